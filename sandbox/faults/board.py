"""The sandbox's fault registry: what is injected now, and the decision each seam asks for.

One `FaultBoard` per sandbox, shared by the threads that run things (the Lambda runtime, the event
bus, the botocore seam of handlers' calls). `inject(spec)` replaces a fault of the same name,
`clear(name)` (or `clear()`: all) ends it, and a fault with `for_seconds` ends by itself after that
many virtual seconds (a timer on the sandbox's time scale). Clearing tells the `on_clear`
callbacks, so the event bus delivers what a hold kept.

The parts ask by physical names (a function's name, a rule's name); a spec may name things by
their template logical id, resolved once at inject (`resolve`, given by the sandbox from its
deployment). Thread-safe: the registry is one dict under a lock, each fault's share decided by its
own counter.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sandbox.clock import TimeScale
from sandbox.faults.specs import (
    ApiFault,
    CallCrash,
    EventFault,
    FaultSpec,
    FunctionFault,
    ShareCounter,
    spec_to_json,
)

LOG = logging.getLogger("sandbox.faults")

Resolver = Callable[[str], str]
DYNAMODB_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})


@dataclass
class ActiveFault:
    """One injected fault: its spec with names resolved, its share counter and its end."""

    spec: FaultSpec
    counter: ShareCounter
    injected_at: float  # time.monotonic()
    expires_at: float | None  # time.monotonic(), or None: until cleared
    timer: threading.Timer | None = field(default=None, repr=False)

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


class FaultBoard:
    """The faults injected into one sandbox (see the module docstring)."""

    def __init__(
        self,
        time_scale: TimeScale | None = None,
        resolve: Resolver | None = None,
        *,
        region: str = "us-east-1",
        on_first_call_fault: Callable[[FaultBoard], None] | None = None,
    ) -> None:
        self.time_scale = time_scale or TimeScale.real()
        self._resolve = resolve or (lambda name: name)
        self.region = region
        self._faults: dict[str, ActiveFault] = {}
        self._lock = threading.Lock()
        self._on_clear: tuple[Callable[[FaultSpec], object], ...] = ()
        self._on_first_call_fault = on_first_call_fault
        self._call_faults_wired = False
        self.history: list[dict[str, Any]] = []  # every inject and clear, for a report

    # ---------------------------------------------------------------- control

    def inject(self, spec: FaultSpec) -> dict[str, Any]:
        """Start `spec` (replacing a fault of its name); returns it as `active()` lists it."""
        resolved = self._resolved(spec)
        now = time.monotonic()
        expires = None if spec.for_seconds is None else now + self.time_scale.scale(spec.for_seconds)
        fault = ActiveFault(resolved, ShareCounter(spec.share), now, expires)
        if expires is not None:
            fault.timer = threading.Timer(max(0.0, expires - now), self._expire, args=(spec.name, fault))
            fault.timer.daemon = True
        with self._lock:
            previous = self._faults.get(spec.name)
            self._faults[spec.name] = fault
            self.history.append({"at": _now_iso(), "action": "inject", "fault": spec_to_json(spec)})
        if previous is not None:
            self._ended(previous)
        if isinstance(spec, ApiFault | CallCrash) and not self._call_faults_wired:
            self._call_faults_wired = True
            if self._on_first_call_fault is not None:
                self._on_first_call_fault(self)
        if fault.timer is not None:
            fault.timer.start()
        return self._describe(fault, now)

    def clear(self, name: str | None = None) -> list[str]:
        """End the fault `name` (None: every fault); returns the names ended."""
        with self._lock:
            names = list(self._faults) if name is None else [name] if name in self._faults else []
            ended = [self._faults.pop(n) for n in names]
            for n in names:
                self.history.append({"at": _now_iso(), "action": "clear", "name": n})
        for fault in ended:
            self._ended(fault)
        return names

    def active(self) -> list[dict[str, Any]]:
        """Every fault in force: its spec (names resolved), virtual seconds left, counts."""
        now = time.monotonic()
        with self._lock:
            faults = [f for f in self._faults.values() if not f.expired(now)]
        return [self._describe(f, now) for f in faults]

    def on_clear(self, callback: Callable[[FaultSpec], object]) -> None:
        """Call `callback(spec)` whenever a fault ends (cleared, replaced or expired)."""
        self._on_clear = (*self._on_clear, callback)

    def close(self) -> None:
        """End every fault (the sandbox stops): timers cancelled, holds released."""
        self.clear()

    # ---------------------------------------------------------------- decisions (the seams ask)

    def function_fault(self, function_name: str) -> FunctionFault | None:
        return self._first(FunctionFault, lambda s: s.function == function_name)

    def api_fault(self, caller: str, service: str, operation: str) -> ApiFault | None:
        return self._first(
            ApiFault,
            lambda s: s.service == service
            and s.operation in ("", operation)
            and (not s.callers or caller in s.callers),
        )

    def crash(self, caller: str, service: str, operation: str, when: str) -> CallCrash | None:
        return self._first(
            CallCrash,
            lambda s: s.when == when and s.function == caller and s.service == service and s.operation == operation,
        )

    def event_fault(self, source: str, rule_name: str) -> EventFault | None:
        return self._first(EventFault, lambda s: s.source == source and s.rule in ("", rule_name))

    def api_fault_fired(self, fault: ApiFault, service: str, operation: str, params: Any) -> None:
        """Publish what AWS counts for a throttled call (AWS/DynamoDB throttle events,
        AWS/States ExecutionThrottled): the alarms on them then see the fault."""
        if not fault.throttles:
            return
        try:
            from moto.core import DEFAULT_ACCOUNT_ID

            from sandbox import emf

            for namespace, datum in throttle_metrics(service, operation, params, self.region):
                emf.put_in_process(namespace, [datum], account_id=DEFAULT_ACCOUNT_ID, region=self.region)
        except Exception:  # counting a fault must never change what the caller sees
            LOG.warning("could not publish the throttle metrics of %s:%s", service, operation, exc_info=True)

    # ---------------------------------------------------------------- internals

    def _first(self, kind: type[Any], matches: Callable[[Any], bool]) -> Any:
        if not self._faults:
            return None
        now = time.monotonic()
        with self._lock:
            candidates = [f for f in self._faults.values() if type(f.spec) is kind and not f.expired(now)]
        for fault in candidates:
            if matches(fault.spec) and fault.counter.hit():
                return fault.spec
        return None

    def _resolved(self, spec: FaultSpec) -> FaultSpec:
        if isinstance(spec, FunctionFault | CallCrash):
            return replace(spec, function=self._resolve(spec.function))
        if isinstance(spec, ApiFault) and spec.callers:
            return replace(spec, callers=tuple(self._resolve(c) for c in spec.callers))
        if isinstance(spec, EventFault) and spec.rule:
            return replace(spec, rule=self._resolve(spec.rule))
        return spec

    def _expire(self, name: str, fault: ActiveFault) -> None:
        with self._lock:
            if self._faults.get(name) is not fault:  # cleared or replaced meanwhile
                return
            del self._faults[name]
            self.history.append({"at": _now_iso(), "action": "expire", "name": name})
        self._ended(fault)

    def _ended(self, fault: ActiveFault) -> None:
        if fault.timer is not None:
            fault.timer.cancel()
        for callback in self._on_clear:
            try:
                callback(fault.spec)
            except Exception:
                LOG.warning("a fault-clear callback failed for %s", fault.spec.name, exc_info=True)

    def _describe(self, fault: ActiveFault, now: float) -> dict[str, Any]:
        left = None
        if fault.expires_at is not None:
            left = round(self.time_scale.to_virtual(max(0.0, fault.expires_at - now)), 1)
        return {
            **spec_to_json(fault.spec),
            "seconds_left": left,
            "matched": fault.counter.matched,
            "faulted": fault.counter.faulted,
        }


def throttle_metrics(service: str, operation: str, params: Any, region: str) -> list[tuple[str, dict[str, Any]]]:
    """(namespace, MetricData entry) AWS publishes for one throttled call: a DynamoDB read or
    write throttle event per table the call names, or a Step Functions ExecutionThrottled."""
    at = dt.datetime.now(tz=dt.UTC)
    params = params if isinstance(params, dict) else {}
    if service == "dynamodb":
        name = "ReadThrottleEvents" if operation in DYNAMODB_READS else "WriteThrottleEvents"
        return [
            ("AWS/DynamoDB", _count(name, "TableName", table, at)) for table in sorted(set(_tables(params)))
        ]
    if service == "states" and operation in ("StartExecution", "StartSyncExecution"):
        arn = str(params.get("stateMachineArn") or "")
        return [("AWS/States", _count("ExecutionThrottled", "StateMachineArn", arn, at))] if arn else []
    return []


def _tables(params: dict[str, Any]) -> Iterable[str]:
    if isinstance(params.get("TableName"), str):
        yield params["TableName"]
    yield from (params.get("RequestItems") or {}).keys()
    for item in params.get("TransactItems") or []:
        for action in (item or {}).values():
            if isinstance(action, dict) and isinstance(action.get("TableName"), str):
                yield action["TableName"]


def _count(name: str, dimension: str, value: str, at: dt.datetime) -> dict[str, Any]:
    return {
        "MetricName": name,
        "Dimensions": [{"Name": dimension, "Value": value}],
        "Timestamp": at,
        "Value": 1.0,
        "Unit": "Count",
    }


def _now_iso() -> str:
    return dt.datetime.now(tz=dt.UTC).isoformat(timespec="milliseconds")
