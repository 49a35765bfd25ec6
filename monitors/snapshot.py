"""The numbers `pipeops status` shows beside the reconciler's observation: queue, DLQ and quarantine
depths, the oldest message's age, and the runs by status. Numbers only: what is wrong is said once, by the
reconciler's findings and the alarms (pipeops.views), under the names the alarms and runbooks use.

The semaphore, the running executions and the active runs are the reconciler's observation: they
are not read again here. Jobs are read so that the cost follows the work in flight, never the
table's size: active runs are counted from the reconciler's read of the sparse `active-jobs`
index; ended runs (COMPLETE, FAILED) are counted over stated windows (the last hour, the last
24 h) from the `by-status` index, newest first, at most `RECENT_CAP` per status, so a count past
the cap is a lower bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeline.jobs import format_timestamp
from pipeline.status import ACTIVE_STATUSES, TERMINAL_STATUSES, JobStatus
from pipeline.stores.run_index import RunIndex

# The windows ended runs are counted over, shortest first; the widest bounds the read.
RECENT_WINDOWS: tuple[timedelta, ...] = (timedelta(hours=1), timedelta(hours=24))
# At most this many ended runs are read per status: past it, a window's count is a lower bound.
RECENT_CAP = 1000
# Ended statuses in the order they are shown.
ENDED_STATUSES: tuple[JobStatus, ...] = tuple(s for s in JobStatus if s in TERMINAL_STATUSES)


@dataclass(frozen=True)
class QueueDepth:
    visible: int
    in_flight: int
    delayed: int

    @property
    def total(self) -> int:
        return self.visible + self.in_flight + self.delayed


@dataclass(frozen=True)
class OutcomeWindow:
    """Runs that ended (COMPLETE, FAILED) within the last `window`, read newest first."""

    window: str  # "1h", "24h"
    since: str  # the window's start (a tracking timestamp)
    counts: Mapping[str, int]  # ended status -> runs that reached it within the window
    # Statuses whose read stopped at RECENT_CAP inside the window: their counts are lower bounds.
    lower_bounds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    taken_at: str
    main_queue: QueueDepth
    dead_letter_depth: int
    tracker_dead_letter_depth: int
    ingest_dead_letter_depth: int
    # Dead letters a redrive parked: only a person takes them out.
    quarantine_depth: int
    oldest_message_age_seconds: float | None
    # Active runs by status: every one (the sparse index holds only active runs).
    active_runs: Mapping[str, int] = field(default_factory=dict)
    # Ended runs by window, shortest first; each says its start and whether its counts are exact.
    recent_outcomes: tuple[OutcomeWindow, ...] = ()

    @property
    def jobs_by_status(self) -> dict[str, int]:
        """Every active run, and the runs that ended within the widest window (non-zero only)."""
        widest = self.recent_outcomes[-1].counts if self.recent_outcomes else {}
        merged = {**self.active_runs, **widest}
        return {status.value: merged[status.value] for status in JobStatus if merged.get(status.value)}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["jobs_by_status"] = self.jobs_by_status
        data["jobs_by_status_window"] = self.recent_outcomes[-1].window if self.recent_outcomes else None
        return data


def window_label(window: timedelta) -> str:
    """How a window is named in the output: 1h, 24h, 30m."""
    seconds = int(window.total_seconds())
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


def count_since(stamps: Sequence[str], truncated: bool, since: str) -> tuple[int, bool]:
    """How many of the newest-first `updated_at` stamps fall after `since`, and whether that is all.

    A truncated read (more items were left unread) is still exact for a window it read past.
    """
    count = sum(1 for stamp in stamps if stamp > since)
    return count, not truncated or (bool(stamps) and stamps[-1] <= since)


def recent_outcomes(
    ended: Mapping[JobStatus, tuple[Sequence[str], bool]], now: datetime, windows: Sequence[timedelta] = RECENT_WINDOWS
) -> tuple[OutcomeWindow, ...]:
    """Count each ended status's stamps (newest first, and whether the read was cut) per window."""
    result = []
    for window in windows:
        since = format_timestamp(now - window)
        counts: dict[str, int] = {}
        lower_bounds: list[str] = []
        for status in ENDED_STATUSES:
            stamps, truncated = ended.get(status, ((), False))
            counts[status.value], exact = count_since(stamps, truncated, since)
            lower_bounds += [] if exact else [status.value]
        result.append(OutcomeWindow(window_label(window), since, counts, tuple(lower_bounds)))
    return tuple(result)


def _queue_depth(sqs: Any, url: str) -> QueueDepth:
    if not url:
        return QueueDepth(0, 0, 0)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return QueueDepth(*(int(attributes.get(name, 0)) for name in names))


def _oldest_message_age(cloudwatch: Any, queue_url: str, now: datetime) -> float | None:
    """The highest ApproximateAgeOfOldestMessage of the last minute (AWS/SQS; the sandbox publishes it too)."""
    response = cloudwatch.get_metric_statistics(
        Namespace="AWS/SQS",
        MetricName="ApproximateAgeOfOldestMessage",
        Dimensions=[{"Name": "QueueName", "Value": queue_url.rsplit("/", 1)[-1]}],
        StartTime=now - timedelta(minutes=10),
        EndTime=now,
        Period=60,
        Statistics=["Maximum"],
    )
    points = sorted(response.get("Datapoints", []), key=lambda p: p["Timestamp"])
    return float(points[-1]["Maximum"]) if points else None


def observe(
    resources: Any,
    client: Any,
    active: Mapping[JobStatus, int],
    now: datetime | None = None,
    *,
    windows: Sequence[timedelta] = RECENT_WINDOWS,
    cap: int = RECENT_CAP,
) -> Snapshot:
    """Read the numbers. `client(service)` returns a boto3 client; `active`: active runs by status,
    as the reconciler's observation read them (not read twice)."""
    now = now or datetime.now(UTC)
    sqs = client("sqs")
    runs = RunIndex(resources.TrackingTableName, client("dynamodb"))
    widest = format_timestamp(now - max(windows))
    ended = {status: runs.ended_since(status, widest, cap) for status in ENDED_STATUSES}
    return Snapshot(
        taken_at=format_timestamp(now),
        main_queue=_queue_depth(sqs, resources.MainQueueUrl),
        dead_letter_depth=_queue_depth(sqs, resources.DeadLetterQueueUrl).total,
        tracker_dead_letter_depth=_queue_depth(sqs, resources.TrackerDeadLetterQueueUrl).total,
        ingest_dead_letter_depth=_queue_depth(sqs, resources.IngestDeadLetterQueueUrl).total,
        quarantine_depth=_queue_depth(sqs, resources.QuarantineQueueUrl).total,
        oldest_message_age_seconds=_oldest_message_age(client("cloudwatch"), resources.MainQueueUrl, now),
        active_runs={status.value: active.get(status, 0) for status in ACTIVE_STATUSES if active.get(status, 0)},
        recent_outcomes=recent_outcomes(ended, now, sorted(windows)),
    )
