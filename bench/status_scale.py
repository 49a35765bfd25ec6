"""`pipeops status` and `pipeops jobs` against a large tracking table.

Deploys template.yaml into in-process moto (no handlers running), seeds tracking records with
BatchWriteItem (a realistic mix: 40 active runs of the last minute, as many as a pipeline at its
concurrency with a small backlog holds whatever its history, the rest COMPLETE or FAILED over the
90-day retention, about three runs per job plus each job's head item), then times
the same view functions the CLI calls (`pipeops.views.status` / `.jobs`) at 10,000 and 100,000
records: the median of several repetitions.

Besides the time, every DynamoDB call the views make is counted through a botocore event hook:
the items read (the responses' ScannedCount) and the time spent inside those calls.

moto with the sandbox's indexed-query seam (`sandbox.seams.dynamodb_query`, installed by the sandbox with
its other moto seams): raw moto answers an indexed Query by walking every item of the table (and
re-walking it for each page), so its time grows with the table even for a one-item read; with the
seam moto's own query logic is handed only the queried partition, as AWS reads it. The goal is
the items read, a count that carries over to AWS: within the command's budget (what it shows)
whatever the table's size. The wall time with the seam is reported next to it, not judged: it is
moto's speed as much as ours. Raw moto's time (the seam's `moto_walk()`, one repetition:
it takes tens of seconds at 100,000 records) is stated next to it; so is the first call after the
writes, which rebuilds the seam's index cache (one walk of the table, once per write burst).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.goal_row import GoalRow
from monitors.snapshot import RECENT_CAP
from pipeline.jobs import RunRef, format_timestamp
from pipeline.status import ACTIVE_STATUSES, JobStatus
from pipeline.stores._dynamodb import to_attribute
from pipeline.stores.run_index import STATUS_INDEX
from pipeline.stores.tracking import HEAD_SORT_KEY, RETENTION, queued_run_item
from sandbox.seams import dynamodb_query

SIZES = (10_000, 100_000)
REPEATS = 5
JOBS_LIMIT = 50  # `pipeops jobs`' default
RUNS_PER_JOB = 3
ACTIVE_RUNS = 40  # in flight at any moment: bounded by the concurrency and the backlog, not the history
FAILED_SHARE = 0.08
_BATCH = 25  # BatchWriteItem's maximum


def record_items(start: int, count: int, now: datetime, seed: int = 11) -> Iterator[dict[str, Any]]:
    """Run items `start` .. `start + count - 1` (and a head item for each job they start), shaped by
    the writer's own item builder: the first ACTIVE_RUNS are active, updated within the last minute
    (a healthy pipeline); the rest ended, spread over the retention period."""
    rng = random.Random(seed * 1_000_003 + start)
    for index in range(start, start + count):
        job_id = f"bench/batch-{index // RUNS_PER_JOB:06d}/"
        if index < ACTIVE_RUNS:
            status = rng.choice(ACTIVE_STATUSES)
            age = timedelta(seconds=rng.uniform(5, 60))
        else:
            status = JobStatus.FAILED if rng.random() < FAILED_SHARE else JobStatus.COMPLETE
            age = timedelta(seconds=rng.uniform(60, RETENTION.total_seconds() - 86_400))
        took = rng.uniform(1, 30) if status.is_active else rng.uniform(5, 300)  # from start to last update
        started = now - age - timedelta(seconds=took, microseconds=index % 1_000_000)
        run = RunRef(job_id, format_timestamp(started))
        files = [f"{job_id}doc-{n:03d}.txt" for n in range(rng.randint(1, 6))]
        item = queued_run_item(run, files, "bench-input", started)
        updated = format_timestamp(now - age)
        item["status"] = {"S": status.value}
        item["updated_at"] = {"S": updated}
        if status.is_active:
            item["active_status"] = {"S": status.value}
        else:
            del item["active_status"]
            item["execution_arn"] = to_attribute(f"arn:aws:states:us-east-1:123456789012:execution:pipeline:{run.execution_name}")
        if status is JobStatus.COMPLETE:
            item["redaction_results"] = to_attribute({"entities_by_type": {"EMAIL": rng.randint(0, 9), "NAME": rng.randint(0, 9)}})
        if status is JobStatus.FAILED:
            item["error"] = to_attribute("States.TaskFailed")
        yield item
        if index % RUNS_PER_JOB == 0:
            yield {
                "job_id": {"S": job_id},
                "started_at": {"S": HEAD_SORT_KEY},
                "latest_started_at": {"S": run.started_at},
            }


def seed(dynamodb: Any, table: str, start: int, count: int, now: datetime, progress: Callable[[int], None]) -> None:
    """Write the records with BatchWriteItem, retrying unprocessed items; `progress(records written)`."""
    batch: list[dict[str, Any]] = []
    written = 0

    def flush() -> None:
        request: dict[str, Any] = {table: [{"PutRequest": {"Item": item}} for item in batch]}
        while request:
            request = dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
        batch.clear()

    for item in record_items(start, count, now):
        batch.append(item)
        written += item["started_at"]["S"] != HEAD_SORT_KEY
        if len(batch) == _BATCH:
            flush()
            if written % 5000 < _BATCH:
                progress(start + written)
    if batch:
        flush()
    progress(start + written)


@dataclass
class CallLog:
    """DynamoDB calls seen through botocore's event hooks: operations, items read, time inside."""

    operations: Counter[str] = field(default_factory=Counter)
    items_read: int = 0
    seconds: float = 0.0
    _started: dict[int, float] = field(default_factory=dict)

    def before(self, context: dict[str, Any], **_: Any) -> None:
        context["bench_started"] = time.perf_counter()

    def after(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        self.operations[model.name] += 1
        self.items_read += int(parsed.get("ScannedCount", 0))
        if "Item" in parsed:
            self.items_read += 1
        if "bench_started" in context:
            self.seconds += time.perf_counter() - context.pop("bench_started")

    def watch(self, client: Any) -> Any:
        client.meta.events.register("before-call.dynamodb", self.before)
        client.meta.events.register("after-call.dynamodb", self.after)
        return client


@dataclass(frozen=True)
class Timing:
    what: str
    records: int
    median_seconds: float
    dynamodb_seconds: float  # median time inside DynamoDB calls (moto's share)
    calls: dict[str, int]  # per repetition
    items_read: int  # per repetition
    query_floor_seconds: float = 0.0  # median time for one indexed Query reading one item, same size (seam)
    first_seconds: float = 0.0  # the first repetition: after writes it rebuilds the seam's index cache
    raw_seconds: float = 0.0  # raw moto (the seam's `moto_walk()`), one repetition
    raw_query_floor_seconds: float = 0.0  # raw moto's one indexed Query reading one item

    @property
    def outside_dynamodb_seconds(self) -> float:
        return self.median_seconds - self.dynamodb_seconds


def _time(what: str, records: int, run: Callable[[Callable[[str], Any]], Any], connection: Any) -> Timing:
    totals, inside, logs = [], [], []
    for _ in range(REPEATS):
        log = CallLog()
        clients: dict[str, Any] = {}

        def client(service: str, log: CallLog = log, clients: dict[str, Any] = clients) -> Any:
            if service not in clients:
                made = connection.client(service)
                clients[service] = log.watch(made) if service == "dynamodb" else made
            return clients[service]

        started = time.perf_counter()
        run(client)
        totals.append(time.perf_counter() - started)
        inside.append(log.seconds)
        logs.append(log)
    return Timing(
        what,
        records,
        statistics.median(totals),
        statistics.median(inside),
        dict(logs[-1].operations),
        logs[-1].items_read,
        first_seconds=totals[0],
    )


def _raw_seconds(run: Callable[[Callable[[str], Any]], Any], connection: Any) -> float:
    """One repetition on raw moto: the seam steps aside (its cache is kept)."""
    clients: dict[str, Any] = {}

    def client(service: str) -> Any:
        return clients.setdefault(service, connection.client(service))

    with dynamodb_query.moto_walk():
        started = time.perf_counter()
        run(client)
        return time.perf_counter() - started


def _query_floor(dynamodb: Any, table: str, now: datetime, repeats: int = REPEATS) -> tuple[float, float]:
    """The cost of the cheapest indexed Query (Limit 1 on `by-status`) at the table's size: (median, first
    sample; after writes the seam rebuilds the index's partitions there)."""
    request = {
        "TableName": table,
        "IndexName": STATUS_INDEX,
        "KeyConditionExpression": "#status = :s",
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {":s": {"S": JobStatus.FAILED.value}},
        "ScanIndexForward": False,
        "Limit": 1,
    }
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        dynamodb.query(**request)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), samples[0]


