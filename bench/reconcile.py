"""The reconciler's cost against the size of the tracking table, on in-process moto.

    .venv/bin/python -m bench.reconcile          # 10,000 then 100,000 run records: ~3.5 min of CPU
    .venv/bin/python -m bench.reconcile --sizes 1000,3000 --repeat 2 --out /tmp/perf.md   # ~30 s
    .venv/bin/python -m bench.reconcile --json r.json            # keep the raw results
    .venv/bin/python -m bench.reconcile --render r.json          # only re-render the section

`measure()` is bench.goals' row: the items one reconcile pass reads, a count that carries over to
AWS, at two table sizes (small ones, to keep the goals run short): its active runs and the
semaphore item, whatever the history.

Writes its own section of docs/PERFORMANCE.md (`<!-- bench:reconcile -->`, see bench.sections) and
leaves the rest of the file, which `bench.e2e` renders, alone.

One run, one process, plain `mock_aws()` (no execute_state_machine: started executions stay RUNNING):
1. The tracking and coordination tables from template.yaml's definitions, a state machine.
2. A world with drift: `--running` runs in active statuses, each with a RUNNING execution and a
   semaphore slot; `--queued` QUEUED runs waiting for a slot; 2 leaked slots (their executions were
   stopped and the tracker never heard); the counter one above its holders (a count mismatch).
3. History around it: COMPLETE runs (and a few FAILED), ten runs a job, each job with its head
   item, loaded with BatchWriteItem (25 items a call) up to the first size, measured, then up to
   the next size with the same active set, measured again.
4. At each size, `--repeat` times each, interleaved (a naive pass after the first only while it
   fits in `--naive-budget` seconds: one naive pass at 100,000 records takes minutes in moto): `reconcile(reconciler, apply=False)` as the
   Lambda builds it (the sparse `active-jobs` index) and a naive reconcile whose TrackingStore finds
   active runs with a paginated Scan of the whole table filtered on status. Dry runs: the world
   stays as it is. Counted on the reconciler's own clients with botocore event hooks: API calls by
   service and operation, time spent in each, items read (ScannedCount of Query and Scan, the item
   of GetItem, the items of BatchGetItem) and returned, and read units estimated from item sizes (moto's ConsumedCapacity is
   a constant placeholder).

Every item is cloned from prototypes written through the real stores (`TrackingStore.create_run`,
the router's `admission_item`, `record_execution`, `transition`), so the history has the shape of
real runs: `active_status` (the sparse index key) only on active ones, files, account fields.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import re
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.goal_row import GoalRow
from monitors.reconcile.loop import Reconciler, reconcile
from pipeline.config import SEMAPHORE_KEY, ReconcileSettings
from pipeline.jobs import RunRef, execution_arn, execution_name, format_timestamp
from pipeline.status import ACTIVE_STATUSES, JobStatus, empty_failed_files
from pipeline.stores.audit import AuditStore
from pipeline.stores.claims import ClaimsStore
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.run_index import RunIndex
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import HEAD_SORT_KEY, RETENTION, RunRecord, TrackingStore

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = PROJECT_ROOT / "docs" / "PERFORMANCE.md"
SECTION = "reconcile"
HEADING = "## Reconciler cost against the size of the tracking table"

REGION = "us-east-1"
ACCOUNT = "123456789012"
TRACKING_TABLE = "pipeops-tracking"
COORDINATION_TABLE = "pipeops-coordination"
BUCKET = "pipeops-input"
PASS_MACHINE = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
BATCH_WRITE_LIMIT = 25
RUNS_PER_JOB = 10
FILES_PER_RUN = 4
FAILED_SHARE = 0.03
HISTORY_DAYS = 80
LEAKED_SLOTS = 2
COUNT_EXCESS = 1
MODES = ("proper", "naive")
_OPERATION_LABELS = {"stepfunctions": "sfn"}


# --------------------------------------------------------------------------- pure helpers


def attribute_bytes(value: Mapping[str, Any]) -> int:
    """Approximate stored size of one DynamoDB AttributeValue (the documented sizing rules)."""
    (kind, inner), = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        digits = inner.lstrip("-").replace(".", "").lstrip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in inner)
    if kind == "NS":
        return sum(attribute_bytes({"N": n}) for n in inner)
    if kind == "BS":
        return sum(len(b) for b in inner)
    if kind == "L":
        return 3 + sum(1 + attribute_bytes(v) for v in inner)
    if kind == "M":
        return 3 + sum(len(k.encode()) + 1 + attribute_bytes(v) for k, v in inner.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_bytes(item: Mapping[str, Mapping[str, Any]]) -> int:
    """Approximate size of an item as DynamoDB bills it: names plus values."""
    return sum(len(name.encode()) + attribute_bytes(value) for name, value in item.items())


def read_units(size: int, *, consistent: bool) -> float:
    """Read request units of one read of `size` bytes: 4 KB steps, half for eventually consistent."""
    steps = max(1, math.ceil(size / 4096))
    return steps * (1.0 if consistent else 0.5)


def operation_label(service: str, operation: str) -> str:
    return f"{_OPERATION_LABELS.get(service, service)} {operation}"


# --------------------------------------------------------------------------- counting


@dataclass
class Sample:
    """What one reconcile pass cost."""

    ms: float
    cpu_ms: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    op_ms: Counter[str] = field(default_factory=Counter)
    items_read: int = 0
    items_returned: int = 0
    bytes_read: int = 0
    read_units: float = 0.0
    errors: int = 0
    findings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ms": round(self.ms, 2),
            "cpu_ms": round(self.cpu_ms, 2),
            "calls": dict(sorted(self.calls.items())),
            "op_ms": {k: round(v, 2) for k, v in sorted(self.op_ms.items())},
            "items_read": self.items_read,
            "items_returned": self.items_returned,
            "bytes_read": self.bytes_read,
            "read_units": self.read_units,
            "errors": self.errors,
            "findings": self.findings,
        }


class CallMeter:
    """Counts and times the calls of the clients it is attached to, and what DynamoDB reads return.

    Items read: ScannedCount of each Query and Scan page (what DynamoDB reads, before a filter),
    the item of a GetItem. Bytes: the items a Query or GetItem returned (no filter, ALL projection:
    what was read); for a Scan, its ScannedCount times the table's mean item size, since the
    items its filter dropped never come back.
    """

    def __init__(self, mean_item_bytes: Callable[[], float]) -> None:
        self._mean_item_bytes = mean_item_bytes
        self.sample: Sample | None = None

    def attach(self, client: Any) -> None:
        events = client.meta.events
        events.register("provide-client-params.*.*", self._params)
        events.register("before-call.*.*", self._before)
        events.register("after-call.*.*", self._after)
        events.register("after-call-error.*.*", self._error)

    def _params(self, params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["bench_consistent"] = bool(params.get("ConsistentRead"))

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        # Must return None: a value returned from before-call short-circuits the request.
        context["bench_started"] = time.perf_counter()
        if self.sample is not None:
            self.sample.calls[operation_label(model.service_model.service_name, model.name)] += 1

    def _elapsed(self, model: Any, context: Mapping[str, Any]) -> None:
        started = context.get("bench_started")
        if self.sample is not None and started is not None:
            label = operation_label(model.service_model.service_name, model.name)
            self.sample.op_ms[label] += (time.perf_counter() - started) * 1000

    def _error(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        self._elapsed(model, context)
        if self.sample is not None:
            self.sample.errors += 1

    def _after(self, model: Any, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        self._elapsed(model, context)
        sample = self.sample
        if sample is None or model.service_model.service_name != "dynamodb":
            return
        consistent = bool(context.get("bench_consistent"))
        if model.name == "GetItem":
            item = parsed.get("Item")
            size = item_bytes(item) if item else 0
            sample.items_read += 1 if item else 0
            sample.items_returned += 1 if item else 0
            sample.bytes_read += size
            sample.read_units += read_units(size, consistent=consistent)
        elif model.name == "BatchGetItem":
            items = [item for found in parsed.get("Responses", {}).values() for item in found]
            size = sum(item_bytes(item) for item in items)
            sample.items_read += len(items)
            sample.items_returned += len(items)
            sample.bytes_read += size
            sample.read_units += sum(read_units(item_bytes(item), consistent=consistent) for item in items)
        elif model.name in ("Query", "Scan"):
            scanned = int(parsed.get("ScannedCount", 0))
            sample.items_read += scanned
            sample.items_returned += int(parsed.get("Count", 0))
            if model.name == "Query":
                size = sum(item_bytes(item) for item in parsed.get("Items", []))
            else:
                size = round(scanned * self._mean_item_bytes())
            sample.bytes_read += size
            sample.read_units += read_units(size, consistent=consistent)


# --------------------------------------------------------------------------- the world


@dataclass(frozen=True)
class Prototype:
    """One item written through the real stores, and the strings in it that belong to its run."""

    item: dict[str, Any]
    strings: Mapping[str, str]  # placeholder name -> the prototype's value
    offsets: tuple[float, ...]  # seconds after started_at of each timestamp it holds


def _clone(proto: Prototype, values: Mapping[str, str], expires: int) -> dict[str, Any]:
    """A copy of `proto.item` with the prototype run's strings replaced by another run's."""
    mapping = {proto.strings[name]: values[name] for name in proto.strings}
    pattern = re.compile("|".join(re.escape(s) for s in sorted(mapping, key=len, reverse=True)))

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda m: mapping[m.group(0)], value)
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    item = swap(proto.item)
    if "expiration_time" in item:
        item["expiration_time"] = {"N": str(expires)}
    return item


class World:
    """moto, the tables, the state machine and the clients; the drift and the history in them."""

    def __init__(self, *, running: int, queued: int, seed: int) -> None:
        import boto3
        from botocore.config import Config

        self.running = running
        self.queued = queued
        self.rng = random.Random(seed)
        self.now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        session = boto3.session.Session(region_name=REGION)
        # Setup and checks, never counted; the loader skips botocore's parameter validation (~15%).
        self.ddb = session.client("dynamodb")
        self.loader = session.client("dynamodb", config=Config(parameter_validation=False))
        self.sfn = session.client("stepfunctions")
        definitions = _table_definitions()
        self.ddb.create_table(TableName=TRACKING_TABLE, **definitions["TrackingTable"])
        self.ddb.create_table(TableName=COORDINATION_TABLE, **definitions["CoordinationTable"])
        self.state_machine_arn = self.sfn.create_state_machine(
            name="pipeops-pipeline", definition=PASS_MACHINE, roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn"
        )["stateMachineArn"]
        self.semaphore = Semaphore(COORDINATION_TABLE, self.ddb)
        self.max_slots = running + LEAKED_SLOTS + 50
        self.runs = 0  # run records written
        self.heads = 0
        self.table_bytes = 0
        self.jobs = 0
        self.active_runs = 0
        self._prototypes = self._make_prototypes()

    @property
    def items(self) -> int:
        return self.runs + self.heads

    def mean_item_bytes(self) -> float:
        return self.table_bytes / self.items if self.items else 0.0

    # -- prototypes through the real stores

    def _make_prototypes(self) -> dict[str, Prototype]:
        from pipeline.artifacts import mapping_key, results_prefix

        scratch = "bench-prototypes"
        self.ddb.create_table(TableName=scratch, **_table_definitions()["TrackingTable"])
        store = TrackingStore(scratch, self.ddb)
        base = dt.datetime(2001, 1, 1, tzinfo=dt.UTC)
        prototypes: dict[str, Prototype] = {}
        kinds = ("COMPLETE", "FAILED", "ACTIVE", "QUEUED")
        for number, kind in enumerate(kinds):
            job = f"proto-{kind.lower()}/"
            started = base + dt.timedelta(days=number)
            run = RunRef(job, format_timestamp(started))
            name = run.execution_name
            token = uuid.uuid4().hex
            files = [f"{job}proto-file-{k}.txt" for k in range(FILES_PER_RUN)]

            def at(seconds: float, started: dt.datetime = started) -> dt.datetime:
                return started + dt.timedelta(seconds=seconds)

            store.create_run(run, files, BUCKET, at(0))
            offsets = [0.0]
            if kind != "QUEUED":
                admit = store.admission_item(run, at(2), token, expected_status=JobStatus.QUEUED)
                self.ddb.transact_write_items(TransactItems=[admit])  # type: ignore[list-item]  # the store's plain dict
                store.record_execution(run, execution_arn(self.state_machine_arn, name), [])
                store.transition(run, JobStatus.DETECTING, at(3))
                offsets += [2.0, 3.0]
            if kind == "COMPLETE":
                account = {
                    "failed_files": empty_failed_files(),
                    "redaction_results": {
                        "files_total": FILES_PER_RUN,
                        "files_redacted": FILES_PER_RUN,
                        "files_failed": 0,
                        "files_empty": 0,
                        "files_unsupported": 0,
                        "replacements": 37,
                        "entities_by_type": {"CREDIT_DEBIT_NUMBER": 4, "EMAIL": 12, "NAME": 15, "PHONE": 6},
                    },
                    "results_s3_prefix": results_prefix(name),
                    "mapping_s3_key": mapping_key(name),
                }
                for step, status in enumerate((JobStatus.DETECT_COMPLETE, JobStatus.REDACTING)):
                    store.transition(run, status, at(20 + step))
                store.transition(run, JobStatus.REDACT_COMPLETE, at(40), fields=account)
                store.transition(run, JobStatus.COMPLETE, at(41))
                offsets += [20.0, 21.0, 40.0, 41.0]
            elif kind == "FAILED":
                store.transition(
                    run, JobStatus.FAILED, at(30),
                    fields={"error": "Lambda.Unknown", "cause": "The detection of 1 file(s) failed; over the tolerance."},
                )
                offsets.append(30.0)
            item = self.ddb.get_item(TableName=scratch, Key=_key(run.job_id, run.started_at))["Item"]
            strings = {"job": job, "name": name, "token": token}
            strings |= {f"t{i}": format_timestamp(at(offset)) for i, offset in enumerate(offsets)}
            prototypes[kind] = Prototype(item, strings, tuple(offsets))
            if kind == "COMPLETE":
                head = self.ddb.get_item(TableName=scratch, Key=_key(job, HEAD_SORT_KEY))["Item"]
                prototypes["HEAD"] = Prototype(head, {"job": job, "t0": run.started_at}, (0.0,))
        self.ddb.delete_table(TableName=scratch)
        return prototypes

    # -- items

    def _run_item(self, kind: str, job: str, started: dt.datetime) -> dict[str, Any]:
        proto = self._prototypes[kind]
        stamp = format_timestamp(started)
        values = {"job": job, "name": execution_name(job, stamp), "token": uuid.uuid4().hex}
        values |= {f"t{i}": format_timestamp(started + dt.timedelta(seconds=o)) for i, o in enumerate(proto.offsets)}
        expires = int((started + RETENTION).timestamp())
        return _clone(proto, values, expires)

    def _head_item(self, job: str, latest: dt.datetime) -> dict[str, Any]:
        values = {"job": job, "t0": format_timestamp(latest)}
        return _clone(self._prototypes["HEAD"], values, int((latest + RETENTION).timestamp()))

    def _history_time(self) -> dt.datetime:
        seconds = self.rng.uniform(3600, HISTORY_DAYS * 86400)
        return (self.now - dt.timedelta(seconds=seconds)).replace(microsecond=self.rng.randrange(1_000_000))

    def _job_id(self) -> str:
        self.jobs += 1
        return f"claims/batch-{self.jobs:06d}/"

    def grow(self, target_runs: int) -> float:
        """Add jobs of history (and, the first time, the active set) up to `target_runs` run records.

        Items are written in key order: moto sorts the whole table on every Query and Scan, and
        Timsort on sorted input is linear. Returns the seconds the load took.
        """
        began = time.perf_counter()
        items: list[dict[str, Any]] = []
        first = self.runs == 0
        live: list[tuple[RunRef, str]] = []  # (run, "running" | "leaked")
        active_statuses = [s for s in ACTIVE_STATUSES if s is not JobStatus.QUEUED]
        active_total = self.running + LEAKED_SLOTS + self.queued if first else 0
        new_runs = target_runs - self.runs
        if new_runs < active_total:
            raise ValueError(f"{target_runs} run records cannot hold the {active_total} active runs")
        history = new_runs - active_total
        active_index = 0
        while history > 0 or active_index < active_total:
            job = self._job_id()
            count = min(history, RUNS_PER_JOB - (1 if active_index < active_total else 0))
            times = sorted(self._history_time() for _ in range(count))
            history -= count
            for moment in times:
                kind = "FAILED" if self.rng.random() < FAILED_SHARE else "COMPLETE"
                items.append(self._run_item(kind, job, moment))
            latest = times[-1] if times else None
            if active_index < active_total:
                # The job's newest run is active: minutes old (leaked ones: half an hour).
                if active_index < self.running:
                    kind, role, age = "ACTIVE", "running", self.rng.uniform(60, 1500)
                elif active_index < self.running + LEAKED_SLOTS:
                    kind, role, age = "ACTIVE", "leaked", 1800.0
                else:
                    kind, role, age = "QUEUED", "queued", self.rng.uniform(5, 300)
                moment = self.now - dt.timedelta(seconds=age)
                item = self._run_item(kind, job, moment)
                if kind == "ACTIVE":
                    status = active_statuses[active_index % len(active_statuses)].value
                    item["status"] = item["active_status"] = {"S": status}
                items.append(item)
                if role != "queued":
                    live.append((RunRef(job, format_timestamp(moment)), role))
                latest = moment
                active_index += 1
            if latest is not None:
                items.append(self._head_item(job, latest))
        items.sort(key=lambda i: (i["job_id"]["S"], i["started_at"]["S"]))
        self._write(items)
        if live:
            self._start_the_active_set(live)
        return time.perf_counter() - began

    def _write(self, items: Sequence[dict[str, Any]]) -> None:
        for start in range(0, len(items), BATCH_WRITE_LIMIT):
            request: dict[str, Any] = {TRACKING_TABLE: [{"PutRequest": {"Item": i}} for i in items[start : start + BATCH_WRITE_LIMIT]]}
            for attempt in range(8):
                response = self.loader.batch_write_item(RequestItems=request)
                request = response.get("UnprocessedItems") or {}
                if not request:
                    break
                time.sleep(0.05 * 2**attempt)
            else:
                raise RuntimeError("BatchWriteItem left items unprocessed after 8 attempts")
        for item in items:
            self.table_bytes += item_bytes(item)
            if item["started_at"]["S"] == HEAD_SORT_KEY:
                self.heads += 1
            else:
                self.runs += 1
                self.active_runs += 1 if "active_status" in item else 0

    def _start_the_active_set(self, live: Sequence[tuple[Any, str]]) -> None:
        """Executions and slots: RUNNING for the running, stopped (never heard of) for the leaked;
        then the counter one above its holders."""
        for run, role in live:
            arn = self.sfn.start_execution(
                stateMachineArn=self.state_machine_arn,
                name=run.execution_name,
                input=json.dumps({"job_id": run.job_id, "started_at": run.started_at}),
            )["executionArn"]
            self.semaphore.acquire(run.execution_name, run.started_at, self.max_slots)
            if role == "leaked":
                self.sfn.stop_execution(executionArn=arn, error="States.Timeout", cause="bench: ended unseen")
        self.ddb.update_item(
            TableName=COORDINATION_TABLE,
            Key={"doc_key": {"S": SEMAPHORE_KEY}},
            UpdateExpression="ADD active_count :n, version :one",
            ExpressionAttributeValues={":n": {"N": str(COUNT_EXCESS)}, ":one": {"N": "1"}},
        )

    # -- the reconcilers

    def reconciler(self, mode: str, meter: CallMeter) -> Any:
        """A Reconciler as the Lambda builds it, on clients of its own that `meter` counts."""
        import boto3

        session = boto3.session.Session(region_name=REGION)
        ddb, sfn = session.client("dynamodb"), session.client("stepfunctions")
        meter.attach(ddb)
        meter.attach(sfn)
        tracking = TrackingStore(TRACKING_TABLE, ddb)
        runs = RunIndex(TRACKING_TABLE, ddb) if mode == "proper" else ScanningRunIndex(TRACKING_TABLE, ddb)

        def send(message: Any, delay: int) -> None:
            raise AssertionError("a dry run announces nothing")

        return Reconciler(
            semaphore=Semaphore(COORDINATION_TABLE, ddb),
            executions=ExecutionsStore(sfn, self.state_machine_arn),
            tracking=tracking,
            claims=ClaimsStore(TRACKING_TABLE, COORDINATION_TABLE, ddb),
            runs=runs,
            send=send,
            audit=AuditStore(COORDINATION_TABLE, ddb),
            settings=ReconcileSettings(max_slots=self.max_slots),
            actor="bench",
            clock=lambda: dt.datetime.now(dt.UTC),
        )

    def semaphore_version(self) -> int:
        return self.semaphore.read().version


class ScanningRunIndex(RunIndex):
    """A reconciler without the sparse index: active runs from a paginated Scan of the whole table."""

    def __init__(self, table_name: str, client: Any) -> None:
        super().__init__(table_name, client)
        self._scan_table = table_name
        self._scan_client = client

    def active_runs(self, status: JobStatus | None = None, updated_before: str | None = None) -> Iterator[RunRecord]:
        statuses = [status] if status else list(ACTIVE_STATUSES)
        values: dict[str, Any] = {f":s{i}": {"S": s.value} for i, s in enumerate(statuses)}
        condition = f"#status IN ({', '.join(values)})"
        if updated_before:
            values[":before"] = {"S": updated_before}
            condition += " AND updated_at < :before"
        pages = self._scan_client.get_paginator("scan").paginate(
            TableName=self._scan_table,
            FilterExpression=condition,
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=values,
        )
        for page in pages:
            for item in page.get("Items", []):
                yield RunRecord.from_item(item)


def _table_definitions() -> dict[str, dict[str, Any]]:
    """Table schemas as template.yaml declares them (as tests/conftest.py builds them)."""
    from stack.template import load_template

    resources = load_template()["Resources"]
    wanted = ("KeySchema", "AttributeDefinitions", "GlobalSecondaryIndexes", "BillingMode")
    return {
        logical: {k: v for k, v in resources[logical]["Properties"].items() if k in wanted}
        for logical in ("TrackingTable", "CoordinationTable")
    }


def _key(job_id: str, sort_key: str) -> dict[str, Any]:
    return {"job_id": {"S": job_id}, "started_at": {"S": sort_key}}


# --------------------------------------------------------------------------- measuring


def measure_once(world: World, mode: str) -> Sample:
    """One dry reconcile on fresh, metered clients (client creation is outside the timing)."""
    meter = CallMeter(world.mean_item_bytes)
    reconciler = world.reconciler(mode, meter)
    version = world.semaphore_version()
    meter.sample = sample = Sample(ms=0.0)
    started, cpu = time.perf_counter(), time.process_time()
    report = reconcile(reconciler, apply=False)
    sample.ms = (time.perf_counter() - started) * 1000
    sample.cpu_ms = (time.process_time() - cpu) * 1000  # moto runs in this thread: its work counts
    meter.sample = None
    sample.findings = sorted(f"{f.kind.value}:{f.target}" for f in report.plan.findings)
    if world.semaphore_version() != version:
        raise RuntimeError("a dry reconcile changed the semaphore")
    return sample


EXPECTED_FINDINGS = Counter({"count_mismatch": 1, "leaked_slot": LEAKED_SLOTS})


def measure_passes(world: World, repeat: int, naive_budget_s: float) -> dict[str, Any]:
    """`repeat` passes of each mode, interleaved (a noisy neighbour hurts both alike). A naive pass
    after the first runs only if it should fit, at the last one's length, in `naive_budget_s`."""
    samples: dict[str, list[Sample]] = {mode: [] for mode in MODES}
    for _ in range(repeat):
        for mode in MODES:
            done = samples[mode]
            if mode == "naive" and done and (sum(s.ms for s in done) + done[-1].ms) / 1000 > naive_budget_s:
                continue
            done.append(measure_once(world, mode))
    rows = []
    for mode in MODES:
        first = samples[mode][0]
        kinds = Counter(f.split(":", 1)[0] for f in first.findings)
        if kinds != EXPECTED_FINDINGS:
            raise RuntimeError(f"{mode} reconcile found {dict(kinds)}, expected {dict(EXPECTED_FINDINGS)}")
        stable = all(s.calls == first.calls and s.items_read == first.items_read for s in samples[mode])
        rows.append(
            {
                "mode": mode,
                "runs": world.runs,
                "items": world.items,
                "heads": world.heads,
                "table_mb": round(world.table_bytes / 1e6, 2),
                "mean_item_bytes": round(world.mean_item_bytes()),
                "active_runs": world.active_runs,
                "running_executions": world.running,
                "holders": world.running + LEAKED_SLOTS,
                "stable": stable,
                "samples": [s.to_dict() for s in samples[mode]],
            }
        )
    return {"rows": rows}


