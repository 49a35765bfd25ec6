"""What a sandbox fault is, as plain data: one frozen dataclass per kind, and how a share is decided.

Pure: no AWS, no threads. A spec names what it breaks the way AWS does (a function by its template
logical id or its name, an API call by service and operation, an event by its source), how often
(`share`, 0..1 of the matching invocations, calls or deliveries) and for how long (`for_seconds`,
virtual seconds on the sandbox's time scale; None: until cleared). Specs travel as JSON between a
served sandbox and the CLI (`spec_to_json` / `spec_from_json`), so every field is a plain value.

A share is decided by a deterministic counter, not a random draw (`ShareCounter`): the n-th match is
faulted when ceil(n * share) grows, so the first match is faulted, share 0.5 faults every other one,
and a test sees the same sequence every run.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

FunctionEffect = Literal["error", "timeout", "delay"]
CrashPoint = Literal["before", "after"]
EventEffect = Literal["hold", "duplicate", "lose", "delay"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# The error codes botocore's retry handlers count as throttling (botocore.retries.standard).
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)


class FaultSpecError(ValueError):
    """A spec that cannot be injected; the message says which field and why."""


@dataclass(frozen=True)
class _Spec:
    name: str
    share: float = 1.0
    for_seconds: float | None = None

    def __post_init__(self) -> None:
        problems = [*self._common_problems(), *self.problems()]
        if problems:
            raise FaultSpecError(f"fault {self.name!r}: {'; '.join(problems)}")

    def _common_problems(self) -> list[str]:
        found = []
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            found.append("its name must be kebab-case: lower-case letters, digits and '-', up to 63")
        if not isinstance(self.share, (int, float)) or not 0.0 < float(self.share) <= 1.0:
            found.append(f"share {self.share!r} is not in (0, 1]")
        if self.for_seconds is not None and (
            not isinstance(self.for_seconds, (int, float)) or float(self.for_seconds) <= 0
        ):
            found.append(f"for_seconds {self.for_seconds!r} is not a positive number of virtual seconds")
        return found

    def problems(self) -> list[str]:
        return []


@dataclass(frozen=True)
class FunctionFault(_Spec):
    """A function's invocations fail, time out or start late, as AWS FIS's Lambda actions do
    (aws:lambda:invocation-error, aws:lambda:invocation-add-delay).

    `error`: the handler does not run and the invocation fails with `error_type`. `timeout`: the
    invocation fails as Lambda's timeout does (Sandbox.Timedout, "Task timed out after N seconds")
    at once, without waiting the timeout out. `delay`: the handler starts `delay_seconds` (virtual)
    late; the invocation's Duration counts the virtual delay; a delay as long as the function's
    Timeout is a timeout."""

    function: str = ""
    effect: FunctionEffect = "error"
    delay_seconds: float = 0.0
    error_type: str = "InjectedFault"

    def problems(self) -> list[str]:
        found = []
        if not self.function:
            found.append("it names no function (a logical id such as RouterFunction, or a function name)")
        if self.effect not in ("error", "timeout", "delay"):
            found.append(f"effect {self.effect!r} is not error, timeout or delay")
        if self.effect == "delay" and not self.delay_seconds > 0:
            found.append("a delay needs delay_seconds > 0")
        if not re.match(r"^[A-Za-z][A-Za-z0-9_.]{0,99}$", self.error_type or ""):
            found.append(f"error_type {self.error_type!r} is not an exception name")
        return found


@dataclass(frozen=True)
class ApiFault(_Spec):
    """An AWS API answers a handler's calls with an error, as the service would: a throttle
    (ThrottlingException, ProvisionedThroughputExceededException: botocore retries it as a
    throttle) or a failure. `service` is the API's prefix as IAM writes it (dynamodb, states,
    sqs, s3, lambda); `operation` its name (UpdateItem, StartExecution), empty for every one.
    `callers`: the functions whose calls fail (logical ids or names); empty: every handler.
    The sandbox's own clients and callers outside a handler are never faulted."""

    service: str = ""
    operation: str = ""
    code: str = "ThrottlingException"
    status: int = 400
    message: str = "Rate exceeded"
    callers: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        found = []
        if not re.match(r"^[a-z0-9-]+$", self.service or ""):
            found.append(f"service {self.service!r} is not an API prefix such as dynamodb or states")
        if self.operation and not re.match(r"^[A-Z][A-Za-z0-9]+$", self.operation):
            found.append(f"operation {self.operation!r} is not an API operation name such as UpdateItem")
        if not re.match(r"^[A-Za-z][A-Za-z0-9.]+$", self.code or ""):
            found.append(f"code {self.code!r} is not an AWS error code")
        if not 400 <= int(self.status) <= 599:
            found.append(f"status {self.status!r} is not an HTTP error status")
        return found

    @property
    def throttles(self) -> bool:
        return self.code in THROTTLING_CODES


