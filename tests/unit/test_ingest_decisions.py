"""Ingest's pure decisions: ordering S3 object versions, and what one delivery of an event does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.batch import group_by_job
from pipeline.ingest import Delivery, candidate_run, judge_delivery, pick_key
from pipeline.jobs import RunRef, format_timestamp, is_folder_marker
from pipeline.s3events import (
    ObjectCreated,
    ObjectVersion,
    VersionOrder,
    compare_sequencers,
    compare_versions,
    object_created,
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
    created = object_created(event)
    assert created is not None
    assert (created.key, created.version) == ("a b.txt", ObjectVersion("0055AED6DCD90281E5", "v1"))


def test_version_id_null_of_an_unversioned_bucket_is_no_version() -> None:
    event = {
        "detail-type": "Object Created",
        "detail": {"bucket": {"name": "in"}, "object": {"key": "a.txt", "sequencer": "0A", "version-id": "null"}},
    }
    created = object_created(event)
    assert created is not None and created.version == ObjectVersion("0A", "")


def test_an_event_about_no_created_object_names_none() -> None:
    assert object_created({"detail-type": "Object Deleted", "detail": {"bucket": {"name": "in"}}}) is None


def test_an_event_without_version_fields_has_an_empty_version() -> None:
    event = {
        "detail-type": "Object Created",
        "detail": {"bucket": {"name": "in"}, "object": {"key": "a.txt"}},
    }
    created = object_created(event)
    assert created is not None and created.version == ObjectVersion()


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


# ------------------------------------------------------------------ keys and folder markers


@pytest.mark.parametrize("key", ["newfolder/", "claims/2026/", "with space/"])
def test_a_key_ending_in_a_slash_is_a_folder_marker(key: str) -> None:
    assert is_folder_marker(key)


@pytest.mark.parametrize("key", ["newfolder", "claims/a.txt", "a/b", ""])
def test_a_key_not_ending_in_a_slash_is_a_file(key: str) -> None:
    assert not is_folder_marker(key)


def test_batch_groups_no_folder_marker_into_a_job() -> None:
    assert group_by_job(["claims/", "claims/a.txt", "empty/"], 1) == {"claims/": ["claims/a.txt"]}


def _eventbridge(key: str, etag: str = "") -> dict:
    obj = {"key": key, "size": 3} | ({"etag": etag} if etag else {})
    return {"detail-type": "Object Created", "detail": {"bucket": {"name": "in"}, "object": obj}}


@pytest.mark.parametrize(
    ("delivered", "forms"),
    [
        ("plain.txt", ("plain.txt",)),
        ("a+b.txt", ("a b.txt", "a+b.txt")),
        ("100%25+sure.txt", ("100% sure.txt", "100%25+sure.txt")),
        ("unicod%C3%A9%2F%E3%83%95.txt", ("unicodé/フ.txt", "unicod%C3%A9%2F%E3%83%95.txt")),
        ("unicodé/フ.txt", ("unicodé/フ.txt",)),
    ],
)
def test_the_decoded_key_comes_first_and_the_delivered_one_second(delivered: str, forms: tuple[str, ...]) -> None:
    created = _created(delivered, '"e1"')
    assert (created.key, created.delivered_key, created.etag) == (forms[0], delivered, "e1")
    assert created.key_forms() == forms


def _created(delivered: str, etag: str = "") -> ObjectCreated:
    created = object_created(_eventbridge(delivered, etag))
    assert created is not None
    return created


def test_pick_key_takes_the_decoded_form_when_it_exists() -> None:
    assert pick_key(_created("a+b.txt"), {"a b.txt": '"x"', "a+b.txt": '"y"'}.get) == "a b.txt"


def test_pick_key_takes_the_form_as_delivered_when_the_decoded_one_is_missing() -> None:
    assert pick_key(_created("a+b.txt"), {"a+b.txt": '"y"'}.get) == "a+b.txt"
    assert pick_key(_created("100%.txt"), {"100%.txt": '"y"'}.get) == "100%.txt"


def test_pick_key_prefers_the_form_whose_etag_is_the_events_when_both_exist() -> None:
    listed = {"a b.txt": '"x"', "a+b.txt": '"y"'}
    assert pick_key(_created("a+b.txt", "y"), listed.get) == "a+b.txt"
    assert pick_key(_created("a+b.txt", "x"), listed.get) == "a b.txt"
    # Overwritten since the event (no ETag matches): the decoded form, as when only it exists.
    assert pick_key(_created("a+b.txt", "z"), listed.get) == "a b.txt"
    assert pick_key(_created("a+b.txt", "z"), {"a+b.txt": '"y"'}.get) == "a+b.txt"


def test_pick_key_falls_back_to_the_decoded_form_when_no_form_exists() -> None:
    assert pick_key(_created("a+b.txt"), {}.get) == "a b.txt"


def test_pick_key_looks_up_the_delivered_form_only_when_the_decoded_one_does_not_settle_it() -> None:
    looked: list[str] = []

    def etag_of(key: str) -> str | None:
        looked.append(key)
        return '"x"'

    pick_key(_created("a+b.txt"), etag_of)
    assert looked == ["a b.txt"]
