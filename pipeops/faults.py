"""The pipeline's known faults, by name: what each breaks, the alarm that should see it, the remedy.

Every fault this pipeline is known for is one `NamedFault` of `FAULTS`, in the order a game day
plays them. Two kinds:

- **Sandbox faults** are the sandbox's own primitives (`sandbox.faults`: a function failing, an
  API throttled for the handlers, the router dying around a call, status or S3 events held,
  duplicated, lost or late), injected and cleared over the served sandbox's HTTP control
  (`sandbox.faults.CONTROL_PATH`), so a person with a `pipeops sandbox up` can rehearse by hand.
- **Data faults** are what a person or a bug leaves behind (a hand-edited `active_count`, a ghost
  holder, a poison message, an execution started by hand, a stale run): written with boto3 through
  the stack's resources, as they would be on AWS. Clearing one changes nothing: the data stays
  until the remedy (the reconciler, or the runbook) repairs it.

`expected_alarms` are the alarm ids (`alarms/catalog.py`, the deployed name without the stack
prefix) that should fire while the fault acts with traffic flowing, on a stack with the template's
defaults (the scheduled reconciler applies its repairs); empty when the pipeline absorbs the fault
and no alarm may fire: a duplicate is harmless by construction, and a hand edit the reconciler
repairs on its next run (a ghost holder, a count at the max) is gone before CounterDrift's three
periods. Each expectation was measured on the sandbox (time scale 0.02, a file uploaded a second);
other alarms may fire besides (PipelineUnhealthy, the composite, with any critical one). `remedy` is
the runbook to run, or None when the scheduled reconciler (or the redelivery itself) repairs it.
`for_seconds` is the fault's suggested duration in virtual seconds: long enough for its alarm's
evaluation periods (errors in 3 of 5 minutes, throttles in 5 of 5).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from alarms.slo_alarms import burn_pairs
from alarms.slos import DEFAULT_TARGET, time_to_fire_seconds
from pipeline.config import SEMAPHORE_KEY
from pipeline.jobs import RunRef, format_timestamp
from pipeline.status import JobStatus
from pipeline.stores.semaphore import AcquireResult, Semaphore
from pipeline.stores.tracking import TrackingStore
from runbooks.catalog import Runbook
from sandbox.faults import (
    CONTROL_PATH,
    ApiFault,
    CallCrash,
    EventFault,
    FaultBoard,
    FaultSpec,
    FunctionFault,
    spec_to_json,
)
from stack.resources import SANDBOX_CREDENTIALS, StackResources

if TYPE_CHECKING:
    from sandbox.sandbox import Sandbox

GHOST_HOLDER = "ghost-of-a-crashed-router"  # an execution name no router will ever start
LONG_AGO = timedelta(minutes=45)  # past the reconciler's grace and the stale-run window
POISON_BODY = json.dumps({"hello": "this is not a job message"})


class FaultError(Exception):
    """A fault that cannot be injected or cleared here; the message says what to do."""


@dataclass(frozen=True)
class FaultTarget:
    """Where faults go: a served sandbox's endpoint and the stack's resources there.

    `board`: an in-process sandbox's own `FaultBoard` (`FaultTarget.of_sandbox`), used instead of
    the HTTP control; `endpoint_url` is then None for an in-process (`mock_aws`) sandbox."""

    endpoint_url: str | None
    resources: StackResources
    region: str = "us-east-1"
    board: FaultBoard | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of_sandbox(cls, sandbox: Sandbox) -> FaultTarget:
        """The target for a sandbox running in this process (served or not)."""
        resources = StackResources.from_outputs(sandbox.stack_name, dict(sandbox.outputs))
        return cls(sandbox.endpoint_url, resources, sandbox.region, sandbox.faults)

    def client(self, service: str) -> Any:
        import boto3

        if self.endpoint_url is None:  # in-process mock_aws: no endpoint, credentials from the test
            return boto3.client(service, region_name=self.region)  # type: ignore[call-overload]  # named at run time
        return boto3.client(  # type: ignore[call-overload]  # a service named at run time
            service, endpoint_url=self.endpoint_url, region_name=self.region, **SANDBOX_CREDENTIALS
        )

    def max_concurrency(self) -> int:
        """The stack's MaxConcurrentWorkflows, as deployed."""
        stack = self.client("cloudformation").describe_stacks(StackName=self.resources.stack_name)["Stacks"][0]
        parameters = {p["ParameterKey"]: p.get("ParameterValue") for p in stack.get("Parameters", [])}
        return int(parameters.get("MaxConcurrentWorkflows") or 3)