# Sizes and active set of the goal row (`measure`): the reads must not grow from one to the other.
GOAL_SIZES = (1_000, 10_000)
GOAL_RUNNING = 40


def items_read_budget(active_runs: int, queued_files: int) -> int:
    """The most items a proper pass may read: every active run (the sparse index), the semaphore,
    the claims of the files of overdue QUEUED runs and the stall check's two one-item queries."""
    return active_runs + 1 + queued_files + 2


def goal_row(first: Sample, last: Sample, world: World, sizes: Sequence[int]) -> GoalRow:
    """The goal row from a pass at the smallest and one at the largest size. Pure."""
    budget = items_read_budget(world.active_runs, world.queued * FILES_PER_RUN)
    return GoalRow(
        measure=f"reconcile pass: items read at {sizes[-1]:,} tracking records",
        now=f"{last.items_read:,}",
        goal=f"≤ {budget:,} (active runs, the semaphore, queued runs' claims), the same at every table size",
        met=last.items_read <= budget and first.items_read == last.items_read,
        detail=(
            f"one dry pass as the Lambda builds it, {world.active_runs} active runs, {world.running} running "
            f"executions, in-process moto; at {sizes[0]:,} records {first.items_read:,} items read, "
            f"{sum(first.calls.values())} calls; at {sizes[-1]:,} {last.items_read:,} items, "
            f"{sum(last.calls.values())} calls; `python -m bench.reconcile` for the timed comparison with a Scan"
        ),
    )


