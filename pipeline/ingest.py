"""Realtime ingest: every created object joins the pending run of its job, or starts one.

A job's pending run is QUEUED and still accepts files; its message is sent once, when the run is
created, with a delay for folder jobs so files uploaded together land in one run. A file that
arrives after the router froze the run starts the next run: no file is dropped because its
folder already started (docs/ARCHITECTURE.md#files-dropped-by-folder-batching). A pending run also closes when it holds
`MaxFilesPerRun` files (a condition of the join): a large folder becomes several runs, none of its
files dropped, each run small enough for AWS's size limits.

S3 and EventBridge deliver at least once, and a timed-out ingest is retried while its first
attempt may still be running. So each object *version* is put into exactly one run: the write
that puts the file into a run also writes the object's claim (its version and run) in the same
conditional transaction. A later delivery of a claimed version puts the file nowhere; a newer
version (a real overwrite) is processed again. Powertools' Idempotency utility is not used: its
INPROGRESS record expires after a timed-out attempt, letting a retry run again, it is written
apart from the run (a crash between the two is a window), it cannot order versions, and it would
replay the first answer where a redelivery must look at the run as it is now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from pipeline.config import Settings
from pipeline.jobs import (
    ANNOUNCE_LEASE_WAITS,
    JobMessage,
    RunRef,
    format_timestamp,
    job_id_for_key,
    parse_timestamp,
)
from pipeline.s3events import ObjectCreated, VersionOrder, compare_versions
from pipeline.status import JobStatus
from pipeline.stores.claims import ClaimWrite, ObjectClaim
from pipeline.stores.protocols import ClaimsProtocol, TrackingProtocol

MAX_SQS_DELAY_SECONDS = 900
_MAX_ATTEMPTS = 5


class IngestOutcome(StrEnum):
    NEW_RUN = "new_run"
    JOINED_PENDING_RUN = "joined_pending_run"
    REANNOUNCED = "reannounced"  # already in a run that has not started: announced again
    DUPLICATE = "duplicate"  # this version is in a run that started or ended: nothing to do
    STALE = "stale"  # a newer version of the object is claimed already: superseded


class Delivery(StrEnum):
    """What to do with one delivered event, given the object's claim."""

    PROCESS = "process"
    REANNOUNCE = "reannounce"
    DUPLICATE = "duplicate"
    STALE = "stale"


@dataclass(frozen=True)
class IngestResult:
    outcome: IngestOutcome
    run: RunRef


class IngestContentionError(RuntimeError):
    """The job's pending run or the object's claim kept changing under us; the event is retried."""


def message_delay(job_id: str, key: str, settings: Settings) -> int:
    """Folder jobs wait for their siblings to arrive; a single-file job goes at once."""
    return 0 if job_id == key else min(settings.folder_settle_seconds, MAX_SQS_DELAY_SECONDS)


def announce_ahead(delay: int, settings: Settings) -> int:
    """How long a new run counts as announced: its message's delay plus the router's lease of
    capacity waits, so the router's first wait needs no write to keep the run announced (the
    reconciler re-announces a lost message that much later)."""
    return delay + settings.capacity_retry_seconds * ANNOUNCE_LEASE_WAITS


def judge_delivery(order: VersionOrder | None, claimed_run_status: JobStatus | None) -> Delivery:
    """Decide from the event's version relative to the claim (None: no claim) and the claimed
    run's status (None: the run is gone).

    Whenever the event is not processed and the claimed run is still QUEUED, it is announced
    again: the attempt that created that run may have died before sending its message (a newer
    version that joined the run afterwards does not announce it). An announcement is harmless
    twice: the router starts a run once. An event whose version cannot be placed (UNORDERED: no
    sequencer or version id on both sides) folds into a claimed run that has not read the object
    yet, and is otherwise processed again: a second run is better than a dropped overwrite.
    """
    if order is None or order is VersionOrder.NEWER:
        return Delivery.PROCESS
    if claimed_run_status is JobStatus.QUEUED:
        return Delivery.REANNOUNCE
    if order is VersionOrder.SAME:
        return Delivery.DUPLICATE
    if order is VersionOrder.OLDER:
        return Delivery.STALE
    return Delivery.PROCESS


