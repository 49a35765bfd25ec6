"""The parts of EventBridge that moto lacks (docs/ARCHITECTURE.md#sandbox): Lambda targets, execution status
events, faithful S3 events, schedules -- with retries, dead letters and fault injection.

What moto 5.2.5 does (pinned by tests/sandbox/test_eventbus.py):
- Every route into a rule's targets -- `put_events`, S3's EventBridge notifications, cross-bus
  forwarding -- ends in `moto.events.models.Rule.send_to_targets(event, transform_input)`, which
  handles log groups, archives, SQS, buses and API destinations and raises NotImplementedError for
  any other target (Lambda, Step Functions). It also delivers to DISABLED rules, and a schedule
  rule (no pattern) matches every event.
- S3 *does* forward to EventBridge once `put_bucket_notification_configuration(
  EventBridgeConfiguration={})` is set, in `moto.s3.notifications._send_event_bridge_message`, but
  the event is not AWS-shaped: the key is not URL-encoded, `eTag` instead of `etag`, reason
  "ObjectCreated" instead of "PutObject", the same event id every time; it goes to every bus, and
  every `put_object` also sends a spurious "Object Tags Added" event. An exception there (e.g. a
  Lambda target) is swallowed, silently skipping the remaining rules.
- No "Step Functions Execution Status Change" events, no schedules.

The two seams (`sandbox.seams.eventbridge_routes`, attached by `start()`, detached by `stop()`):
1. `Rule.send_to_targets` -> `EventBus._route`: skips DISABLED rules and schedule-only rules
   (AWS behaviour), matches with moto's own `EventPattern`, hands Lambda targets to the delivery
   workers, and passes every other target to moto's original method, one at a time, on a copy of
   the rule holding just that target (with the event untouched unless the target has an
   InputTransformer: moto's default re-templating drops `account`).
2. `moto.s3.notifications._send_event_bridge_message` -> `s3_event`: builds the AWS event for
   Object Created / Object Deleted (others dropped) and `emit`s it to the default bus.

Delivery (Lambda targets). Asynchronous like AWS: the put returns at once; worker threads invoke
the function through `LambdaRuntime.invoke_direct` with the target's input (`Input`, `InputPath`,
or `InputTransformer` via moto's `EventTemplateParser`; else the whole event). Each target of each
rule has its own delivery lane (`workers` threads, started on its first delivery), as in AWS,
where one target's backlog never holds another's: a slow ingest function once held the tracker's
status events for 92 s when all rules shared four workers. Within a lane deliveries are sharded
over its workers by an ordering key -- the execution ARN for status events -- so one execution's
RUNNING is always delivered before its terminal event. Failures come in two kinds:
- EventBridge could not hand the event to Lambda (function missing -> NO_RESOURCE, no retry;
  a rule paused with `fail=True` -> THROTTLING, retried): retried with exponential backoff and
  jitter per the target's RetryPolicy (MaximumRetryAttempts, default 185; MaximumEventAgeInSeconds,
  default 86400; virtual seconds, time-scaled), then sent to the target's DeadLetterConfig queue
  with the attributes AWS adds: RULE_ARN, TARGET_ARN, ERROR_CODE, ERROR_MESSAGE,
  EXHAUSTED_RETRY_CONDITION, RETRY_ATTEMPTS.
- The handler raised or timed out. In AWS, EventBridge invokes Lambda *asynchronously*: the
  event was delivered once Lambda queued it, and a handler error is Lambda's business -- retried
  per the function's event-invoke config (MaximumRetryAttempts, default 2, after 60 s then 120 s;
  MaximumEventAgeInSeconds, default 6 h), then sent to its OnFailure destination (SQS supported)
  or discarded. The rule's RetryPolicy and DLQ never see it. That is `handler_errors=
  "lambda-async"` (the default). `handler_errors="eventbridge"` instead treats a handler error as
  a delivery failure (RetryPolicy, then the rule's DLQ with ERROR_CODE=ERROR_FROM_TARGET): handy
  for exercising the DLQ path, but not what AWS does.

Idle detection (`wait_until_idle`): a counter of deliveries in flight (queued, running, or waiting
for a retry; held deliveries of a paused rule excluded). Idle = that counter is zero, then a full
status-watcher round that *started after* that moment completes, and still nothing new was
accepted meanwhile; else repeat. So when it returns True every execution's status as of the call
has been emitted and every resulting delivery has settled.

All boto3 clients (Step Functions polling, dead-letter sends) honour `endpoint_url`; rules and
functions are read from moto's backends directly, so the bus must run in the process that hosts
moto (in-process `mock_aws`, or the process running `ThreadedMotoServer`) -- as the Lambda
runtime must.
"""

from __future__ import annotations

import copy
import datetime as dt
import heapq
import itertools
import json
import logging
import queue
import random
import string
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast
from urllib.parse import quote_plus

from sandbox import schedules, status_events
from sandbox.background import BackgroundThread
from sandbox.clients import ClientCache
from sandbox.clock import TimeScale
from sandbox.runtime import InvokeResult, LambdaRuntime
from sandbox.seams import eventbridge_routes

LOG = logging.getLogger("sandbox.eventbus")

HandlerErrors = Literal["lambda-async", "eventbridge"]

