"""AWS API calls the handlers make per job: one single-file job, one folder of 10 files,
and what a capacity wait costs beyond its re-send.

    .venv/bin/python -m bench.api_calls          # per-handler, per-operation breakdown

Counted on the clients the handlers use (`pipeline.aws.client`), attributed to the function whose
invocation made the call (`CURRENT_FUNCTION`): the sandbox's own calls (IAM enforcement, pollers,
event bus, the state machine's interpreter) go through other clients and are never counted, and a
call no handler invocation made is counted under "(outside a handler)" so that it shows, not hides.
A count, not a time: it does not depend on the machine or its load.

Each job has a goal row, every handler's calls (the issue's measure, the workflow's task functions
included), and a context row: the coordination handlers alone (`COORDINATION`: ingest, router,
tracker, batch trigger), what it costs to get a file into a run and the run into the workflow. The
jobs run in blackout mode (the default): each file's task reads it and writes its redacted copy,
and the run's verdict is one write (pipeline/statemachine/build.py).

Every file is a realistic document (`document`): it carries one value of each of the six entity
types, so its detection summary is as large as a real file's, and a summary that went through S3
instead of the workflow's state would show as two more calls per file.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.goal_row import GoalRow

COORDINATION = ("IngestFunction", "RouterFunction", "WorkflowTrackerFunction", "BatchTriggerFunction")
SINGLE_FILE_GOAL = 12
FOLDER_GOAL = 60
FOLDER_FILES = 10
CAPACITY_WAIT_GOAL = 1  # calls beyond the re-send
OUTSIDE = "(outside a handler)"
_HOOK_ID = "pipeops-bench-api-calls"
# One slot, so the capacity wait needs one stand-in holder; the scheduled reconciler off (it would
# release that holder, which has no execution, and its calls belong to no job): `without_reconciler`.
# A folder's files land in one run while the machine is loaded: a settle time of 6 real seconds.
SANDBOX_PARAMETERS = {"MaxConcurrentWorkflows": "1", "FolderSettleSeconds": "6"}


# One value of each entity type the pipeline handles, all of them published test values (a
# reserved domain, a fictional UK number, an SSN never issued, a test card, the documentation IBAN,
# a private address): the offline detector finds each once.
SIX_TYPES = (
    "EMAIL",
    "PHONE",
    "SSN",
    "CREDIT_DEBIT_NUMBER",
    "INTERNATIONAL_BANK_ACCOUNT_NUMBER",
    "IP_ADDRESS",
)
_DOCUMENT = (
    "Ticket {index}: ada.lovelace{index}@analytical.example called from +44 20 7946 0958 about card "
    "5555 5555 5555 4444.\nSSN on file 219-09-9999; refund to DE89 3704 0044 0532 0130 00; last login "
    "from 172.16.254.1.\n"
)


def document(index: int) -> bytes:
    """The bench's file `index`: one value of each of SIX_TYPES."""
    return _DOCUMENT.format(index=index).encode()


def without_reconciler(sandbox: Any) -> Any:
    """The sandbox with its reconciler's schedule rule disabled (ReconcileSchedule allows 15 minutes at most)."""
    sandbox.client("events").disable_rule(Name=sandbox.deployment.resources["ReconcilerFunctionSchedule"])
    return sandbox