def pick_key(created: ObjectCreated, etag_of: Callable[[str], str | None]) -> str:
    """The key `created` has in its bucket, among its decoded and delivered forms.

    `etag_of(key)` is the listed object's ETag (None: no such key). Called only when the forms
    differ (a key with '+' or '%'): whether S3's EventBridge events encode keys is not documented
    (pipeline/s3events.py), so the decoded form is tried first and the form as delivered second.
    When both exist (`a b` and `a+b`), the one whose ETag is the event's wins; when neither does
    (deleted since), the decoded form.
    """
    forms = created.key_forms()
    existing: str | None = None
    for key in forms:
        etag = etag_of(key)
        if etag is None:
            continue
        if not created.etag or etag.strip('"') == created.etag:
            return key
        existing = existing or key
    return existing or forms[0]


def candidate_run(job_id: str, now: datetime, attempt: int, latest: str = "") -> RunRef:
    """A new run's key. Pure. A later attempt shifts by microseconds so it never meets its own key,
    and a new run always starts after the job's latest (`latest`, "" for none): the write that
    opens it also makes it the job's latest, conditional on that (a clock behind another
    function's opens just after the latest run, never under it)."""
    earliest = max(now, parse_timestamp(latest) + timedelta(microseconds=1)) if latest else now
    return RunRef(job_id, format_timestamp(earliest + timedelta(microseconds=attempt)))


def ingest_object(
    created: ObjectCreated,
    store: TrackingProtocol,
    claims: ClaimsProtocol,
    send: Callable[[JobMessage, int], object],
    settings: Settings,
    now: datetime,
) -> IngestResult:
    """Put one created object version into its job's pending run, or a new announced run.

    Each attempt reads the claim and the job's head (one call) and decides; a file goes into a
    run only together with its claim, conditional on the claim being as read, so of racing
    deliveries one wins and the others decide again and find the version claimed. A file costs
    two calls (the read, the write), a new run one more (its message): no candidate run is
    written that a lost race would leave behind.
    """
    job_id = job_id_for_key(created.key, settings.job_folder_depth)
    delay = message_delay(job_id, created.key, settings)
    for attempt in range(_MAX_ATTEMPTS):
        view = claims.ingest_view(created.bucket, created.key, job_id)
        claim = view.claim
        if claim is not None:
            claimed = store.get_run(claim.run)
            order = compare_versions(created.version, claim.version)
            delivery = judge_delivery(order, claimed.status if claimed else None)
            if delivery is not Delivery.PROCESS:
                return _answer_repeat(delivery, claim, created, store, send, delay, now, settings)

        pending = view.pending
        run = pending or candidate_run(job_id, now, attempt, view.latest)
        successor = (
            claim.succeeded_by(run, created.version)
            if claim
            else ObjectClaim(created.bucket, created.key, run, created.version)
        )
        if pending is None:
            written = claims.open_run_with_claim(successor, created.bucket, now, announce_ahead(delay, settings))
            if written is ClaimWrite.WRITTEN:  # the run leads the job's head already (same write)
                send(JobMessage(job_id, run.started_at, created.bucket), delay)
                return IngestResult(IngestOutcome.NEW_RUN, run)
        else:
            written = claims.join_run_with_claim(successor, now, settings.max_files_per_run)
            if written is ClaimWrite.WRITTEN:
                return IngestResult(IngestOutcome.JOINED_PENDING_RUN, run)
            if written is ClaimWrite.RUN_CLOSED:
                # The pending run started, or holds MaxFilesPerRun files: stop routing files to
                # it, so the next attempt opens the job's next run.
                store.clear_pending(run)
        # CLAIM_MOVED, PENDING_MOVED, RUN_EXISTS, CONFLICT: nothing was written; look again.
    raise IngestContentionError(
        f"job's pending run or object claim kept moving after {_MAX_ATTEMPTS} attempts"
    )


def _answer_repeat(
    delivery: Delivery,
    claim: ObjectClaim,
    created: ObjectCreated,
    store: TrackingProtocol,
    send: Callable[[JobMessage, int], object],
    delay: int,
    now: datetime,
    settings: Settings,
) -> IngestResult:
    """A delivery whose file is in a run already (or superseded): announce again or do nothing."""
    if delivery is Delivery.REANNOUNCE:
        # The run was opened leading the job's head (one write): only its message may be missing.
        store.extend_announcement(claim.run, now + timedelta(seconds=announce_ahead(delay, settings)))
        send(JobMessage(claim.run.job_id, claim.run.started_at, created.bucket), delay)
        return IngestResult(IngestOutcome.REANNOUNCED, claim.run)
    outcome = IngestOutcome.DUPLICATE if delivery is Delivery.DUPLICATE else IngestOutcome.STALE
    return IngestResult(outcome, claim.run)