def _fake_aws_environment() -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        os.environ.pop(name, None)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(name, value)


def run(sizes: tuple[int, ...] = SIZES, say: Callable[[str], None] = print) -> list[Timing]:
    """Deploy, seed up to each size in turn, time status, jobs and jobs --status FAILED at each."""
    import logging

    from moto import mock_aws

    from pipeops import views
    from sandbox.deploy import deploy
    from stack.resources import Connection

    _fake_aws_environment()
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    timings: list[Timing] = []
    say("moto with the sandbox's indexed-query seam (sandbox.seams.dynamodb_query); raw moto once for comparison")
    dynamodb_query.install()
    try:
        with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):  # deploy() requires it
            _measure(sizes, say, timings, deploy, views, Connection)
    finally:
        dynamodb_query.uninstall()
    return timings


def _measure(
    sizes: tuple[int, ...], say: Callable[[str], None], timings: list[Timing], deploy: Any, views: Any, connection_type: Any
) -> None:
    deploy()
    connection = connection_type.resolve("pipeops", None, "us-east-1")
    resources = connection.resources()
    dynamodb = connection.client("dynamodb")
    now = datetime.now(UTC)
    seeded = 0
    for size in sorted(sizes):
        began = time.perf_counter()

        def progress(written: int, began: float = began) -> None:
            say(f"  seeded {written:,} records ({time.perf_counter() - began:.0f} s)")

        seed(dynamodb, resources.TrackingTableName, seeded, size - seeded, now, progress)
        seeded = size
        cases: list[tuple[str, Callable[[Callable[[str], Any]], Any]]] = [
            ("pipeops status", lambda c: views.status(resources, c)),
            ("pipeops jobs", lambda c: views.jobs(resources, c, None, JOBS_LIMIT)),
            ("pipeops jobs --status FAILED", lambda c: views.jobs(resources, c, JobStatus.FAILED, JOBS_LIMIT)),
        ]
        floor, rebuild = _query_floor(dynamodb, resources.TrackingTableName, now)
        with dynamodb_query.moto_walk():
            raw_floor = _query_floor(dynamodb, resources.TrackingTableName, now, repeats=1)[0]
        say(
            f"  one indexed Query reading one item at {size:,} records: {floor:.4f} s with the seam "
            f"(the first after the writes, rebuilding the index's partitions: {rebuild:.2f} s), "
            f"{raw_floor:.2f} s on raw moto"
        )
        for what, call in cases:
            timing = replace(
                _time(what, size, call, connection),
                query_floor_seconds=floor,
                raw_seconds=_raw_seconds(call, connection),
                raw_query_floor_seconds=raw_floor,
            )
            timings.append(timing)
            say(f"  {describe(timing)}")


