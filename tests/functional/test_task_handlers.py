"""The workflow's Lambda tasks on moto S3: detect, synthetic mapping, redact, finalize."""

from __future__ import annotations

import pytest

from pipeline.handlers import detect, finalize, generate_synthetic, redact

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


def run_file(resources, lambda_context, key: str, mode: str = "blackout") -> tuple[dict, dict]:
    found = detect.handler(task_input(resources, file_key=key), lambda_context)
    mapping = {"mapping_s3_key": None}
    if mode == "synthetic":
        mapping = generate_synthetic.handler(task_input(resources, detect_results=[found]), lambda_context)
    done = redact.handler(
        task_input(resources, redaction_mode=mode, mapping_s3_key=mapping["mapping_s3_key"], detection=found),
        lambda_context,
    )
    return found, done


def test_blackout_replaces_each_entity_with_its_type(resources, lambda_context) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    found, done = run_file(resources, lambda_context, "claims/a.txt")
    assert found["outcome"] == "ok"
    assert found["entity_counts"] == {"EMAIL": 1, "PHONE": 1, "CREDIT_DEBIT_NUMBER": 1, "SSN": 1}
    assert done == {"file_key": "claims/a.txt", "output_key": "claims/a.txt", "replacements": 4, "outcome": "redacted"}
    assert output(resources, "claims/a.txt") == (
        "Contact [REDACTED:EMAIL] or [REDACTED:PHONE]. Card [REDACTED:CREDIT_DEBIT_NUMBER], SSN [REDACTED:SSN].\n"
    )


def test_synthetic_mode_is_consistent_across_the_job_and_hides_every_original(resources, lambda_context) -> None:
    put(resources, "claims/a.txt", TEXT.encode())
    put(resources, "claims/b.txt", b"Again: jane.roe@corp.example\n")
    first = detect.handler(task_input(resources, file_key="claims/a.txt"), lambda_context)
    second = detect.handler(task_input(resources, file_key="claims/b.txt"), lambda_context)
    mapping = generate_synthetic.handler(task_input(resources, detect_results=[first, second]), lambda_context)
    assert mapping["replacements"] == 4
    for found in (first, second):
        redact.handler(
            task_input(resources, redaction_mode="synthetic", mapping_s3_key=mapping["mapping_s3_key"], detection=found),
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
    found = detect.handler(task_input(resources, file_key="claims/a.txt"), lambda_context)
    put(resources, "claims/a.txt", b"rewritten " + TEXT.encode())
    with pytest.raises(Exception, match="changed after detection"):
        redact.handler(task_input(resources, redaction_mode="blackout", mapping_s3_key=None, detection=found), lambda_context)


def result(key: str, outcome: str, **extra: object) -> dict:
    return {"file_key": key, "outcome": outcome, "entity_counts": {}, "findings_key": None, **extra}


def test_finalize_accounts_for_every_file_and_tolerates_up_to_half_failing(resources, lambda_context) -> None:
    detect_results = [
        result("j/a.txt", "ok", entity_counts={"EMAIL": 2}),
        result("j/b.txt", "failed", error="Sandbox.Timedout", cause='{"errorMessage": "Task timed out"}'),
        result("j/c.txt", "empty"),
        result("j/d.txt", "ok"),
    ]
    redact_results = [
        {"file_key": "j/a.txt", "outcome": "redacted", "replacements": 2},
        {"file_key": "j/b.txt", "outcome": "skipped", "replacements": 0},
        {"file_key": "j/c.txt", "outcome": "redacted", "replacements": 0},
        {"file_key": "j/d.txt", "outcome": "failed", "error": "S3Error", "cause": "boom"},
    ]
    event = {"phase": "complete", "job_id": "j/", "unsupported": ["j/x.pdf"], "detect_results": detect_results,
             "redact_results": redact_results, "mapping_s3_key": None}
    summary = finalize.handler(event, lambda_context)
    assert summary["within_tolerance"] is True  # 2 of 4 failed: exactly 50%
    assert summary["failed_files"] == {
        "detect": [{"key": "j/b.txt", "error": "Sandbox.Timedout", "message": "Task timed out"}],
        "redact": [{"key": "j/d.txt", "error": "S3Error", "message": "boom"}],
        "unsupported": ["j/x.pdf"],
        "empty": ["j/c.txt"],
    }
    assert summary["mapping_s3_key_ddb"] == {"NULL": True}
    over = {**event, "redact_results": [*redact_results[:2], {**redact_results[2], "outcome": "failed"}, redact_results[3]]}
    assert finalize.handler(over, lambda_context)["within_tolerance"] is False
