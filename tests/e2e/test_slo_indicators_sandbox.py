"""The on-time objective's indicators on the sandbox, from the real handlers to CloudWatch: a file
done normally counts FilesOnTime; a run stalled past FileDeadlineMinutes counts FilesOverdue once
however many reconciler passes see it, and nothing more when it ends late (FilesMissed); a file removed from its
run by hand is reported by FilesLost until it is uploaded again.

Timestamps are wall-clock in the sandbox (only waits are scaled), so the deadline of 1 minute is
one real minute. Rather than wait it out, the test moves the two clocks the reconciler reads back
by two minutes, as if the stalled files had been uploaded that long ago: their runs' `queued_at`
(overdue runs) and their claims' `claimed_at` (lost files).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.deadline import is_overdue
from pipeline.jobs import format_timestamp, parse_timestamp
from pipeline.queue import JobQueue
from pipeline.status import DeadlineCount, JobStatus
from pipeline.telemetry.catalog import Metric
from pipeops.cli import app
from tests.conftest import datapoints, held_off, put, run_of, runs, wait_for

pytestmark = pytest.mark.slow

DEADLINE_MINUTES = 1


def reconciler_pass(sandbox: Any) -> dict[str, int]:
    """One scheduled-style (applying) pass of the reconciler Lambda; its indicators."""
    invoked = sandbox.client("lambda").invoke(FunctionName=sandbox.outputs["ReconcilerFunctionName"], Payload=b"{}")
    assert "FunctionError" not in invoked
    indicators: dict[str, int] = json.loads(invoked["Payload"].read())["indicators"]
    return indicators


def files_with(sandbox: Any, key: str) -> tuple[str, ...]:
    """The files of the newest run holding `key` (none yet: empty)."""
    run = run_of(sandbox, key)
    return run.files if run is not None else ()


def remove_from_its_run(sandbox: Any, key: str) -> None:
    """What an operator's hand edit does: the file leaves its run's record; its claim stays."""
    run = run_of(sandbox, key)
    assert run is not None
    sandbox.client("dynamodb").update_item(
        TableName=sandbox.outputs["TrackingTableName"],
        Key={"job_id": {"S": run.job_id}, "started_at": {"S": run.started_at}},
        UpdateExpression="DELETE files :k",
        ExpressionAttributeValues={":k": {"SS": [key]}},
    )


def uploaded_earlier(sandbox: Any, stalled: list[Any], by: timedelta) -> None:
    """The stalled runs and every unsettled claim as if written `by` earlier: what waiting that long
    would have left in the tables. Conditional on the time read, as any write that could race."""
    dynamodb = sandbox.client("dynamodb")

    def moved(stamp: str) -> str:
        return format_timestamp(parse_timestamp(stamp) - by)

    for run in stalled:
        dynamodb.update_item(
            TableName=sandbox.outputs["TrackingTableName"],
            Key={"job_id": {"S": run.job_id}, "started_at": {"S": run.started_at}},
            UpdateExpression="SET queued_at = :moved",
            ConditionExpression="queued_at = :read",
            ExpressionAttributeValues={":moved": {"S": moved(run.queued_at)}, ":read": {"S": run.queued_at}},
        )
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=sandbox.outputs["CoordinationTableName"], FilterExpression="attribute_exists(unsettled)"
    )
    for claim in (item for page in pages for item in page["Items"]):
        dynamodb.update_item(
            TableName=sandbox.outputs["CoordinationTableName"],
            Key={"doc_key": claim["doc_key"]},
            UpdateExpression="SET claimed_at = :moved",
            ConditionExpression="claimed_at = :read",
            ExpressionAttributeValues={":moved": {"S": moved(claim["claimed_at"]["S"])}, ":read": claim["claimed_at"]},
        )


def test_on_time_overdue_once_and_lost_until_uploaded_again(make_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A long reconciler grace: its passes count, and never announce the stalled runs again.
    sandbox = held_off(make_sandbox(FileDeadlineMinutes=str(DEADLINE_MINUTES), ReconcileGraceSeconds="3600"))
    put(sandbox, "ontime.txt")
    wait_for(lambda: any(run.status is JobStatus.COMPLETE for run in runs(sandbox)))
    assert sandbox.wait_until_idle(120)
    assert sum(datapoints(sandbox, Metric.FILES_ON_TIME, "Sum")) == 1

    # Two runs stall: their messages are lost (ingest's send dropped), so nothing runs them.
    lost_messages: list[Any] = []
    real_send = JobQueue.send
    monkeypatch.setattr(JobQueue, "send", lambda self, message, delay=0: lost_messages.append(message) or "lost")
    for key in ("stalled.txt", "lost/a.txt", "lost/b.txt"):
        put(sandbox, key)
    wait_for(lambda: run_of(sandbox, "stalled.txt") is not None and len(files_with(sandbox, "lost/a.txt")) == 2)
    assert sandbox.wait_until_idle(60)
    monkeypatch.setattr(JobQueue, "send", real_send)
    remove_from_its_run(sandbox, "lost/a.txt")
    stalled = [run for run in runs(sandbox) if run.status is JobStatus.QUEUED]
    assert len(stalled) == 2
    uploaded_earlier(sandbox, stalled, timedelta(minutes=DEADLINE_MINUTES + 1))
    assert all(is_overdue(run.queued_at, datetime.now(UTC), timedelta(minutes=DEADLINE_MINUTES)) for run in runs(sandbox) if run.status is JobStatus.QUEUED)

    passes = [reconciler_pass(sandbox) for _ in range(3)]
    assert [p["overdue_files"] for p in passes] == [2, 0, 0]  # stalled.txt and lost/b.txt, once
    assert [p["lost_files"] for p in passes] == [1, 1, 1]  # lost/a.txt, on every pass
    assert {run.deadline_counted for run in runs(sandbox) if run.status is JobStatus.QUEUED} == {DeadlineCount.OVERDUE}

    # Uploaded again, the file is back in a run (its job's pending one): nothing is lost.
    put(sandbox, "lost/a.txt")
    wait_for(lambda: "lost/a.txt" in files_with(sandbox, "lost/b.txt"))
    assert reconciler_pass(sandbox)["lost_files"] == 0

    # The stalled runs are announced again and end, late: counted overdue already, nothing more.
    # Again only once no message for them can be on its way (their announce deadline, seconds away).
    unheard = max(parse_timestamp(run.announce_deadline) for run in runs(sandbox) if run.status is JobStatus.QUEUED)
    wait_for(lambda: datetime.now(UTC) > unheard, timeout=120)
    repaired = CliRunner().invoke(app, ["reconcile", "--apply", "--grace-seconds", "0", "--json"])
    assert repaired.exit_code in (0, 1), repaired.output
    wait_for(lambda: all(run.status is JobStatus.COMPLETE for run in runs(sandbox)), timeout=180)
    assert sandbox.wait_until_idle(120)

    assert sum(datapoints(sandbox, Metric.FILES_OVERDUE, "Sum")) == 2
    assert sum(datapoints(sandbox, Metric.FILES_ON_TIME, "Sum")) == 1
    assert sum(datapoints(sandbox, Metric.FILES_MISSED, "Sum")) == 0
    assert max(datapoints(sandbox, Metric.FILES_LOST, "Maximum")) == 1
    assert min(datapoints(sandbox, Metric.FILES_LOST, "Minimum")) == 0
