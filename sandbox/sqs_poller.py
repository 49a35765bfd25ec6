"""SQS event source mappings that behave like AWS's (docs/ARCHITECTURE.md#what-the-sandbox-adds-to-moto).

moto registers `AWS::Lambda::EventSourceMapping` for SQS but delivers unrealistically: inside
`send_message`, one message per invoke, ignoring `batchItemFailures`, re-queueing the whole batch on
any failure, never retrying in the background. The sandbox keeps the mapping registered in moto
(`list_event_source_mappings` shows it, `update_event_source_mapping` changes it) and delivers with
its own poller instead.

**The seam neutralised (moto 5.2.5).** moto's native delivery lives in exactly one place,
`Queue.add_message`; `sandbox.seams.sqs_native_mappings` makes it skip the invocation loop while a
poller runs (the mapping stays registered) and tells this module of every message added.

**The poller.** `SqsEventSourcePoller` discovers the SQS mappings (`list_event_source_mappings`,
paginated; a mapping polls only while its `State` is Enabled/Enabling/Updating) and runs, per
mapping, up to `concurrency` daemon poller threads that each take their own batches, as AWS's
event source mapping does (5, the concurrent batches AWS starts a mapping with), never more than the
mapping's `ScalingConfig.MaximumConcurrency` nor the function's reserved concurrency (none polls
a function whose reserved concurrency is 0: AWS throttles every invocation). Each message is
still received by one poller at a time -- SQS's visibility timeout, moto's own -- so batches
never share a message, and a batch's deletes and retries are its own. A poller:

1. long-polls the queue (`WaitTimeSeconds` = 1 s, so stop is prompt; `poll_wait_seconds=0`
   short-polls) for up to min(BatchSize, 10) messages with all system and message attributes (a
   short poll first looks at moto's queue in this process: one with nothing receivable costs no
   ReceiveMessage, see `moto_queue`);
2. once it holds at least one message, gathers more until BatchSize or
   `MaximumBatchingWindowInSeconds` (scaled by the `TimeScale`) is reached -- with a window of 0 it
   takes only what is available at once;
3. builds the Lambda SQS event (`build_sqs_event`) and calls `runtime.invoke_direct(FunctionArn, ...)`;
4. deletes: everything on success; with `FunctionResponseTypes: [ReportBatchItemFailures]` everything
   except the listed `itemIdentifier`s -- an unknown/empty/missing identifier or a malformed response
   fails the whole batch, as in AWS (`parse_batch_item_failures`); nothing on a function error.

Messages not deleted become visible again after the queue's visibility timeout, and moto moves
them to the DLQ on the receive after `maxReceiveCount` -- both are moto's own SQS behaviour.
*Time compression*: when the time scale is below 1 a failed message's visibility is shortened with
`change_message_visibility` to the scaled visibility timeout (rounded to whole seconds, the API's
unit; it can be 0). The order of events is unchanged -- failure, invisibility, redelivery, DLQ --
only the wait is shorter, exactly as a scaled Lambda timeout is.

Empty receives and errors back off (the SQS API raising, the function missing); a poller logs and
continues, it never dies silently. `stats` counts per mapping.

**Wake-on-send.** An idle worker does not sleep out its back-off when its queue gets a message: the
`add_message` hook (the seam above, which every producer passes) tells the workers of that queue
when the new message can be received -- at once, or when its `DelaySeconds` ends -- and a worker
that leaves a failed message on the queue knows when it reappears (its shortened visibility, or
the queue's own). The worker then receives right away; the back-off (at most
`SHORT_POLL_MAX_PAUSE` with short polls) remains the safety net for what no hook reports (a
message whose visibility runs out while its batch is still running, another consumer's receive). Receiving stays moto's
`ReceiveMessage`, so delay, visibility and at-least-once are SQS's own.

**Quiescence.** `idle()` is true when no worker holds a batch *and* every polled queue reports 0
visible, 0 in-flight and 0 delayed messages. To be a consistent snapshot, it reads an activity
counter (bumped whenever a worker starts or finishes a batch) before and after reading the queues
and answers true only if the counter did not move and no batch was in flight at either end. A
message waiting for its visibility timeout to retry counts as in flight (not idle); one that has
exhausted its receives is moved to the DLQ by the worker's next receive, after which the queue is
empty. The DLQs themselves are not polled (unless a mapping points at them) and may hold messages
when idle. `wait_until_idle(timeout)` polls `idle()`.

Pollers are added as a backlog shows, as AWS scales an event source mapping's pollers with the
messages available: a mapping's first poller answers the wakes above and keeps the back-off's
cadence of empty receives (the safety net); the others wait until a poller receives a full
batch (more wait behind it) and then each takes the next batch, so a burst is taken by as many
pollers as it fills batches while a trickle is batched by one, with no idle receives of the
others (they look again after `SIBLING_IDLE_PAUSE` at the latest).

Limitations, by design: the number of pollers is fixed (AWS adds pollers as a backlog grows, up
to 1,250 concurrent batches); `FilterCriteria` is not applied (a warning is logged); the 6 MB
payload limit is not enforced.
"""

