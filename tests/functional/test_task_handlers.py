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


def run_file(resources, lambda_context, key: str, mode: str = "blackout") -> tuple[dict, dict]:
    """Detect then redact one file; returns the stored results (the handlers return summaries)."""
    found = detect.handler(task_input(resources, file_key=key), lambda_context)
    assert set(found) == {"outcome"}, "a per-file task hands back its outcome only"
    mapping = {"mapping_s3_key": None}
    if mode == "synthetic":
        mapping = generate_synthetic.handler(task_input(resources, files=[key]), lambda_context)
    done = redact.handler(
        task_input(resources, file_key=key, redaction_mode=mode, mapping_s3_key=mapping["mapping_s3_key"]), lambda_context
    )
    assert set(done) == {"outcome"}
    return stored(resources, "detect", key), stored(resources, "redact", key)


def stored(resources, phase: str, key: str) -> dict:
    from pipeline.artifacts import result_key

    body = resources.client("s3").get_object(Bucket=resources.work_bucket, Key=result_key(EXECUTION, phase, key))["Body"]
    return json.loads(body.read())


def test_blackout_replaces_each_entity_with_its_type(resources, lambda_context) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    found, done = run_file(resources, lambda_context, "claims/a.txt")
    assert found["outcome"] == "ok"
    assert found["entity_counts"] == {"EMAIL": 1, "PHONE": 1, "CREDIT_DEBIT_NUMBER": 1, "SSN": 1}
    assert done == {
        "file_key": "claims/a.txt", "phase": "redact", "output_key": "claims/a.txt", "replacements": 4, "outcome": "redacted"
    }
    assert output(resources, "claims/a.txt") == (
        "Contact [REDACTED:EMAIL] or [REDACTED:PHONE]. Card [REDACTED:CREDIT_DEBIT_NUMBER], SSN [REDACTED:SSN].\n"
    )


def test_synthetic_mode_is_consistent_across_the_job_and_hides_every_original(resources, lambda_context) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    put(resources, "claims/b.txt", b"Again: jane.roe@corp.example\n")
    files = ["claims/a.txt", "claims/b.txt"]
    for key in files:
        detect.handler(task_input(resources, file_key=key), lambda_context)
    mapping = generate_synthetic.handler(task_input(resources, files=files), lambda_context)
    assert mapping["replacements"] == 4
    for key in files:
        redact.handler(
            task_input(resources, file_key=key, redaction_mode="synthetic", mapping_s3_key=mapping["mapping_s3_key"]),
            lambda_context,
        )
    a, b = output(resources, "claims/a.txt"), output(resources, "claims/b.txt")
    for original in ("jane.roe@corp.example", "415-555-2671", "4111 1111 1111 1111", "123-45-6789"):
        assert original not in a + b
    fake_email = b.removeprefix("Again: ").strip()
    assert fake_email in a  # the same person gets the same fake everywhere in the job


def test_an_empty_file_is_recorded_as_empty_not_failed(resources, lambda_context) -> None:
    put(resources, "claims/empty.txt", b"")
    found, done = run_file(resources, lambda_context, "claims/empty.txt")
    assert found["outcome"] == "empty"
    assert done["outcome"] == "redacted" and output(resources, "claims/empty.txt") == ""


def test_a_file_that_is_not_utf8_is_a_recorded_failure_of_that_file(resources, lambda_context) -> None:
    put(resources, "claims/latin1.txt", "café ñ".encode("latin-1"))
    found, done = run_file(resources, lambda_context, "claims/latin1.txt")
    assert found["outcome"] == "failed" and found["error"] == "NotUtf8"
    assert done["outcome"] == "skipped"


def test_a_file_changed_after_detection_is_not_redacted_with_stale_offsets(resources, lambda_context) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    detect.handler(task_input(resources, file_key="claims/a.txt"), lambda_context)
    put(resources, "claims/a.txt", b"rewritten " + TEXT.encode())
    with pytest.raises(Exception, match="changed after detection"):
        redact.handler(
            task_input(resources, file_key="claims/a.txt", redaction_mode="blackout", mapping_s3_key=None), lambda_context
        )


def test_redacting_a_file_without_a_stored_detection_raises(resources, lambda_context) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    with pytest.raises(Exception, match="no stored detection result"):
        redact.handler(task_input(resources, file_key="claims/a.txt", redaction_mode="blackout", mapping_s3_key=None), lambda_context)


# -- the run's bookkeeping (finalize) -------------------------------------------------------------