# -- the served sandbox's fault control ---------------------------------------------------------


def control(target: FaultTarget, method: str, *, spec: FaultSpec | None = None, name: str | None = None) -> Any:
    """One request to the sandbox's fault control; FaultError says what is wrong."""
    if target.board is not None:
        return _local(target.board, method, spec=spec, name=name)
    if target.endpoint_url is None:
        raise FaultError("no sandbox to inject into: pass a served sandbox's endpoint (`pipeops sandbox up`)")
    url = target.endpoint_url.rstrip("/") + CONTROL_PATH
    if name is not None:
        url += "?" + urllib.parse.urlencode({"name": name})
    data = json.dumps({"spec": spec_to_json(spec)}).encode() if spec is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        if exc.code == 404 or exc.code == 501:
            raise FaultError(
                f"{target.endpoint_url} is no pipeops sandbox (it has no fault control): start one with `pipeops sandbox up`"
            ) from None
        try:
            message = json.loads(exc.read() or b"{}").get("message", "")
        except ValueError:
            message = ""
        raise FaultError(f"the sandbox refused the fault: {message or exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise FaultError(
            f"no sandbox answers at {target.endpoint_url} ({getattr(exc, 'reason', exc)}): start one with `pipeops sandbox up`"
        ) from None


def _local(board: FaultBoard, method: str, *, spec: FaultSpec | None, name: str | None) -> Any:
    """The control's answers, from an in-process sandbox's board (no HTTP)."""
    if method == "GET":
        return {"active": board.active()}
    if method == "DELETE":
        return {"cleared": board.clear(name)}
    assert spec is not None
    return {"injected": board.inject(spec)}


# -- the named faults -------------------------------------------------------------------------

Specs = Callable[[str, float, float | None], tuple[FaultSpec, ...]]


@dataclass(frozen=True)
class NamedFault:
    """One known fault of the pipeline (see the module docstring)."""

    name: str
    description: str  # one line
    expected_alarms: tuple[str, ...]
    remedy: Runbook | None
    for_seconds: float | None = None  # suggested duration (virtual seconds); None: a one-off
    specs: Specs | None = field(default=None, repr=False)  # a sandbox fault's primitives
    write: Callable[[FaultTarget, float], str] | None = field(default=None, repr=False)  # a data fault
    # The objective's faults (`_slo_fault`): alarms that must not fire, the traffic before and during
    # the fault (virtual seconds), and the computed time to fire from the first bad file.
    quiet_alarms: tuple[str, ...] = ()
    lead_seconds: float | None = None
    traffic_every: float | None = None
    computed_seconds: float | None = None
    timed_from: str | None = None

    @property
    def kind(self) -> str:
        return "sandbox" if self.specs is not None else "data"

    def inject(self, target: FaultTarget, share: float = 1.0, for_seconds: float | None = None) -> list[dict[str, Any]]:
        """Start the fault; returns what was injected (the sandbox's view, or what was written)."""
        if self.specs is not None:
            return [control(target, "POST", spec=spec)["injected"] for spec in self.specs(self.name, share, for_seconds)]
        assert self.write is not None
        return [{"name": self.name, "kind": "data", "written": self.write(target, share)}]

    def clear(self, target: FaultTarget) -> list[str]:
        """End the fault's sandbox primitives (a data fault stays until it is repaired)."""
        if self.specs is None:
            return []
        cleared: list[str] = []
        for spec in self.specs(self.name, 1.0, None):
            cleared += control(target, "DELETE", name=spec.name)["cleared"]
        return cleared


def _one(make: Callable[..., FaultSpec], **fields: Any) -> Specs:
    return lambda name, share, for_seconds: (make(name=name, share=share, for_seconds=for_seconds, **fields),)


# -- data faults: written as a person or a bug would, with boto3 ---------------------------------


def _set_count(target: FaultTarget, count: int | Callable[[FaultTarget], int]) -> str:
    value = count(target) if callable(count) else count
    target.client("dynamodb").update_item(
        TableName=target.resources.CoordinationTableName,
        Key={"doc_key": {"S": SEMAPHORE_KEY}},
        UpdateExpression="SET active_count = :n",
        ExpressionAttributeValues={":n": {"N": str(value)}},
    )
    return f"active_count = {value}"


def _counter_at_max(target: FaultTarget, _share: float) -> str:
    return _set_count(target, lambda t: t.max_concurrency())


def _counter_negative(target: FaultTarget, _share: float) -> str:
    return _set_count(target, -1)