from __future__ import annotations

import base64
import heapq
import logging
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from sandbox.background import Periodic
from sandbox.clients import ClientCache
from sandbox.clock import TimeScale
from sandbox.seams import sqs_native_mappings

if TYPE_CHECKING:
    from sandbox.runtime import LambdaRuntime

LOG = logging.getLogger("sandbox.sqs_poller")

ACTIVE_STATES = frozenset({"Enabled", "Enabling", "Updating"})
MAX_RECEIVE = 10  # ReceiveMessage's MaxNumberOfMessages upper bound
POLL_WAIT_SECONDS = 1  # long-poll length: how long stop() may wait for a receive to return
# poll_wait_seconds=0: the longest pause between empty short polls. Every receive that could find
# a message is announced (wake-on-send, below): these polls are only the safety net.
SHORT_POLL_MAX_PAUSE = 1.0
SIBLING_IDLE_PAUSE = 10.0  # an idle poller other than a mapping's first waits this long for a backlog
DEFAULT_CONCURRENCY = 5  # concurrent batches AWS starts an SQS event source mapping with
_REAL_TIME = TimeScale(1.0)


def moto_queue(queue_arn: str) -> Any:
    """moto's queue for `queue_arn` in this process, or None (not there, or moto not loaded).

    The sandbox hosts moto in its own process (in-process or a ThreadedMotoServer), so a short
    poll can first look whether anything is receivable: `Queue.messages` is what moto's
    ReceiveMessage scans (visible, not delayed). Most short polls found nothing (the empty look
    that ends a batch, the back-off's safety-net looks), each a botocore round trip; an empty look
    now costs no call. A receive still decides everything else (visibility, receive counts, the
    DLQ, FIFO groups): a message sent just after an empty look wakes the worker (wake-on-send).
    """
    models = sys.modules.get("moto.sqs.models")
    if models is None:
        return None
    parts = queue_arn.split(":")
    if len(parts) != 6:
        return None
    try:
        return models.sqs_backends[parts[4]][parts[3]].queues.get(parts[5])
    except Exception:  # an account or region moto does not know
        return None


# --------------------------------------------------------------------------- wake-on-send


_WAKES: dict[str, set[_Wake]] = {}  # queue ARN -> the wakes of the workers polling it
_WAKES_LOCK = threading.Lock()


def receivable_in(delayed_until_ms: float, now_epoch_s: float) -> float:
    """Seconds until a message delayed until `delayed_until_ms` (epoch ms, moto's field) can be received."""
    return max(0.0, delayed_until_ms / 1000.0 - now_epoch_s)


def _announce(queue: Any, message: Any) -> None:
    """Tell the workers polling `queue` when `message` becomes receivable (never raises)."""
    try:
        with _WAKES_LOCK:
            wakes = list(_WAKES.get(str(getattr(queue, "queue_arn", "")), ()))
        if wakes:
            due = time.monotonic() + receivable_in(
                float(getattr(message, "delayed_until", 0.0) or 0.0), time.time()
            )
            for wake in wakes:
                wake.at(due)
    except Exception:  # a producer's send must never fail for the poller's sake
        LOG.debug("could not announce a message to the SQS poller", exc_info=True)


class _Wake:
    """When a worker's queue may next have a message to receive (monotonic times), and its stop."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: list[float] = []  # a heap
        self._stopped = False

    def at(self, moment: float) -> None:
        with self._cond:
            heapq.heappush(self._due, moment)
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def wait(self, timeout: float) -> None:
        """Return after `timeout` s, at stop, or once a due time has come (which it consumes)."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                if self._due and self._due[0] <= now:
                    while self._due and self._due[0] <= now:
                        heapq.heappop(self._due)
                    return
                end = min(deadline, self._due[0]) if self._due else deadline
                if end <= now:
                    return
                self._cond.wait(end - now)


# --------------------------------------------------------------------------- mappings and stats


