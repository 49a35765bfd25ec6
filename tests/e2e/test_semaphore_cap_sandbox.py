"""The cap holds whatever `active_count` says, in the sandbox (issue: a count hand-set to -3 at
max 2 let five executions run at once). Admission is bounded by the holders as well as by the
count, so a count that says five slots are free admits only the two the holders leave.

Sampled, not timed: a background thread reads the RUNNING executions and the semaphore every
~50 ms while more jobs than the max run.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.config import SEMAPHORE_KEY
from pipeline.status import JobStatus
from tests.e2e.test_pipeline_e2e import Sampler, all_runs, clean_text, pii_text, upload, wait_idle

pytestmark = pytest.mark.slow

MAX = 2
JOBS = 8


def hand_set_count(sandbox: Any, value: int) -> None:
    """What an operator does in the console: `active_count` set, the holders left as they are."""
    sandbox.client("dynamodb").update_item(
        TableName=sandbox.outputs["CoordinationTableName"],
        Key={"doc_key": {"S": SEMAPHORE_KEY}},
        UpdateExpression="SET active_count = :v",
        ExpressionAttributeValues={":v": {"N": str(value)}},
    )


def test_a_count_hand_set_to_minus_3_never_lets_more_than_the_max_run(make_sandbox: Any) -> None:
    sandbox = make_sandbox(MaxConcurrentWorkflows=str(MAX))
    big = (pii_text(1) + clean_text(2)) * 1200  # ~200 KB: long enough for executions to overlap
    files = {f"single-{n}.txt": (big if n % 2 == 0 else pii_text(n)) for n in range(JOBS)}
    hand_set_count(sandbox, -3)  # by the count alone, five slots are free

    with Sampler(sandbox).sampling() as sampler:
        upload(sandbox, files)
        wait_idle(sandbox)

    assert max(sampler.running) <= MAX, sampler.running
    assert max(sampler.holders) <= MAX, sampler.holders
    assert max(sampler.running) == MAX, "the jobs never overlapped: the cap was not exercised"
    assert min(sampler.counts) < 0, "the count was never below its holders: nothing was tested"
    runs = all_runs(sandbox)
    assert sorted(run.job_id for run in runs) == sorted(files)
    assert {run.status for run in runs} == {JobStatus.COMPLETE}, "a count below its holders stalls nothing"