class HandlerCallCounter:
    """Counts calls on `pipeline.aws` clients by (function, service, operation).

    Installed by wrapping `pipeline.aws._client` (the cached factory behind `client()`), so every
    client a handler builds afterwards carries the hook; `uninstall()` puts the factory back.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, str]] = Counter()
        self._refused: Counter[tuple[str, str, str, str]] = Counter()
        self._original: Any = None

    def install(self) -> HandlerCallCounter:
        from pipeline import aws

        original = aws._client
        original.cache_clear()  # clients built before the hook would not count
        counter = self

        @functools.cache
        def counted(service: str, region: str | None, endpoint_url: str | None) -> Any:
            client = original(service, region, endpoint_url)
            client.meta.events.register("before-call", counter._before_call, unique_id=_HOOK_ID)
            client.meta.events.register("after-call", counter._after_call, unique_id=f"{_HOOK_ID}-after")
            return client

        self._original = original
        aws._client = counted
        return self

    def uninstall(self) -> None:
        from pipeline import aws

        if self._original is not None:
            aws._client.cache_clear()
            aws._client = self._original
            self._original = None

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._refused.clear()

    def counts(self) -> Counter[tuple[str, str, str]]:
        """(function, service, operation) -> calls, since the last reset."""
        with self._lock:
            return Counter(self._counts)

    def refused(self) -> Counter[tuple[str, str, str, str]]:
        """(function, service, operation, error code) -> calls that AWS answered with an error."""
        with self._lock:
            return Counter(self._refused)

    def _after_call(self, model: Any = None, parsed: Any = None, **_: Any) -> None:
        from pipeline.config import CURRENT_FUNCTION

        code = (parsed or {}).get("Error", {}).get("Code") if isinstance(parsed, dict) else None
        if model is None or not code:
            return
        key = (CURRENT_FUNCTION.get() or OUTSIDE, model.service_model.service_name, model.name, str(code))
        with self._lock:
            self._refused[key] += 1

    def _before_call(self, model: Any = None, **_: Any) -> None:
        # Must return None: a value returned from before-call short-circuits the request.
        from pipeline.config import CURRENT_FUNCTION

        if model is None:
            return
        key = (CURRENT_FUNCTION.get() or OUTSIDE, model.service_model.service_name, model.name)
        with self._lock:
            self._counts[key] += 1


@contextmanager
def counting() -> Iterator[HandlerCallCounter]:
    counter = HandlerCallCounter().install()
    try:
        yield counter
    finally:
        counter.uninstall()


def by_function(counts: Mapping[tuple[str, str, str], int], names: Mapping[str, str] | None = None) -> dict[str, int]:
    """Calls per function (physical names mapped to logical ones where `names` knows them). Pure."""
    totals: Counter[str] = Counter()
    for (function, _, _), calls in counts.items():
        totals[(names or {}).get(function, function)] += calls
    return dict(sorted(totals.items()))


def breakdown(counts: Mapping[tuple[str, str, str], int], names: Mapping[str, str] | None = None) -> str:
    """One line per function: its total, then each operation with its calls. Pure."""
    rows: dict[str, Counter[str]] = {}
    for (function, service, operation), calls in counts.items():
        rows.setdefault((names or {}).get(function, function), Counter())[f"{service}.{operation}"] += calls
    lines = [f"total {sum(counts.values())}"]
    for function in sorted(rows):
        ops = ", ".join(f"{op} {n}" for op, n in sorted(rows[function].items()))
        lines.append(f"  {function}: {sum(rows[function].values())} ({ops})")
    return "\n".join(lines)


# -- the sandbox runs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobCalls:
    """The handler calls one job made, by (function, service, operation), and its outcome."""

    counts: Mapping[tuple[str, str, str], int]
    names: Mapping[str, str]  # physical function name -> logical
    executions: Mapping[str, int]  # execution status -> how many
    entities: Mapping[str, int]  # entity type -> how many the job's run found (its account)
    # (logical function, "service.Operation") -> calls answered with an error (a lost race, a
    # condition that failed): each one explains a retry's calls.
    refused: Mapping[tuple[str, str], int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Every handler's calls, the workflow's task functions included."""
        return sum(self.counts.values())

    @property
    def coordination(self) -> int:
        """The coordination handlers' calls (`COORDINATION`): what the goal rows count."""
        return sum(n for function, n in by_function(self.counts, self.names).items() if function in COORDINATION)

    def breakdown(self) -> str:
        return breakdown(self.counts, self.names)


def function_names(outputs: Mapping[str, str]) -> dict[str, str]:
    """Physical function name -> logical ("IngestFunction"), from the stack outputs."""
    return {outputs[k]: k.removesuffix("Name") for k in outputs if k.endswith("FunctionName")}


def run_job(sandbox: Any, counter: HandlerCallCounter, keys: list[str], *, timeout: float = 300.0) -> JobCalls:
    """Upload `keys` (six-type documents, one job), wait until the sandbox is idle, count the calls."""
    outputs = sandbox.outputs
    s3 = sandbox.client("s3")
    sfn = sandbox.client("stepfunctions")
    machine = outputs["StateMachineArn"]
    before = _execution_arns(sfn, machine)
    counter.reset()
    for index, key in enumerate(keys):
        s3.put_object(Bucket=outputs["InputBucketName"], Key=key, Body=document(index))
    if not sandbox.wait_until_idle(timeout):
        raise RuntimeError(f"the sandbox did not go idle within {timeout} s")
    counts = counter.counts()
    names = function_names(outputs)
    refused: Counter[tuple[str, str]] = Counter()
    for (function, service, operation, _code), n in counter.refused().items():
        refused[(names.get(function, function), f"{service}.{operation}")] += n
    statuses: Counter[str] = Counter(
        e["status"] for e in _executions(sfn, machine) if e["executionArn"] not in before
    )
    return JobCalls(counts, names, dict(statuses), _entities_found(sandbox, keys), dict(refused))


