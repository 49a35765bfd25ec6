"""Realtime ingest: every created object joins the pending run of its job, or starts one.

A job's pending run is QUEUED and still accepts files; its message is sent once, when the run is
created, with a delay for folder jobs so files uploaded together land in one run. A file that
arrives after the router froze the run starts the next run: no file is dropped because its
folder already started (DESIGN.md failure mode 10).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pipeline.config import Settings
from pipeline.jobs import JobMessage, RunRef, format_timestamp, job_id_for_key
from pipeline.s3events import ObjectCreated
from pipeline.stores.tracking import PendingAdd, TrackingStore

MAX_SQS_DELAY_SECONDS = 900
_MAX_ATTEMPTS = 5


class IngestOutcome(StrEnum):
    NEW_RUN = "new_run"
    JOINED_PENDING_RUN = "joined_pending_run"
    REANNOUNCED = "reannounced"


@dataclass(frozen=True)
class IngestResult:
    outcome: IngestOutcome
    run: RunRef


class IngestContentionError(RuntimeError):
    """The job's pending run kept changing under us; the event is retried."""


def message_delay(job_id: str, key: str, settings: Settings) -> int:
    """Folder jobs wait for their siblings to arrive; a single-file job goes at once."""
    return 0 if job_id == key else min(settings.folder_settle_seconds, MAX_SQS_DELAY_SECONDS)


def ingest_object(
    created: ObjectCreated,
    store: TrackingStore,
    send: Callable[[JobMessage, int], None],
    settings: Settings,
    now: datetime,
) -> IngestResult:
    """Add one created object to its job's pending run, creating (and announcing) one if none is.

    The candidate run is written first, then claimed as the job's pending run: if another run
    is already pending, the file joins it and the unannounced candidate is discarded.
    """
    job_id = job_id_for_key(created.key, settings.job_folder_depth)
    candidate = RunRef(job_id, format_timestamp(now))
    if not store.create_run(candidate, [created.key], created.bucket, now, lead=False):
        raise IngestContentionError("a run with this start time already exists; the event is retried")
    delay = message_delay(job_id, created.key, settings)
    for _ in range(_MAX_ATTEMPTS):
        pending = RunRef(job_id, store.claim_pending(job_id, candidate.started_at))
        if pending == candidate:
            store.advance_head(candidate, now)
            send(JobMessage(job_id, candidate.started_at, created.bucket), delay)
            return IngestResult(IngestOutcome.NEW_RUN, candidate)
        added = store.add_file_to_pending(pending, created.key, now)
        if added is not PendingAdd.CLOSED:
            store.discard_unannounced_run(candidate)
            if added is PendingAdd.ALREADY_PRESENT:
                # A redelivered event: its first attempt may have died before announcing the run.
                send(JobMessage(job_id, pending.started_at, created.bucket), delay)
                return IngestResult(IngestOutcome.REANNOUNCED, pending)
            return IngestResult(IngestOutcome.JOINED_PENDING_RUN, pending)
        store.clear_pending(pending)  # the pending run started: stop routing files to it
    store.discard_unannounced_run(candidate)
    raise IngestContentionError(f"job's pending run kept moving after {_MAX_ATTEMPTS} attempts")
