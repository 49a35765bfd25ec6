"""Signals the alarms watch, computed from one observation (docs/ARCHITECTURE.md#alarms: alarms watch single
metrics; a condition that combines signals becomes one metric that a monitor computes).

- slots_full_idle: every slot is counted taken and no router-started execution runs. This is
  the stall signature: the pipeline waits for capacity that nothing uses.
- oldest_queued_age: how long the oldest QUEUED run has waited. SQS's age of the oldest message
  cannot show it, because every capacity wait re-sends the message and resets its age.
- backlog_stalled: a run has waited longer than the stall window and nothing moved in that
  window. Moving means no execution started and no run changed status or ended. A busy pipeline
  whose runs are slow still moves; a stalled one does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from monitors.reconcile.model import Observation
from pipeline.status import JobStatus


@dataclass(frozen=True)
class Signals:
    slots_full_idle: bool
    oldest_queued_age: float
    backlog_stalled: bool


def oldest_queued(observation: Observation) -> datetime | None:
    """When the oldest QUEUED run was written (its start time, which is its key)."""
    queued = [run.started_at for run in observation.active_runs if run.status is JobStatus.QUEUED]
    return _parse(min(queued)) if queued else None


def last_progress(observation: Observation) -> datetime | None:
    """The latest sign of movement the observation holds: a run past QUEUED changing status, an
    execution starting, or (looked up only when needed) a run ending."""
    moments = [run.last_change for run in observation.active_runs if run.status is not JobStatus.QUEUED]
    moments += [execution.started_at for execution in observation.running]
    if observation.last_run_ended is not None:
        moments.append(observation.last_run_ended)
    return max(moments, default=None)


def signals(observation: Observation) -> Signals:
    now = observation.semaphore_read_at
    settings = observation.settings
    held = {holder.name for holder in observation.holders}
    router_started_running = sum(1 for execution in observation.running if execution.name in held)
    slots_full_idle = observation.active_count >= settings.max_slots and router_started_running == 0
    since = oldest_queued(observation)
    age = max(0.0, (now - since).total_seconds()) if since is not None else 0.0
    progress = last_progress(observation)
    quiet = progress is None or (now - progress).total_seconds() > settings.stall_seconds
    return Signals(slots_full_idle, age, age > settings.stall_seconds and quiet)


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
