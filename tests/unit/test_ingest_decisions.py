"""Ingest's pure decisions: ordering S3 object versions, and what one delivery of an event does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.ingest import Delivery, candidate_run, judge_delivery
from pipeline.jobs import RunRef, format_timestamp
from pipeline.s3events import (
    ObjectVersion,
    VersionOrder,
    compare_sequencers,
    compare_versions,
    objects_in,
    parse_notification_body,
)
from pipeline.status import JobStatus

HEX = st.text(alphabet="0123456789ABCDEF", min_size=1, max_size=24)


# ------------------------------------------------------------------------------- sequencers


def test_sequencers_of_different_lengths_compare_after_left_padding() -> None:
    assert compare_sequencers("0100", "FF") == 1  # a plain string comparison says "0100" < "FF"
    assert compare_sequencers("FF", "0100") == -1
    assert compare_sequencers("00FF", "FF") == 0
    assert compare_sequencers("0055aed6dcd90281e5", "0055AED6DCD90281E5") == 0


@given(st.integers(0, 2**96), st.integers(0, 2**96), st.integers(0, 4), st.integers(0, 4))
def test_sequencer_order_is_the_order_of_their_values(a: int, b: int, pad_a: int, pad_b: int) -> None:
    left, right = "0" * pad_a + f"{a:X}", "0" * pad_b + f"{b:X}"
    assert compare_sequencers(left, right) == (a > b) - (a < b)


@given(HEX, HEX)
def test_sequencer_order_is_antisymmetric(a: str, b: str) -> None:
    assert compare_sequencers(a, b) == -compare_sequencers(b, a)


@pytest.mark.parametrize(
    ("event", "claimed", "order"),
    [
        (ObjectVersion("0B"), ObjectVersion("0A"), VersionOrder.NEWER),
        (ObjectVersion("0A"), ObjectVersion("0A"), VersionOrder.SAME),
        (ObjectVersion("0A"), ObjectVersion("0B"), VersionOrder.OLDER),
        # the sequencer decides even if version ids disagree (they cannot, for one write)
        (ObjectVersion("0A", "v2"), ObjectVersion("0A", "v1"), VersionOrder.SAME),
        # without sequencers a version id tells "same" only: different ones have no order
        (ObjectVersion("", "v1"), ObjectVersion("0A", "v1"), VersionOrder.SAME),
        (ObjectVersion("", "v2"), ObjectVersion("", "v1"), VersionOrder.UNORDERED),
        (ObjectVersion(), ObjectVersion(), VersionOrder.UNORDERED),
        (ObjectVersion("0A"), ObjectVersion(), VersionOrder.UNORDERED),
    ],
)
def test_compare_versions(event: ObjectVersion, claimed: ObjectVersion, order: VersionOrder) -> None:
    assert compare_versions(event, claimed) is order


# ---------------------------------------------------------------------------------- delivery

STARTED = [s for s in JobStatus if s is not JobStatus.QUEUED]


@pytest.mark.parametrize("status", [None, *JobStatus])
def test_an_unclaimed_object_or_a_newer_version_is_processed(status: JobStatus | None) -> None:
    assert judge_delivery(None, None) is Delivery.PROCESS
    assert judge_delivery(VersionOrder.NEWER, status) is Delivery.PROCESS


@pytest.mark.parametrize("order", [VersionOrder.SAME, VersionOrder.OLDER, VersionOrder.UNORDERED])
def test_any_repeat_whose_run_has_not_started_announces_it_again(order: VersionOrder) -> None:
    assert judge_delivery(order, JobStatus.QUEUED) is Delivery.REANNOUNCE


@pytest.mark.parametrize("status", [None, *STARTED])
def test_the_same_version_once_its_run_started_ended_or_vanished_is_a_duplicate(
    status: JobStatus | None,
) -> None:
    assert judge_delivery(VersionOrder.SAME, status) is Delivery.DUPLICATE


@pytest.mark.parametrize("status", [None, *STARTED])
def test_an_older_version_is_stale(status: JobStatus | None) -> None:
    assert judge_delivery(VersionOrder.OLDER, status) is Delivery.STALE


@pytest.mark.parametrize("status", [None, *STARTED])
def test_a_version_that_cannot_be_placed_is_processed_again_rather_than_dropped(
    status: JobStatus | None,
) -> None:
    assert judge_delivery(VersionOrder.UNORDERED, status) is Delivery.PROCESS


# ----------------------------------------------------------------------------------- parsing


def test_eventbridge_object_created_carries_sequencer_and_version_id() -> None:
    event = {
        "detail-type": "Object Created",
        "detail": {
            "bucket": {"name": "in"},
            "object": {"key": "a+b.txt", "size": 3, "sequencer": "0055AED6DCD90281E5", "version-id": "v1"},
        },
    }
    [(message_id, created)] = list(objects_in(event))
    assert message_id is None
    assert (created.key, created.version) == ("a b.txt", ObjectVersion("0055AED6DCD90281E5", "v1"))


def test_s3_notifications_carry_sequencer_and_version_id_and_null_is_no_version() -> None:
    record = {
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": "in"}, "object": {"key": "a.txt", "sequencer": "0A", "versionId": "null"}},
    }
    [created] = parse_notification_body(json.dumps({"Records": [record]}))
    assert created.version == ObjectVersion("0A", "")


def test_an_event_without_version_fields_has_an_empty_version() -> None:
    event = {
        "detail-type": "Object Created",
        "detail": {"bucket": {"name": "in"}, "object": {"key": "a.txt"}},
    }
    [(_, created)] = list(objects_in(event))
    assert created.version == ObjectVersion()


# ------------------------------------------------------------------------------- new runs


def test_a_new_run_starts_now_shifted_by_its_attempt() -> None:
    now = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
    assert candidate_run("claims/", now, 0) == RunRef("claims/", "2026-11-29T20:00:00.000000Z")
    assert candidate_run("claims/", now, 2, "2026-11-29T19:59:59.000000Z").started_at == "2026-11-29T20:00:00.000002Z"


@given(st.datetimes(datetime(2000, 1, 1), datetime(2100, 1, 1), timezones=st.just(UTC)), st.integers(0, 4), st.integers(-10**7, 10**7))
def test_a_new_run_always_starts_after_the_jobs_latest_run(now: datetime, attempt: int, skew_us: int) -> None:
    """A clock behind the one that opened the latest run still opens a run after it (the open's
    condition on the head would refuse anything else), and a later attempt never meets an earlier one."""
    latest = format_timestamp(now + timedelta(microseconds=skew_us))
    run = candidate_run("claims/", now, attempt, latest)
    assert run.started_at > latest
    assert candidate_run("claims/", now, attempt + 1, latest).started_at > run.started_at
