"""Ingest under concurrency, on moto: a timed-out attempt still running while its retry runs.

Interleavings are forced deterministically: a store whose claim read runs another delivery to
completion right after the first attempt looked, before it writes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.config import Settings
from pipeline.ingest import IngestOutcome, IngestResult, ingest_object
from pipeline.jobs import ANNOUNCE_LEASE_WAITS, JobMessage, format_timestamp
from pipeline.s3events import ObjectCreated, ObjectVersion
from pipeline.status import JobStatus
from pipeline.stores.claims import ClaimsStore, IngestView
from pipeline.stores.tracking import TrackingStore

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
SETTINGS = Settings(folder_settle_seconds=30)


class InterleavingClaims(ClaimsStore):
    """Runs `meanwhile` once, just after the first read (claim and head): the other attempt overtakes."""

    meanwhile: Callable[[], object] | None = None

    def ingest_view(self, bucket: str, key: str, job_id: str) -> IngestView:
        view = super().ingest_view(bucket, key, job_id)
        overtake, self.meanwhile = self.meanwhile, None
        if overtake is not None:
            overtake()
        return view


@pytest.fixture
def store(resources) -> TrackingStore:
    return TrackingStore(resources.tracking_table, resources.client("dynamodb"))


@pytest.fixture
def claims(resources) -> InterleavingClaims:
    return InterleavingClaims(resources.tracking_table, resources.coordination_table, resources.client("dynamodb"))


def upload(key: str, sequencer: str = "0A") -> ObjectCreated:
    return ObjectCreated("in", key, 3, ObjectVersion(sequencer))


def test_a_retry_that_overtakes_its_timed_out_attempt_leaves_one_run(store: TrackingStore, claims: InterleavingClaims) -> None:
    sent: list[JobMessage] = []
    results: list[IngestResult] = []

    def send(message: JobMessage, delay: int) -> None:
        sent.append(message)

    event = upload("claims/a.txt")
    claims.meanwhile = lambda: results.append(
        ingest_object(event, store, claims, send, SETTINGS, NOW + timedelta(seconds=1))
    )
    first = ingest_object(event, store, claims, send, SETTINGS, NOW)  # its transaction loses on the claim
    [retry] = results
    assert (retry.outcome, first.outcome) == (IngestOutcome.NEW_RUN, IngestOutcome.REANNOUNCED)
    assert first.run == retry.run and sent == [JobMessage("claims/", retry.run.started_at, "in")] * 2
    [record] = store.runs_of("claims/")
    assert record.files == ("claims/a.txt",)


def test_a_sibling_that_opens_the_run_first_is_joined(store: TrackingStore, claims: InterleavingClaims) -> None:
    sent: list[JobMessage] = []
    results: list[IngestResult] = []
    claims.meanwhile = lambda: results.append(
        ingest_object(upload("claims/b.txt"), store, claims, lambda m, d: sent.append(m), SETTINGS, NOW)
    )
    first = ingest_object(upload("claims/a.txt"), store, claims, lambda m, d: sent.append(m), SETTINGS, NOW)
    [sibling] = results
    assert (sibling.outcome, first.outcome) == (IngestOutcome.NEW_RUN, IngestOutcome.JOINED_PENDING_RUN)
    assert len(sent) == 1
    [record] = store.runs_of("claims/")
    assert record.files == ("claims/a.txt", "claims/b.txt")


def test_a_run_frozen_between_read_and_join_sends_the_file_to_a_new_run(store: TrackingStore, claims: InterleavingClaims) -> None:
    sent: list[JobMessage] = []
    first = ingest_object(upload("claims/a.txt"), store, claims, lambda m, d: sent.append(m), SETTINGS, NOW)
    # the router freezes the run after ingest read the pending pointer, before it clears it
    claims.meanwhile = lambda: store.transition(first.run, JobStatus.IN_PROGRESS, NOW)
    late = ingest_object(
        upload("claims/b.txt"), store, claims, lambda m, d: sent.append(m), SETTINGS, NOW + timedelta(seconds=1)
    )
    assert late.outcome is IngestOutcome.NEW_RUN and late.run != first.run
    assert [(r.run, r.files) for r in store.runs_of("claims/")] == [
        (late.run, ("claims/b.txt",)),
        (first.run, ("claims/a.txt",)),
    ]
    assert store.pending_run("claims/") == late.run


def test_an_unversioned_event_redelivered_after_its_run_started_is_processed_again(
    store: TrackingStore,
    claims: InterleavingClaims,
) -> None:
    """No sequencer and no version id: a redelivery cannot be told from an overwrite. Once the
    run has read the object, processing again is the safe side (a dropped overwrite is not)."""
    event = ObjectCreated("in", "solo.txt", 3)
    first = ingest_object(event, store, claims, lambda m, d: None, SETTINGS, NOW)
    assert ingest_object(event, store, claims, lambda m, d: None, SETTINGS, NOW).outcome is IngestOutcome.REANNOUNCED
    store.transition(first.run, JobStatus.IN_PROGRESS, NOW)
    again = ingest_object(event, store, claims, lambda m, d: None, SETTINGS, NOW + timedelta(seconds=1))
    assert again.outcome is IngestOutcome.NEW_RUN and again.run != first.run


def test_a_new_run_leads_its_job_and_is_announced_a_lease_of_capacity_waits_ahead(store: TrackingStore, claims: InterleavingClaims) -> None:
    result = ingest_object(upload("claims/a.txt"), store, claims, lambda m, d: None, SETTINGS, NOW)
    record = store.get_run(result.run)
    lease = SETTINGS.folder_settle_seconds + SETTINGS.capacity_retry_seconds * ANNOUNCE_LEASE_WAITS
    assert record is not None and record.announce_deadline == format_timestamp(NOW + timedelta(seconds=lease))
    assert store.latest_runs(["claims/"])["claims/"].run == result.run  # in the same write as the run


def test_an_ingest_whose_clock_is_behind_the_jobs_latest_run_opens_the_next_run_after_it(
    store: TrackingStore,
    claims: InterleavingClaims,
) -> None:
    first = ingest_object(upload("claims/a.txt"), store, claims, lambda m, d: None, SETTINGS, NOW)
    store.transition(first.run, JobStatus.IN_PROGRESS, NOW)  # frozen: the next file opens a new run
    store.clear_pending(first.run)
    behind = ingest_object(upload("claims/b.txt"), store, claims, lambda m, d: None, SETTINGS, NOW - timedelta(seconds=5))
    assert behind.outcome is IngestOutcome.NEW_RUN and behind.run.started_at > first.run.started_at
    assert store.latest_runs(["claims/"])["claims/"].run == behind.run
