"""End-to-end: the reference pipeline running in the embedded sandbox (docs/ARCHITECTURE.md#how-it-is-checked).

template.yaml deployed on moto, the real handlers invoked by the sandbox's Lambda runtime, SQS
event sources, EventBridge (S3 events, execution status changes, schedules). Each test drives the
pipeline only through its edges (S3 uploads, queue messages, schedules) and asserts what it left
behind: tracking records, redacted copies, the semaphore, the queues, telemetry.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from pipeline.jobs import job_id_for_key
from pipeline.status import JobStatus
from pipeline.stores.run_index import RunIndex
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import HEAD_SORT_KEY, RunRecord, TrackingStore
from pipeline.telemetry.catalog import CATALOG, NAMESPACE, STANDARD_DIMENSIONS, Metric

IDLE_TIMEOUT = 90.0
DLQ_OUTPUTS = ("DeadLetterQueueUrl", "TrackerDeadLetterQueueUrl", "IngestDeadLetterQueueUrl")
FUNCTION_OUTPUTS = (
    "IngestFunctionName",
    "RouterFunctionName",
    "BatchTriggerFunctionName",
    "WorkflowTrackerFunctionName",
    "DetectFunctionName",
    "GenerateSyntheticFunctionName",
    "RedactFunctionName",
    "FinalizeFunctionName",
    "ReconcilerFunctionName",
)

# Seeded PII: every value is one the offline detector must find (valid NANP numbers, Luhn-valid
# cards), so "no original value in the output" is a real check of detection and redaction.
EMAILS = ("john.doe@example.com", "ana.silva@example.org", "ops+alerts@corp.example.net")
PHONES = ("415-555-0142", "(212) 555-0199", "+44 20 7946 0958")
CARDS = ("4111 1111 1111 1111", "5555555555554444", "3782 822463 10005")
ALL_PII = EMAILS + PHONES + CARDS


# --------------------------------------------------------------------------- helpers


def pii_text(index: int) -> str:
    email, phone, card = EMAILS[index % 3], PHONES[(index + 1) % 3], CARDS[(index + 2) % 3]
    return (
        f"Ticket {index}: customer wrote from {email} and asked to be called back on {phone}.\n"
        f"They paid with card {card}; order id 12345-{index:04d}.\n"
    )


def clean_text(index: int) -> str:
    return f"Meeting notes {index}: nothing personal here, just numbers like 42 and 7.\n"


def wait_idle(sandbox: Any, timeout: float = IDLE_TIMEOUT) -> None:
    assert sandbox.wait_until_idle(timeout), "the sandbox did not become idle"


def upload(sandbox: Any, files: Mapping[str, bytes | str]) -> None:
    s3 = sandbox.client("s3")
    bucket = sandbox.outputs["InputBucketName"]
    for key, body in files.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body.encode() if isinstance(body, str) else body)


def tracking(sandbox: Any) -> TrackingStore:
    return TrackingStore(sandbox.outputs["TrackingTableName"], sandbox.client("dynamodb"))


def semaphore(sandbox: Any) -> Semaphore:
    return Semaphore(sandbox.outputs["CoordinationTableName"], sandbox.client("dynamodb"))


def all_runs(sandbox: Any) -> list[RunRecord]:
    """Every run item of the tracking table (head items skipped); a test-side scan is fine."""
    paginator = sandbox.client("dynamodb").get_paginator("scan")
    runs = []
    for page in paginator.paginate(TableName=sandbox.outputs["TrackingTableName"], ConsistentRead=True):
        runs += [RunRecord.from_item(i) for i in page["Items"] if i["started_at"]["S"] != HEAD_SORT_KEY]
    return runs


def read_output(sandbox: Any, key: str) -> str | None:
    s3 = sandbox.client("s3")
    try:
        body = s3.get_object(Bucket=sandbox.outputs["OutputBucketName"], Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    return body.decode("utf-8")


def queue_messages(sandbox: Any, output: str) -> int:
    """Every message a queue holds: visible, in flight and delayed."""
    attributes = sandbox.client("sqs").get_queue_attributes(
        QueueUrl=sandbox.outputs[output],
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return sum(int(v) for v in attributes.values())


def assert_dead_letter_queues_empty(sandbox: Any) -> None:
    assert {output: queue_messages(sandbox, output) for output in DLQ_OUTPUTS} == dict.fromkeys(
        DLQ_OUTPUTS, 0
    )


def assert_semaphore_settled(sandbox: Any, holders: Mapping[str, str] | None = None) -> None:
    state = semaphore(sandbox).read()
    expected = dict(holders or {})
    assert dict(state.holders) == expected
    assert state.active_count == len(expected)


def assert_no_active_runs(sandbox: Any) -> None:
    runs = RunIndex(sandbox.outputs["TrackingTableName"], sandbox.client("dynamodb"))
    assert [r.job_id for r in runs.active_runs()] == []
    assert [r.job_id for r in all_runs(sandbox) if r.status.is_active] == []


def invocations_of(sandbox: Any, output: str) -> list[Any]:
    name = sandbox.outputs[output]
    return [record for record in sandbox.runtime.invocations if record.function_name == name]


def json_lines(lines: Any) -> Iterator[dict[str, Any]]:
    for line in lines:
        text = line.strip()
        if text.startswith("{"):
            try:
                doc = json.loads(text)
            except ValueError:
                continue
            if isinstance(doc, dict):
                yield doc


def files_of(runs: list[RunRecord]) -> dict[str, RunRecord]:
    """file key -> the run holding it; a file in two runs is a failure of the accounting."""
    owner: dict[str, RunRecord] = {}
    for run in runs:
        for key in run.files:
            assert key not in owner, f"{key} is in two runs"
            owner[key] = run
    return owner


@dataclass
class Sampler:
    """Samples RUNNING executions and the semaphore every ~50 ms on a background thread."""

    sandbox: Any
    interval: float = 0.05
    running: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    holders: list[int] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _loop(self) -> None:
        region = self.sandbox.region
        sfn = boto3.session.Session().client("stepfunctions", region_name=region)
        sem = Semaphore(
            self.sandbox.outputs["CoordinationTableName"],
            boto3.session.Session().client("dynamodb", region_name=region),
        )
        arn = self.sandbox.outputs["StateMachineArn"]
        while not self._stop.is_set():
            try:
                pages = sfn.get_paginator("list_executions").paginate(
                    stateMachineArn=arn, statusFilter="RUNNING"
                )
                self.running.append(sum(len(page["executions"]) for page in pages))
                state = sem.read()
                self.counts.append(state.active_count)
                self.holders.append(len(state.holders))
            except BaseException as exc:  # reported by the test, never swallowed
                self.errors.append(exc)
                return
            self._stop.wait(self.interval)

    @contextmanager
    def sampling(self) -> Iterator[Sampler]:
        thread = threading.Thread(target=self._loop, name="e2e-sampler", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(10)
        assert not self.errors, f"the sampler failed: {self.errors!r}"
        assert self.running, "the sampler took no samples"


# --------------------------------------------------------------------------- 1. realtime


def test_realtime_mode_processes_every_uploaded_file(sandbox: Any) -> None:
    files: dict[str, str] = {}
    for folder in range(10):
        for n in range(5):
            index = folder * 5 + n
            files[f"dept-{folder}/doc-{n}.txt"] = pii_text(index) if index % 2 == 0 else clean_text(index)
    # Two files the pipeline must account for without redacting: unsupported, and empty.
    files["dept-3/doc-4.txt"] = ""
    del files["dept-7/doc-4.txt"]
    files["dept-7/scan.png"] = "not really a png"
    assert len(files) == 50
    upload(sandbox, files)
    wait_idle(sandbox)

    runs = all_runs(sandbox)
    owner = files_of(runs)
    assert set(owner) == set(files), "every uploaded file belongs to a run"
    assert {run.status for run in runs} == {JobStatus.COMPLETE}
    for key, run in owner.items():
        assert run.job_id == job_id_for_key(key, 1)
    assert {job_id_for_key(k, 1) for k in files} == {run.job_id for run in runs}

    failed: dict[str, list[str]] = {kind: [] for kind in ("detect", "redact")}
    for run in runs:
        for kind in failed:
            failed[kind] += run.failed_files[kind]
    assert failed == {"detect": [], "redact": []}
    unsupported = [k for run in runs for k in run.failed_files["unsupported"]]
    empty = [k for run in runs for k in run.failed_files["empty"]]
    assert unsupported == ["dept-7/scan.png"]
    assert empty == ["dept-3/doc-4.txt"]

    for key, original in files.items():
        redacted = read_output(sandbox, key)
        if key == "dept-7/scan.png":
            assert redacted is None, "an unsupported file is not copied"
            continue
        assert redacted is not None, f"no redacted copy of {key}"
        leaked = [value for value in ALL_PII if value in redacted]
        assert leaked == [], f"{key} still holds {leaked}"
        seeded = [value for value in ALL_PII if value in original]
        if seeded:
            assert redacted.count("[REDACTED:") == len(seeded), redacted
        else:
            assert redacted == original

    assert_no_active_runs(sandbox)
    assert_semaphore_settled(sandbox)
    assert_dead_letter_queues_empty(sandbox)
    assert queue_messages(sandbox, "MainQueueUrl") == 0


# --------------------------------------------------------------------------- 2. batch


def schedule_rule_of(sandbox: Any, function_output: str) -> str:
    """The name of the schedule rule that targets a function (read from EventBridge)."""
    events = sandbox.client("events")
    function_arn = sandbox.client("lambda").get_function(FunctionName=sandbox.outputs[function_output])[
        "Configuration"
    ]["FunctionArn"]
    names = events.list_rule_names_by_target(TargetArn=function_arn)["RuleNames"]
    scheduled = [n for n in names if events.describe_rule(Name=n).get("ScheduleExpression")]
    assert len(scheduled) == 1, scheduled
    return scheduled[0]


def batch_reports(sandbox: Any) -> list[dict[str, Any]]:
    reports = []
    for record in invocations_of(sandbox, "BatchTriggerFunctionName"):
        assert not record.errored, record.payload
        reports.append(json.loads(record.payload))
    return reports


def test_batch_mode_processes_each_folder_once(make_sandbox: Any) -> None:
    sandbox = make_sandbox(ProcessingMode="batch")
    files = {f"batch-{f}/part-{n}.txt": pii_text(f * 3 + n) for f in range(3) for n in range(3)}
    files["loose.csv"] = "name,email\nJohn,john.doe@example.com\n"
    upload(sandbox, files)
    wait_idle(sandbox)
    assert all_runs(sandbox) == [], "batch mode: nothing runs before the schedule fires"

    rule = schedule_rule_of(sandbox, "BatchTriggerFunctionName")
    sandbox.bus.fire_schedule(rule)
    wait_idle(sandbox)

    runs = all_runs(sandbox)
    jobs = {job_id_for_key(key, 1) for key in files}
    assert sorted(run.job_id for run in runs) == sorted(jobs), "one run per job"
    assert {run.status for run in runs} == {JobStatus.COMPLETE}
    assert set(files_of(runs)) == set(files)
    for key in files:
        redacted = read_output(sandbox, key)
        assert redacted is not None and not [v for v in ALL_PII if v in redacted], key
    first = batch_reports(sandbox)
    assert sorted(first[0]["queued"]) == sorted(jobs)

    sandbox.bus.fire_schedule(rule)
    wait_idle(sandbox)
    later = batch_reports(sandbox)[len(first) :]
    assert later, "the second firing ran the batch trigger"
    for report in later:
        assert report["queued"] == [] and report["reclaimed"] == []
        assert report["decisions"] == {"skip_complete": len(jobs)}
    assert sorted((r.job_id, r.started_at) for r in all_runs(sandbox)) == sorted(
        (r.job_id, r.started_at) for r in runs
    )
    assert_no_active_runs(sandbox)
    assert_semaphore_settled(sandbox)
    assert_dead_letter_queues_empty(sandbox)


# --------------------------------------------------------------------------- 3. concurrency


def emf_totals(sandbox: Any) -> dict[str, float]:
    """Sum of every catalog metric over the EMF documents all invocations printed.

    Summed over every function on purpose: which invocation flushes a data point is not what
    these tests are about (see test_metrics_name_the_function_that_emitted_them).
    """
    totals: dict[str, float] = {}
    for record in sandbox.runtime.invocations:
        for doc in json_lines(record.log_lines):
            if "_aws" not in doc:
                continue
            for directive in doc["_aws"]["CloudWatchMetrics"]:
                for metric in directive["Metrics"]:
                    values = doc[metric["Name"]]
                    totals[metric["Name"]] = totals.get(metric["Name"], 0) + sum(
                        values if isinstance(values, list) else [values]
                    )
    return totals


def test_running_executions_never_exceed_the_slots(make_sandbox: Any) -> None:
    sandbox = make_sandbox(MaxConcurrentWorkflows="2")
    big = (pii_text(1) + clean_text(2)) * 1200  # ~200 KB: long enough for executions to overlap
    files = {f"single-{n}.txt": (big if n % 3 == 0 else pii_text(n)) for n in range(8)}
    with Sampler(sandbox).sampling() as sampler:
        upload(sandbox, files)
        wait_idle(sandbox)

    assert max(sampler.running) <= 2, sampler.running
    assert max(sampler.counts) <= 2, sampler.counts
    assert min(sampler.counts) >= 0
    assert max(sampler.holders) <= 2, sampler.holders
    assert max(sampler.running) == 2, "the jobs never overlapped: the limit was not exercised"
    assert emf_totals(sandbox).get(Metric.CAPACITY_WAITS, 0) >= 1, "no message ever waited for a slot"

    runs = all_runs(sandbox)
    assert sorted(run.job_id for run in runs) == sorted(files)
    assert {run.status for run in runs} == {JobStatus.COMPLETE}
    assert len({run.execution_arn for run in runs if run.execution_arn}) == 8, "one execution per job"
    for key in files:
        redacted = read_output(sandbox, key)
        assert redacted is not None and not [v for v in ALL_PII if v in redacted], key
    assert_no_active_runs(sandbox)
    assert_semaphore_settled(sandbox)
    assert_dead_letter_queues_empty(sandbox)


# --------------------------------------------------------------------------- 4. a task raises


class PoisonedFileError(Exception):
    """Raised by the patched detect function for one file."""


def test_a_file_whose_task_raises_is_recorded_and_the_job_completes(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.handlers.detect as detect_handler

    real_detect = detect_handler.detect_file
    bad = "claims/broken.txt"

    def detect_or_raise(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event["file_key"] == bad:
            raise PoisonedFileError("the parser choked on this file")
        return real_detect(event, *args, **kwargs)

    monkeypatch.setattr("pipeline.handlers.detect.detect_file", detect_or_raise)
    files = {"claims/a.txt": pii_text(0), "claims/b.txt": pii_text(1), bad: pii_text(2)}
    upload(sandbox, files)
    wait_idle(sandbox)

    # Under load a sibling may land after the folder's run was frozen and go to the next run.
    runs = all_runs(sandbox)
    assert {r.job_id for r in runs} == {"claims/"}
    assert all(r.status is JobStatus.COMPLETE for r in runs)
    assert sorted(k for r in runs for k in r.files) == sorted(files)
    run = next(r for r in runs if bad in r.files)
    [failure] = run.failed_files["detect"]
    assert failure["key"] == bad
    assert failure["error"] == "PoisonedFileError"
    assert "the parser choked" in failure["message"]
    assert run.failed_files["redact"] == []
    assert run.redaction_results["files_failed"] == 1
    assert run.redaction_results["files_redacted"] == 2
    # Not transient: the handler's own exception is not retried, it is recorded at once.
    detect_errors = [r for r in invocations_of(sandbox, "DetectFunctionName") if r.errored]
    assert [r.error_type for r in detect_errors] == ["PoisonedFileError"]
    for key in files:
        redacted = read_output(sandbox, key)
        if key == bad:
            assert redacted is None, "a failed file has no redacted copy"
        else:
            assert redacted is not None and not [v for v in ALL_PII if v in redacted], key
    assert_no_active_runs(sandbox)
    assert_semaphore_settled(sandbox)
    assert_dead_letter_queues_empty(sandbox)


# --------------------------------------------------------------------------- 5. a task times out


def test_a_task_that_overruns_its_timeout_is_retried_then_recorded(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    import pipeline.handlers.detect as detect_handler
    from pipeline.statemachine.build import TIMEOUT_RETRY_MAX_ATTEMPTS

    real_detect = detect_handler.detect_file
    slow = "scans/slow.txt"
    marker = f"e2e: slow detect of {slow}"
    released = threading.Event()

    def detect_slowly(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event["file_key"] == slow:
            print(marker)  # lands in this invocation's log lines: ties the timeout to the key
            released.wait(60)  # never ends on its own within the timeout, however busy the machine
            # Abandoned by the runtime long before: touch nothing (the sandbox may be stopping).
            raise AssertionError("the runtime should have cut this invocation off")
        return real_detect(event, *args, **kwargs)

    monkeypatch.setattr("pipeline.handlers.detect.detect_file", detect_slowly)
    request.addfinalizer(released.set)
    detect_name = sandbox.outputs["DetectFunctionName"]
    # A Timeout of 1 s is cut off after 1 real second (the time scale never shortens a handler's
    # time below min(Timeout, the sandbox's minimum)): the slow file never finishes within it.
    sandbox.client("lambda").update_function_configuration(FunctionName=detect_name, Timeout=1)
    files = {"scans/a.txt": pii_text(3), "scans/b.txt": pii_text(4), slow: pii_text(5)}
    upload(sandbox, files)
    wait_idle(sandbox)

    slow_attempts = [r for r in invocations_of(sandbox, "DetectFunctionName") if marker in r.log_lines]
    assert len(slow_attempts) == 1 + TIMEOUT_RETRY_MAX_ATTEMPTS, "first attempt plus its one retry"
    assert all(r.timed_out and r.error_type == "Sandbox.Timedout" for r in slow_attempts)

    # Under load a sibling may land after the folder's run was frozen and go to the next run.
    runs = all_runs(sandbox)
    assert all(r.status is JobStatus.COMPLETE for r in runs)
    run = next(r for r in runs if slow in r.files)
    [failure] = run.failed_files["detect"]
    assert failure["key"] == slow
    assert failure["error"] == "Sandbox.Timedout"
    assert "timed out" in failure["message"].lower()
    for key in files:
        redacted = read_output(sandbox, key)
        if key == slow:
            assert redacted is None
        else:
            assert redacted is not None and not [v for v in ALL_PII if v in redacted], key
    assert_no_active_runs(sandbox)
    assert_semaphore_settled(sandbox)
    assert_dead_letter_queues_empty(sandbox)


# --------------------------------------------------------------------------- 6. poison message


def receive_all(sandbox: Any, output: str) -> list[dict[str, Any]]:
    sqs = sandbox.client("sqs")
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=sandbox.outputs[output], MaxNumberOfMessages=10, AttributeNames=["All"], VisibilityTimeout=60
    ).get("Messages", []):
        messages += batch
    return messages


def test_a_poison_message_reaches_the_dlq_after_max_receive_count(sandbox: Any) -> None:
    sqs = sandbox.client("sqs")
    main = sandbox.outputs["MainQueueUrl"]
    redrive = json.loads(
        sqs.get_queue_attributes(QueueUrl=main, AttributeNames=["RedrivePolicy"])["Attributes"][
            "RedrivePolicy"
        ]
    )
    max_receives = int(redrive["maxReceiveCount"])
    # The template's 365 s visibility is 18 s at the time scale: x5 receives is too slow for a test.
    # 20 s (1 s scaled) keeps the redrive mechanics (maxReceiveCount, the DLQ) exactly as deployed.
    sqs.set_queue_attributes(QueueUrl=main, Attributes={"VisibilityTimeout": "20"})
    poison = '{"v": 1, "job_id": 42, "note": "not a job message"'
    poison_id = sqs.send_message(QueueUrl=main, MessageBody=poison)["MessageId"]
    upload(sandbox, {"ok/report.txt": pii_text(7)})
    wait_idle(sandbox)

    dead = receive_all(sandbox, "DeadLetterQueueUrl")
    assert [m["Body"] for m in dead] == [poison]
    assert int(dead[0]["Attributes"]["ApproximateReceiveCount"]) >= max_receives
    assert queue_messages(sandbox, "MainQueueUrl") == 0
    # The router refused it once per receive: alone in a batch (every record failed, so the batch
    # raises) or as a reported item failure of a batch it shared with the good message.
    refusals = 0
    for record in invocations_of(sandbox, "RouterFunctionName"):
        if record.error_type == "BatchProcessingError":
            refusals += 1
        elif not record.errored:
            failures = json.loads(record.payload)["batchItemFailures"]
            refusals += sum(1 for f in failures if f["itemIdentifier"] == poison_id)
            assert all(f["itemIdentifier"] == poison_id for f in failures), failures
    assert refusals == max_receives
    assert emf_totals(sandbox).get(Metric.MALFORMED_MESSAGES, 0) >= 1

    # Nothing else affected: the real upload went through, no stray run, no slot taken.
    [run] = all_runs(sandbox)
    assert (run.job_id, run.status) == ("ok/", JobStatus.COMPLETE)
    redacted = read_output(sandbox, "ok/report.txt")
    assert redacted is not None and not [v for v in ALL_PII if v in redacted]
    assert_no_active_runs(sandbox)
    assert_semaphore_settled(sandbox)
    assert queue_messages(sandbox, "TrackerDeadLetterQueueUrl") == 0
    assert queue_messages(sandbox, "IngestDeadLetterQueueUrl") == 0


# --------------------------------------------------------------------------- 7. duplicate event


def is_succeeded_status_change(event: Mapping[str, Any]) -> bool:
    return (
        event.get("detail-type") == "Step Functions Execution Status Change"
        and (event.get("detail") or {}).get("status") == "SUCCEEDED"
    )


def test_a_duplicated_status_event_releases_one_slot_only(make_sandbox: Any) -> None:
    sandbox = make_sandbox(MaxConcurrentWorkflows="2")
    # Another job's execution holds the other slot for the whole test.
    other = "another-job-20260101T000000-0123456789abcdef"
    assert semaphore(sandbox).acquire(other, "2026-01-01T00:00:00.000000Z", 2).value == "acquired"
    sandbox.bus.duplicate_next(is_succeeded_status_change)
    with Sampler(sandbox).sampling() as sampler:
        upload(sandbox, {"dup.txt": pii_text(8)})
        wait_idle(sandbox)

    [run] = all_runs(sandbox)
    assert run.status is JobStatus.COMPLETE
    succeeded = [
        e
        for e in sandbox.bus.emitted_events()
        if is_succeeded_status_change(e) and e["detail"]["executionArn"] == run.execution_arn
    ]
    assert len(succeeded) == 1, "one status change, delivered twice"
    tracker_runs = invocations_of(sandbox, "WorkflowTrackerFunctionName")
    assert all(not r.errored for r in tracker_runs)
    assert sorted(json.loads(r.payload)["outcome"] for r in tracker_runs) == ["duplicate", "released"]
    assert emf_totals(sandbox).get(Metric.DUPLICATE_RELEASES, 0) >= 1

    # The duplicate took nothing from the other job: its slot is still held and counted.
    assert min(sampler.counts) >= 0
    assert max(sampler.counts) <= 2
    assert_semaphore_settled(sandbox, {other: "2026-01-01T00:00:00.000000Z"})
    assert semaphore(sandbox).release(other).value == "released"
    assert_semaphore_settled(sandbox)
    assert_no_active_runs(sandbox)
    assert_dead_letter_queues_empty(sandbox)


# --------------------------------------------------------------------------- 8. telemetry

# Which function emits each metric the acceptance list names.
EMITTED_BY = {
    Metric.FILES_INGESTED: "IngestFunctionName",
    Metric.JOBS_STARTED: "RouterFunctionName",
    Metric.FILES_DETECTED: "DetectFunctionName",
    Metric.FILES_REDACTED: "DetectFunctionName",  # blackout (the default): redacted in the same pass
    Metric.JOBS_SUCCEEDED: "WorkflowTrackerFunctionName",
}


def catalog_metrics(sandbox: Any) -> list[dict[str, Any]]:
    pages = sandbox.client("cloudwatch").get_paginator("list_metrics").paginate(Namespace=NAMESPACE)
    return [metric for page in pages for metric in page["Metrics"]]


def run_a_small_workload(sandbox: Any) -> None:
    upload(sandbox, {"tele/a.txt": pii_text(9), "tele/b.txt": clean_text(10), "tele-root.txt": pii_text(11)})
    wait_idle(sandbox)
    runs = all_runs(sandbox)
    assert len(runs) == 2 and {run.status for run in runs} == {JobStatus.COMPLETE}


def test_metrics_of_the_catalog_reach_cloudwatch(sandbox: Any) -> None:
    run_a_small_workload(sandbox)
    metrics = catalog_metrics(sandbox)
    names = {metric["MetricName"] for metric in metrics}
    assert set(EMITTED_BY) <= names
    assert names <= {spec.name.value for spec in CATALOG.values()}, "only catalog metrics are emitted"
    functions = {sandbox.outputs[output] for output in FUNCTION_OUTPUTS}
    for metric in metrics:
        dimensions = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
        assert set(dimensions) == set(STANDARD_DIMENSIONS), metric
        assert dimensions["function"] in functions, metric  # a deployed function, never "local"
        assert dimensions["stage"] == "dev"
        assert dimensions["service"]
    # Data points were published, not just the names: each metric above has a positive sum.
    cloudwatch = sandbox.client("cloudwatch")
    for name in EMITTED_BY:
        sums = [
            point["Sum"]
            for metric in metrics
            if metric["MetricName"] == name
            for point in cloudwatch.get_metric_statistics(
                Namespace=NAMESPACE,
                MetricName=name,
                Dimensions=metric["Dimensions"],
                StartTime=datetime.now(UTC) - timedelta(hours=1),
                EndTime=datetime.now(UTC) + timedelta(minutes=5),
                Period=60,
                Statistics=["Sum"],
            )["Datapoints"]
        ]
        assert sum(sums) > 0, name


def overlap_router_with_detect(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Make a common interleaving certain: an execution's first detect invocation starts before
    the router invocation that started it emits JobsStarted and logs "message routed".

    It happens by itself whenever the pipeline is busy (the router still has a DynamoDB write and
    its telemetry to do after StartExecution); patching only the router's `emit` to wait for it
    makes it deterministic. Returns the event set when a detect invocation ran.
    """
    import pipeline.handlers.detect as detect_handler
    import pipeline.handlers.router as router_handler

    detect_started = threading.Event()
    real_detect, real_emit = detect_handler.detect_file, router_handler.emit

    def detect(event: Any, *args: Any, **kwargs: Any) -> Any:
        detect_started.set()
        return real_detect(event, *args, **kwargs)

    def emit(metric: Metric, value: float = 1) -> None:
        if metric is Metric.JOBS_STARTED:
            detect_started.wait(5)
        real_emit(metric, value)

    monkeypatch.setattr("pipeline.handlers.detect.detect_file", detect)
    monkeypatch.setattr("pipeline.handlers.router.emit", emit)
    return detect_started


