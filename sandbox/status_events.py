"""Step Functions "Execution Status Change" events, which moto never emits (docs/ARCHITECTURE.md#sandbox).

`ExecutionStatusWatcher` watches executions on a daemon thread and, for every execution it sees
change status, hands the AWS-shaped event to a callback (the event bus's `emit`).

Event-driven. moto's interpreter is told of (`sandbox.seams.execution_events`) every execution that starts
(`Execution.start`) and every one that ends (`BaseExecutionWorkerCommunication.terminated`, which
sets SUCCEEDED / FAILED / TIMED_OUT / ABORTED): the hook only records the execution (ARN and
moto's object) and wakes the watcher, which then describes just those executions. Nothing is read
per execution while it runs. A full round (below) runs at start and every `interval` seconds, a
safety net for a status moto changes on a path without these hooks (moto's non-executing backend).
The hooks run in the process hosting moto, as the event bus must.

Reading directly. Since the hooks run where moto lives, a hook-reported execution is described from
moto's object itself (`client_description`): the very dict `describe_execution` returns through
boto3 (moto's responses.py rules; timestamps cut to the millisecond, as moto's serializer does),
without the round trip. Why, measured (bench.sandbox_ratio, folders, 50 files): this thread was ~6%
of the sandbox's CPU, nearly all of it the botocore client, moto's dispatch and its response
serializer for DescribeExecution (and moto's `describe_execution` scans the machine's whole
execution list); read directly, the thread's CPU over the run fell from ~0.095 s to ~0.035 s, with
no DescribeExecution call left. What the round trip decided is kept: the execution must still be in
its machine's list in moto's backend (else it is gone, as on ExecutionDoesNotExist), and in the
scope (account, region) the client sees -- learned from the client's own answers, so another
region's executions still go the client's way (not found). A terminal status read while its change
is being made (moto sets output, error and cause just after the status) counts as RUNNING; that
change's report brings the terminal one. Executions no hook handed over (as a full round, `hooks=False`
or `baseline` meets them) are described through the client, as before.

Idle detection (`request_round` / `wait_round`) needs a round that started after the request and
saw every change made before it. With the hooks that is a light round (describe what the hooks
reported) begun while no status change is in flight: a hook registers the change before moto
makes it and reports it after, so a change made before the request has been reported by then.

One full round, per state machine (`list_state_machines`, paginated):
1. `list_executions(statusFilter="RUNNING")`, all pages: what is running now.
2. `list_executions()` newest first, page by page, stopping after the first page whose executions
   are all already known (new executions -- even ones that already finished -- appear at the top).
3. `describe_execution` only for executions whose status differs from the last one seen, and for
   executions last seen RUNNING that are no longer in the RUNNING list (they finished on a page
   step 2 did not read).

Each status of each execution is emitted exactly once (a seen-set per execution), RUNNING always
before the terminal status: an execution first seen already finished gets its RUNNING event
(built from the same description, with the RUNNING fields) just before its terminal one.

`baseline()` records what already exists without emitting anything (the bus was not listening
then); the event bus calls it synchronously in `start()`, so every execution started after
`start()` returns is reported. An execution RUNNING at baseline later gets only its terminal
event.

moto facts this relies on (moto 5.2.5): `describe_execution` gives `error`/`cause` for FAILED,
none for ABORTED (`stop_execution` does not store them), and no `stopDate` for TIMED_OUT -- the
event then carries the time the watcher saw the change.
"""

from __future__ import annotations

import calendar
import collections
import datetime as dt
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Self

from sandbox.background import BackgroundThread
from sandbox.schedules import iso_time
from sandbox.seams import execution_events

LOG = logging.getLogger("sandbox.status_events")

DETAIL_TYPE = "Step Functions Execution Status Change"
SOURCE = "aws.states"
RUNNING = "RUNNING"
TERMINAL_STATUSES = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
_ERROR_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")
_GONE = object()  # `_read_direct`: moto no longer has the execution
_START_FIELDS = ("executionArn", "input", "name", "startDate", "stateMachineArn")  # set at start