DEFAULT_MAX_RETRY_ATTEMPTS = 185
DEFAULT_MAX_EVENT_AGE_SECONDS = 86400
RETRY_BASE_SECONDS = 1.0  # EventBridge backoff (virtual): 1, 2, 4, ... s with jitter, capped
RETRY_CAP_SECONDS = 300.0
LAMBDA_ASYNC_RETRY_DELAYS = (60.0, 120.0)  # Lambda async: 1 min, then 2 min
LAMBDA_ASYNC_MAX_RETRIES = 2
LAMBDA_ASYNC_MAX_EVENT_AGE_SECONDS = 21600
HISTORY_SIZE = 1000
# Real seconds between the status watcher's safety-net full rounds; moto's hooks report each
# execution's start and end at once (sandbox.status_events), and idle detection asks for its own
# round. A full round lists every execution through the API: every 2 s it cost 4% of a busy
# sandbox's CPU for nothing the hooks had not reported already.
STATUS_FULL_ROUND_SECONDS = 10.0

STAT_KEYS = (
    "matched",  # Lambda-target deliveries accepted (events x targets)
    "invocations",  # handler runs
    "deliveries",  # handler runs that succeeded
    "failures",  # failed attempts (handler errors and EventBridge delivery failures)
    "retries",  # attempts rescheduled
    "dead_lettered",  # sent to the target's DeadLetterConfig queue
    "on_failure",  # sent to the function's OnFailure destination (lambda-async)
    "dropped",  # given up with nowhere to send, or the dead-letter send failed
)

_STOP = object()
_ENABLED_STATES = ("ENABLED", "ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS")


# --------------------------------------------------------------------------- event shapes


def _aws_event(event: dict[str, Any]) -> dict[str, Any]:
    """The event as AWS delivers it: ISO `time`, no moto-internal keys."""
    out = copy.deepcopy(dict(event))
    out.pop("ingestion-time", None)
    when = out.get("time")
    if isinstance(when, int | float | dt.datetime):
        out["time"] = schedules.iso_time(when)
    return out


def _moto_event(event: dict[str, Any], *, ingestion: bool = True) -> dict[str, Any]:
    """The event as moto's own target senders expect it: `time` in epoch seconds."""
    out = copy.deepcopy(dict(event))
    when = out.get("time")
    if isinstance(when, str):
        try:
            out["time"] = dt.datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
        except ValueError:
            out["time"] = time.time()
    elif not isinstance(when, int | float):
        out["time"] = time.time()
    if ingestion:  # moto's InputTransformer reads it
        out.setdefault("ingestion-time", time.time())
    return out


_S3_REASONS = {
    "s3:ObjectCreated:Put": ("Object Created", "PutObject"),
    "s3:ObjectCreated:Post": ("Object Created", "POST Object"),
    "s3:ObjectCreated:Copy": ("Object Created", "CopyObject"),
    "s3:ObjectCreated:CompleteMultipartUpload": ("Object Created", "CompleteMultipartUpload"),
    "s3:ObjectRemoved:Delete": ("Object Deleted", "DeleteObject"),
    "s3:ObjectRemoved:DeleteMarkerCreated": ("Object Deleted", "DeleteObject"),
}


def s3_event(account_id: str, bucket: Any, event_name: Any, key: Any) -> dict[str, Any] | None:
    """The AWS event S3 sends to EventBridge for one notification; None if not forwarded.

    Only Object Created and Object Deleted are forwarded: moto also reports a tagging (and on
    some paths an ACL) change for every put, which S3 does not.
    """
    name = str(getattr(event_name, "value", event_name))
    kind = _S3_REASONS.get(name)
    if kind is None or key is None:
        return None
    detail_type, reason = kind
    # Encoded as S3 encodes keys in its notifications ("hello world.jpg" -> "hello+world.jpg"),
    # folder separators kept as they are ("uploads/a+b.txt"): ingest then looks a key up twice
    # only when it holds a '+' or a '%', as on AWS (pipeline/s3events.py).
    obj: dict[str, Any] = {"key": quote_plus(key.name, safe="/")}
    if detail_type == "Object Created":
        obj["size"] = int(key.size)
        obj["etag"] = str(key.etag).replace('"', "")
    version = getattr(key, "version_id", None)
    if version and str(version) != "null":
        obj["version-id"] = str(version)
    obj["sequencer"] = f"{time.time_ns():020X}"
    detail: dict[str, Any] = {
        "version": "0",
        "bucket": {"name": bucket.name},
        "object": obj,
        "request-id": "".join(random.choices(string.ascii_uppercase + string.digits, k=16)),
        "requester": account_id,
        "source-ip-address": "127.0.0.1",
        "reason": reason,
    }
    if detail_type == "Object Deleted":
        detail["deletion-type"] = (
            "Delete Marker Created" if name.endswith("DeleteMarkerCreated") else "Permanently Deleted"
        )
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": "aws.s3",
        "account": account_id,
        "time": schedules.iso_time(),
        "region": bucket.region_name,
        "resources": [f"arn:aws:s3:::{bucket.name}"],
        "detail": detail,
    }