def _ghost_holder(target: FaultTarget, _share: float) -> str:
    semaphore = Semaphore(target.resources.CoordinationTableName, target.client("dynamodb"))
    acquired_at = (datetime.now(UTC) - LONG_AGO).isoformat(timespec="seconds")
    result = semaphore.acquire(GHOST_HOLDER, acquired_at, target.max_concurrency())
    if result is AcquireResult.AT_CAPACITY:
        raise FaultError("every slot is taken: a ghost holder cannot be added now (try again when one is free)")
    return f"holder {GHOST_HOLDER} acquired at {acquired_at}"


def _poison_messages(target: FaultTarget, share: float) -> str:
    count = max(1, round(3 * share))
    sqs = target.client("sqs")
    for _ in range(count):
        sqs.send_message(QueueUrl=target.resources.MainQueueUrl, MessageBody=POISON_BODY)
    return f"{count} malformed message(s) on the main queue"


def _execution_by_hand(target: FaultTarget, _share: float) -> str:
    """What a person does in the console: start the newest execution's input again under a new
    name (a job run a second time, outside the router: it holds no slot)."""
    sfn = target.client("stepfunctions")
    newest = sfn.list_executions(stateMachineArn=target.resources.StateMachineArn, maxResults=1)["executions"]
    name = f"by-hand-{uuid.uuid4().hex[:12]}"
    if newest:
        payload = json.loads(sfn.describe_execution(executionArn=newest[0]["executionArn"])["input"])
    else:
        payload = {"job_id": name, "started_at": format_timestamp(datetime.now(UTC)), "files": [], "trace": {}}
    payload["execution_name"] = name
    sfn.start_execution(stateMachineArn=target.resources.StateMachineArn, name=name, input=json.dumps(payload))
    return f"execution {name} started outside the router (job {payload.get('job_id')})"


def _stale_run(target: FaultTarget, _share: float) -> str:
    """A run the router froze (IN_PROGRESS) long ago whose execution never started and which
    holds no slot: what a router that died and whose message was lost leaves behind."""
    then = datetime.now(UTC) - LONG_AGO
    run = RunRef(f"stale-run-{uuid.uuid4().hex[:8]}/", format_timestamp(then))
    store = TrackingStore(target.resources.TrackingTableName, target.client("dynamodb"))
    # A file that exists (an uploaded one), so the run's repair runs it rather than fails it.
    listed = target.client("s3").list_objects_v2(Bucket=target.resources.InputBucketName, MaxKeys=1).get("Contents", [])
    key = listed[0]["Key"] if listed else f"{run.job_id}lost.txt"
    store.create_run(run, [key], target.resources.InputBucketName, then)
    if store.transition(run, JobStatus.IN_PROGRESS, then) is None:
        raise FaultError(f"could not freeze the stale run {run.job_id}")
    return f"run {run.job_id} @ {run.started_at} IN_PROGRESS since {then:%H:%M:%S} UTC, no execution"


# -- the catalog --------------------------------------------------------------------------------

ROUTER = "RouterFunction"
DETECT = "DetectFunction"
STATES = "aws.states"
S3 = "aws.s3"
ERRORS_WINDOW = 300.0  # errors in 3 of 5 one-minute periods
THROTTLES_WINDOW = 420.0  # throttles in 5 of 5 one-minute periods, and a margin

