"""The status lifecycle: forward only, FAILED from any active status, terminal is final."""

from __future__ import annotations

import pytest

from pipeline.status import ACTIVE_STATUSES, LIFECYCLE, JobStatus, allowed_predecessors, can_transition


def test_every_status_is_either_active_or_terminal_and_the_lifecycle_covers_them_all() -> None:
    assert set(LIFECYCLE) | {JobStatus.FAILED} == set(JobStatus)
    assert {s for s in JobStatus if s.is_active} == set(ACTIVE_STATUSES)
    assert {s for s in JobStatus if s.is_terminal} == {JobStatus.COMPLETE, JobStatus.FAILED}


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (JobStatus.QUEUED, JobStatus.IN_PROGRESS),
        (JobStatus.IN_PROGRESS, JobStatus.DETECTING),
        (JobStatus.DETECT_COMPLETE, JobStatus.REDACTING),  # blackout skips the synthetic steps
        (JobStatus.REDACT_COMPLETE, JobStatus.COMPLETE),
        (JobStatus.DETECTING, JobStatus.DETECTING),  # a retried task rewrites its own status
        (JobStatus.QUEUED, JobStatus.FAILED),
        (JobStatus.REDACTING, JobStatus.FAILED),
    ],
)
def test_forward_moves_are_legal(current: JobStatus, target: JobStatus) -> None:
    assert can_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (JobStatus.REDACTING, JobStatus.DETECTING),  # a late write from an earlier step
        (JobStatus.DETECTING, JobStatus.IN_PROGRESS),  # the router writing after the workflow began
        (JobStatus.COMPLETE, JobStatus.FAILED),
        (JobStatus.FAILED, JobStatus.FAILED),
        (JobStatus.FAILED, JobStatus.QUEUED),
        (JobStatus.COMPLETE, JobStatus.COMPLETE),
    ],
)
def test_backward_moves_and_writes_to_terminal_records_are_refused(current: JobStatus, target: JobStatus) -> None:
    assert not can_transition(current, target)


def test_only_queued_creates_a_record() -> None:
    assert can_transition(None, JobStatus.QUEUED)
    assert not any(can_transition(None, s) for s in JobStatus if s is not JobStatus.QUEUED)


def test_allowed_predecessors_of_complete_are_every_active_status() -> None:
    assert allowed_predecessors(JobStatus.COMPLETE) == ACTIVE_STATUSES
    assert allowed_predecessors(JobStatus.FAILED) == ACTIVE_STATUSES
    assert allowed_predecessors(JobStatus.DETECTING) == (JobStatus.QUEUED, JobStatus.IN_PROGRESS, JobStatus.DETECTING)