@dataclass(frozen=True)
class SqsMapping:
    """The parts of an SQS event source mapping the poller acts on."""

    uuid: str
    function_arn: str
    queue_arn: str
    batch_size: int = 10
    batching_window: float = 0.0  # virtual seconds
    report_batch_item_failures: bool = False
    state: str = "Enabled"
    has_filter_criteria: bool = False
    maximum_concurrency: int | None = None  # ScalingConfig.MaximumConcurrency

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SqsMapping:
        state = config.get("State")
        if not state:
            state = "Enabled" if config.get("Enabled", True) else "Disabled"
        return cls(
            uuid=str(config["UUID"]),
            function_arn=str(config["FunctionArn"]),
            queue_arn=str(config["EventSourceArn"]),
            batch_size=max(1, int(config.get("BatchSize") or 10)),
            batching_window=float(config.get("MaximumBatchingWindowInSeconds") or 0),
            report_batch_item_failures="ReportBatchItemFailures"
            in (config.get("FunctionResponseTypes") or ()),
            state=str(state),
            has_filter_criteria=bool((config.get("FilterCriteria") or {}).get("Filters")),
            maximum_concurrency=_positive_int((config.get("ScalingConfig") or {}).get("MaximumConcurrency")),
        )

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def queue_region(self) -> str:
        return self.queue_arn.split(":")[3]

    @property
    def queue_account(self) -> str:
        return self.queue_arn.split(":")[4]

    @property
    def queue_name(self) -> str:
        return self.queue_arn.split(":")[5]


def _positive_int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def pollers_for(mapping: SqsMapping, concurrency: int, reserved: int | None) -> int:
    """Concurrent batches for a mapping: the poller's `concurrency`, capped by the mapping's
    MaximumConcurrency and the function's reserved concurrency (None: not set; 0: throttled). Pure."""
    count = max(1, concurrency)
    if mapping.maximum_concurrency is not None:
        count = min(count, mapping.maximum_concurrency)
    if reserved is not None:
        count = min(count, max(0, reserved))
    return count


def is_sqs_arn(arn: str) -> bool:
    parts = arn.split(":")
    return len(parts) >= 6 and parts[2] == "sqs"


@dataclass(frozen=True)
class MappingStats:
    """Counters for one mapping (or the sum over all)."""

    batches: int = 0  # invocations made (or attempted)
    messages_delivered: int = 0  # records handed to the function, redeliveries included
    messages_deleted: int = 0
    messages_failed: int = 0  # records left on the queue after an invocation
    function_errors: int = 0  # invocations that errored or could not be made
    sqs_errors: int = 0  # SQS / Lambda API calls that raised
    empty_receives: int = 0
    visibility_compressed: int = 0  # failed messages whose visibility was shortened (time scale)


_COUNTERS = tuple(f.name for f in fields(MappingStats))


class PollerStats:
    """Thread-safe per-mapping counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = {}
        self._last_error: dict[str, str] = {}

    def add(self, uuid: str, **deltas: int) -> None:
        with self._lock:
            counts = self._counts.setdefault(uuid, dict.fromkeys(_COUNTERS, 0))
            for name, delta in deltas.items():
                counts[name] += delta

    def error(self, uuid: str, message: str) -> None:
        with self._lock:
            self._last_error[uuid] = message

    def for_mapping(self, uuid: str) -> MappingStats:
        with self._lock:
            return MappingStats(**self._counts.get(uuid, {}))

    def last_error(self, uuid: str) -> str | None:
        with self._lock:
            return self._last_error.get(uuid)

    def snapshot(self) -> dict[str, MappingStats]:
        with self._lock:
            return {uuid: MappingStats(**counts) for uuid, counts in self._counts.items()}

    def total(self) -> MappingStats:
        with self._lock:
            sums = dict.fromkeys(_COUNTERS, 0)
            for counts in self._counts.values():
                for name, value in counts.items():
                    sums[name] += value
            return MappingStats(**sums)


# --------------------------------------------------------------------------- event and response


def _b64(raw: Any) -> str:
    """Binary attribute values are base64 text in the Lambda event (boto3 hands us bytes)."""
    return base64.b64encode(raw if isinstance(raw, bytes) else str(raw).encode()).decode()


def _lambda_message_attributes(attributes: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """SQS API `MessageAttributes` -> the Lambda event's lowercase shape."""
    out: dict[str, dict[str, Any]] = {}
    for name, attr in attributes.items():
        value: dict[str, Any] = {}
        if "StringValue" in attr:
            value["stringValue"] = attr["StringValue"]
        if "BinaryValue" in attr:
            value["binaryValue"] = _b64(attr["BinaryValue"])
        value["stringListValues"] = list(attr.get("StringListValues") or [])
        value["binaryListValues"] = [_b64(v) for v in attr.get("BinaryListValues") or []]
        value["dataType"] = attr.get("DataType", "String")
        out[name] = value
    return out


