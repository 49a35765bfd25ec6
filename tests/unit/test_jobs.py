"""Job identity: folder grouping, execution names, message bodies."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.jobs import (
    JobMessage,
    MalformedMessageError,
    execution_arn,
    execution_name,
    execution_name_from_arn,
    format_timestamp,
    job_id_for_key,
    parse_timestamp,
    split_supported,
    utc_now,
)


@pytest.mark.parametrize(
    ("key", "depth", "job_id"),
    [
        ("report.txt", 1, "report.txt"),
        ("claims/a.txt", 1, "claims/"),
        ("claims/2024/a.txt", 1, "claims/"),
        ("claims/2024/a.txt", 2, "claims/2024/"),
        ("claims/a.txt", 2, "claims/"),
        ("claims/a.txt", 0, "claims/a.txt"),
    ],
)
def test_a_file_belongs_to_its_folder_cut_at_the_configured_depth(key: str, depth: int, job_id: str) -> None:
    assert job_id_for_key(key, depth) == job_id


def test_unsupported_extensions_are_split_off_sorted_and_deduplicated() -> None:
    supported, unsupported = split_supported(["b.TXT", "a.pdf", "c.csv", "b.TXT", "d"])
    assert supported == ["b.TXT", "c.csv"]
    assert unsupported == ["a.pdf", "d"]


@given(job_id=st.text(min_size=1, max_size=300), micros=st.integers(0, 10**6 - 1))
def test_execution_names_are_valid_deterministic_and_distinct_per_run(job_id: str, micros: int) -> None:
    started_at = f"2026-11-29T20:20:16.{micros:06d}Z"
    name = execution_name(job_id, started_at)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,80}", name)
    assert name == execution_name(job_id, started_at)
    other = f"2026-11-29T20:20:17.{micros:06d}Z"
    assert name != execution_name(job_id, other)


def test_execution_arn_round_trips_to_its_name() -> None:
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:pipeline"
    arn = execution_arn(machine, "job-1")
    assert arn == "arn:aws:states:us-east-1:123456789012:execution:pipeline:job-1"
    assert execution_name_from_arn(arn) == "job-1"


def test_timestamps_sort_in_time_order_and_parse_back() -> None:
    first = utc_now()
    text = format_timestamp(first)
    assert parse_timestamp(text) == first
    assert parse_timestamp("2026-11-29T20:20:16.123Z").microsecond == 123000


def test_message_bodies_round_trip_unicode_keys() -> None:
    message = JobMessage("dossiers/é 1/", "2026-11-29T20:20:16.000001Z", "in")
    assert JobMessage.from_json(message.to_json()) == message


@pytest.mark.parametrize("body", ["not json", "[]", '{"job_id": "x"}', '{"job_id": 1, "started_at": "t", "bucket": "b"}'])
def test_malformed_message_bodies_are_refused_with_what_is_missing(body: str) -> None:
    with pytest.raises(MalformedMessageError):
        JobMessage.from_json(body)