def measure() -> list[GoalRow]:
    """bench.goals' row (about a minute on 2 cores: loading the table is most of it)."""
    from moto import mock_aws

    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": REGION}.items():
        os.environ.setdefault(name, value)
    with mock_aws():
        world = World(running=GOAL_RUNNING, queued=6, seed=7)
        passes = []
        for size in GOAL_SIZES:
            world.grow(size)
            passes.append(measure_once(world, "proper"))
    return [goal_row(passes[0], passes[-1], world, GOAL_SIZES)]


# --------------------------------------------------------------------------- the section (pure)


def _fmt_ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _spread_ms(values: Sequence[float]) -> str:
    if not values:
        return "-"
    median = _fmt_ms(statistics.median(values))
    if len(values) == 1:
        return f"{median} (1 pass)"
    return f"{median} ({_fmt_ms(min(values))}-{_fmt_ms(max(values))})"


def _median_of(samples: Sequence[Mapping[str, Any]], key: str) -> float:
    present = [s[key] for s in samples if s.get(key) is not None]
    return statistics.median(present) if present else 0.0


def _calls_cell(samples: Sequence[Mapping[str, Any]]) -> str:
    """'dynamodb Query 7 (2,950 ms) · …': calls of the first pass, median ms of each operation."""
    if not samples:
        return "-"
    calls = samples[0]["calls"]
    parts = []
    for label in sorted(calls, key=lambda k: (-statistics.median(s["op_ms"].get(k, 0.0) for s in samples), k)):
        ms = statistics.median(s["op_ms"].get(label, 0.0) for s in samples)
        parts.append(f"{label} {calls[label]:,} ({_fmt_ms(ms)} ms)")
    return " · ".join(parts)