_CATALOG = (
    NamedFault(
        "router-crash-before-start",
        "The router dies after its admission write, before StartExecution: a slot held, no execution.",
        ("RouterErrors",),
        None,
        ERRORS_WINDOW,
        specs=_one(CallCrash, function=ROUTER, service="states", operation="StartExecution", when="before"),
    ),
    NamedFault(
        "router-crash-after-start",
        "The router dies after StartExecution, before it records the execution on the run.",
        ("RouterErrors",),
        None,
        ERRORS_WINDOW,
        specs=_one(CallCrash, function=ROUTER, service="states", operation="StartExecution", when="after"),
    ),
    NamedFault(
        "tracker-dlq-events",
        "Execution status events lost to the tracker's DLQ (EventBridge gave up): their slots stay held.",
        ("TrackerDlqNotEmpty",),
        Runbook.TRACKER_DLQ,
        ERRORS_WINDOW,
        specs=_one(EventFault, source=STATES, effect="lose"),
    ),
    NamedFault(
        "status-events-lost-all-slots",
        "Every execution's end lost to the tracker's DLQ while every slot's run ends: the pipeline stalls.",
        ("TrackerDlqNotEmpty",),
        Runbook.TRACKER_DLQ,
        900.0,
        specs=_one(EventFault, source=STATES, effect="lose"),
    ),
    NamedFault(
        "status-events-paused",
        "Execution status events held (a tracker outage), delivered when the fault ends: slots stay held, the pipeline stalls.",
        ("SlotsFullIdle", "CounterDrift"),
        None,
        600.0,
        specs=_one(EventFault, source=STATES, effect="hold"),
    ),
    NamedFault(
        "status-events-duplicated",
        "Every execution status event delivered twice: the second release finds no holder.",
        (),
        None,
        300.0,
        specs=_one(EventFault, source=STATES, effect="duplicate"),
    ),
    NamedFault(
        "s3-events-duplicated",
        "Every S3 Object Created event delivered twice: the object version is claimed once.",
        (),
        None,
        300.0,
        specs=_one(EventFault, source=S3, effect="duplicate"),
    ),
    NamedFault(
        "s3-events-late",
        "S3 Object Created events delivered 2 minutes late.",
        (),
        None,
        300.0,
        specs=_one(EventFault, source=S3, effect="delay", delay_seconds=120.0),
    ),
    NamedFault(
        "dynamodb-throttled",
        "The handlers' DynamoDB calls throttled: the router's first read of both tables never passes.",
        ("CoordinationReadThrottles", "TrackingReadThrottles"),
        None,
        THROTTLES_WINDOW,
        specs=_one(ApiFault, service="dynamodb", code="ProvisionedThroughputExceededException",
                   message="The level of configured provisioned throughput for the table was exceeded."),
    ),
    NamedFault(
        "sfn-throttled",
        "The handlers' Step Functions calls throttled (ThrottlingException).",
        ("ExecutionsThrottled",),
        None,
        ERRORS_WINDOW,
        specs=_one(ApiFault, service="states", code="ThrottlingException", message="Rate exceeded"),
    ),
    NamedFault(
        "start-execution-fails",
        "StartExecution refused with a non-retryable error (ExecutionLimitExceeded).",
        ("RouterFailures",),
        None,
        ERRORS_WINDOW,
        specs=_one(ApiFault, service="states", operation="StartExecution", code="ExecutionLimitExceeded",
                   message="Execution limit exceeded"),
    ),
    NamedFault(
        "function-errors",
        "The detect function fails its invocations (like FIS aws:lambda:invocation-error).",
        ("DetectErrors", "ExecutionsFailed"),
        Runbook.FUNCTION_ERRORS,
        ERRORS_WINDOW,
        specs=_one(FunctionFault, function=DETECT, effect="error"),
    ),
    NamedFault(
        "function-timeouts",
        "The detect function times out (Task timed out after its Timeout).",
        ("DetectErrors", "ExecutionsFailed"),
        Runbook.FUNCTION_ERRORS,
        ERRORS_WINDOW,
        specs=_one(FunctionFault, function=DETECT, effect="timeout"),
    ),
    NamedFault(
        "function-slow",
        "The detect function starts 100 s late (like FIS aws:lambda:invocation-add-delay).",
        ("DetectDuration",),
        Runbook.FUNCTION_DURATION,
        ERRORS_WINDOW,
        specs=_one(FunctionFault, function=DETECT, effect="delay", delay_seconds=100.0),
    ),
    NamedFault(
        "poison-messages",
        "Malformed messages on the main queue: the router fails them into the DLQ.",
        ("DlqNotEmpty", "RouterFailures"),
        Runbook.DLQ_MESSAGES,
        write=_poison_messages,
    ),
    NamedFault(
        "counter-at-max-no-holder",
        "active_count hand-edited to the max with no holder; the reconciler resets it on its next run.",
        (),
        None,
        write=_counter_at_max,
    ),
    NamedFault(
        "counter-negative",
        "active_count hand-edited to -1: admission would let more than the max run.",
        ("CounterBelowRunning",),
        None,
        write=_counter_negative,
    ),
    NamedFault(
        "ghost-holder",
        "A holder with no execution, taken 45 minutes ago; the reconciler releases it on its next run.",
        (),
        None,
        write=_ghost_holder,
    ),
    NamedFault(
        "execution-by-hand",
        "A finished run's execution started again by hand: it holds no slot and stops itself, FAILED.",
        ("ExecutionsFailed",),
        None,
        write=_execution_by_hand,
    ),
    NamedFault(
        "stale-run",
        "A run IN_PROGRESS for 45 minutes, never started, no slot; the reconciler announces it again.",
        (),
        None,
        write=_stale_run,
    ),
)