def _entities_found(sandbox: Any, keys: list[str]) -> dict[str, int]:
    """Entity type -> count over the runs that claimed `keys` (read on the sandbox's own client:
    not a handler's call, never counted)."""
    from pipeline.stores.claims import ClaimsStore
    from pipeline.stores.tracking import TrackingStore

    outputs = sandbox.outputs
    ddb = sandbox.client("dynamodb")
    store = TrackingStore(outputs["TrackingTableName"], ddb)
    claims = ClaimsStore(outputs["TrackingTableName"], outputs["CoordinationTableName"], ddb)
    found: Counter[str] = Counter()
    for run in set(claims.claimed_runs(outputs["InputBucketName"], keys).values()):
        record = store.get_run(run)
        found.update((record.redaction_results or {}).get("entities_by_type", {}) if record else {})
    return dict(sorted(found.items()))


def _executions(sfn: Any, machine: str) -> list[dict[str, Any]]:
    pages = sfn.get_paginator("list_executions").paginate(stateMachineArn=machine)
    return [execution for page in pages for execution in page["executions"]]


def _execution_arns(sfn: Any, machine: str) -> set[str]:
    return {e["executionArn"] for e in _executions(sfn, machine)}


@dataclass(frozen=True)
class WaitCalls:
    """What the router did in invocations that only waited for capacity."""

    waits: int
    calls: Mapping[str, int]  # "service.Operation" -> calls, over all those waits

    @property
    def per_wait(self) -> float:
        return sum(self.calls.values()) / self.waits if self.waits else 0.0

    @property
    def beyond_resend(self) -> float:
        """Calls per wait other than the re-send itself (SendMessage)."""
        others = sum(n for op, n in self.calls.items() if op != "sqs.SendMessage")
        return others / self.waits if self.waits else 0.0


def measure_capacity_wait(sandbox: Any, counter: HandlerCallCounter, key: str, waits: int = 3) -> WaitCalls:
    """Hold every slot with a stand-in holder, upload one file, let its message wait `waits` times,
    then free the slot and let the job finish. Counts the router's calls while the slot was held."""
    from pipeline.stores.semaphore import AcquireResult, Semaphore

    outputs = sandbox.outputs
    names = function_names(outputs)
    router = next(physical for physical, logical in names.items() if logical.startswith("Router"))
    semaphore = Semaphore(outputs["CoordinationTableName"], sandbox.client("dynamodb"))
    holder = "bench-capacity-holder"
    max_slots = int(sandbox.parameters.get("MaxConcurrentWorkflows", "1"))
    if not _wait_for(lambda: semaphore.read().active_count == 0, timeout=60.0):
        raise RuntimeError("a slot of an earlier job was never given back")
    for index in range(max_slots):
        acquired = semaphore.acquire(f"{holder}-{index}", "2026-01-01T00:00:00.000000Z", max_slots)
        if acquired is not AcquireResult.ACQUIRED:
            raise RuntimeError(f"the stand-in holder could not take a slot: {acquired.value}")
    counter.reset()
    sandbox.client("s3").put_object(Bucket=outputs["InputBucketName"], Key=key, Body=document(0))
    seen = _wait_for(lambda: _router_sends(counter, router) >= waits, timeout=120.0)
    counts = counter.counts()
    for index in range(max_slots):
        semaphore.release(f"{holder}-{index}")
    if not seen:
        raise RuntimeError(f"the capacity wait did not happen: {breakdown(counts, names)}")
    if not sandbox.wait_until_idle(300):
        raise RuntimeError("the waiting job did not finish once the slot was free")
    calls: Counter[str] = Counter()
    for (function, service, operation), n in counts.items():
        if function == router:
            calls[f"{service}.{operation}"] += n
    return WaitCalls(calls["sqs.SendMessage"], dict(calls))


def _router_sends(counter: HandlerCallCounter, router: str) -> int:
    return counter.counts()[(router, "sqs", "SendMessage")]


def _wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@dataclass(frozen=True)
class Measured:
    single: JobCalls
    folder: JobCalls
    wait: WaitCalls