def test_metrics_name_the_function_that_emitted_them(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    detect_started = overlap_router_with_detect(monkeypatch)
    upload(sandbox, {"relabel.txt": pii_text(12)})
    wait_idle(sandbox)
    assert detect_started.is_set()
    [run] = all_runs(sandbox)
    assert run.status is JobStatus.COMPLETE

    emitters: dict[str, set[str]] = {}
    for metric in catalog_metrics(sandbox):
        dimensions = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
        emitters.setdefault(metric["MetricName"], set()).add(dimensions["function"])
    expected = {name.value: {sandbox.outputs[output]} for name, output in EMITTED_BY.items()}
    assert {name: emitters.get(name) for name in expected} == expected


def log_records(sandbox: Any, function: str) -> list[dict[str, Any]]:
    """The JSON log records (EMF documents aside) in a function's CloudWatch log group."""
    logs = sandbox.client("logs")
    pages = logs.get_paginator("filter_log_events").paginate(logGroupName=f"/aws/lambda/{function}")
    messages = [event["message"] for page in pages for event in page["events"]]
    assert any(m.startswith("START RequestId:") for m in messages), function
    return [doc for doc in json_lines(messages) if "_aws" not in doc]


# The functions a realtime run of each redaction mode does not invoke: the batch trigger (batch
# mode only) and, in blackout mode, the synthetic mapping and the redaction Map (DetectPII writes
# the redacted copies in the same pass).
NOT_INVOKED_IN = {
    "blackout": ("BatchTriggerFunctionName", "GenerateSyntheticFunctionName", "RedactFunctionName"),
    "synthetic": ("BatchTriggerFunctionName",),
}


@pytest.mark.parametrize("mode", sorted(NOT_INVOKED_IN))
def test_function_logs_carry_the_job_id(make_sandbox: Any, mode: str) -> None:
    sandbox = make_sandbox(RedactionMode=mode)
    run_a_small_workload(sandbox)
    # The reconciler runs on its schedule, about no job: whether it ran in this window is chance.
    reconciler = sandbox.outputs["ReconcilerFunctionName"]
    ran = sorted({record.function_name for record in sandbox.runtime.invocations} - {reconciler})
    expected = {sandbox.outputs[o] for o in FUNCTION_OUTPUTS} - {
        *(sandbox.outputs[o] for o in NOT_INVOKED_IN[mode]),
        reconciler,
    }
    assert set(ran) == expected, f"every function of a realtime {mode} run ran"
    jobs = {run.job_id for run in all_runs(sandbox)}
    for function in ran:
        records = log_records(sandbox, function)
        assert records, f"/aws/lambda/{function} holds no JSON log record"
        assert all(doc.get("job_id") in jobs for doc in records), function
        assert {doc["level"] for doc in records} <= {"INFO", "WARNING"}, function


def test_log_records_belong_to_their_invocation(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    detect_started = overlap_router_with_detect(monkeypatch)
    upload(sandbox, {"keys.txt": pii_text(13)})
    wait_idle(sandbox)
    assert detect_started.is_set()
    for function in sorted({record.function_name for record in sandbox.runtime.invocations}):
        requests = {r.request_id for r in sandbox.runtime.invocations if r.function_name == function}
        for doc in log_records(sandbox, function):
            assert doc["function_name"] == function, doc
            assert doc["function_request_id"] in requests, doc
            if "file_key" in doc:
                assert doc["job_id"] == job_id_for_key(doc["file_key"], 1), doc
