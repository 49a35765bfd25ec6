"""The AWS/Lambda and AWS/States CloudWatch metrics that moto does not publish, published by the sandbox.

AWS publishes them for every function and state machine; moto publishes none, so an alarm or a
dashboard on Lambda errors or failed executions would read nothing in the sandbox. This
publisher listens to the two places that see what AWS would count -- the Lambda runtime (every
invocation's start and end, `LambdaRuntime.add_listener`) and the Step Functions status watcher
(every execution's status change, `status_events.add_status_listener`) -- and puts the metrics
AWS would put, with AWS's names, dimensions and units, straight into the in-process moto's
CloudWatch backend (`emf.put_in_process`: AWS's services publish their metrics internally, not
through PutMetricData; a boto3 round trip per batch cost CPU the handlers share). A publisher
given a `cloudwatch=` client (tests) calls PutMetricData on it instead.

AWS/Lambda, dimension FunctionName (the deployed function name), per invocation:
- Invocations (Count, 1), Errors (Count, 1 if the invocation ended in a function error: an
  exception escaping the handler, a timeout, an import/init or marshalling error -- everything the
  runtime reports as errored; a handler that *returned* batchItemFailures is not an error),
  Duration (Milliseconds, the real time the handler ran, not time-scaled: `InvocationRecord.
  duration_ms`, init excluded as in AWS). Timestamped at the invocation's end.
- ConcurrentExecutions (Count): the number of invocations of that function running, published at
  each invocation's start (this one included) and end (this one gone), so its Maximum over a
  period is the peak.
- Not published: Throttles. The sandbox runtime never refuses an invocation for concurrency (no
  reserved or account concurrency is modelled), so there is nothing to count; publishing zeros
  would claim a check that does not exist.

AWS/States, dimension StateMachineArn, per status change the watcher sees (timestamped then):
- ExecutionsStarted (RUNNING), ExecutionsSucceeded, ExecutionsFailed, ExecutionsTimedOut,
  ExecutionsAborted (Count, 1 each), and for every ended execution ExecutionTime (Milliseconds,
  stopDate - startDate in real milliseconds; for TIMED_OUT, where moto stores no stopDate, the
  time the watcher saw it). An execution running before the watcher's baseline gets only its
  terminal metrics.
- Not published: ExecutionThrottled (the sandbox never throttles StartExecution).

Publishing is off the caller's thread: listeners only enqueue; one daemon thread sends
PutMetricData per namespace in batches of at most 1000 datums, gathering for `COALESCE_SECONDS`
after the first datum of a batch (one call per window rather than one per invocation: each call
costs CPU that the handlers share; datums keep their own timestamps, and `flush()` and `stop()`
cut the wait short). A failed call is logged at WARNING
and its datums dropped; nothing here ever fails an invocation or an execution. `flush()` blocks
until everything queued so far is sent (the sandbox calls it when it finds itself idle), and
`stop()` flushes what is queued before it returns.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
from collections.abc import Iterable
from typing import Any

from sandbox import emf, status_events
from sandbox.background import BackgroundThread
from sandbox.runtime import InvocationRecord, LambdaRuntime

LOG = logging.getLogger("sandbox.aws_metrics")

LAMBDA_NAMESPACE = "AWS/Lambda"
STATES_NAMESPACE = "AWS/States"
MAX_DATUMS_PER_CALL = 1000  # PutMetricData's limit on MetricData entries
COALESCE_SECONDS = 0.25  # real seconds a batch gathers datums before it is sent
MAX_QUEUED = 100_000  # beyond this, datums are dropped (with a warning) rather than held
COUNT = "Count"
MILLISECONDS = "Milliseconds"
TERMINAL_METRICS = {
    "SUCCEEDED": "ExecutionsSucceeded",
    "FAILED": "ExecutionsFailed",
    "TIMED_OUT": "ExecutionsTimedOut",
    "ABORTED": "ExecutionsAborted",
}

Datum = dict[str, Any]
_STOP = object()


def _at(epoch_seconds: float | None) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch_seconds if epoch_seconds else time.time(), tz=dt.UTC)


def _datum(
    name: str, dimension: str, value_of_dimension: str, value: float, unit: str, at: dt.datetime
) -> Datum:
    return {
        "MetricName": name,
        "Dimensions": [{"Name": dimension, "Value": value_of_dimension}],
        "Timestamp": at,
        "Value": float(value),
        "Unit": unit,
    }


def invocation_metrics(record: InvocationRecord) -> list[Datum]:
    """AWS/Lambda Invocations, Errors and Duration for one completed invocation."""
    at = _at(record.ended_at or None)
    fn = record.function_name
    return [
        _datum("Invocations", "FunctionName", fn, 1, COUNT, at),
        _datum("Errors", "FunctionName", fn, 1 if record.errored else 0, COUNT, at),
        _datum("Duration", "FunctionName", fn, max(0.0, record.duration_ms), MILLISECONDS, at),
    ]


def concurrency_metric(function_name: str, running: int, at: dt.datetime | None = None) -> Datum:
    """AWS/Lambda ConcurrentExecutions: `running` invocations of the function at `at`."""
    return _datum("ConcurrentExecutions", "FunctionName", function_name, running, COUNT, at or _at(None))


def execution_metrics(event: dict[str, Any], seen_at: dt.datetime | None = None) -> list[Datum]:
    """AWS/States metrics for one "Step Functions Execution Status Change" event."""
    detail = event.get("detail") or {}
    status = detail.get("status")
    arn = detail.get("stateMachineArn") or status_events.state_machine_arn_of(detail["executionArn"])
    at = seen_at or _at(None)
    if status == status_events.RUNNING:
        return [_datum("ExecutionsStarted", "StateMachineArn", arn, 1, COUNT, at)]
    name = TERMINAL_METRICS.get(str(status))
    if name is None:
        return []
    data = [_datum(name, "StateMachineArn", arn, 1, COUNT, at)]
    start_ms, stop_ms = detail.get("startDate"), detail.get("stopDate")
    if start_ms is not None:
        stop = stop_ms if stop_ms is not None else at.timestamp() * 1000
        data.append(
            _datum("ExecutionTime", "StateMachineArn", arn, max(0.0, stop - start_ms), MILLISECONDS, at)
        )
    return data


class AwsMetricsPublisher(BackgroundThread):
    """Publishes AWS/Lambda and AWS/States metrics for the runtime's invocations and the watcher's
    execution status changes. `start()` attaches the listeners and the publishing thread."""

    def __init__(
        self,
        runtime: LambdaRuntime | None = None,
        *,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        cloudwatch: Any = None,
        watch_executions: bool = True,
        account_id: str | None = None,
    ) -> None:
        from moto.core import DEFAULT_ACCOUNT_ID

        super().__init__("sandbox-aws-metrics")
        self.runtime = runtime
        self.region = region
        self.account_id = account_id or DEFAULT_ACCOUNT_ID
        self.watch_executions = watch_executions
        # endpoint_url is accepted for symmetry with the other parts: the backend is in this process.
        self._cloudwatch = cloudwatch  # None: the in-process backend
        self._queue: queue.Queue[Any] = queue.Queue()
        self._running: dict[str, int] = {}  # function name -> invocations in flight
        self._running_lock = threading.Lock()
        self._cond = threading.Condition()
        self._hurry = threading.Event()  # flush() or stop(): send what is queued without gathering
        self._enqueued = 0  # datums accepted so far
        self._settled = 0  # datums sent or given up on
        self._sent = 0
        self._failed_calls = 0
        self._dropped = 0
        self._open = False

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> AwsMetricsPublisher:
        if self._thread is not None:
            return self
        self._open = True
        super().start()
        if self.runtime is not None:
            self.runtime.add_listener(self)
        if self.watch_executions:
            status_events.add_status_listener(self.execution_status_changed)
        return self

    def stop(self, timeout: float = 5.0) -> bool:
        """Detach, send what is queued (within `timeout`), and end the thread."""
        if self.runtime is not None:
            self.runtime.remove_listener(self)
        status_events.remove_status_listener(self.execution_status_changed)
        self._open = False
        return super().stop(timeout)

    def _interrupt(self) -> None:
        if self._thread is not None:  # send what is queued, then end
            self._queue.put(_STOP)
            self._hurry.set()

    def flush(self, timeout: float = 10.0) -> bool:
        """Block until every datum queued before this call is sent (or given up); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._enqueued
            if self._settled < target:
                self._hurry.set()
            while self._settled < target:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    return self._settled >= target
                self._cond.wait(min(left, 0.5))
            return True

    def stats(self) -> dict[str, int]:
        with self._cond:
            return {
                "enqueued": self._enqueued,
                "sent": self._sent,
                "failed_calls": self._failed_calls,
                "dropped": self._dropped,
                "pending": self._enqueued - self._settled,
            }

    # ---------------------------------------------------------------- listeners (callers' threads)

    def invocation_started(self, function_name: str, request_id: str) -> None:
        with self._running_lock:
            running = self._running.get(function_name, 0) + 1
            self._running[function_name] = running
        self._put(LAMBDA_NAMESPACE, [concurrency_metric(function_name, running)])

    def invocation_finished(
        self, function_name: str, request_id: str, record: InvocationRecord | None
    ) -> None:
        with self._running_lock:
            running = max(0, self._running.get(function_name, 0) - 1)
            self._running[function_name] = running
        data = invocation_metrics(record) if record is not None else []
        data.append(concurrency_metric(function_name, running, _at(record.ended_at if record else None)))
        self._put(LAMBDA_NAMESPACE, data)

    def execution_status_changed(self, event: dict[str, Any]) -> None:
        self._put(STATES_NAMESPACE, execution_metrics(event))

    def _put(self, namespace: str, data: list[Datum]) -> None:
        if not data or not self._open:
            return
        with self._cond:
            if self._enqueued - self._settled + len(data) > MAX_QUEUED:
                if not self._dropped:
                    LOG.warning("AWS metrics publisher is %d datums behind: dropping new ones", MAX_QUEUED)
                self._dropped += len(data)
                return
            self._enqueued += len(data)
        self._queue.put((namespace, data))

    # ---------------------------------------------------------------- publishing thread

    def _run(self) -> None:
        stopping = False
        while not stopping:
            items = [self._queue.get()]
            if items[0] is not _STOP:
                self._hurry.wait(COALESCE_SECONDS)
            self._hurry.clear()  # before draining: a flush() from now on is served by the next batch
            while True:  # take everything queued meanwhile: one batch
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            batches: dict[str, list[Datum]] = {}
            for item in items:
                if item is _STOP:
                    stopping = True
                    continue
                namespace, data = item
                batches.setdefault(namespace, []).extend(data)
            for namespace, data in batches.items():
                self._send(namespace, data)

    def _send(self, namespace: str, data: list[Datum]) -> None:
        for batch in _chunks(data, MAX_DATUMS_PER_CALL):
            ok = False
            try:
                if self._cloudwatch is not None:
                    self._cloudwatch.put_metric_data(Namespace=namespace, MetricData=batch)
                else:
                    emf.put_in_process(namespace, batch, account_id=self.account_id, region=self.region)
                ok = True
            except Exception:  # never let the publisher die, never reach a handler
                LOG.warning("could not publish %d %s metric datums", len(batch), namespace, exc_info=True)
            with self._cond:
                self._settled += len(batch)
                if ok:
                    self._sent += len(batch)
                else:
                    self._failed_calls += 1
                self._cond.notify_all()


def _chunks(data: list[Datum], size: int) -> Iterable[list[Datum]]:
    for start in range(0, len(data), size):
        yield data[start : start + size]
