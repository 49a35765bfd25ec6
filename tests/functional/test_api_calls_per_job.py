"""AWS API calls per job, counted on the sandbox: a count, not a time, so it cannot creep back.

Measured on realistic documents (`bench.api_calls.document`): every file carries all six entity
types, so its detection summary is as large as a real file's and must still travel in the
workflow's state; a summary that went through S3 would add a write and a read per file.

The calls are counted on the clients the handlers use (`bench.api_calls.HandlerCallCounter`), by the
function whose invocation made them: the sandbox's own calls (IAM enforcement, pollers, the state
machine's interpreter, its DynamoDB status write) are not the handlers' and are not counted. Every
handler's calls are asserted exactly, per function and operation, and their total against the goal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

import pytest

from bench.api_calls import (
    COORDINATION,
    FOLDER_GOAL,
    SANDBOX_PARAMETERS,
    SINGLE_FILE_GOAL,
    SIX_TYPES,
    HandlerCallCounter,
    JobCalls,
    breakdown,
    counting,
    measure_capacity_wait,
    run_job,
    without_reconciler,
)
from pipeline.handlers import _wiring

# Ingest, per file: one read (the object's claim and its job's head, one BatchGetItem) and one
# write (the file into a run with its claim, one transaction); per run, its one message.
# Router, per run: one read (run and semaphore), the admission (slot and freeze, one transaction),
# the pending pointer cleared, StartExecution, the ARN recorded. Tracker, per run: the release.
# Detect, per file (blackout): read the source, write its redacted copy (the summary, six types
# and all, goes back into the workflow's state; nothing else is stored). Finalize, per run: the
# verdict with the account, which reads nothing from S3.
SINGLE_FILE = {
    "IngestFunction": {"dynamodb.BatchGetItem": 1, "dynamodb.TransactWriteItems": 1, "sqs.SendMessage": 1},
    "RouterFunction": {
        "dynamodb.BatchGetItem": 1,
        "dynamodb.TransactWriteItems": 1,
        "dynamodb.UpdateItem": 2,
        "stepfunctions.StartExecution": 1,
    },
    "WorkflowTrackerFunction": {"dynamodb.UpdateItem": 1},
    "DetectFunction": {"s3.GetObject": 1, "s3.PutObject": 1},
    "FinalizeFunction": {"dynamodb.UpdateItem": 1},
}
FOLDER = {
    **SINGLE_FILE,
    "IngestFunction": {"dynamodb.BatchGetItem": 10, "dynamodb.TransactWriteItems": 10, "sqs.SendMessage": 1},
    "DetectFunction": {"s3.GetObject": 10, "s3.PutObject": 10},
}


@pytest.fixture
def counted_sandbox(make_sandbox) -> Iterator[tuple[object, HandlerCallCounter]]:
    sandbox = without_reconciler(make_sandbox(**SANDBOX_PARAMETERS))
    with counting() as counter:
        _wiring.reset()  # collaborators built from here on use counted clients
        run_job(sandbox, counter, ["warmup.txt"])  # cold starts and first builds out of the way
        yield sandbox, counter


def calls_by_function(job: JobCalls) -> dict[str, dict[str, int]]:
    calls: dict[str, Counter[str]] = {}
    for (function, service, operation), n in job.counts.items():
        calls.setdefault(job.names.get(function, function), Counter())[f"{service}.{operation}"] += n
    return {function: dict(ops) for function, ops in calls.items()}


def assert_calls(job: JobCalls, expected: Mapping[str, Mapping[str, int]], goal: int, files: int) -> None:
    message = f"handler calls by function and operation:\n{breakdown(job.counts, job.names)}"
    assert job.executions == {"SUCCEEDED": 1}, message
    assert job.entities == {entity_type: files for entity_type in sorted(SIX_TYPES)}, job.entities
    assert calls_by_function(job) == expected, message
    assert job.total == sum(sum(ops.values()) for ops in expected.values()) <= goal, message
    assert job.coordination == sum(sum(expected[f].values()) for f in COORDINATION if f in expected), message


def test_a_single_file_job_costs_twelve_handler_calls(counted_sandbox) -> None:
    sandbox, counter = counted_sandbox
    assert_calls(run_job(sandbox, counter, ["notes.txt"]), SINGLE_FILE, SINGLE_FILE_GOAL, files=1)


def test_a_folder_of_ten_files_costs_four_calls_a_file_and_eight_a_run(counted_sandbox) -> None:
    """A folder's files are ingested at once, as their S3 events arrive: a file whose transaction
    lost the run to another file's (refused: TransactionCanceled) reads and writes once more, so
    each refusal explains exactly one extra pair, and nothing else may add a call."""
    sandbox, counter = counted_sandbox
    keys = [f"tenants/acme/batch-1/file-{i:02d}.txt" for i in range(10)]
    job = run_job(sandbox, counter, keys)
    lost_races = job.refused.get(("IngestFunction", "dynamodb.TransactWriteItems"), 0)
    assert set(job.refused) <= {("IngestFunction", "dynamodb.TransactWriteItems")}, job.refused
    ingest = {"dynamodb.BatchGetItem": 10 + lost_races, "dynamodb.TransactWriteItems": 10 + lost_races, "sqs.SendMessage": 1}
    assert_calls(job, {**FOLDER, "IngestFunction": ingest}, FOLDER_GOAL, files=10)


def test_a_capacity_wait_costs_one_call_beyond_its_resend(counted_sandbox) -> None:
    """The first wait reads run and semaphore together (ingest announced the run a lease ahead, so
    nothing is written); each later wait is one conditional write that also renews the lease."""
    sandbox, counter = counted_sandbox
    wait = measure_capacity_wait(sandbox, counter, "waiting.txt", waits=3)
    assert wait.calls == {"dynamodb.BatchGetItem": 1, "dynamodb.TransactWriteItems": 2, "sqs.SendMessage": 3}
    assert wait.beyond_resend == 1