# -- the objective's faults: burn rates are shares of the files in a window ------------------------
#
# The burn pairs judge the share of bad files over hours (1 h and 6 h for the page pairs), so each of
# these faults first lets traffic fill the slow pair's 6-hour window (`lead_seconds`, 111 real s at
# the game day's time scale): the computed time to fire assumes a long window full of files done on
# time at the rate that then fails, and a 6-hour window still holding an earlier fault's failed files
# pages on more failures, rightly (its budget is burning). On the sandbox that window holds about 130
# files (20-25 an hour), so 6% is 8 bad files: one fault's failures, not two. Hence one full lead
# each (the low-traffic one's at its low pace), in this order, last, after the cause faults; not in
# the short game day. ExecutionsFailed is expected of the blip and the low traffic: one failed
# execution is the cause catalog's signal (critical, so it pages through PipelineUnhealthy on its
# own); what these faults prove is the objective's pairs: which fire, and which stay quiet.

_FAST, _SLOW = (pair for pair in burn_pairs() if pair.alert.name in ("FastBurn", "SlowBurn"))
SLO_WINDOW_LEAD = _SLOW.alert.long_seconds + 600.0  # the slow pair's long window, and a margin
LOW_TRAFFIC_EVERY = 1_800.0  # a file every 30 minutes: 2 an hour and 12 in six, below both guards (7 and 17)


def _slo_fault(name: str, description: str, *, quiet: tuple[str, ...], expected: tuple[str, ...] = ("ExecutionsFailed",),
               **fields: Any) -> NamedFault:
    return NamedFault(name, description, expected, Runbook.SLO_BURN, specs=_one(FunctionFault, function=DETECT, effect="error"),
                      quiet_alarms=quiet, **fields)


_SLO_CATALOG = (
    _slo_fault(
        "slo-failure-blip",
        "Six hours of healthy traffic, then a blip: the detect function fails until one execution has failed.",
        quiet=(_FAST.name_suffix, _SLOW.name_suffix),
        lead_seconds=SLO_WINDOW_LEAD,
    ),
    _slo_fault(
        "slo-low-traffic-failures",
        "Six hours of a file every 30 minutes, then every one failing for an hour: fewer files than both page pairs' guards.",
        quiet=(_FAST.name_suffix, _SLOW.name_suffix),
        lead_seconds=SLO_WINDOW_LEAD,
        traffic_every=LOW_TRAFFIC_EVERY,
        for_seconds=float(_FAST.alert.long_seconds),
    ),
    _slo_fault(
        "slo-sustained-failures",
        "Six hours of healthy traffic, then every file failing: the fast pair pages, the slow pair stays quiet.",
        quiet=(_SLOW.name_suffix,),
        expected=(_FAST.name_suffix,),
        lead_seconds=SLO_WINDOW_LEAD,
        computed_seconds=time_to_fire_seconds(_FAST.alert, DEFAULT_TARGET, 1.0),
        timed_from=_FAST.short.name_suffix,
    ),
)

FAULTS: Mapping[str, NamedFault] = {fault.name: fault for fault in (*_CATALOG, *_SLO_CATALOG)}
# The objective's scenario: its own game day (`pipeops gameday --slo`), as each fault needs six
# virtual hours of traffic first; the full game day runs the cause faults.
SLO_SCENARIO: tuple[str, ...] = tuple(fault.name for fault in _SLO_CATALOG)


def fault_named(name: str) -> NamedFault:
    """The fault `name`; FaultError lists the names."""
    fault = FAULTS.get(name)
    if fault is None:
        raise FaultError(f"no fault {name!r}: the faults are {', '.join(FAULTS)}")
    return fault


def inject(target: FaultTarget, name: str, share: float = 1.0, for_seconds: float | None = None) -> list[dict[str, Any]]:
    """Inject the named fault into the sandbox at `target`."""
    if not 0.0 < share <= 1.0:
        raise FaultError(f"share {share} is not in (0, 1]: e.g. 0.5 for every other call")
    if for_seconds is not None and for_seconds <= 0:
        raise FaultError(f"duration {for_seconds} s is not positive")
    return fault_named(name).inject(target, share, for_seconds)


def clear(target: FaultTarget, name: str | None = None) -> list[str]:
    """End the named fault (None: every sandbox fault in force); returns what was cleared."""
    if name is None:
        return list(control(target, "DELETE")["cleared"])
    return fault_named(name).clear(target)


def active(target: FaultTarget) -> list[dict[str, Any]]:
    """The sandbox faults in force at `target` (data faults leave data, not a fault in force)."""
    return list(control(target, "GET")["active"])
