"""The game day's reads of the sandbox: alarm states and transitions, the semaphore and running
executions sampled on a thread, each file's outcome, the audit records, an alarm's metric.

Everything returned is plain data for the pure checks (invariants.py, verdict.py); times are
seconds since the game day's start (`Clock`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pipeline.jobs import execution_name, job_id_for_key
from pipeline.stores.audit import AuditStore, AuditStream
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import TrackingStore
from pipeops.demo import accounted
from pipeops.gameday.invariants import RunView, Sample
from pipeops.gameday.model import Action, AlarmChange, Point, alarm_id
from stack.resources import StackResources

if TYPE_CHECKING:
    from sandbox.sandbox import Sandbox

JOB_FOLDER_DEPTH = 1  # the template's JobFolderDepth default: a wave's folder is one job


@dataclass(frozen=True)
class Clock:
    """Real seconds since the game day started, and the time scale to turn them virtual."""

    started: datetime
    time_scale: float

    def now(self) -> float:
        return self.since(datetime.now(UTC))

    def since(self, moment: datetime) -> float:
        return round((moment - self.started).total_seconds(), 3)

    def virtual(self, real_seconds: float) -> float:
        return round(real_seconds / self.time_scale, 1)


def alarm_states(cloudwatch: Any, stack_name: str) -> dict[str, str]:
    """Every alarm of the stack (metric and composite) by id -> its state."""
    states: dict[str, str] = {}
    pages = cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=f"{stack_name}-", AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    for page in pages:
        for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", []):
            states[alarm_id(alarm["AlarmName"])] = alarm["StateValue"]
    return states


def transitions(sandbox: Sandbox, clock: Clock, since: float = 0.0) -> list[AlarmChange]:
    """The alarm engine's state changes since `since` (game-day seconds), oldest first."""
    assert sandbox.alarms is not None
    found = []
    for t in list(sandbox.alarms.transitions):
        at = clock.since(t.time)
        if at >= since:
            found.append(AlarmChange(alarm_id(t.alarm_name), t.old_state.value, t.new_state.value, at, clock.virtual(at), t.reason))
    return found


@dataclass
class Sampler:
    """Samples the semaphore and the running executions every `interval` real seconds, on a thread."""

    resources: StackResources
    client: Callable[[str], Any]
    clock: Clock
    interval: float = 0.5
    samples: list[tuple[float, Sample]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._loop, name="gameday-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)

    def look(self) -> Sample:
        state = Semaphore(self.resources.CoordinationTableName, self.client("dynamodb")).read()
        running = ExecutionsStore(self.client("stepfunctions"), self.resources.StateMachineArn).running()
        return Sample(state.active_count, len(state.holders), frozenset(e.name for e in running))

    def between(self, start: float, end: float) -> list[Sample]:
        return [sample for at, sample in list(self.samples) if start <= at <= end]

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.samples.append((self.clock.now(), self.look()))
            except Exception:  # a throttling fault may refuse a read: that sample is skipped
                continue


@dataclass(frozen=True)
class AtRest:
    """The pipeline once traffic stopped: file outcomes, the runs, the semaphore and executions."""

    outcomes: dict[str, str]
    runs: list[RunView]
    active_count: int
    holders: tuple[str, ...]
    running: frozenset[str]


def look_at_rest(resources: StackResources, client: Callable[[str], Any], keys: Sequence[str]) -> AtRest:
    """One look: every key's outcome in the latest terminal run that holds it, and the counter."""
    store = TrackingStore(resources.TrackingTableName, client("dynamodb"))
    jobs = sorted({job_id_for_key(key, JOB_FOLDER_DEPTH) for key in keys})
    runs_by_job = {job: store.runs_of(job) for job in jobs}
    state = Semaphore(resources.CoordinationTableName, client("dynamodb")).read()
    running = frozenset(e.name for e in ExecutionsStore(client("stepfunctions"), resources.StateMachineArn).running())
    runs = [
        RunView(r.job_id, r.started_at, r.status.value, r.files, r.execution_name or execution_name(r.job_id, r.started_at))
        for records in runs_by_job.values()
        for r in records
    ]
    return AtRest(accounted(list(keys), runs_by_job, JOB_FOLDER_DEPTH), runs, state.active_count, tuple(state.holders), running)


def audit_actions(resources: StackResources, client: Callable[[str], Any], clock: Clock, since: float) -> list[Action]:
    """The audit records written since `since` (game-day seconds), both streams (the reconciler's
    repairs and the runbooks' actions), oldest first."""
    moment = clock.started + timedelta(seconds=since)
    found = []
    for stream in AuditStream:
        store = AuditStore(resources.CoordinationTableName, client("dynamodb"), stream)
        for record in store.history(moment, limit=200).records:
            try:
                at = clock.since(datetime.fromisoformat(record.at.replace("Z", "+00:00")))
            except ValueError:
                continue
            found.append(Action(f"audit ({stream.value}): {record.action} {record.target}"[:160], at))
    return sorted(found, key=lambda action: action.real_at)


def metric_series(cloudwatch: Any, stack_name: str, alarms: Iterable[str], clock: Clock, start: float, end: float) -> dict[str, tuple[Point, ...]]:
    """Each alarm's watched metric between `start` and `end` (game-day seconds), one point per datum."""
    series: dict[str, tuple[Point, ...]] = {}
    names = [f"{stack_name}-{alarm}" for alarm in alarms]
    if not names:
        return series
    described = cloudwatch.describe_alarms(AlarmNames=names, AlarmTypes=["MetricAlarm"]).get("MetricAlarms", [])
    for alarm in described:
        metric = _watched(alarm)
        if metric is None:
            continue
        namespace, name, dimensions = metric
        statistic = alarm.get("Statistic") if alarm.get("Statistic") in _STATISTICS else "Maximum"
        window = (clock.started + timedelta(seconds=start - 5), clock.started + timedelta(seconds=end + 5))
        try:
            answer = cloudwatch.get_metric_statistics(
                Namespace=namespace, MetricName=name, Dimensions=dimensions, StartTime=window[0], EndTime=window[1],
                Period=1, Statistics=[statistic],
            )
        except Exception:  # the chart is shown empty rather than failing the game day
            continue
        points = [Point(clock.since(_utc(p["Timestamp"])), float(p[statistic])) for p in answer.get("Datapoints", [])]
        series[alarm_id(alarm["AlarmName"])] = tuple(sorted(points, key=lambda p: p.real_at))
    return series


_STATISTICS = ("Minimum", "Maximum", "Sum", "Average", "SampleCount")


def _watched(alarm: Mapping[str, Any]) -> tuple[str, str, list[dict[str, str]]] | None:
    if alarm.get("MetricName"):
        return alarm["Namespace"], alarm["MetricName"], list(alarm.get("Dimensions", []))
    for query in alarm.get("Metrics", []):
        stat = query.get("MetricStat")
        if stat:
            metric = stat["Metric"]
            return metric["Namespace"], metric["MetricName"], list(metric.get("Dimensions", []))
    return None


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def wait_for(done: Callable[[], bool], timeout: float, interval: float = 0.25) -> bool:
    """Poll `done` until it is true or `timeout` real seconds passed; whether it became true."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True