# Callbacks told of every status-change event any watcher emits (e.g. sandbox.aws_metrics, which
# publishes the AWS/States execution metrics). A tuple, replaced and never mutated.
_LISTENERS: tuple[Callable[[dict[str, Any]], Any], ...] = ()
_LISTENERS_LOCK = threading.Lock()


def add_status_listener(listener: Callable[[dict[str, Any]], Any]) -> None:
    """Call `listener(event)` for every status-change event emitted from now on, by any watcher.

    Called on the watcher's thread just before the event is emitted: it must be quick; an
    exception is logged and ignored (the event is still emitted).
    """
    global _LISTENERS
    with _LISTENERS_LOCK:
        if listener not in _LISTENERS:
            _LISTENERS = (*_LISTENERS, listener)


def remove_status_listener(listener: Callable[[dict[str, Any]], Any]) -> None:
    global _LISTENERS
    with _LISTENERS_LOCK:
        _LISTENERS = tuple(x for x in _LISTENERS if x != listener)


def _notify_listeners(event: dict[str, Any]) -> None:
    for listener in _LISTENERS:
        try:
            listener(event)
        except Exception:
            LOG.warning("status listener %r failed", listener, exc_info=True)


def _epoch_ms(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return int(value.timestamp() * 1000)
    return int(float(value) * 1000)  # epoch seconds


def _wire_time(value: Any) -> dt.datetime:
    """A moto timestamp as a boto3 client reads it: moto's serializer sends epoch seconds cut to the
    millisecond (moto.core.serialize `_timestamp_unixtimestamp`), botocore makes an aware datetime."""
    from botocore.utils import parse_to_aware_datetime

    aware = parse_to_aware_datetime(value)
    epoch: float = calendar.timegm(aware.timetuple())
    if aware.microsecond:
        epoch += (aware.microsecond // 1000) / 1000.0
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


def client_description(execution: Any) -> dict[str, Any]:
    """What `describe_execution` returns through boto3 for moto's `execution` (no ResponseMetadata).

    Mirrors moto's responses.py `describe_execution`: stopDate only for SUCCEEDED / ABORTED / FAILED,
    output (JSON text; moto dumps a non-string) and outputDetails only for SUCCEEDED, error and cause
    when set; None values are left out, as moto's serializer does.
    """
    status = getattr(execution.status, "value", execution.status)  # a str, or moto's str enum
    desc: dict[str, Any] = {
        "executionArn": execution.execution_arn,
        "input": execution.execution_input,
        "name": execution.name,
        "startDate": execution.start_date,
        "stateMachineArn": execution.state_machine_arn,
        "status": status,
    }
    if status in ("SUCCEEDED", "ABORTED", "FAILED"):
        desc["stopDate"] = execution.stop_date
    if status == "SUCCEEDED":
        output = execution.output
        desc["output"] = output if isinstance(output, str) or output is None else json.dumps(output)
        details = execution.output_details
        desc["outputDetails"] = dict(details) if details is not None else None
    desc["error"] = execution.error
    desc["cause"] = execution.cause
    for key in ("startDate", "stopDate"):
        if desc.get(key) is not None:
            desc[key] = _wire_time(desc[key])
    return {key: value for key, value in desc.items() if value is not None}


def _scope_of(arn: str) -> tuple[str, str]:
    """(account, region) of an ARN: the moto backend it lives in."""
    parts = arn.split(":")
    return parts[4], parts[3]


def state_machine_arn_of(execution_arn: str) -> str:
    """arn:...:execution:<machine>:<name> -> arn:...:stateMachine:<machine>."""
    parts = execution_arn.split(":")
    return ":".join([*parts[:5], "stateMachine", parts[6]])


def status_change_event(
    description: Mapping[str, Any], status: str, *, observed_at: dt.datetime | None = None
) -> dict[str, Any]:
    """The AWS event for `status`, built from a `describe_execution` response.

    `status` may be earlier than the description's (the RUNNING event of an execution first seen
    finished): fields that belong to later statuses (stopDate, output, error, cause) are then null.
    """
    observed_at = observed_at or dt.datetime.now(tz=dt.UTC)
    arn = description["executionArn"]
    terminal = status != RUNNING
    start_ms = _epoch_ms(description.get("startDate")) or _epoch_ms(observed_at)
    stop_ms = (_epoch_ms(description.get("stopDate")) or _epoch_ms(observed_at)) if terminal else None
    output = description.get("output") if status == "SUCCEEDED" else None
    error = (description.get("error") or None) if status in _ERROR_STATUSES else None
    cause = (description.get("cause") or None) if status in _ERROR_STATUSES else None
    when_ms = stop_ms if terminal else start_ms
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": DETAIL_TYPE,
        "source": SOURCE,
        "account": arn.split(":")[4],
        "time": iso_time(when_ms / 1000 if when_ms is not None else None),
        "region": arn.split(":")[3],
        "resources": [arn],
        "detail": {
            "executionArn": arn,
            "stateMachineArn": description.get("stateMachineArn") or state_machine_arn_of(arn),
            "name": description.get("name"),
            "status": status,
            "startDate": start_ms,
            "stopDate": stop_ms,
            "input": description.get("input"),
            "output": output,
            "inputDetails": {"included": True},
            "outputDetails": {"included": True} if output is not None else None,
            "error": error,
            "cause": cause,
        },
    }


class ExecutionStatusWatcher(BackgroundThread):
    """Emits status-change events as moto's hooks report them. Start/stop from one owner thread.

    `client_factory()` returns a boto3 "stepfunctions" client (honouring the sandbox endpoint);
    `emit(event)` delivers one event. `interval` is real seconds between the safety-net full rounds.
    `hooks=False`: no hooks, a full round every `interval` (polling, as before the hooks).
    """

    def __init__(
        self,
        client_factory: Callable[[], Any],
        emit: Callable[[dict[str, Any]], Any],
        *,
        interval: float = 2.0,
        name: str = "sandbox-sfn-status",
        hooks: bool = True,
    ) -> None:
        super().__init__(name)
        self._client_factory = client_factory
        self._emit = emit
        self.interval = interval
        self._known: dict[str, str] = {}  # execution ARN -> last status seen
        self._machine: dict[str, str] = {}  # execution ARN -> state machine ARN
        self._emitted: dict[str, set[str]] = {}  # the seen-set: statuses emitted per execution
        self._hooks = hooks
        self._dirty: set[str] = set()  # executions a hook reported since the last look
        self._objects: dict[str, Any] = {}  # ARN -> moto's execution, from the hooks, until terminal
        self._scope: tuple[str, str] | None = None  # (account, region) the client sees, once known
        self._in_flight: collections.Counter[str] = collections.Counter()  # changes being made now
        self._dirty_lock = threading.Lock()
        self._round_cond = threading.Condition()
        self._full_requested = False
        self.full_rounds = 0  # full rounds done (a count for tests: hooks make them rare)
        self._rounds_started = 0
        self._rounds_completed = 0
        self._events_emitted = 0
        self._wake = threading.Event()
        self._last_error_logged = 0.0

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> Self:
        if self._thread is not None:
            return self
        if self._hooks:
            execution_events.SEAM.attach(self)
        return super().start()

    def stop(self, timeout: float = 2.0) -> bool:
        if self._hooks:
            execution_events.SEAM.detach(self)
        with self._dirty_lock:
            self._objects.clear()
        ended = super().stop(timeout)
        with self._round_cond:
            self._round_cond.notify_all()
        return ended

    def _interrupt(self) -> None:
        self._wake.set()

    @property
    def events_emitted(self) -> int:
        return self._events_emitted

    def emitted_statuses(self, execution_arn: str) -> set[str]:
        """The statuses already emitted for one execution (a copy)."""
        return set(self._emitted.get(execution_arn, ()))

    # ---------------------------------------------------------------- rounds (for idle detection)

    def changing(self, execution_arn: str) -> None:
        """An execution's status is about to change (moto's hook, on moto's thread)."""
        with self._dirty_lock:
            self._in_flight[execution_arn] += 1

    def notify(self, execution_arn: str, execution: Any = None) -> None:
        """An execution started or ended (called by moto's hooks, on moto's threads): look at it.

        `execution`: moto's execution object, read directly instead of asking the client.
        """
        with self._dirty_lock:
            self._dirty.add(execution_arn)
            if execution is not None:
                self._objects[execution_arn] = execution
            if self._in_flight[execution_arn] > 1:
                self._in_flight[execution_arn] -= 1
            else:
                self._in_flight.pop(execution_arn, None)
        self._wake.set()

    def request_round(self) -> int:
        """Ask for a fresh look; returns the round number whose completion proves one."""
        with self._round_cond:
            target = self._rounds_started + 1
            if not self._hooks:
                self._full_requested = True
        self._wake.set()
        return target

    def wait_round(self, target: int, timeout: float) -> bool:
        """Block until round `target` (from `request_round`) completed successfully."""
        deadline = time.monotonic() + timeout
        with self._round_cond:
            while self._rounds_completed < target:
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    return False
                self._round_cond.wait(min(left, 0.1))
            return True

    # ---------------------------------------------------------------- polling

    def baseline(self) -> None:
        """Record every existing execution's status as seen, emitting nothing."""
        for sm_arn in self._state_machines():
            for summary in self._executions(sm_arn):
                arn, status = summary["executionArn"], summary["status"]
                self._known[arn] = status
                self._machine[arn] = sm_arn
                self._emitted[arn] = {RUNNING, status}

    def poll_once(self) -> int:
        """One round; returns the number of events emitted."""
        emitted = 0
        for sm_arn in self._state_machines():
            running = {e["executionArn"] for e in self._executions(sm_arn, status_filter=RUNNING)}
            observed: dict[str, str] = {}
            for page in self._execution_pages(sm_arn):
                all_known = True
                for summary in page:
                    arn = summary["executionArn"]
                    observed[arn] = summary["status"]
                    self._machine.setdefault(arn, sm_arn)
                    if arn not in self._known:
                        all_known = False
                if all_known:
                    break
            for arn, status in observed.items():
                if self._known.get(arn) != status:
                    emitted += self._advance(arn)
            for arn, status in list(self._known.items()):
                if (
                    status == RUNNING
                    and self._machine.get(arn) == sm_arn
                    and arn not in running
                    and arn not in observed
                ):
                    emitted += self._advance(arn)
        return emitted

    def _advance(self, arn: str) -> int:
        if self._known.get(arn) in TERMINAL_STATUSES:  # final: nothing more to emit
            self._objects.pop(arn, None)
            return 0
        self._machine.setdefault(arn, state_machine_arn_of(arn))
        desc = self._read_direct(arn)
        if desc is None:
            sfn = self._client_factory()
            try:
                desc = sfn.describe_execution(executionArn=arn)
            except sfn.exceptions.ExecutionDoesNotExist:
                desc = _GONE
            else:
                self._scope = _scope_of(arn)  # the client found it: the client sees this backend
        if desc is _GONE:
            self._known.pop(arn, None)
            self._objects.pop(arn, None)
            return 0
        assert isinstance(desc, Mapping)
        status = desc["status"]
        done = self._emitted.setdefault(arn, set())
        count = 0
        observed_at = dt.datetime.now(tz=dt.UTC)
        for step in (RUNNING, status) if status != RUNNING else (RUNNING,):
            if step in done:
                continue
            done.add(step)
            event = status_change_event(desc, step, observed_at=observed_at)
            _notify_listeners(event)
            self._emit(event)
            self._events_emitted += 1
            count += 1
        self._known[arn] = status
        if status in TERMINAL_STATUSES:
            self._objects.pop(arn, None)
        return count

    def _read_direct(self, arn: str) -> Mapping[str, Any] | object | None:
        """The client's description of a hook-reported execution, read from moto's objects.

        None: not readable here (not handed over by a hook, a scope the client was not seen to
        see, or not started) -- ask the client. `_GONE`: moto no longer has it (the client would
        get ExecutionDoesNotExist).

        A terminal status read while a change of this execution was being made (in flight, or
        reported since this round began) may lack what moto sets just after the status (output,
        error, cause): it reads as RUNNING, and that change's report brings the terminal status.
        """
        execution = self._objects.get(arn)
        if execution is None or self._scope is None or _scope_of(arn) != self._scope:
            return None
        if getattr(execution, "exec_status", None) is None:  # not started (or not moto's parser)
            return None
        from moto.stepfunctions.responses import get_backend

        backend = get_backend(*_scope_of(arn))  # the backend moto's describe_execution would use
        name = arn.split(":")[6]
        machine = next((m for m in backend.state_machines if m.name == name), None)
        if machine is None or execution not in machine.executions:  # (identity: no __eq__)
            return _GONE
        desc = client_description(execution)  # (reads the status first)
        if desc["status"] != RUNNING:
            with self._dirty_lock:
                changing = arn in self._in_flight or arn in self._dirty
            if changing:
                return {**{k: desc[k] for k in _START_FIELDS if k in desc}, "status": RUNNING}
        return desc

    def _state_machines(self) -> list[str]:
        paginator = self._client_factory().get_paginator("list_state_machines")
        arns = [m["stateMachineArn"] for page in paginator.paginate() for m in page["stateMachines"]]
        if arns:
            self._scope = _scope_of(arns[0])  # the client lists the machines of its own backend
        return arns

    def _execution_pages(self, sm_arn: str, status_filter: str | None = None) -> Any:
        kwargs: dict[str, Any] = {"stateMachineArn": sm_arn}
        if status_filter:
            kwargs["statusFilter"] = status_filter
        paginator = self._client_factory().get_paginator("list_executions")
        for page in paginator.paginate(**kwargs):
            yield page["executions"]

    def _executions(self, sm_arn: str, status_filter: str | None = None) -> list[dict[str, Any]]:
        return [e for page in self._execution_pages(sm_arn, status_filter) for e in page]

    def _run(self) -> None:
        next_full = 0.0
        while not self._stop.is_set():
            with self._round_cond:
                full = self._full_requested or not self._hooks or time.monotonic() >= next_full
                self._full_requested = False
                self._rounds_started += 1
                round_number = self._rounds_started
            with self._dirty_lock:  # (a full round sees every execution these name anyway)
                dirty, self._dirty = self._dirty, set()
                settled = not self._in_flight
            try:
                if full:
                    self.poll_once()
                    self.full_rounds += 1
                else:
                    for arn in sorted(dirty):
                        self._advance(arn)
            except Exception:
                if self._stop.is_set():
                    break
                with self._dirty_lock:  # look again next round (a second look emits nothing twice)
                    self._dirty |= dirty
                now = time.monotonic()
                if now - self._last_error_logged > 10:
                    self._last_error_logged = now
                    LOG.warning("execution status watch failed", exc_info=True)
            else:
                if full or settled:  # else a change in flight: its report wakes the next round
                    with self._round_cond:
                        self._rounds_completed = max(self._rounds_completed, round_number)
                        self._round_cond.notify_all()
            if full:
                next_full = time.monotonic() + self.interval
            self._wake.wait(max(0.0, next_full - time.monotonic()))
            self._wake.clear()