def target_input(target: dict[str, Any], event: dict[str, Any]) -> Any:
    """What a target receives: Input, InputPath, InputTransformer, or the whole event."""
    if target.get("Input") is not None:
        try:
            return json.loads(target["Input"])
        except ValueError:
            return target["Input"]
    if target.get("InputPath"):
        from jsonpath_ng.ext import parse

        matches = parse(target["InputPath"]).find(event)
        return matches[0].value if matches else None
    transformer = target.get("InputTransformer")
    if transformer:
        from moto.events.utils import EventTemplateParser

        template = transformer.get("InputTemplate") or ""
        paths = transformer.get("InputPathsMap") or {}
        try:
            return EventTemplateParser.parse(
                input_template=template, input_paths_map=paths, event=_moto_event(event)  # type: ignore[arg-type]  # moto's TypedDict of this dict
            )
        except ValueError:  # not a JSON template: AWS delivers the substituted text
            from jsonpath_ng.ext import parse

            text = template
            for name, path in paths.items():
                found = parse(path).find(event)
                value = found[0].value if found else ""
                text = text.replace(f"<{name}>", value if isinstance(value, str) else json.dumps(value))
            return text
    return event


# --------------------------------------------------------------------------- internals


@dataclass
class _Delivery:
    rule_key: tuple[str, str]  # (bus name, rule name)
    rule_arn: str
    target: dict[str, Any]
    event: dict[str, Any]
    payload: Any
    order_key: str
    lane_key: tuple[str, str, str] = ("", "", "")  # (bus, rule, target id): its delivery lane
    created: float = field(default_factory=time.monotonic)
    eventbridge_retries: int = 0
    invocations: int = 0
    state: str = "queued"  # queued | running | scheduled | held | done
    faulted: bool = False  # an injected fault acted on it already (a duplicate, a late delivery)


@dataclass
class _Lane:
    """One rule target's delivery workers: a queue per worker, sharded by ordering key."""

    queues: list[queue.Queue[Any]]
    threads: list[threading.Thread]


@dataclass
class _Pause:
    fail: bool


def _rule_label(rule_key: tuple[str, str]) -> str:
    bus, name = rule_key
    return name if bus == "default" else f"{bus}/{name}"


def _error_message(result: InvokeResult) -> str:
    payload = result.payload
    if isinstance(payload, dict):
        return str(payload.get("errorMessage") or payload.get("errorType") or result.raw)[:2000]
    return str(result.raw)[:2000]


class EventFaults(Protocol):
    """Where the bus asks whether a delivery is faulted (`sandbox.faults.FaultBoard`): None, or
    an `EventFault` (effect hold / duplicate / lose / delay)."""

    def event_fault(self, source: str, rule_name: str) -> Any: ...


