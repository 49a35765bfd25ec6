"""The workflow's Lambda tasks on moto S3: detect, synthetic mapping, redact, finalize."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from pipeline.artifacts import MAX_CAUSE_BYTES
from pipeline.config import ConfigurationError
from pipeline.handlers import detect, finalize, generate_synthetic, redact
from pipeline.jobs import RunRef
from pipeline.status import JobStatus
from pipeline.stores.tracking import TrackingStore
from pipeline.tasks import MAX_MESSAGE_BYTES, JobNoLongerActive

TEXT = "Contact jane.roe@corp.example or +1 415-555-2671. Card 4111 1111 1111 1111, SSN 123-45-6789.\n"


def put(resources, key: str, body: bytes) -> None:
    resources.client("s3").put_object(Bucket=resources.input_bucket, Key=key, Body=body)


def output(resources, key: str) -> str:
    return resources.client("s3").get_object(Bucket=resources.output_bucket, Key=key)["Body"].read().decode()


def task_input(resources, **fields: object) -> dict:
    return {
        "job_id": "claims/",
        "started_at": "2026-11-29T20:00:00.000000Z",
        "execution_name": "claims-20261129T200000-0123456789abcdef",
        "bucket": resources.input_bucket,
        "output_bucket": resources.output_bucket,
        "trace": {},
        **fields,
    }


EXECUTION = "claims-20261129T200000-0123456789abcdef"
BLACKOUT, SYNTHETIC = "blackout", "synthetic"


def detect_one(resources, lambda_context, key: str, mode: str = BLACKOUT) -> dict:
    """What the detect Map hands back for one file (its item of `detections`)."""
    return detect.handler(task_input(resources, file_key=key, redaction_mode=mode), lambda_context)


def redact_one(resources, lambda_context, key: str, detection: dict | None, mapping_s3_key: str | None) -> dict:
    """The synthetic redaction of one file, given its item of `detections` as the workflow picks it."""
    event = task_input(resources, file_key=key, redaction_mode=SYNTHETIC, mapping_s3_key=mapping_s3_key, detection=detection)
    return redact.handler(event, lambda_context)


def run_synthetic(resources, lambda_context, files: list[str]) -> tuple[list[dict], dict, list[dict]]:
    """Detect, map and redact `files` as the synthetic branch chains them: (detections, mapping, redactions)."""
    detections = [detect_one(resources, lambda_context, key, SYNTHETIC) for key in files]
    mapping = generate_synthetic.handler(task_input(resources, files=files, detections=detections), lambda_context)
    redactions = [
        redact_one(resources, lambda_context, key, detection, mapping["mapping_s3_key"])
        for key, detection in zip(files, detections, strict=True)
    ]
    return detections, mapping, redactions


def stored(resources, phase: str, key: str) -> dict:
    from pipeline.artifacts import result_key

    body = resources.client("s3").get_object(Bucket=resources.work_bucket, Key=result_key(EXECUTION, phase, key))["Body"]
    return json.loads(body.read())


def work_keys(resources) -> list[str]:
    listing = resources.client("s3").list_objects_v2(Bucket=resources.work_bucket)
    return [o["Key"] for o in listing.get("Contents", [])]


def output_keys(resources) -> list[str]:
    listing = resources.client("s3").list_objects_v2(Bucket=resources.output_bucket)
    return [o["Key"] for o in listing.get("Contents", [])]


TEXT_ENTITIES = {"EMAIL": 1, "PHONE": 1, "CREDIT_DEBIT_NUMBER": 1, "SSN": 1}
# The same counts as a summary holds them (pipeline.tasks.SUMMARY_ENTITY_ORDER): EMAIL, PHONE, SSN, CARD.
TEXT_SUMMARY_COUNTS = [1, 1, 1, 1]


def test_blackout_replaces_each_entity_with_its_type(resources, lambda_context) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    found = detect_one(resources, lambda_context, "claims/a.txt")
    assert found == {"outcome": "ok", "entities": TEXT_SUMMARY_COUNTS, "redacted": True}
    assert output(resources, "claims/a.txt") == (
        "Contact [REDACTED:EMAIL] or [REDACTED:PHONE]. Card [REDACTED:CREDIT_DEBIT_NUMBER], SSN [REDACTED:SSN].\n"
    )


def test_blackout_detection_redacts_in_the_same_pass_and_stores_nothing(resources, lambda_context) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    put(resources, "claims/empty.txt", b"")
    summaries = [detect_one(resources, lambda_context, key) for key in ("claims/a.txt", "claims/empty.txt")]
    assert summaries == [
        {"outcome": "ok", "entities": TEXT_SUMMARY_COUNTS, "redacted": True},
        {"outcome": "empty", "redacted": True},
    ]
    assert sorted(output_keys(resources)) == ["claims/a.txt", "claims/empty.txt"]
    assert "jane.roe@corp.example" not in output(resources, "claims/a.txt")
    assert [key for key in work_keys(resources) if key.startswith("_pipeops/")] == []  # no findings, no results


def test_synthetic_detection_stores_the_findings_and_writes_no_copy(resources, lambda_context) -> None:
    from pipeline.artifacts import findings_key

    put(resources, "claims/a.txt", TEXT.encode())
    found = detect_one(resources, lambda_context, "claims/a.txt", SYNTHETIC)
    assert found == {"outcome": "ok", "entities": TEXT_SUMMARY_COUNTS}
    assert work_keys(resources) == [findings_key(EXECUTION, "claims/a.txt")]
    assert output_keys(resources) == []  # the copy waits for the job's mapping


def test_synthetic_mode_is_consistent_across_the_job_and_hides_every_original(resources, lambda_context) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    put(resources, "claims/b.txt", b"Again: jane.roe@corp.example\n")
    _, mapping, redactions = run_synthetic(resources, lambda_context, ["claims/a.txt", "claims/b.txt"])
    assert mapping["replacements"] == 4
    assert redactions == [{"outcome": "redacted", "replacements": 4}, {"outcome": "redacted", "replacements": 1}]
    a, b = output(resources, "claims/a.txt"), output(resources, "claims/b.txt")
    for original in ("jane.roe@corp.example", "415-555-2671", "4111 1111 1111 1111", "123-45-6789"):
        assert original not in a + b
    fake_email = b.removeprefix("Again: ").strip()
    assert fake_email in a  # the same person gets the same fake everywhere in the job


def test_an_empty_file_is_recorded_as_empty_not_failed(resources, lambda_context) -> None:
    put(resources, "claims/empty.txt", b"")
    assert detect_one(resources, lambda_context, "claims/empty.txt") == {"outcome": "empty", "redacted": True}
    assert output(resources, "claims/empty.txt") == ""
    resources.client("s3").delete_object(Bucket=resources.output_bucket, Key="claims/empty.txt")
    detections, _, redactions = run_synthetic(resources, lambda_context, ["claims/empty.txt"])
    assert detections == [{"outcome": "empty"}] and redactions == [{"outcome": "redacted"}]
    assert output(resources, "claims/empty.txt") == ""


def test_a_file_that_is_not_utf8_is_a_recorded_failure_of_that_file(resources, lambda_context) -> None:
    put(resources, "claims/latin1.txt", "café ñ".encode("latin-1"))
    assert detect_one(resources, lambda_context, "claims/latin1.txt") == {"outcome": "failed", "stored": True}
    found = stored(resources, "detect", "claims/latin1.txt")
    assert found["outcome"] == "failed" and found["error"] == "NotUtf8"
    assert output_keys(resources) == []  # no blackout copy of a file that could not be read


def test_the_synthetic_redaction_skips_a_file_whose_detection_failed(resources, lambda_context) -> None:
    put(resources, "claims/latin1.txt", "café ñ".encode("latin-1"))
    detections, _, redactions = run_synthetic(resources, lambda_context, ["claims/latin1.txt"])
    assert detections == [{"outcome": "failed", "stored": True}]
    assert redactions == [{"outcome": "skipped"}]  # the account names it by its detection failure
    assert output_keys(resources) == []


def test_a_file_changed_after_detection_is_not_redacted_with_stale_offsets(resources, lambda_context) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    detection = detect_one(resources, lambda_context, "claims/a.txt", SYNTHETIC)
    mapping = generate_synthetic.handler(task_input(resources, files=["claims/a.txt"], detections=[detection]), lambda_context)
    put(resources, "claims/a.txt", b"rewritten " + TEXT.encode())
    with pytest.raises(Exception, match="changed after detection"):
        redact_one(resources, lambda_context, "claims/a.txt", detection, mapping["mapping_s3_key"])
    assert output_keys(resources) == []


@pytest.mark.parametrize("detection", [None, {}], ids=["absent", "empty"])
def test_redacting_a_file_without_its_detection_raises(resources, lambda_context, detection) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    event = task_input(resources, file_key="claims/a.txt", redaction_mode=SYNTHETIC, mapping_s3_key=None)
    if detection is not None:
        event["detection"] = detection
    with pytest.raises(Exception, match="no detection result for this file"):
        redact.handler(event, lambda_context)
    assert output_keys(resources) == []


# -- the run's bookkeeping (finalize) -------------------------------------------------------------

RUN = {"job_id": "claims/", "started_at": "2026-11-29T20:00:00.000000Z"}
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
SEEDED_AT = "2026-11-29T20:01:00.000000Z"


def seed_run(resources, status: JobStatus, files: list[str]) -> TrackingStore:
    """A run whose record holds `status` (FAILED: failed by someone else while IN_PROGRESS)."""
    store = TrackingStore(resources.tracking_table, resources.client("dynamodb"))
    run = RunRef(RUN["job_id"], RUN["started_at"])
    store.create_run(run, files, resources.input_bucket, datetime(2026, 11, 29, 20, tzinfo=UTC))
    path = (JobStatus.IN_PROGRESS, JobStatus.DETECTING, JobStatus.DETECT_COMPLETE, JobStatus.REDACTING, JobStatus.REDACT_COMPLETE)
    for target in path:
        if status is JobStatus.FAILED:
            store.transition(run, JobStatus.FAILED, datetime(2026, 11, 29, 20, 1, tzinfo=UTC), fields={"error": "SomeoneElse"})
            break
        if _rank(target) > _rank(status):
            break
        store.transition(run, target, datetime(2026, 11, 29, 20, 1, tzinfo=UTC))
    record = store.get_run(run)
    assert record is not None and record.status is status
    return store


def _rank(status: JobStatus) -> int:
    from pipeline.status import LIFECYCLE

    return LIFECYCLE.index(status)


def record_of(store: TrackingStore):
    record = store.get_run(RunRef(**RUN))
    assert record is not None
    return record


def raw_item(resources) -> dict:
    key = {"job_id": {"S": RUN["job_id"]}, "started_at": {"S": RUN["started_at"]}}
    return resources.client("dynamodb").get_item(TableName=resources.tracking_table, Key=key)["Item"]


def failure(key: str, phase: str, error: str, cause: str) -> dict:
    return {"action": "record_failure", "phase": phase, "file_key": key, "error": {"Error": error, "Cause": cause}}


def check_event(resources, phase: str, mode: str, files: list[str], detections: list, **fields: object) -> dict:
    """The finalize `check` as CheckDetectTolerance / PrepareComplete build it."""
    event = task_input(resources, action="check", phase=phase, **RUN, files=files, unsupported=[], detections=detections)
    if phase == "complete":
        event |= {"redaction_mode": mode, "redactions": None, "mapping_s3_key": None}
    return event | fields


def test_a_caught_failure_is_stored_with_its_key_error_and_a_cut_cause(resources, lambda_context) -> None:
    cause = json.dumps({"errorMessage": "the parser choked " + "é" * 300, "errorType": "Boom", "stackTrace": ["x" * 5000]})
    answer = finalize.handler(task_input(resources, **failure("claims/b.txt", "detect", "Boom", cause)), lambda_context)
    assert answer == {"outcome": "failed", "stored": True}
    result = stored(resources, "detect", "claims/b.txt")
    assert result["file_key"] == "claims/b.txt" and result["error"] == "Boom" and result["outcome"] == "failed"
    assert result["message"].startswith("the parser choked") and len(result["message"].encode()) <= MAX_MESSAGE_BYTES
    assert len(result["cause"].encode()) <= MAX_CAUSE_BYTES and cause.startswith(result["cause"])


def test_the_account_takes_every_file_from_what_its_tasks_handed_back_and_ends_the_run(resources, lambda_context) -> None:
    files = ["j/a.txt", "j/b.txt", "j/c.txt", "j/d.txt", "j/e.txt"]
    store = seed_run(resources, JobStatus.REDACT_COMPLETE, [*files, "j/x.pdf"])
    put(resources, "j/a.txt", TEXT.encode())
    put(resources, "j/c.txt", b"")
    put(resources, "j/d.txt", b"nothing here\n")
    caught = finalize.handler(
        task_input(resources, **failure("j/b.txt", "detect", "Sandbox.Timedout", '{"errorMessage": "Task timed out"}')),
        lambda_context,
    )
    by_key = {key: detect_one(resources, lambda_context, key, SYNTHETIC) for key in ("j/a.txt", "j/c.txt", "j/d.txt")}
    # j/e.txt: the Map's output has no item for it and nothing was stored (a bug): ResultMissing, never a silent skip
    detections = [by_key["j/a.txt"], caught, by_key["j/c.txt"], by_key["j/d.txt"]]
    mapping = generate_synthetic.handler(task_input(resources, files=files, detections=detections), lambda_context)
    redactions = [
        redact_one(resources, lambda_context, key, detection, mapping["mapping_s3_key"])
        for key, detection in zip(files[:3], detections[:3], strict=True)
    ]
    redactions.append(finalize.handler(task_input(resources, **failure("j/d.txt", "redact", "S3Error", "boom")), lambda_context))
    assert redactions[1] == {"outcome": "skipped"}  # b's detection failed: nothing to redact
    event = task_input(
        resources, action="check", phase="complete", **RUN, files=files, unsupported=["j/x.pdf"], redaction_mode=SYNTHETIC,
        detections=detections, redactions=redactions, mapping_s3_key=mapping["mapping_s3_key"],
    )
    check = finalize.handler(event, lambda_context)
    assert check == {
        "within_tolerance": False,  # 3 of 5 failed
        "failed_share": 0.6,
        "counts": {"files": 5, "failed": 3, "entities": 4},
    }
    record = record_of(store)
    assert record.failed_files == {
        "detect": [
            {"key": "j/b.txt", "error": "Sandbox.Timedout", "message": "Task timed out"},
            {"key": "j/e.txt", "error": "ResultMissing", "message": "no detect result was stored for this file"},
        ],
        "redact": [{"key": "j/d.txt", "error": "S3Error", "message": "boom"}],
        "unsupported": ["j/x.pdf"],
        "empty": ["j/c.txt"],
    }
    assert record.redaction_results == {
        "files_total": 5, "files_redacted": 2, "files_failed": 3, "files_empty": 1, "files_unsupported": 1,
        "replacements": 4, "entities_by_type": {"CREDIT_DEBIT_NUMBER": 1, "EMAIL": 1, "PHONE": 1, "SSN": 1},
    }
    assert record.mapping_s3_key == mapping["mapping_s3_key"]
    assert record.status is JobStatus.FAILED and record.error == "FailureToleranceExceeded"
    assert record.cause == "Failed share of files 0.6 is over the tolerance"


def test_the_detect_account_tolerates_up_to_half_failing(resources, lambda_context) -> None:
    store = seed_run(resources, JobStatus.DETECTING, ["j/a.txt", "j/b.txt"])
    put(resources, "j/a.txt", TEXT.encode())
    detections = [
        detect_one(resources, lambda_context, "j/a.txt", SYNTHETIC),
        finalize.handler(task_input(resources, **failure("j/b.txt", "detect", "Boom", "x")), lambda_context),
    ]
    event = check_event(resources, "detect", SYNTHETIC, ["j/a.txt", "j/b.txt"], detections)
    assert finalize.handler(event, lambda_context)["within_tolerance"] is True  # exactly 50%
    record = record_of(store)
    assert record.status is JobStatus.DETECTING  # the detect account writes no status
    assert record.failed_files["detect"] == [{"key": "j/b.txt", "error": "Boom", "message": "x"}]
    assert record.redaction_results["entities_by_type"] == TEXT_ENTITIES


@pytest.mark.parametrize(
    ("phase", "status"),
    [("complete", JobStatus.DETECTING), ("detect", JobStatus.REDACTING), ("detect", JobStatus.FAILED)],
    ids=["verdict-before-redaction-completed", "detect-account-after-detection", "detect-account-of-failed-run"],
)
def test_the_account_of_a_run_that_moved_on_raises_job_no_longer_active(resources, lambda_context, phase, status) -> None:
    store = seed_run(resources, status, ["j/a.txt"])
    event = check_event(resources, phase, SYNTHETIC, [], [])
    with pytest.raises(JobNoLongerActive):
        finalize.handler(event, lambda_context)
    record = record_of(store)
    assert record.status is status and record.redaction_results == {}  # nothing written


# -- the verdict (blackout: PrepareComplete right after the one-pass detection) --------------------


@pytest.fixture
def tracking_updates(resources):
    """Every UpdateItem the handlers send from now on (their shared DynamoDB client)."""
    from pipeline.aws import client

    calls: list[dict] = []

    def note(params: dict, **_: object) -> None:
        calls.append(params)

    events = client("dynamodb").meta.events
    events.register("provide-client-params.dynamodb.UpdateItem", note)
    yield calls
    events.unregister("provide-client-params.dynamodb.UpdateItem", note)


def test_the_verdict_writes_complete_with_the_account_in_one_write(resources, lambda_context, tracking_updates) -> None:
    from pipeline.artifacts import results_prefix

    files = ["j/a.txt", "j/c.txt"]
    store = seed_run(resources, JobStatus.DETECTING, files)
    put(resources, "j/a.txt", TEXT.encode())
    put(resources, "j/c.txt", b"")
    detections = [detect_one(resources, lambda_context, key) for key in files]
    tracking_updates.clear()
    check = finalize.handler(check_event(resources, "complete", BLACKOUT, files, detections), lambda_context)
    assert check == {"within_tolerance": True, "failed_share": 0.0, "counts": {"files": 2, "failed": 0, "entities": 4}}
    assert len(tracking_updates) == 1, "the verdict and the account are one conditional write"
    record = record_of(store)
    assert record.status is JobStatus.COMPLETE and record.error is None and record.mapping_s3_key is None
    assert record.updated_at != SEEDED_AT and TIMESTAMP.match(record.updated_at), record.updated_at
    assert record.redaction_results == {
        "files_total": 2, "files_redacted": 2, "files_failed": 0, "files_empty": 1, "files_unsupported": 0,
        "replacements": 4, "entities_by_type": dict(sorted(TEXT_ENTITIES.items())),
    }
    assert record.failed_files == {"detect": [], "redact": [], "unsupported": [], "empty": ["j/c.txt"]}
    assert raw_item(resources)["results_s3_prefix"] == {"S": results_prefix(EXECUTION)}


def test_the_verdict_over_the_tolerance_writes_failed(resources, lambda_context) -> None:
    files = ["j/a.txt", "j/b.txt", "j/c.txt"]
    store = seed_run(resources, JobStatus.DETECTING, files)
    put(resources, "j/a.txt", TEXT.encode())
    put(resources, "j/b.txt", "café".encode("latin-1"))
    put(resources, "j/c.txt", "ñ".encode("latin-1"))
    detections = [detect_one(resources, lambda_context, key) for key in files]
    check = finalize.handler(check_event(resources, "complete", BLACKOUT, files, detections), lambda_context)
    assert check["within_tolerance"] is False and check["failed_share"] == 0.6667
    record = record_of(store)
    assert record.status is JobStatus.FAILED and record.error == "FailureToleranceExceeded"
    assert record.cause == "Failed share of files 0.6667 is over the tolerance"
    assert [f["key"] for f in record.failed_files["detect"]] == ["j/b.txt", "j/c.txt"]
    assert record.redaction_results["files_redacted"] == 1 and record.redaction_results["files_failed"] == 2


@pytest.mark.parametrize(("broken", "verdict"), [(0, JobStatus.COMPLETE), (2, JobStatus.FAILED)])
def test_a_retried_verdict_finds_its_own_write_and_succeeds(resources, lambda_context, broken, verdict) -> None:
    files = ["j/a.txt", "j/b.txt"]
    store = seed_run(resources, JobStatus.DETECTING, files)
    for index, key in enumerate(files):
        put(resources, key, "café".encode("latin-1") if index < broken else TEXT.encode())
    event = check_event(resources, "complete", BLACKOUT, files, [detect_one(resources, lambda_context, key) for key in files])
    first = finalize.handler(event, lambda_context)
    written = record_of(store)
    assert written.status is verdict
    assert finalize.handler(event, lambda_context) == first  # the retry: its first write landed
    assert record_of(store).status is verdict


@pytest.mark.parametrize("status", [JobStatus.FAILED, JobStatus.QUEUED, JobStatus.REDACT_COMPLETE])
def test_a_verdict_on_a_run_that_moved_on_raises_job_no_longer_active(resources, lambda_context, status) -> None:
    store = seed_run(resources, status, ["j/a.txt"])
    before = raw_item(resources)
    put(resources, "j/a.txt", TEXT.encode())
    event = check_event(resources, "complete", BLACKOUT, ["j/a.txt"], [detect_one(resources, lambda_context, "j/a.txt")])
    with pytest.raises(JobNoLongerActive):
        finalize.handler(event, lambda_context)
    assert raw_item(resources) == before  # neither the verdict nor the account was written
    assert record_of(store).status is status


def test_a_failing_verdict_on_a_run_someone_else_failed_is_not_taken_for_its_own(resources, lambda_context) -> None:
    """Both say FAILED, but the record's error is another writer's: the run moved on, and its
    account and error stay as that writer left them."""
    files = ["j/a.txt", "j/b.txt"]
    store = seed_run(resources, JobStatus.FAILED, files)
    before = raw_item(resources)
    for key in files:
        put(resources, key, "café".encode("latin-1"))
    event = check_event(resources, "complete", BLACKOUT, files, [detect_one(resources, lambda_context, key) for key in files])
    with pytest.raises(JobNoLongerActive):
        finalize.handler(event, lambda_context)
    assert raw_item(resources) == before
    assert record_of(store).error == "SomeoneElse"


def test_a_summary_over_the_limit_is_stored_and_still_counted(resources, lambda_context, monkeypatch) -> None:
    monkeypatch.setattr("pipeline.tasks.SUMMARY_MAX_BYTES", 32)
    store = seed_run(resources, JobStatus.DETECTING, ["j/a.txt"])
    put(resources, "j/a.txt", TEXT.encode())
    found = detect_one(resources, lambda_context, "j/a.txt")
    assert found == {"outcome": "ok", "stored": True, "redacted": True}
    assert stored(resources, "detect", "j/a.txt")["entity_counts"] == TEXT_ENTITIES
    check = finalize.handler(check_event(resources, "complete", BLACKOUT, ["j/a.txt"], [found]), lambda_context)
    assert check["counts"] == {"files": 1, "failed": 0, "entities": 4}
    results = record_of(store).redaction_results
    assert results["entities_by_type"] == dict(sorted(TEXT_ENTITIES.items()))
    assert results["files_redacted"] == 1 and results["replacements"] == 4


def test_status_writes_are_forward_only_and_stamped_in_our_format(resources, lambda_context) -> None:
    store = seed_run(resources, JobStatus.IN_PROGRESS, ["j/a.txt"])
    status = {"action": "status", "table": resources.tracking_table, **RUN}
    assert finalize.handler(task_input(resources, **status, target="REDACTING"), lambda_context) == {"status": "REDACTING"}
    record = store.get_run(RunRef(**RUN))
    assert record is not None and record.status is JobStatus.REDACTING
    assert TIMESTAMP.match(record.updated_at), record.updated_at
    with pytest.raises(JobNoLongerActive):  # backwards
        finalize.handler(task_input(resources, **status, target="DETECTING"), lambda_context)
    failed = task_input(resources, **status, target="FAILED", error="ValueError", cause="c" * 5000)
    finalize.handler(failed, lambda_context)
    record = store.get_run(RunRef(**RUN))
    assert record is not None and record.status is JobStatus.FAILED and record.error == "ValueError"
    assert record.cause == "c" * MAX_CAUSE_BYTES
    with pytest.raises(JobNoLongerActive):  # terminal stays terminal
        finalize.handler(task_input(resources, **status, target="COMPLETE"), lambda_context)


def test_a_status_write_naming_another_table_is_refused(resources, lambda_context) -> None:
    seed_run(resources, JobStatus.IN_PROGRESS, ["j/a.txt"])
    event = task_input(resources, action="status", table="someone-elses", **RUN, target="DETECTING")
    with pytest.raises(ConfigurationError):
        finalize.handler(event, lambda_context)


def test_the_synthetic_mapping_is_kept_apart_from_the_redacted_outputs(resources) -> None:
    """Whoever reads the redacted copies must not find the originals they replaced next to them."""
    from pipeline.artifacts import ArtifactStore

    s3 = resources.client("s3")
    store = ArtifactStore(s3, resources.output_bucket, work_bucket=resources.work_bucket)
    key = store.write_mapping("run-1", {"ann@corp.example": "bo@fake.example"})
    assert store.read_mapping(key) == {"ann@corp.example": "bo@fake.example"}
    assert s3.list_objects_v2(Bucket=resources.output_bucket).get("KeyCount", 0) == 0
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=resources.work_bucket)["Contents"]] == [key]
    assert s3.head_object(Bucket=resources.work_bucket, Key=key)["ServerSideEncryption"] == "AES256"
