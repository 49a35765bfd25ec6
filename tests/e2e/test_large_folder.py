"""A folder of 2,000 files, in the sandbox with AWS's size limits enforced (sandbox.seams.limits).

Realtime mode: ingest closes the folder's pending run at MaxFilesPerRun files, so the folder
becomes runs of at most that many; each run's execution carries its keys, counts and pointers,
never per-file results, so none fails for size (`States.DataLimitExceeded`, a tracking item over
400 KB). Every file reaches a terminal outcome in exactly one run, and every stored timestamp
has one format.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pipeline.config import DEFAULT_MAX_FILES_PER_RUN
from pipeline.handlers import _wiring
from pipeline.status import JobStatus
from tests.e2e.test_pipeline_e2e import (
    all_runs,
    assert_dead_letter_queues_empty,
    assert_no_active_runs,
    assert_semaphore_settled,
    files_of,
    read_output,
)

pytestmark = [pytest.mark.slow, pytest.mark.large]

FILES = 2_000
FOLDER = "bulk-intake/"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
# The sandbox shortens the workflow's TimeoutSeconds by its time scale (25 min -> 75 s) but not
# the time handlers take: ten 100-file runs sharing two cores would each need longer than that.
# Throughput is CPU-bound either way; three at a time keeps every run well inside its timeout.
PARAMETERS = {"MaxConcurrentWorkflows": "3"}


@pytest.fixture
def limited_sandbox(aws_env: None) -> Iterator[Any]:
    """A sandbox with the limits on: installed before it starts (under seams), removed after."""
    from sandbox.sandbox import Sandbox
    from sandbox.seams import limits

    limits.install()
    sandbox = None
    try:
        sandbox = Sandbox(parameters=PARAMETERS).start()
        _wiring.reset()
        yield sandbox
    finally:
        if sandbox is not None:
            sandbox.stop()
        _wiring.reset()
        limits.uninstall()


def body(index: int) -> str:
    if index % 10 == 0:
        return f"Ticket {index}: write to person{index}@example.com.\n"
    if index % 250 == 1:
        return ""  # empty: recorded as empty, not failed
    return f"Note {index}: nothing personal.\n"


def test_a_folder_of_2000_files_completes_in_runs_of_at_most_the_max(limited_sandbox: Any) -> None:
    sandbox = limited_sandbox
    s3 = sandbox.client("s3")
    bucket = sandbox.outputs["InputBucketName"]
    files = {f"{FOLDER}doc-{index:05d}.txt": body(index) for index in range(FILES)}
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda item: s3.put_object(Bucket=bucket, Key=item[0], Body=item[1].encode()), files.items()))
    uploaded = time.monotonic()
    assert sandbox.wait_until_idle(timeout=1_500), "the sandbox did not become idle"
    finished = time.monotonic()
    print(f"\n{FILES} files: uploaded in {uploaded - started:.1f} s, all runs done {finished - started:.1f} s after the first upload")

    runs = all_runs(sandbox)
    owner = files_of(runs)  # a file in two runs fails here
    assert set(owner) == set(files), "every uploaded file belongs to exactly one run"
    assert {run.job_id for run in runs} == {FOLDER}
    assert max(len(run.files) for run in runs) <= DEFAULT_MAX_FILES_PER_RUN
    assert len(runs) >= FILES // DEFAULT_MAX_FILES_PER_RUN
    assert {run.status for run in runs} == {JobStatus.COMPLETE}, {r.started_at: (r.status, r.error) for r in runs}
    print(f"{len(runs)} runs, {min(len(r.files) for r in runs)}..{max(len(r.files) for r in runs)} files each")

    empty = sorted(k for run in runs for k in run.failed_files["empty"])
    assert empty == sorted(k for k, text in files.items() if not text)
    assert [k for run in runs for kind in ("detect", "redact", "unsupported") for k in run.failed_files[kind]] == []
    assert sum(run.redaction_results["files_redacted"] for run in runs) == FILES
    assert sum(run.redaction_results["entities_by_type"].get("EMAIL", 0) for run in runs) == FILES // 10

    sfn = sandbox.client("stepfunctions")
    pages = sfn.get_paginator("list_executions").paginate(stateMachineArn=sandbox.outputs["StateMachineArn"])
    executions = [e for page in pages for e in page["executions"]]
    assert len(executions) == len(runs)
    assert {e["status"] for e in executions} == {"SUCCEEDED"}, "no run failed (for size or anything else)"

    for run in runs:  # one timestamp format everywhere: ours, never Step Functions' EnteredTime
        for stamp in (run.started_at, run.updated_at, run.queued_at):
            assert TIMESTAMP.match(stamp), stamp
    for key in list(files)[:: FILES // 20]:
        assert read_output(sandbox, key) is not None, key
    assert_no_active_runs(sandbox)
    assert_semaphore_settled(sandbox)
    assert_dead_letter_queues_empty(sandbox)