@dataclass(frozen=True)
class CallCrash(_Spec):
    """A function dies right before or right after one of its own AWS calls: the call is not sent
    (`before`) or its answer is never used (`after`), and the invocation fails there as a crashed
    runtime does (Runtime.ExitError), whatever the handler catches."""

    function: str = ""
    service: str = ""
    operation: str = ""
    when: CrashPoint = "before"

    def problems(self) -> list[str]:
        found = []
        if not self.function:
            found.append("it names no function")
        if not re.match(r"^[a-z0-9-]+$", self.service or ""):
            found.append(f"service {self.service!r} is not an API prefix such as states")
        if not re.match(r"^[A-Z][A-Za-z0-9]+$", self.operation or ""):
            found.append(f"operation {self.operation!r} is not an API operation name such as StartExecution")
        if self.when not in ("before", "after"):
            found.append(f"when {self.when!r} is not before or after")
        return found


@dataclass(frozen=True)
class EventFault(_Spec):
    """EventBridge's deliveries of the events from `source` (aws.states: execution status changes;
    aws.s3: object created) to Lambda targets are held (delivered when the fault is cleared or
    expires), duplicated (delivered twice, same event id), lost (sent to the target's dead-letter
    queue as EventBridge does once its retries are spent) or delivered `delay_seconds` late.
    `rule`: only this rule's targets (a logical id or name); empty: every rule. A held delivery is
    not in flight (as a paused rule's): the sandbox reads idle while it waits."""

    source: str = ""
    effect: EventEffect = "hold"
    delay_seconds: float = 0.0
    rule: str = ""

    def problems(self) -> list[str]:
        found = []
        if not re.match(r"^aws\.[a-z0-9-]+$", self.source or ""):
            found.append(f"source {self.source!r} is not an AWS event source such as aws.states")
        if self.effect not in ("hold", "duplicate", "lose", "delay"):
            found.append(f"effect {self.effect!r} is not hold, duplicate, lose or delay")
        if self.effect == "delay" and not self.delay_seconds > 0:
            found.append("a delay needs delay_seconds > 0")
        return found


FaultSpec = FunctionFault | ApiFault | CallCrash | EventFault
KINDS: Mapping[str, type[_Spec]] = {
    "function": FunctionFault,
    "api": ApiFault,
    "crash": CallCrash,
    "event": EventFault,
}


def kind_of(spec: FaultSpec) -> str:
    return next(kind for kind, cls in KINDS.items() if type(spec) is cls)


def spec_to_json(spec: FaultSpec) -> dict[str, Any]:
    """The spec as JSON-ready data, with its `kind`."""
    data = asdict(spec)
    if "callers" in data:
        data["callers"] = list(data["callers"])
    return {"kind": kind_of(spec), **data}


def spec_from_json(data: Any) -> FaultSpec:
    """A spec from `spec_to_json`'s data; FaultSpecError names what is wrong."""
    if not isinstance(data, Mapping):
        raise FaultSpecError("a fault spec is a JSON object")
    kind = data.get("kind")
    cls = KINDS.get(str(kind))
    if cls is None:
        raise FaultSpecError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known - {"kind"})
    if unknown:
        raise FaultSpecError(f"a {kind} fault has no field {', '.join(unknown)}")
    values = {k: v for k, v in data.items() if k != "kind"}
    if "callers" in values:
        values["callers"] = tuple(values["callers"] or ())
    try:
        return cls(**values)  # type: ignore[return-value]  # one of the four kinds
    except TypeError as exc:
        raise FaultSpecError(str(exc)) from None


class ShareCounter:
    """Decides which matches a share faults: the n-th when ceil(n * share) grows (thread-safe)."""

    def __init__(self, share: float) -> None:
        self.share = float(share)
        self.matched = 0
        self.faulted = 0
        self._lock = threading.Lock()

    def hit(self) -> bool:
        with self._lock:
            self.matched += 1
            fire = decide(self.matched, self.share)
            self.faulted += fire
            return fire


def decide(n: int, share: float) -> bool:
    """Whether the n-th match (from 1) of a fault with this share is faulted."""
    # Rounded first: 0.3 * 10 is 3.0000000000000004 in floating point, whose ceiling is 4.
    return math.ceil(round(n * share, 9)) > math.ceil(round((n - 1) * share, 9))