class EventBus(BackgroundThread):
    """EventBridge for the sandbox. Use as a context manager, or `start()` / `stop()`.

    `runtime`: the installed `LambdaRuntime` that runs Lambda targets. `region`, `endpoint_url`
    (default: the runtime's), `time_scale` (default: the runtime's) scale every wait: schedules,
    retry backoff, event ages. `account_id`: moto's default account unless given.
    `poll_interval`: real seconds between schedule syncs (and between the status watcher's
    safety-net full rounds, at least STATUS_FULL_ROUND_SECONDS: its hooks report changes at once).
    `workers`: delivery threads per rule target. `handler_errors`: see the module docstring.
    `watch_executions`: emit Step Functions status-change events.
    """

    def __init__(
        self,
        runtime: LambdaRuntime,
        *,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        time_scale: TimeScale | None = None,
        account_id: str | None = None,
        poll_interval: float = 0.2,
        workers: int = 4,
        handler_errors: HandlerErrors = "lambda-async",
        watch_executions: bool = True,
    ) -> None:
        if handler_errors not in ("lambda-async", "eventbridge"):
            raise ValueError(
                f"handler_errors must be 'lambda-async' or 'eventbridge', got {handler_errors!r}"
            )
        self.runtime = runtime
        self.region = region
        self.endpoint_url = endpoint_url if endpoint_url is not None else runtime.endpoint_url
        self.time_scale = time_scale or runtime.time_scale
        if account_id is None:
            from moto.core import DEFAULT_ACCOUNT_ID

            account_id = DEFAULT_ACCOUNT_ID
        self.account_id = account_id
        self.poll_interval = poll_interval
        self.handler_errors: HandlerErrors = handler_errors
        self._n_workers = max(1, workers)

        super().__init__("sandbox-eventbus-timer")  # the thread of retries and schedules
        self._lock = threading.RLock()
        self._idle_cond = threading.Condition(self._lock)
        self._pending = 0
        self._accepted_total = 0
        self._emitted_total = 0
        self._stats: dict[str, dict[str, int]] = {}
        self._paused: dict[tuple[str, str], _Pause] = {}
        self._held: dict[tuple[str, str], list[_Delivery]] = {}
        self._duplicates: list[list[Any]] = []  # [predicate, copies]
        self._history: deque[dict[str, Any]] = deque(maxlen=HISTORY_SIZE)
        self.faults: EventFaults | None = None  # set by the sandbox: injected delivery faults
        self._fault_held: dict[str, list[_Delivery]] = {}  # fault name -> deliveries it holds

        self._lanes: dict[tuple[str, str, str], _Lane] = {}
        self._timer_cond = threading.Condition()
        self._retry_heap: list[tuple[float, int, _Delivery]] = []
        self._seq = itertools.count()
        self._schedules = schedules.ScheduleTable(self.time_scale)
        self._started = False
        self._clients = ClientCache(region, endpoint_url)
        self._queue_urls: dict[str, str] = {}
        self._warned: set[str] = set()
        self._watcher = (
            status_events.ExecutionStatusWatcher(
                lambda: self._client("stepfunctions"),
                self.emit,
                interval=max(poll_interval, STATUS_FULL_ROUND_SECONDS),
            )
            if watch_executions
            else None
        )

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> EventBus:
        if self._started:
            return self
        if not self.runtime.installed:
            raise RuntimeError("the LambdaRuntime must be installed before the EventBus starts")
        # The started flag first: once the seams are installed, an S3 event may arrive on another
        # thread at once, and it must find somewhere to go (its lane starts on demand).
        self._lanes = {}
        self._stop.clear()
        self._started = True
        try:
            eventbridge_routes.SEAM.attach(self)
        except BaseException:
            self._started = False
            raise
        if self._watcher is not None:
            try:
                self._watcher.baseline()
            except Exception:
                LOG.warning("could not take the Step Functions baseline", exc_info=True)
        super().start()
        if self._watcher is not None:
            self._watcher.start()
        return self

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop the threads (queued deliveries are abandoned) and restore moto's methods; True
        when every thread has ended."""
        if not self._started:
            return True
        deadline = time.monotonic() + timeout
        self._stop.set()
        if self._watcher is not None:
            self._watcher.stop(max(0.0, deadline - time.monotonic()))
        with self._lock:
            lanes = list(self._lanes.values())
        for lane in lanes:
            for q in lane.queues:
                q.put(_STOP)
        ended = super().stop(max(0.0, deadline - time.monotonic()))
        threads = [t for lane in lanes for t in lane.threads]
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in threads if t.is_alive()] + ([] if ended else [self._thread_name])
        if alive:
            LOG.warning("event bus threads still busy after stop (daemon, left behind): %s", alive)
        with self._timer_cond:
            self._retry_heap.clear()
        with self._lock:
            if self._pending or self._held:
                LOG.info(
                    "event bus stopped with %d deliveries in flight and %d held (abandoned)",
                    self._pending,
                    sum(len(h) for h in self._held.values()),
                )
            self._pending = 0
            self._held.clear()
            self._fault_held.clear()
            self._idle_cond.notify_all()
        eventbridge_routes.SEAM.detach(self)
        self._started = False
        return not alive

    @property
    def started(self) -> bool:
        return self._started

    # ---------------------------------------------------------------- emitting

    def emit(self, event: dict[str, Any], *, bus_name: str = "default") -> dict[str, Any]:
        """Deliver an event to the matching rules of a bus (default: the default bus).

        Missing envelope fields are filled in (version, id, time, account, region, resources,
        detail). Returns the event as delivered. Armed `duplicate_next` injections apply here.
        """
        if not self._started:
            raise RuntimeError("EventBus is not started")
        if not event.get("source") or not event.get("detail-type"):
            raise ValueError("an event needs 'source' and 'detail-type'")
        full = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": event["detail-type"],
            "source": event["source"],
            "account": self.account_id,
            "time": schedules.iso_time(),
            "region": self.region,
            "resources": [],
            "detail": {},
        }
        full.update(event)
        full = _aws_event(full)
        copies = 0
        with self._lock:
            self._emitted_total += 1
            self._history.append(full)
            for armed in list(self._duplicates):
                predicate, count = armed
                try:
                    matched = predicate is None or bool(predicate(full))
                except Exception:  # a predicate that cannot read this event does not match it
                    matched = False
                if matched:
                    copies += count
                    self._duplicates.remove(armed)
        for _ in range(1 + copies):
            self._route_to_bus(full, bus_name)
        return full

    def _route_to_bus(self, event: dict[str, Any], bus_name: str) -> None:
        from moto.events.models import events_backends

        backend = events_backends[event["account"]][event["region"]]
        bus = backend.event_buses.get(bus_name)
        if bus is None:
            LOG.warning("event %s for missing bus %s dropped", event["id"], bus_name)
            return
        for rule in list(bus.rules.values()):
            try:
                self._route(rule, event)
            except Exception:
                LOG.warning("routing event %s to rule %s failed", event["id"], rule.name, exc_info=True)

    def route_moto_rule(self, rule: Any, event: Any, transform_input: bool) -> None:
        """moto's `Rule.send_to_targets`, as AWS delivers (`sandbox.seams.eventbridge_routes`)."""
        self._route(rule, event, transform_input=transform_input)

    def s3_notification(self, account_id: str, bucket: Any, event_name: Any, key: Any) -> None:
        """S3's EventBridge notification, as the AWS event (`sandbox.seams.eventbridge_routes`)."""
        try:
            event = s3_event(account_id, bucket, event_name, key)
            if event is not None:
                self.emit(event)
        except Exception:  # S3 notifications are asynchronous in AWS: never fail the S3 call
            LOG.warning("S3 EventBridge notification failed", exc_info=True)

    def _route(
        self, rule: Any, event: dict[str, Any], *, transform_input: bool = True, scheduled: bool = False
    ) -> None:
        """A rule's delivery of an event (moto's routes and the schedule firing path)."""
        aws_event = _aws_event(event)
        if not scheduled:
            if rule.state not in _ENABLED_STATES:
                return
            if not rule.event_pattern.get_pattern():  # schedule-only rules match no events
                return
            if not rule.event_pattern.matches_event(aws_event):
                return
        lambda_targets = [t for t in rule.targets if ":lambda:" in t.get("Arn", "")]
        others = [t for t in rule.targets if ":lambda:" not in t.get("Arn", "")]
        # moto's original for every other target, one at a time (it raises NotImplementedError on
        # the first kind it does not know, which would skip the rest). Without an InputTransformer
        # moto would still re-template the event with a default that drops `account`: such
        # targets get the event untouched, as in AWS.
        for target in others:
            clone = copy.copy(rule)
            clone.targets = [target]
            transform = transform_input and bool(target.get("InputTransformer"))
            try:
                eventbridge_routes.moto_send_to_targets(clone, _moto_event(aws_event, ingestion=transform), transform)
            except NotImplementedError:
                kind = target.get("Arn", "").split(":")[2:3]
                self._warn_once(
                    f"target:{kind}", "moto cannot deliver to %s targets (rule %s)", kind, rule.name
                )
        bus_name = getattr(rule, "event_bus_name", "default") or "default"
        for target in lambda_targets:
            self._accept(rule, (bus_name, rule.name), target, aws_event)

    def _accept(
        self, rule: Any, rule_key: tuple[str, str], target: dict[str, Any], event: dict[str, Any]
    ) -> None:
        try:
            payload = target_input(target, event)
        except Exception:
            LOG.warning("could not build the input of target %s", target.get("Id"), exc_info=True)
            payload = event
        order_key = event["id"]
        if event.get("source") == status_events.SOURCE:
            order_key = str(event.get("detail", {}).get("executionArn") or order_key)
        delivery = _Delivery(
            rule_key=rule_key,
            rule_arn=rule.arn,
            target=copy.deepcopy(target),
            event=event,
            payload=payload,
            order_key=f"{target.get('Arn')}|{order_key}",
            lane_key=(rule_key[0], rule_key[1], str(target.get("Id") or target.get("Arn"))),
        )
        with self._lock:
            self._pending += 1
            self._accepted_total += 1
            self._count(rule_key, "matched")
        self._enqueue(delivery)

    def _enqueue(self, delivery: _Delivery) -> None:
        delivery.state = "queued"
        lane = self._lane(delivery.lane_key)
        if lane is None:  # stopping: abandoned, as queued deliveries are
            return
        shard = zlib.crc32(delivery.order_key.encode()) % len(lane.queues)
        lane.queues[shard].put(delivery)

    def _lane(self, key: tuple[str, str, str]) -> _Lane | None:
        """The delivery lane of one rule target, its workers started on first use."""
        with self._lock:
            lane = self._lanes.get(key)
            if lane is not None or self._stop.is_set():
                return lane
            label = "/".join(part for part in key if part and part != "default")
            queues: list[queue.Queue[Any]] = [queue.Queue() for _ in range(self._n_workers)]
            threads = [
                threading.Thread(
                    target=self._work, args=(q,), name=f"sandbox-eventbus-{label}-{i}", daemon=True
                )
                for i, q in enumerate(queues)
            ]
            lane = self._lanes[key] = _Lane(queues, threads)
            for thread in threads:
                thread.start()
            return lane

    # ---------------------------------------------------------------- delivery workers

    def _work(self, q: queue.Queue[Any]) -> None:
        while True:
            item = q.get()
            if item is _STOP or self._stop.is_set():
                return
            try:
                self._process(item)
            except Exception:
                LOG.exception("delivery to %s failed unexpectedly", item.target.get("Arn"))
                if item.state == "running":
                    self._finish(item)

    def _process(self, d: _Delivery) -> None:
        d.state = "running"
        if self.faults is not None and not d.faulted and self._injected(d):
            return
        with self._lock:
            pause = self._paused.get(d.rule_key)
            if pause is not None and not pause.fail:
                d.state = "held"
                self._held.setdefault(d.rule_key, []).append(d)
                self._pending -= 1
                self._idle_cond.notify_all()
                return
        if pause is not None:
            self._eventbridge_failure(d, "THROTTLING", "Rate exceeded (sandbox fault injection: rule paused)")
            return
        arn = d.target["Arn"]
        try:
            result = self.runtime.invoke_direct(arn, d.payload)
        except Exception as exc:
            missing = type(exc).__name__ in ("UnknownFunctionException", "ResourceNotFoundException")
            code = "NO_RESOURCE" if missing else "INTERNAL_ERROR"
            self._eventbridge_failure(d, code, f"{type(exc).__name__}: {exc}", retriable=not missing)
            return
        d.invocations += 1
        with self._lock:
            self._count(d.rule_key, "invocations")
            self._count(d.rule_key, "deliveries" if not result.errored else "failures")
        if not result.errored:
            self._finish(d)
        elif self.handler_errors == "eventbridge":
            self._eventbridge_failure(d, "ERROR_FROM_TARGET", _error_message(result), counted=True)
        else:
            self._lambda_async_failure(d, result)

    def _eventbridge_failure(
        self, d: _Delivery, code: str, message: str, *, retriable: bool = True, counted: bool = False
    ) -> None:
        if not counted:
            with self._lock:
                self._count(d.rule_key, "failures")
        policy = d.target.get("RetryPolicy") or {}
        max_retries = int(policy.get("MaximumRetryAttempts", DEFAULT_MAX_RETRY_ATTEMPTS))
        max_age = float(policy.get("MaximumEventAgeInSeconds", DEFAULT_MAX_EVENT_AGE_SECONDS))
        condition: str | None = None
        if retriable:
            if d.eventbridge_retries >= max_retries:
                condition = "MaximumRetryAttempts"
            else:
                delay = min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2**d.eventbridge_retries)
                delay *= random.uniform(0.5, 1.0)
                if self._age(d) + delay > max_age:
                    condition = "MaximumEventAgeInSeconds"
                else:
                    d.eventbridge_retries += 1
                    self._retry_later(d, delay)
                    return
        LOG.info(
            "event %s could not be delivered to %s (%s: %s) after %d retries",
            d.event.get("id"),
            d.target.get("Arn"),
            code,
            message,
            d.eventbridge_retries,
        )
        self._dead_letter(d, code, message, condition)

    def _lambda_async_failure(self, d: _Delivery, result: InvokeResult) -> None:
        config = self._event_invoke_config(d.target["Arn"])
        max_retries = int(config.get("MaximumRetryAttempts", LAMBDA_ASYNC_MAX_RETRIES))
        max_age = float(config.get("MaximumEventAgeInSeconds", LAMBDA_ASYNC_MAX_EVENT_AGE_SECONDS))
        retries_done = d.invocations - 1
        if retries_done < max_retries:
            delay = LAMBDA_ASYNC_RETRY_DELAYS[min(retries_done, len(LAMBDA_ASYNC_RETRY_DELAYS) - 1)]
            if self._age(d) + delay <= max_age:
                self._retry_later(d, delay)
                return
            condition = "EventAgeExceeded"
        else:
            condition = "RetriesExhausted"
        destination = ((config.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        record = {
            "version": "1.0",
            "timestamp": dt.datetime.now(tz=dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "requestContext": {
                "requestId": result.request_id,
                "functionArn": f"{d.target['Arn']}:$LATEST"
                if d.target["Arn"].count(":") == 6
                else d.target["Arn"],
                "condition": condition,
                "approximateInvokeCount": d.invocations,
            },
            "requestPayload": d.payload,
            "responseContext": {
                "statusCode": 200,
                "executedVersion": "$LATEST",
                "functionError": "Unhandled",
            },
            "responsePayload": result.payload,
        }
        if destination and ":sqs:" in destination:
            try:
                self._send_sqs(destination, json.dumps(record), {})
                with self._lock:
                    self._count(d.rule_key, "on_failure")
            except Exception:
                LOG.warning("could not send to the OnFailure destination %s", destination, exc_info=True)
                with self._lock:
                    self._count(d.rule_key, "dropped")
        else:
            if destination:
                self._warn_once(
                    f"dest:{destination}", "OnFailure destination %s is not supported", destination
                )
            LOG.warning(
                "event %s discarded by Lambda after %d attempts of %s (%s): %s",
                d.event.get("id"),
                d.invocations,
                d.target["Arn"],
                condition,
                _error_message(result),
            )
            with self._lock:
                self._count(d.rule_key, "dropped")
        self._finish(d)

    def _dead_letter(self, d: _Delivery, code: str, message: str, condition: str | None) -> None:
        dlq = (d.target.get("DeadLetterConfig") or {}).get("Arn")
        if not dlq:
            with self._lock:
                self._count(d.rule_key, "dropped")
            self._finish(d)
            return
        attributes = {
            "RULE_ARN": d.rule_arn,
            "TARGET_ARN": d.target["Arn"],
            "ERROR_CODE": code,
            "ERROR_MESSAGE": message or code,
            "RETRY_ATTEMPTS": str(d.eventbridge_retries),
        }
        if condition:
            attributes["EXHAUSTED_RETRY_CONDITION"] = condition
        try:
            self._send_sqs(dlq, json.dumps(d.event), attributes)
            outcome = "dead_lettered"
        except Exception:
            LOG.warning(
                "could not send event %s to the dead-letter queue %s", d.event.get("id"), dlq, exc_info=True
            )
            outcome = "dropped"
        with self._lock:
            self._count(d.rule_key, outcome)
        self._finish(d)

    def _finish(self, d: _Delivery) -> None:
        with self._lock:
            if d.state in ("done", "held"):
                return
            d.state = "done"
            self._pending = max(0, self._pending - 1)  # an invocation abandoned by stop() may end late
            self._idle_cond.notify_all()

    def _retry_later(self, d: _Delivery, virtual_delay: float) -> None:
        d.state = "scheduled"
        with self._lock:
            self._count(d.rule_key, "retries")
        due = time.monotonic() + self.time_scale.scale(virtual_delay)
        with self._timer_cond:
            heapq.heappush(self._retry_heap, (due, next(self._seq), d))
            self._timer_cond.notify_all()

    def _age(self, d: _Delivery) -> float:
        """Virtual seconds since the event was accepted."""
        return self.time_scale.to_virtual(time.monotonic() - d.created)

    def _event_invoke_config(self, function_arn: str) -> dict[str, Any]:
        from moto.awslambda.utils import get_backend

        parts = function_arn.split(":")
        try:
            fn = get_backend(parts[4], parts[3]).get_function(function_arn)
        except Exception:
            return {}
        configs = getattr(fn, "event_invoke_config", None) or []
        return dict(configs[0].config) if configs else {}

    # ---------------------------------------------------------------- timer: retries and schedules

    def _interrupt(self) -> None:
        with self._timer_cond:
            self._timer_cond.notify_all()

    def _run(self) -> None:
        """Retries and schedules, due on the timer thread."""
        next_sync = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            due: list[_Delivery] = []
            with self._timer_cond:
                while self._retry_heap and self._retry_heap[0][0] <= now:
                    due.append(heapq.heappop(self._retry_heap)[2])
            for d in due:
                self._enqueue(d)
            if now >= next_sync:
                try:
                    self._schedules.sync(self._schedule_rules(), now)
                except Exception:
                    LOG.debug("schedule sync failed", exc_info=True)
                next_sync = now + self.poll_interval
            for key in self._schedules.pop_due(now):
                try:
                    self._fire(key, only_if_enabled=True)
                except Exception:
                    LOG.warning("schedule %s could not fire", key, exc_info=True)
            wake_at = [next_sync]
            sched = self._schedules.next_due()
            if sched is not None:
                wake_at.append(sched)
            with self._timer_cond:
                if self._retry_heap:
                    wake_at.append(self._retry_heap[0][0])
                if self._stop.is_set():
                    return
                self._timer_cond.wait(max(0.001, min(wake_at) - time.monotonic()))

    def _schedule_rules(self) -> list[tuple[Hashable, str, bool]]:
        from moto.events.models import events_backends

        backend = events_backends[self.account_id][self.region]
        out: list[tuple[Hashable, str, bool]] = []
        for bus_name, bus in list(backend.event_buses.items()):
            for rule in list(bus.rules.values()):
                if rule.scheduled_expression:
                    out.append(
                        ((bus_name, rule.name), rule.scheduled_expression, rule.state in _ENABLED_STATES)
                    )
        return out

    def _find_rule(self, rule_name: str, bus_name: str) -> Any:
        from moto.events.models import events_backends

        bus = events_backends[self.account_id][self.region].event_buses.get(bus_name)
        rule = bus.rules.get(rule_name) if bus is not None else None
        if rule is None:
            raise KeyError(f"no rule {rule_name!r} on event bus {bus_name!r}")
        return rule

    def _fire(self, key: Hashable, *, only_if_enabled: bool = False) -> dict[str, Any] | None:
        bus_name, rule_name = cast(tuple[str, str], key)
        try:
            rule = self._find_rule(rule_name, bus_name)
        except KeyError:
            return None
        if only_if_enabled and rule.state not in _ENABLED_STATES:
            return None
        event = schedules.scheduled_event(rule.arn, self.account_id, self.region)
        with self._lock:
            self._emitted_total += 1
            self._history.append(event)
        self._route(rule, event, scheduled=True)
        return event

    def fire_schedule(self, rule_name: str, *, bus_name: str = "default") -> dict[str, Any]:
        """Send a rule's "Scheduled Event" to its targets now (whatever its state); returns it."""
        if not self._started:
            raise RuntimeError("EventBus is not started")
        rule = self._find_rule(rule_name, bus_name)
        if not rule.scheduled_expression:
            raise ValueError(f"rule {rule_name!r} has no ScheduleExpression")
        event = self._fire((bus_name, rule_name))
        assert event is not None
        return event

    # ---------------------------------------------------------------- fault injection

    def duplicate_next(
        self, predicate: Callable[[dict[str, Any]], bool] | None = None, *, copies: int = 1
    ) -> None:
        """Deliver the next emitted event that matches `predicate` 1 + `copies` times (same id).

        Applies to events this bus emits (status changes, S3, `emit`), not to `put_events`.
        """
        with self._lock:
            self._duplicates.append([predicate, max(1, int(copies))])

    def redeliver(self, event_id: str, *, bus_name: str = "default") -> dict[str, Any]:
        """Deliver a recently emitted event again, same id ("EventBridge delivered it twice")."""
        with self._lock:
            found = next((e for e in reversed(self._history) if e["id"] == event_id), None)
        if found is None:
            raise KeyError(f"event {event_id!r} is not in the recent history")
        self._route_to_bus(found, bus_name)
        return found

    def pause_rule(self, rule_name: str, *, bus_name: str = "default", fail: bool = False) -> None:
        """Stop delivering to a rule's Lambda targets ("tracker outage").

        `fail=False`: deliveries are held (not counted by `wait_until_idle`) and delivered in order
        by `resume_rule`. `fail=True`: every attempt fails as an EventBridge delivery failure
        (THROTTLING), so the target's RetryPolicy and DLQ apply.
        """
        with self._lock:
            self._paused[(bus_name, rule_name)] = _Pause(fail=fail)

    def resume_rule(self, rule_name: str, *, bus_name: str = "default") -> int:
        """Resume a paused rule; returns how many held deliveries were re-queued."""
        key = (bus_name, rule_name)
        with self._lock:
            self._paused.pop(key, None)
            held = self._held.pop(key, [])
            self._pending += len(held)
        for d in held:
            self._enqueue(d)
        return len(held)

    def expire_held(self, rule_name: str, *, bus_name: str = "default") -> int:
        """End an outage whose events were lost: resume the rule, and dead-letter what it held as
        EventBridge does once an undeliverable event is older than MaximumEventAgeInSeconds (to the
        target's DLQ, or dropped without one). Returns how many deliveries were lost."""
        key = (bus_name, rule_name)
        with self._lock:
            self._paused.pop(key, None)
            held = self._held.pop(key, [])
            self._pending += len(held)
        for d in held:
            d.state = "running"
            self._dead_letter(d, "THROTTLING", "Rate exceeded (sandbox fault injection: outage)", "MaximumEventAgeInSeconds")
        return len(held)

    @property
    def paused_rules(self) -> dict[str, str]:
        with self._lock:
            return {_rule_label(k): ("fail" if p.fail else "hold") for k, p in self._paused.items()}

    def _injected(self, d: _Delivery) -> bool:
        """Apply an injected `EventFault` to a delivery; True when it took the delivery over."""
        assert self.faults is not None
        fault = self.faults.event_fault(str(d.event.get("source") or ""), d.rule_key[1])
        if fault is None:
            return False
        d.faulted = True
        if fault.effect == "duplicate":
            copy_ = copy.copy(d)
            with self._lock:
                self._pending += 1
                self._accepted_total += 1
                self._count(d.rule_key, "matched")
            self._enqueue(copy_)
            return False
        if fault.effect == "lose":  # as EventBridge reports it once the rule's retries are spent
            policy = d.target.get("RetryPolicy") or {}
            d.eventbridge_retries = int(policy.get("MaximumRetryAttempts", DEFAULT_MAX_RETRY_ATTEMPTS))
            message = "Rate exceeded (sandbox fault: events lost)"
            self._dead_letter(d, "THROTTLING", message, "MaximumRetryAttempts")
            return True
        if fault.effect == "delay":
            d.state = "scheduled"
            due = time.monotonic() + self.time_scale.scale(fault.delay_seconds)
            with self._timer_cond:
                heapq.heappush(self._retry_heap, (due, next(self._seq), d))
                self._timer_cond.notify_all()
            return True
        with self._lock:  # hold: kept until the fault ends, not counted as in flight
            d.state = "held"
            self._fault_held.setdefault(fault.name, []).append(d)
            self._pending -= 1
            self._idle_cond.notify_all()
        return True

    def fault_ended(self, spec: Any) -> int:
        """A fault ended: deliver what it held, in order; returns how many."""
        with self._lock:
            held = self._fault_held.pop(getattr(spec, "name", ""), [])
            self._pending += len(held)
        for d in held:
            self._enqueue(d)
        return len(held)

    # ---------------------------------------------------------------- observation

    def _count(self, rule_key: tuple[str, str], key: str, n: int = 1) -> None:
        """Must be called with self._lock held."""
        per_rule = self._stats.setdefault(_rule_label(rule_key), dict.fromkeys(STAT_KEYS, 0))
        per_rule[key] += n

    @property
    def stats(self) -> dict[str, Any]:
        """A snapshot: totals, `emitted`, `in_flight`, `held`, and `rules` {rule label: counters}."""
        with self._lock:
            rules = {name: dict(counters) for name, counters in self._stats.items()}
            for key, held in self._held.items():
                rules.setdefault(_rule_label(key), dict.fromkeys(STAT_KEYS, 0))["held"] = len(held)
            totals = {k: sum(r.get(k, 0) for r in rules.values()) for k in STAT_KEYS}
            return {
                **totals,
                "emitted": self._emitted_total,
                "in_flight": self._pending,
                "held": sum(len(h) for h in self._held.values()),
                "rules": rules,
            }

    def emitted_events(self) -> list[dict[str, Any]]:
        """The most recent events this bus emitted (status changes, S3, schedules, `emit`)."""
        with self._lock:
            return list(self._history)

    def wait_until_idle(self, timeout: float = 10.0) -> bool:
        """True once nothing is in flight and the status watcher has seen every current status."""
        deadline = time.monotonic() + timeout
        while True:
            with self._idle_cond:
                while self._pending > 0:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._idle_cond.wait(left)
                accepted = self._accepted_total
                emitted = self._emitted_total
            if self._watcher is not None and self._watcher.running:
                target = self._watcher.request_round()
                if not self._watcher.wait_round(target, max(0.0, deadline - time.monotonic())):
                    return False
            with self._lock:
                if self._pending == 0 and self._accepted_total == accepted and self._emitted_total == emitted:
                    return True
            if time.monotonic() >= deadline:
                return False

    # ---------------------------------------------------------------- AWS clients

    def _client(self, service: str) -> Any:
        return self._clients.client(service)

    def _send_sqs(self, queue_arn: str, body: str, attributes: dict[str, str]) -> None:
        sqs = self._client("sqs")
        url = self._queue_urls.get(queue_arn)
        if url is None:
            parts = queue_arn.split(":")
            url = sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]
            self._queue_urls[queue_arn] = url
        sqs.send_message(
            QueueUrl=url,
            MessageBody=body,
            MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
        )

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            LOG.warning(message, *args)


def active_bus() -> EventBus | None:
    """The event bus started in this process, if any."""
    return eventbridge_routes.SEAM.current()  # type: ignore[return-value]  # the seam holds what installed it