def describe(timing: Timing) -> str:
    calls = ", ".join(f"{name} {count}" for name, count in sorted(timing.calls.items()))
    return (
        f"{timing.what} at {timing.records:,} records: {timing.median_seconds:.3f} s median of {REPEATS} "
        f"({timing.dynamodb_seconds:.3f} s inside moto's DynamoDB, {timing.outside_dynamodb_seconds:.3f} s "
        f"outside; first {timing.first_seconds:.2f} s; raw moto {timing.raw_seconds:.1f} s); DynamoDB calls: {calls}; "
        f"items read {timing.items_read:,}"
    )


def item_budget(what: str) -> int:
    """The most items a command may read whatever the table's size: what it shows, and no more."""
    if what == "pipeops status":
        # Every active run (read by the reconciler's dry run), up to RECENT_CAP ended runs per ended
        # status, one item per ended status for the reconciler's stall check.
        return ACTIVE_RUNS + 2 * RECENT_CAP + 2
    return JOBS_LIMIT * len(JobStatus)


def goal_rows(timings: list[Timing]) -> list[GoalRow]:
    """Per command, a goal row (items read at the largest size, within its budget at every size)
    and a reported row (the wall time on moto with the sandbox's indexed-query seam). Pure."""
    largest = max(t.records for t in timings)
    rows = []
    for what in ("pipeops status", "pipeops jobs"):
        mine = sorted((t for t in timings if t.what == what), key=lambda t: t.records)
        top = next(t for t in mine if t.records == largest)
        budget = item_budget(what)
        sizes = "; ".join(f"at {t.records:,}: {t.items_read:,} items, {t.median_seconds:.3f} s" for t in mine)
        rows.append(
            GoalRow(
                measure=f"`{what}`: items read at {largest:,} tracking records",
                now=f"{top.items_read:,}",
                goal=f"≤ {budget:,} (what it shows), whatever the table's size",
                met=all(t.items_read <= budget for t in mine),
                detail=f"{sum(top.calls.values())} DynamoDB calls ({top.calls.get('Query', 0)} Query, no Scan); {sizes}",
            )
        )
        rows.append(
            GoalRow(
                measure=f"`{what}` at {largest:,} tracking records, wall time on moto",
                now=f"{top.median_seconds:.3f} s",
                goal="- (reported)",
                met=True,
                detail=(
                    f"median of {REPEATS}, moto with the sandbox's indexed-query seam (in-process); "
                    f"{top.dynamodb_seconds:.3f} s inside DynamoDB calls; first call after the writes "
                    f"{top.first_seconds:.2f} s (the seam rebuilds its index partitions once after writes); raw moto "
                    f"(seam off, one repetition) {top.raw_seconds:.1f} s, its one-item indexed Query "
                    f"{top.raw_query_floor_seconds:.2f} s vs {top.query_floor_seconds:.4f} s with the seam"
                ),
            )
        )
    return rows


def measure() -> list[GoalRow]:
    return goal_rows(run(say=lambda line: print(line, file=sys.stderr, flush=True)))


def main() -> None:
    timings = run()
    print()
    for row in goal_rows(timings):
        print(f"{row.measure}: {row.now} (goal {row.goal}: {'met' if row.met else 'not met'})\n  {row.detail}")


if __name__ == "__main__":
    main()