def _row(row: Mapping[str, Any]) -> list[str]:
    samples = row.get("samples", [])
    total = sum(samples[0]["calls"].values()) if samples else 0
    first = samples[0] if samples else {}
    return [
        f"{row['runs']:,} ({row['items']:,})",
        f"{row['active_runs']:,}",
        f"{row['running_executions']:,}",
        f"**{row['mode']}**",
        _spread_ms([s["ms"] for s in samples]),
        _fmt_ms(_median_of(samples, "cpu_ms")),
        f"{total:,}: {_calls_cell(samples)}",
        f"{first.get('items_read', 0):,}",
        _units(first.get("read_units", 0)),
    ]


def _find(rows: Sequence[Mapping[str, Any]], mode: str, runs: int) -> Mapping[str, Any] | None:
    return next((r for r in rows if r["mode"] == mode and r["runs"] == runs), None)


def _units(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def conclusion(results: Mapping[str, Any]) -> str:
    """Two sentences from the numbers: what the reads grow with, and what is slow (and why)."""
    rows = results.get("rows", [])
    sizes = sorted({r["runs"] for r in rows})
    if not sizes:
        return "No measurements."
    small, big = sizes[0], sizes[-1]
    p_small, p_big, n_big = _find(rows, "proper", small), _find(rows, "proper", big), _find(rows, "naive", big)
    if p_big is None or n_big is None or not p_big.get("samples") or not n_big.get("samples"):
        return "Incomplete measurements."

    def first(row: Mapping[str, Any], key: str) -> float:
        return row["samples"][0][key] if row.get("samples") else 0

    def ms(row: Mapping[str, Any], key: str = "ms") -> float:
        return _median_of(row.get("samples", []), key)

    def calls(row: Mapping[str, Any], operation: str | None = None) -> int:
        counted = row["samples"][0]["calls"]
        return counted.get(operation, 0) if operation else sum(counted.values())

    p_read, n_read = first(p_big, "items_read"), first(n_big, "items_read")
    text = (
        f"At {big:,} run records the proper reconcile read {p_read:,.0f} items "
        f"(~{_units(first(p_big, 'read_units'))} read units) in {calls(p_big):,} calls"
    )
    if p_small is not None and small != big:
        same = first(p_small, "items_read") == p_read
        text += (
            f", {'exactly as many as' if same else 'NOT the same as'} at {small:,} "
            f"({first(p_small, 'items_read'):,.0f}): its reads follow the {p_big['active_runs']:,} active runs and "
            f"{p_big['running_executions']:,} running executions, not the table"
        )
    ratio = f"{ms(n_big) / ms(p_big):,.0f}x" if ms(p_big) else "-"
    text += (
        f"; the naive one read {n_read:,.0f} items (~{_units(first(n_big, 'read_units'))} read units, "
        f"{n_read / p_read if p_read else 0:,.0f}x) in {calls(n_big):,} calls and took {_fmt_ms(ms(n_big))} ms "
        f"against {_fmt_ms(ms(p_big))} ms ({ratio})."
    )
    slow: list[str] = []
    if p_small is not None and small != big and ms(p_small) and ms(p_big) > 1.5 * ms(p_small):
        query = ms_in(p_big, "dynamodb Query")
        slow.append(
            f"the proper pass still grew from {_fmt_ms(ms(p_small))} to {_fmt_ms(ms(p_big))} ms "
            f"({_fmt_ms(query)} ms of it in Query) because moto answers a Query on a GSI by sorting and walking "
            "every item of the table"
        )
    pages = calls(n_big, "dynamodb Scan")
    if pages > 1 and ms(n_big, "cpu_ms"):
        slow.append(
            f"each of the naive pass's {pages:,} Scan pages cost ~{_fmt_ms(ms(n_big, 'cpu_ms') / pages)} ms of CPU "
            "because moto sorts the table again and walks it from the top to every page's start key"
        )
    if slow:
        text += (
            " What is slow here beyond that is moto, not DynamoDB: " + "; ".join(slow) + ". DynamoDB reads only "
            "the index partition and resumes a Scan at its key, so the calls and read units carry over to AWS "
            "and the times do not."
        )
    return text


def ms_in(row: Mapping[str, Any], operation: str) -> float:
    """Median ms a row's passes spent in one operation."""
    samples = row.get("samples", [])
    return statistics.median(s["op_ms"].get(operation, 0.0) for s in samples) if samples else 0.0


def _budget(meta: Mapping[str, Any]) -> str:
    budget = meta.get("naive_budget_s")
    return f"{budget:g} s" if isinstance(budget, int | float) else "the time budget"


def render_section(results: Mapping[str, Any]) -> str:
    """The `reconcile` section of docs/PERFORMANCE.md (without its markers). Pure."""
    meta = results.get("meta", {})
    rows = results.get("rows", [])
    sizes = sorted({r["runs"] for r in rows})
    lines = [HEADING, ""]
    load, load_end, cores = meta.get("load_start"), meta.get("load_end"), meta.get("usable_cores")
    shared = ""
    if load and cores and max(load[0], (load_end or [0])[0]) > cores:
        shared = "; other processes competed for the cores, so wall times are inflated: compare the CPU column"
    lines.append(
        f"Measured {meta.get('date', '?')} with `{meta.get('command', 'python -m bench.reconcile')}` on "
        f"{cores or '?'} usable cores (load average {load[0] if load else '?'} at the start, "
        f"{load_end[0] if load_end else '?'} at the end{shared}), "
        f"moto {meta.get('moto', '?')}: {meta.get('duration_s', 0):,.0f} s in all, of which "
        f"{sum(meta.get('load_s', {}).values()):,.0f} s loading the table "
        f"({', '.join(f'{int(k):,} records {v:,.0f} s' for k, v in sorted(meta.get('load_s', {}).items(), key=lambda kv: int(kv[0])))})."
    )
    lines.append("")
    example = rows[0] if rows else {}
    lines.append(
        "**Method.** In-process moto (plain `mock_aws()`: started executions stay RUNNING), tables from "
        "template.yaml's definitions. The world has drift: "
        f"{example.get('running_executions', '?')} runs in active statuses, each with a RUNNING execution and a "
        f"semaphore slot; {meta.get('queued', '?')} QUEUED runs; {LEAKED_SLOTS} leaked slots (execution stopped, "
        "run still active); the counter one above its holders. Around it, history: COMPLETE runs "
        f"(~{FAILED_SHARE:.0%} FAILED), {RUNS_PER_JOB} runs and one head item a job, cloned from items written "
        "through the real stores and loaded with BatchWriteItem, first up to "
        f"{' then '.join(f'{s:,}' for s in sizes)} run records with the same active set. At each size, "
        f"{meta.get('repeat', '?')} dry `reconcile(..., apply=False)` passes of each mode, interleaved (a naive pass "
        f"after the first only if it fits in {_budget(meta)} of naive passes a size): **proper** "
        "(as the Lambda: semaphore GetItem, ListExecutions, one Query per active status on the sparse "
        "`active-jobs` index, DescribeExecution of holders and active runs not listed) and **naive** (the same, "
        "with active runs found by a paginated Scan of the whole table filtered on status). Counted by botocore "
        "event hooks on the reconciler's own clients; *CPU* is the process's CPU time in the pass (moto runs in the "
        "same thread), steadier than wall time on a shared machine. *Items read*: ScannedCount of Query and Scan pages plus "
        "the GetItem item. *Read units* are estimated from item sizes (4 KB steps, half for eventually "
        "consistent reads; a Scan page at the table's mean item size), since moto's ConsumedCapacity is a "
        "constant placeholder. Every pass found the same drift (count mismatch, leaked slots) in both modes."
    )
    lines.append("")
    header = [
        "run records (table items)",
        "active runs",
        "running executions",
        "mode",
        "time, ms: median (min-max)",
        "CPU ms (median)",
        "API calls: by operation (median ms in it)",
        "items read",
        "read units (est.)",
    ]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---:", "---:", "---:", "---", "---:", "---:", "---", "---:", "---:"]) + "|")
    for size in sizes:
        for mode in MODES:
            row = _find(rows, mode, size)
            if row is not None:
                lines.append("| " + " | ".join(_row(row)) + " |")
    lines.append("")
    if rows:
        big = max(rows, key=lambda r: r["runs"])
        lines.append(
            f"The table at {big['runs']:,} run records: {big['items']:,} items, ~{big['table_mb']:,.1f} MB "
            f"({big['mean_item_bytes']:,} bytes an item on average)."
            + ("" if all(r.get("stable", True) for r in rows) else " Calls or items read varied between passes of one mode.")
        )
        lines.append("")
    lines.append(conclusion(results))
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- entry point


def _progress(message: str) -> None:
    print(f"[bench.reconcile {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.reconcile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="run records to measure at, ascending (default 10000,100000)")
    parser.add_argument("--repeat", type=int, default=3, help="passes of each mode at each size (default 3)")
    parser.add_argument("--running", type=int, default=200, help="running executions, each with a slot (default 200)")
    parser.add_argument("--queued", type=int, default=6, help="QUEUED runs waiting for a slot (default 6)")
    parser.add_argument(
        "--naive-budget", type=float, default=60.0, metavar="S",
        help="seconds of naive passes per size: a pass after the first runs only if it fits (default 60)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="report path (default docs/PERFORMANCE.md)")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results as JSON")
    parser.add_argument("--render", type=Path, default=None, metavar="JSON", help="only re-render a saved --json file")
    return parser.parse_args(argv)


def _sizes(text: str) -> list[int]:
    sizes = [int(s.replace("_", "")) for s in text.split(",") if s.strip()]
    if not sizes or sizes != sorted(set(sizes)):
        raise SystemExit("--sizes: ascending, distinct numbers")
    return sizes


def write_section(path: Path, results: Mapping[str, Any]) -> None:
    from bench.sections import replace_section

    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    path.write_text(replace_section(old, SECTION, render_section(results)))


def run(args: argparse.Namespace, command: str) -> dict[str, Any]:
    from moto import mock_aws

    from bench.e2e import machine_facts

    sizes = _sizes(args.sizes)
    began = time.perf_counter()
    results: dict[str, Any] = {
        "meta": {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": command,
            "sizes": sizes,
            "repeat": args.repeat,
            "naive_budget_s": args.naive_budget,
            "running": args.running,
            "queued": args.queued,
            "load_start": [round(x, 2) for x in os.getloadavg()],
            "load_s": {},
            **machine_facts(),
        },
        "rows": [],
    }
    with mock_aws():
        world = World(running=args.running, queued=args.queued, seed=args.seed)
        for size in sizes:
            _progress(f"loading up to {size:,} run records")
            seconds = world.grow(size)
            results["meta"]["load_s"][str(size)] = round(seconds, 1)
            _progress(f"{world.runs:,} runs + {world.heads:,} heads in {seconds:.1f}s; measuring x{args.repeat}")
            measured = measure_passes(world, args.repeat, args.naive_budget)
            for row in measured["rows"]:
                times = ", ".join(f"{s['ms']:.0f}" for s in row["samples"])
                _progress(f"{size:,} {row['mode']}: {times} ms, items read {row['samples'][0]['items_read']:,}")
            results["rows"] += measured["rows"]
    results["meta"]["load_end"] = [round(x, 2) for x in os.getloadavg()]
    results["meta"]["duration_s"] = round(time.perf_counter() - began, 1)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        write_section(args.out, json.loads(args.render.read_text()))
        _progress(f"rendered {args.render} into {args.out}")
        return 0
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": REGION}.items():
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    words = sys.argv[1:] if argv is None else list(argv)
    from bench.e2e import measuring_args

    command = " ".join(["python -m bench.reconcile", *measuring_args(words)])
    results = run(args, command)
    write_section(args.out, results)
    _progress(f"wrote the {SECTION} section of {args.out} in {results['meta']['duration_s']:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