def build_sqs_event(messages: Sequence[Mapping[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """The event Lambda passes for a batch of `ReceiveMessage` messages."""
    records = []
    for message in messages:
        record: dict[str, Any] = {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message.get("Body", ""),
            "attributes": {str(k): str(v) for k, v in (message.get("Attributes") or {}).items()},
            "messageAttributes": _lambda_message_attributes(message.get("MessageAttributes") or {}),
        }
        if message.get("MD5OfMessageAttributes"):
            record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
        record["md5OfBody"] = message.get("MD5OfBody", "")
        record["eventSource"] = "aws:sqs"
        record["eventSourceARN"] = queue_arn
        record["awsRegion"] = region
        records.append(record)
    return {"Records": records}


def parse_batch_item_failures(payload: Any, message_ids: Sequence[str] | set[str]) -> set[str] | None:
    """The failed message ids of a `ReportBatchItemFailures` response; None = the whole batch failed.

    As in AWS: null / `{}` / no or null or empty `batchItemFailures` is complete success; a response
    that is not a JSON object, a `batchItemFailures` that is not a list, an entry without a string
    `itemIdentifier`, an empty one, or one naming a message that is not in the batch fails it all.
    """
    if payload is None:
        return set()
    if not isinstance(payload, dict):
        return None
    failures = payload.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        return None
    known = set(message_ids)
    failed: set[str] = set()
    for item in failures:
        if not isinstance(item, dict):
            return None
        identifier = item.get("itemIdentifier")
        if not isinstance(identifier, str) or not identifier or identifier not in known:
            return None
        failed.add(identifier)
    return failed


# --------------------------------------------------------------------------- backoff


class _Backoff:
    def __init__(self, base: float, cap: float) -> None:
        self.base = base
        self.cap = cap
        self._attempt = 0

    def next(self) -> float:
        delay = min(self.cap, self.base * (2**self._attempt))
        self._attempt = min(self._attempt + 1, 30)
        return delay

    def reset(self) -> None:
        self._attempt = 0


# --------------------------------------------------------------------------- the worker


class _MappingWorker:
    """The poller threads of one mapping (`concurrency` of them), sharing its wake and stop."""

    def __init__(self, poller: SqsEventSourcePoller, mapping: SqsMapping, concurrency: int = 1) -> None:
        self.poller = poller
        self.mapping = mapping  # replaced in place by refresh(); read once per batch
        self.concurrency = concurrency
        self.stop_event = threading.Event()
        self.wake = _Wake()  # sends, delays and shortened visibilities: the first poller's
        self.backlog = _Wake()  # a poller received a full batch: more wait, for an idle sibling
        self._live = 0
        self._live_lock = threading.Lock()
        self.threads = [
            threading.Thread(
                target=self._run,
                args=(i == 0,),
                name=f"sqs-poller:{mapping.queue_name}:{mapping.uuid[:8]}" + (f":{i}" if i else ""),
                daemon=True,
            )
            for i in range(concurrency)
        ]
        if mapping.has_filter_criteria:
            LOG.warning("mapping %s has FilterCriteria; the sandbox poller does not apply them", mapping.uuid)

    # ---------------------------------------------------------------- loop

    def start(self) -> None:
        with _WAKES_LOCK:  # before any thread runs: a send from now on wakes them
            _WAKES.setdefault(self.mapping.queue_arn, set()).add(self.wake)
        self._live = len(self.threads)
        for thread in self.threads:
            thread.start()
        if not self.threads:
            self._unregister()
            LOG.warning(
                "mapping %s: %s has reserved concurrency 0 (throttled): not polled",
                self.mapping.uuid,
                self.mapping.function_arn,
            )

    def is_alive(self) -> bool:
        return any(thread.is_alive() for thread in self.threads)

    def signal_stop(self) -> None:
        self.stop_event.set()
        self.wake.stop()
        self.backlog.stop()

    def _unregister(self) -> None:
        with _WAKES_LOCK:
            wakes = _WAKES.get(self.mapping.queue_arn, set())
            wakes.discard(self.wake)
            if not wakes:
                _WAKES.pop(self.mapping.queue_arn, None)

    def _run(self, lead: bool = True) -> None:
        LOG.debug("poller for %s started", self.mapping.queue_arn)
        cap = float(self.poller.poll_wait_seconds) or SHORT_POLL_MAX_PAUSE
        empty_backoff = (
            _Backoff(base=0.05, cap=cap)
            if lead
            else _Backoff(base=SIBLING_IDLE_PAUSE, cap=SIBLING_IDLE_PAUSE)
        )
        error_backoff = _Backoff(base=0.1, cap=self.poller.max_error_backoff)
        try:
            while not self.stop_event.is_set():
                try:
                    self._poll_once(empty_backoff, error_backoff, self.wake if lead else self.backlog)
                except Exception as exc:  # never die silently: log, count, back off, continue
                    self.poller._forget_url(self.mapping)  # the queue may have been deleted and recreated
                    self._record_error(exc, "polling")
                    self.stop_event.wait(error_backoff.next())
        finally:
            with self._live_lock:
                self._live -= 1
                last = self._live == 0
            if last:
                self._unregister()
        LOG.debug("poller for %s stopped", self.mapping.queue_arn)

    def _record_error(self, exc: BaseException, what: str) -> None:
        uuid = self.mapping.uuid
        self.poller.stats.add(uuid, sqs_errors=1)
        self.poller.stats.error(uuid, f"{what}: {type(exc).__name__}: {exc}")
        LOG.warning("SQS poller for %s: error while %s: %s", self.mapping.queue_arn, what, exc, exc_info=True)

    def _sqs(self) -> Any:
        return self.poller._client("sqs", self.mapping.queue_region)

    def _url(self) -> str:
        return self.poller._queue_url(self.mapping)

    def _receive(self, count: int, wait_seconds: int) -> list[dict[str, Any]]:
        response = self._sqs().receive_message(
            QueueUrl=self._url(),
            MaxNumberOfMessages=max(1, min(MAX_RECEIVE, count)),
            WaitTimeSeconds=max(0, int(wait_seconds)),
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages") or [])

    def _nothing_to_receive(self) -> bool:
        """True when the queue, read in this process's moto, holds no message a receive could
        return right now (see `moto_queue`). False when it cannot tell: then SQS answers."""
        queue = moto_queue(self.mapping.queue_arn)
        return queue is not None and not queue.messages

    def _poll_once(self, empty_backoff: _Backoff, error_backoff: _Backoff, wake: _Wake | None = None) -> None:
        wake = wake or self.wake
        mapping = self.mapping
        started = time.monotonic()
        want = min(mapping.batch_size, MAX_RECEIVE)
        wait_seconds = self.poller.poll_wait_seconds
        first = [] if wait_seconds == 0 and self._nothing_to_receive() else self._receive(want, wait_seconds)
        error_backoff.reset()
        if not first:
            self.poller.stats.add(mapping.uuid, empty_receives=1)
            # Space empty receives out (a full long poll already did; a server that answers at
            # once does not). A send to the queue, or a delay or shortened visibility running out
            # (`self.wake`), ends the pause early.
            pause = empty_backoff.next() - (time.monotonic() - started)
            if pause > 0:
                wake.wait(pause)
            return
        empty_backoff.reset()
        if len(first) >= want and self.concurrency > 1:
            self.backlog.at(time.monotonic())  # a full receive: more may wait, for an idle sibling
        self.poller._batch_started()
        try:
            batch = self._gather(mapping, first)
            self._deliver(mapping, batch)
        finally:
            self.poller._batch_finished()

    def _gather(self, mapping: SqsMapping, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Receive more until BatchSize or the (scaled) batching window; stop() cuts the window short."""
        by_id: dict[str, dict[str, Any]] = {m["MessageId"]: m for m in batch}
        window = self.poller.time_scale.scale(mapping.batching_window)
        deadline = time.monotonic() + window
        while len(by_id) < mapping.batch_size and not self.stop_event.is_set():
            want = min(MAX_RECEIVE, mapping.batch_size - len(by_id))
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    if window > 0 or self._nothing_to_receive():
                        break
                    more = self._receive(want, 0)  # no window: take what is there right now
                    if not more:
                        break
                else:
                    more = self._receive(want, int(min(self.poller.poll_wait_seconds, remaining)))
                    if not more:  # until the window closes, or a send (wake-on-send) comes first
                        self.wake.wait(max(0.0, deadline - time.monotonic()))
                        continue
            except Exception as exc:  # deliver what we hold rather than lose it to a timeout
                self._record_error(exc, "gathering a batch")
                break
            for message in more:  # a redelivery during the window replaces the stale receipt
                by_id[message["MessageId"]] = message
        return list(by_id.values())

    def _deliver(self, mapping: SqsMapping, batch: list[dict[str, Any]]) -> None:
        poller = self.poller
        stats = poller.stats
        ids = [m["MessageId"] for m in batch]
        event = build_sqs_event(batch, mapping.queue_arn, mapping.queue_region)
        stats.add(mapping.uuid, batches=1, messages_delivered=len(batch))
        failed: set[str]
        try:
            result = poller.runtime.invoke_direct(mapping.function_arn, event)
        except Exception as exc:  # e.g. the function was deleted: nothing is deleted, retry later
            LOG.warning("SQS poller: could not invoke %s: %s", mapping.function_arn, exc, exc_info=True)
            stats.add(mapping.uuid, function_errors=1)
            stats.error(mapping.uuid, f"invoke: {type(exc).__name__}: {exc}")
            failed = set(ids)
        else:
            if result.errored:
                stats.add(mapping.uuid, function_errors=1)
                failed = set(ids)
            elif mapping.report_batch_item_failures:
                parsed = parse_batch_item_failures(result.payload, ids)
                if parsed is None:
                    LOG.warning(
                        "SQS poller: invalid batchItemFailures from %s (whole batch failed): %.500s",
                        mapping.function_arn,
                        result.raw,
                    )
                    failed = set(ids)
                else:
                    failed = parsed
            else:
                failed = set()
        succeeded = [m for m in batch if m["MessageId"] not in failed]
        retry = [m for m in batch if m["MessageId"] in failed]
        if succeeded:
            self._delete(mapping, succeeded)
        if retry:
            stats.add(mapping.uuid, messages_failed=len(retry))
            self._compress_visibility(mapping, retry)
        if retry and len(retry) == len(batch) and not poller.time_scale.is_real:
            # With compressed visibility (possibly 0 s) a function that keeps failing would be
            # re-invoked at once; pause a scaled second, as AWS backs off a failing function too.
            self.stop_event.wait(min(1.0, poller.time_scale.scale(1.0)))

    def _delete(self, mapping: SqsMapping, messages: list[dict[str, Any]]) -> None:
        sqs = self._sqs()
        for start in range(0, len(messages), MAX_RECEIVE):
            chunk = messages[start : start + MAX_RECEIVE]
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)]
            try:
                response = sqs.delete_message_batch(QueueUrl=self._url(), Entries=entries)
            except Exception as exc:  # the messages will be redelivered: at-least-once, as in AWS
                self._record_error(exc, "deleting messages")
                continue
            self.poller.stats.add(mapping.uuid, messages_deleted=len(response.get("Successful") or []))
            for failure in response.get("Failed") or []:
                LOG.warning("SQS poller: could not delete a message from %s: %s", mapping.queue_arn, failure)

    def _compress_visibility(self, mapping: SqsMapping, messages: list[dict[str, Any]]) -> None:
        """Time compression: a failed message reappears after the *scaled* visibility timeout."""
        poller = self.poller
        sqs = self._sqs()
        try:
            attrs = sqs.get_queue_attributes(QueueUrl=self._url(), AttributeNames=["VisibilityTimeout"])
            visibility = int(attrs["Attributes"].get("VisibilityTimeout", "30"))
            scaled = round(poller.time_scale.scale(visibility))  # the API takes whole seconds
            if poller.time_scale.is_real or not poller.compress_visibility or scaled >= visibility:
                self.wake.at(time.monotonic() + visibility)  # the queue's own timeout, which no hook reports
                return
            for start in range(0, len(messages), MAX_RECEIVE):
                chunk = messages[start : start + MAX_RECEIVE]
                entries = [
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": scaled}
                    for i, m in enumerate(chunk)
                ]
                response = sqs.change_message_visibility_batch(QueueUrl=self._url(), Entries=entries)
                poller.stats.add(mapping.uuid, visibility_compressed=len(response.get("Successful") or []))
            self.wake.at(time.monotonic() + scaled)  # no hook reports a visibility running out
        except Exception as exc:  # the queue's own visibility timeout then applies: slower, not wrong
            self._record_error(exc, "shortening visibility")


# --------------------------------------------------------------------------- the poller


class SqsEventSourcePoller:
    """Delivers SQS messages to Lambda functions per the registered event source mappings.

    `runtime` runs the handlers (`invoke_direct`). `region` / `endpoint_url`: where the mappings
    and queues live (`endpoint_url=None` = in-process `mock_aws`). `time_scale` scales batching
    windows and (with `compress_visibility`) retry visibility; None means the runtime's scale.
    `poll_wait_seconds`: the long poll (whole seconds, the API's unit), which bounds how long
    `stop()` waits for an idle worker; 0 short-polls instead, pausing at most
    `SHORT_POLL_MAX_PAUSE` between empty receives, so stop() is immediate (handy in tests).
    `discovery_interval`: if set, re-read the mappings every so many real seconds (new, changed,
    disabled or deleted mappings are picked up); `refresh()` does it on demand.
    `disable_native`: neutralise moto's own SQS -> Lambda delivery while running.
    `concurrency`: concurrent batches per mapping (AWS starts with 5), capped per mapping by its
    MaximumConcurrency and its function's reserved concurrency (`pollers_for`).
    """

    def __init__(
        self,
        runtime: LambdaRuntime,
        *,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        time_scale: TimeScale | None = None,
        poll_wait_seconds: int = POLL_WAIT_SECONDS,
        discovery_interval: float | None = None,
        compress_visibility: bool = True,
        disable_native: bool = True,
        max_error_backoff: float = 5.0,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        self.runtime = runtime
        self.region = region
        self.endpoint_url = endpoint_url
        self.time_scale = time_scale or getattr(runtime, "time_scale", None) or _REAL_TIME
        self.poll_wait_seconds = max(0, int(poll_wait_seconds))
        self.discovery_interval = discovery_interval
        self.compress_visibility = compress_visibility
        self.disable_native = disable_native
        self.max_error_backoff = max_error_backoff
        self.concurrency = max(1, int(concurrency))
        self.stats = PollerStats()

        self._lock = threading.RLock()  # workers, lifecycle
        self._workers: dict[str, _MappingWorker] = {}
        self._retired: list[_MappingWorker] = []
        self._running = False
        self._native_disabled = False
        self._discovery = (
            Periodic(
                "sqs-poller:discovery",
                self.discovery_interval,
                LOG,
                "SQS poller: refreshing the event source mappings failed",
                tick=self.refresh,
            )
            if self.discovery_interval
            else None
        )
        self._clients = ClientCache(region, endpoint_url, read_timeout=max(60, self.poll_wait_seconds + 30))
        self._urls: dict[str, str] = {}
        # quiescence bookkeeping (see idle())
        self._state = threading.Condition()
        self._busy = 0
        self._activity = 0

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> SqsEventSourcePoller:
        with self._lock:
            if self._running:
                return self
            if self.disable_native and not self._native_disabled:
                sqs_native_mappings.install(_announce)
                self._native_disabled = True
            try:
                self._running = True
                self.refresh()
            except BaseException:
                self._running = False
                self._restore_native()
                raise
            if self._discovery is not None:
                self._discovery.start()
        return self

    def stop(self, timeout: float = 5.0) -> bool:
        """Signal every worker, join them within `timeout`; True if all have finished.

        A worker finishes its in-flight batch (invocation and deletes) before exiting; a batching
        window still open is cut short and what was gathered is delivered. Workers are daemon
        threads, so one that overruns `timeout` never blocks interpreter exit.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            self._running = False
            workers = list(self._workers.values()) + self._retired
            self._workers.clear()
            self._retired = []
            for worker in workers:
                worker.signal_stop()
        ended = self._discovery is None or self._discovery.stop(max(0.0, deadline - time.monotonic()))
        threads = [t for w in workers for t in w.threads]
        for thread in threads:
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in threads if t.is_alive()] + ([] if ended else ["sqs-poller:discovery"])
        if alive:
            LOG.warning("SQS poller threads still running after stop(): %s", alive)
        with self._lock:
            self._restore_native()
        return not alive

    def _restore_native(self) -> None:
        if self._native_disabled:
            sqs_native_mappings.uninstall()
            self._native_disabled = False

    def __enter__(self) -> SqsEventSourcePoller:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._running

    @property
    def mappings(self) -> list[SqsMapping]:
        """The mappings being polled now."""
        with self._lock:
            return [w.mapping for w in self._workers.values()]

    @property
    def threads(self) -> list[threading.Thread]:
        with self._lock:
            return [t for w in list(self._workers.values()) + self._retired for t in w.threads]

    # ---------------------------------------------------------------- discovery

    def discover(self) -> list[SqsMapping]:
        """Every SQS event source mapping in the region (active or not)."""
        client = self._client("lambda", self.region)
        found: list[SqsMapping] = []
        for page in client.get_paginator("list_event_source_mappings").paginate():
            for config in page.get("EventSourceMappings") or []:
                if is_sqs_arn(str(config.get("EventSourceArn", ""))):
                    found.append(SqsMapping.from_config(config))
        return found

    def refresh(self) -> None:
        """Start workers for new active mappings, update changed ones, retire the rest."""
        mappings = {m.uuid: m for m in self.discover() if m.active}
        pollers = {uuid: pollers_for(m, self.concurrency, self._reserved(m)) for uuid, m in mappings.items()}
        with self._lock:
            if not self._running:
                return
            for uuid in list(self._workers):
                worker = self._workers[uuid]
                current = mappings.get(uuid)
                if (
                    current is None
                    or current.queue_arn != worker.mapping.queue_arn
                    or pollers[uuid] != worker.concurrency
                ):
                    worker.signal_stop()
                    self._retired.append(self._workers.pop(uuid))
                elif current != worker.mapping:
                    worker.mapping = current
            for uuid, mapping in mappings.items():
                if uuid not in self._workers:
                    worker = _MappingWorker(self, mapping, pollers[uuid])
                    self._workers[uuid] = worker
                    worker.start()
            self._retired = [w for w in self._retired if w.is_alive()]

    def _reserved(self, mapping: SqsMapping) -> int | None:
        """The function's reserved concurrency (None: not set, or not readable)."""
        client = self._client("lambda", mapping.function_arn.split(":")[3])
        try:
            found = client.get_function_concurrency(FunctionName=mapping.function_arn)
        except Exception:  # e.g. the function is gone: its invocations will say so
            LOG.debug("could not read the reserved concurrency of %s", mapping.function_arn, exc_info=True)
            return None
        value = found.get("ReservedConcurrentExecutions")
        return None if value is None else int(value)

    # ---------------------------------------------------------------- quiescence

    def _batch_started(self) -> None:
        with self._state:
            self._busy += 1
            self._activity += 1
            self._state.notify_all()

    def _batch_finished(self) -> None:
        with self._state:
            self._busy -= 1
            self._activity += 1
            self._state.notify_all()

    @property
    def in_flight_batches(self) -> int:
        with self._state:
            return self._busy

    def _queue_counts(self, mapping: SqsMapping) -> tuple[int, int, int] | None:
        """(visible, in flight, delayed) for the mapping's queue; None if it does not exist."""
        sqs = self._client("sqs", mapping.queue_region)
        try:
            url = self._queue_url(mapping)
            attrs = sqs.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )["Attributes"]
        except sqs.exceptions.QueueDoesNotExist:
            self._forget_url(mapping)
            return None
        return (
            int(attrs.get("ApproximateNumberOfMessages", 0)),
            int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
            int(attrs.get("ApproximateNumberOfMessagesDelayed", 0)),
        )

    def idle(self) -> bool:
        """No batch in flight and every polled queue empty (0 visible, 0 in flight, 0 delayed).

        A consistent snapshot: true only if no worker started or finished a batch while the
        queues were being read. A missing queue counts as empty; an API error as not idle. When
        the poller is not running, the queues of the active mappings are checked all the same, so
        a forgotten `start()` makes `wait_until_idle` time out instead of passing vacuously.
        """
        with self._state:
            if self._busy:
                return False
            before = self._activity
        with self._lock:
            running = self._running
            mappings = [w.mapping for w in self._workers.values()]
        if not running:  # messages waiting for a stopped poller are work not done
            try:
                mappings = [m for m in self.discover() if m.active]
            except Exception:
                LOG.debug("idle(): could not list the event source mappings", exc_info=True)
                return False
        seen: set[str] = set()
        for mapping in mappings:
            if mapping.queue_arn in seen:
                continue
            seen.add(mapping.queue_arn)
            try:
                counts = self._queue_counts(mapping)
            except Exception:
                LOG.debug("idle(): could not read %s", mapping.queue_arn, exc_info=True)
                return False
            if counts is not None and any(counts):
                return False
        with self._state:
            return self._busy == 0 and self._activity == before

    def wait_until_idle(self, timeout: float = 30.0, poll_interval: float = 0.05) -> bool:
        """Block until `idle()` (True) or `timeout` real seconds pass (False)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.idle():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._state:  # wake early when a batch finishes
                self._state.wait(min(poll_interval, left))

    # ---------------------------------------------------------------- clients

    def _client(self, service: str, region: str) -> Any:
        return self._clients.client(service, region)

    def _queue_url(self, mapping: SqsMapping) -> str:
        url = self._urls.get(mapping.queue_arn)
        if url is None:
            sqs = self._client("sqs", mapping.queue_region)
            url = sqs.get_queue_url(
                QueueName=mapping.queue_name, QueueOwnerAWSAccountId=mapping.queue_account
            )["QueueUrl"]
            self._urls[mapping.queue_arn] = url
        return url

    def _forget_url(self, mapping: SqsMapping) -> None:
        self._urls.pop(mapping.queue_arn, None)