RUN = {"job_id": "claims/", "started_at": "2026-11-29T20:00:00.000000Z"}
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def seed_run(resources, status: JobStatus, files: list[str]) -> TrackingStore:
    store = TrackingStore(resources.tracking_table, resources.client("dynamodb"))
    run = RunRef(RUN["job_id"], RUN["started_at"])
    store.create_run(run, files, resources.input_bucket, datetime(2026, 11, 29, 20, tzinfo=UTC))
    for target in (JobStatus.IN_PROGRESS, JobStatus.DETECTING, JobStatus.DETECT_COMPLETE, JobStatus.REDACTING, JobStatus.REDACT_COMPLETE):
        if _rank(target) > _rank(status):
            break
        store.transition(run, target, datetime(2026, 11, 29, 20, 1, tzinfo=UTC))
    return store


def _rank(status: JobStatus) -> int:
    from pipeline.status import LIFECYCLE

    return LIFECYCLE.index(status)


def failure(key: str, phase: str, error: str, cause: str) -> dict:
    return {"action": "record_failure", "phase": phase, "file_key": key, "error": {"Error": error, "Cause": cause}}


def test_a_caught_failure_is_stored_with_its_key_error_and_a_cut_cause(resources, lambda_context) -> None:
    cause = json.dumps({"errorMessage": "the parser choked " + "é" * 300, "errorType": "Boom", "stackTrace": ["x" * 5000]})
    answer = finalize.handler(task_input(resources, **failure("claims/b.txt", "detect", "Boom", cause)), lambda_context)
    assert answer == {"outcome": "failed"}
    result = stored(resources, "detect", "claims/b.txt")
    assert result["file_key"] == "claims/b.txt" and result["error"] == "Boom" and result["outcome"] == "failed"
    assert result["message"].startswith("the parser choked") and len(result["message"].encode()) <= MAX_MESSAGE_BYTES
    assert len(result["cause"].encode()) <= MAX_CAUSE_BYTES and cause.startswith(result["cause"])


def test_the_account_reads_every_stored_result_and_writes_the_outcome_on_the_record(resources, lambda_context) -> None:
    files = ["j/a.txt", "j/b.txt", "j/c.txt", "j/d.txt", "j/e.txt"]
    store = seed_run(resources, JobStatus.REDACT_COMPLETE, [*files, "j/x.pdf"])
    put(resources, "j/a.txt", TEXT.encode())
    put(resources, "j/c.txt", b"")
    put(resources, "j/d.txt", b"nothing here\n")
    for key in ("j/a.txt", "j/c.txt", "j/d.txt"):
        detect.handler(task_input(resources, file_key=key), lambda_context)
    finalize.handler(task_input(resources, **failure("j/b.txt", "detect", "Sandbox.Timedout", '{"errorMessage": "Task timed out"}')), lambda_context)
    for key in ("j/a.txt", "j/b.txt", "j/c.txt"):
        redact.handler(task_input(resources, file_key=key, redaction_mode="blackout", mapping_s3_key=None), lambda_context)
    finalize.handler(task_input(resources, **failure("j/d.txt", "redact", "S3Error", "boom")), lambda_context)
    # j/e.txt has no stored result at all: a failure named ResultMissing, never a silent skip
    event = task_input(resources, action="check", phase="complete", **RUN, files=files, unsupported=["j/x.pdf"], mapping_s3_key=None)
    check = finalize.handler(event, lambda_context)
    assert check == {
        "within_tolerance": False,  # 3 of 5 failed
        "failed_share": 0.6,
        "counts": {"files": 5, "failed": 3, "entities": 4},
    }
    record = store.get_run(RunRef(**RUN))
    assert record is not None
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
    assert record.mapping_s3_key is None
    assert record.status is JobStatus.REDACT_COMPLETE  # the account writes no status


def test_the_detect_account_tolerates_up_to_half_failing(resources, lambda_context) -> None:
    seed_run(resources, JobStatus.DETECTING, ["j/a.txt", "j/b.txt"])
    put(resources, "j/a.txt", TEXT.encode())
    detect.handler(task_input(resources, file_key="j/a.txt"), lambda_context)
    finalize.handler(task_input(resources, **failure("j/b.txt", "detect", "Boom", "x")), lambda_context)
    event = task_input(resources, action="check", phase="detect", **RUN, files=["j/a.txt", "j/b.txt"], unsupported=[])
    assert finalize.handler(event, lambda_context)["within_tolerance"] is True  # exactly 50%


def test_the_account_of_a_run_that_moved_on_raises_job_no_longer_active(resources, lambda_context) -> None:
    seed_run(resources, JobStatus.DETECTING, ["j/a.txt"])
    event = task_input(resources, action="check", phase="complete", **RUN, files=[], unsupported=[], mapping_s3_key=None)
    with pytest.raises(JobNoLongerActive):
        finalize.handler(event, lambda_context)


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