def run_all() -> Measured:
    """The three measurements on one in-process sandbox (template defaults, one slot for the wait)."""
    import logging

    from sandbox.sandbox import Sandbox

    with counting() as counter:
        sandbox = without_reconciler(Sandbox(parameters=dict(SANDBOX_PARAMETERS)).start())
        try:
            logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
            from pipeline.handlers import _wiring

            _wiring.reset()
            run_job(sandbox, counter, ["warmup.txt"])  # every client and collaborator built once
            single = run_job(sandbox, counter, ["single.txt"])
            folder = run_job(sandbox, counter, [f"tenants/acme/batch-1/file-{i:02d}.txt" for i in range(FOLDER_FILES)])
            wait = measure_capacity_wait(sandbox, counter, "waiting.txt")
        finally:
            sandbox.stop()
    return Measured(single, folder, wait)


def _refusals(job: JobCalls) -> str:
    """The calls AWS refused (each one explains a retry's calls), if any."""
    if not job.refused:
        return "; no call was refused"
    listed = ", ".join(f"{function} {op} {n}" for (function, op), n in sorted(job.refused.items()))
    return f"; refused (a lost race, each retried once more): {listed}"


def rows(measured: Measured) -> list[GoalRow]:
    """The goal rows of a measurement. Pure.

    Two rows per job: every handler (the goal: the issue's baseline counted the task functions
    too), and the coordination handlers alone (context: what ingest, router and tracker cost).
    """
    single, folder, wait = measured.single, measured.folder, measured.wait
    return [
        GoalRow(
            "handler API calls, one single-file job (every handler)",
            str(single.total),
            f"≤ {SINGLE_FILE_GOAL}",
            single.total <= SINGLE_FILE_GOAL,
            _inline(single),
        ),
        GoalRow(
            "handler API calls, one single-file job (ingest, router, tracker; not a goal)",
            str(single.coordination),
            "-",
            True,
            "the coordination handlers alone, part of the row above",
        ),
        GoalRow(
            f"handler API calls, one folder of {FOLDER_FILES} files (every handler)",
            str(folder.total),
            f"≤ {FOLDER_GOAL}",
            folder.total <= FOLDER_GOAL,
            _inline(folder),
        ),
        GoalRow(
            f"handler API calls, one folder of {FOLDER_FILES} files (ingest, router, tracker; not a goal)",
            str(folder.coordination),
            "-",
            True,
            "the coordination handlers alone, part of the row above" + _refusals(folder),
        ),
        GoalRow(
            "router capacity wait: calls beyond the re-send",
            f"{wait.beyond_resend:g}",
            f"≤ {CAPACITY_WAIT_GOAL}",
            wait.waits > 0 and wait.beyond_resend <= CAPACITY_WAIT_GOAL,
            f"{wait.waits} waits; " + ", ".join(f"{op} {n}" for op, n in sorted(wait.calls.items())),
        ),
    ]


def _inline(job: JobCalls) -> str:
    """"six-type documents (6 types found); Ingest 3, Router 5, WorkflowTracker 1; workflow tasks: Detect 2, Finalize 1" Pure."""
    totals = by_function(job.counts, job.names)

    def listed(functions: list[str]) -> str:
        return ", ".join(f"{function.removesuffix('Function')} {totals[function]}" for function in functions)

    ours = [f for f in COORDINATION if f in totals]
    tasks = sorted(f for f in totals if f not in COORDINATION)
    found = f"six-type documents ({sum(1 for t in SIX_TYPES if job.entities.get(t))} of 6 types found); "
    return found + listed(ours) + (f"; workflow tasks: {listed(tasks)}" if tasks else "")


def measure() -> list[GoalRow]:
    return rows(run_all())


def main() -> None:
    measured = run_all()
    print(f"single-file job ({measured.single.executions}):\n{measured.single.breakdown()}\n")
    print(f"folder of {FOLDER_FILES} files ({measured.folder.executions}):\n{measured.folder.breakdown()}\n")
    wait = measured.wait
    print(
        f"capacity wait: {wait.waits} waits, {wait.per_wait:g} calls per wait, {wait.beyond_resend:g} beyond the"
        f" re-send ({', '.join(f'{op} {n}' for op, n in sorted(wait.calls.items()))})\n"
    )
    for row in rows(measured):
        print(f"{row.measure}: {row.now} (goal {row.goal}, {'met' if row.met else 'NOT met'}): {row.detail}")


if __name__ == "__main__":
    main()
