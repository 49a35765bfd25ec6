"""`pipeops status` and `pipeops jobs` on moto read what they show, never the table.

The stack is template.yaml deployed into in-process moto; the tracking table is seeded with a mix of
active and ended runs over 90 days. Every DynamoDB call the views make is seen through botocore's
event hooks: no Scan, and the items read (the responses' ScannedCount) are counted, not timed.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from moto import mock_aws

from bench.status_scale import record_items, seed
from monitors import snapshot as numbers
from pipeline.jobs import format_timestamp
from pipeline.status import JobStatus
from pipeops import views
from sandbox.deploy import deploy
from stack.resources import Connection, StackResources

RECORDS = 900
NOW = datetime.now(UTC)


@dataclass
class Reads:
    """DynamoDB operations called and items read, through the client's event hooks."""

    operations: Counter[str] = field(default_factory=Counter)
    items: int = 0

    def after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        self.operations[model.name] += 1
        self.items += int(parsed.get("ScannedCount", 0))


@dataclass
class Stack:
    connection: Connection
    resources: StackResources
    runs: list[dict[str, str]]  # the seeded runs: job_id, status, updated_at

    def watched(self) -> tuple[Any, Reads]:
        """A client factory like the CLI's whose DynamoDB client reports to a fresh `Reads`."""
        reads = Reads()
        dynamodb = self.connection.client("dynamodb")
        dynamodb.meta.events.register("after-call.dynamodb", reads.after)

        def client(service: str) -> Any:
            return dynamodb if service == "dynamodb" else self.connection.client(service)

        return client, reads


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            monkeypatch.setenv(name, "testing")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
            deploy()
            connection = Connection.resolve("pipeops", None, "us-east-1")
            resources = connection.resources()
            seed(connection.client("dynamodb"), resources.TrackingTableName, 0, RECORDS, NOW, lambda _: None)
            runs = [
                {"job_id": i["job_id"]["S"], "status": i["status"]["S"], "updated_at": i["updated_at"]["S"]}
                for i in record_items(0, RECORDS, NOW)
                if "status" in i
            ]
            yield Stack(connection, resources, runs)


def ended_within(stack: Stack, status: JobStatus, window: timedelta) -> int:
    since = format_timestamp(NOW - window)
    return sum(1 for r in stack.runs if r["status"] == status.value and r["updated_at"] > since)


def test_status_counts_every_active_run_and_the_ended_runs_of_each_window(stack: Stack) -> None:
    client, reads = stack.watched()
    view = views.status(stack.resources, client, NOW)
    active = Counter(r["status"] for r in stack.runs if JobStatus(r["status"]).is_active)
    assert dict(view.snapshot.active_runs) == dict(active) and active
    day, hour = timedelta(hours=24), timedelta(hours=1)
    short, wide = view.snapshot.recent_outcomes
    assert (short.window, wide.window) == ("1h", "24h") and short.lower_bounds == wide.lower_bounds == ()
    assert wide.counts == {s.value: ended_within(stack, s, day) for s in (JobStatus.COMPLETE, JobStatus.FAILED)}
    assert short.counts == {s.value: ended_within(stack, s, hour) for s in (JobStatus.COMPLETE, JobStatus.FAILED)}
    assert view.to_dict()["jobs_by_status"] == {
        status: count for status, count in (dict(active) | wide.counts).items() if count
    }
    assert "Scan" not in reads.operations
    # What it shows, and no more: the active runs, the ended runs of the last 24 h, and at most one
    # item of each ended status for the reconciler's stall check.
    ended_today = wide.counts["COMPLETE"] + wide.counts["FAILED"]
    assert reads.items <= sum(active.values()) + ended_today + 2 < len(stack.runs) // 4


def test_status_stops_reading_ended_runs_at_the_cap_and_says_the_count_is_a_lower_bound(stack: Stack) -> None:
    client, reads = stack.watched()
    snapshot = numbers.observe(stack.resources, client, {}, NOW, cap=2)
    _, wide = snapshot.recent_outcomes
    assert "COMPLETE" in wide.lower_bounds and wide.counts["COMPLETE"] == 2
    assert ended_within(stack, JobStatus.COMPLETE, timedelta(hours=24)) > 2
    # At most the cap per ended status: the active runs are counted from the reconciler's read.
    assert "Scan" not in reads.operations and reads.items <= 2 + 2


def newest(stack: Stack, limit: int, status: JobStatus | None = None) -> list[str]:
    runs = [r for r in stack.runs if status is None or r["status"] == status.value]
    return [r["updated_at"] for r in sorted(runs, key=lambda r: r["updated_at"], reverse=True)[:limit]]


def test_jobs_with_a_status_reads_only_the_runs_it_lists(stack: Stack) -> None:
    client, reads = stack.watched()
    listed = views.jobs(stack.resources, client, JobStatus.COMPLETE, 7)
    assert [r["updated_at"] for r in listed] == newest(stack, 7, JobStatus.COMPLETE)
    assert reads.operations == Counter({"Query": 1}) and reads.items == 7


def test_jobs_of_every_status_asks_each_status_for_the_limit_and_keeps_the_newest(stack: Stack) -> None:
    client, reads = stack.watched()
    listed = views.jobs(stack.resources, client, None, 7)
    assert [r["updated_at"] for r in listed] == newest(stack, 7)
    assert reads.operations == Counter({"Query": len(JobStatus)}) and reads.items <= 7 * len(JobStatus)
