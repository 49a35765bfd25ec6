"""Known PII values pushed through every handler never reach a log line, an EMF document or a span."""

from __future__ import annotations

import io
import json
import logging

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pipeline.handlers import (
    batch_trigger,
    detect,
    finalize,
    generate_synthetic,
    ingest,
    redact,
    router,
    workflow_tracker,
)
from pipeline.jobs import JobMessage, execution_arn
from pipeline.telemetry.logging import logger
from tests.conftest import drain_queue, eventbridge_object_created, sqs_event

SEEDED = {
    "email": "ada.lovelace@analytical.example",
    "phone": "+44 20 7946 0958",
    "ssn": "219-09-9999",
    "card": "5555 5555 5555 4444",
    "ipv4": "172.16.254.1",
    "iban": "DE89 3704 0044 0532 0130 00",
}
DOCUMENT = "\n".join(f"{kind}: {value}" for kind, value in SEEDED.items()) + "\n"


def forms(value: str) -> set[str]:
    """The value as written and without separators, so a reformatted leak is caught too."""
    compact = "".join(ch for ch in value if ch.isalnum())
    return {value, compact} if len(compact) >= 6 else {value}


@pytest.fixture
def spans():
    """Every span the handlers record. Without an exporter the handlers use the API alone (no-op
    spans): like the sandbox or a collector would, the test sets the SDK provider they then use."""
    exporter = InMemorySpanExporter()
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    yield exporter
    exporter.shutdown()  # quiet from now on: the provider keeps its processors for the session


@pytest.fixture
def log_lines():
    """Every JSON log line the powertools logger formats, however its stream was bound."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logger.registered_formatter)
    logger.addHandler(handler)
    logger.setLevel("DEBUG")
    yield buffer
    logger.setLevel("INFO")
    logger.removeHandler(handler)


@pytest.mark.parametrize("mode", ["blackout", "synthetic"])
def test_no_seeded_value_leaves_any_handler(resources, lambda_context, capsys, log_lines, spans, mode) -> None:
    s3 = resources.client("s3")
    key = "patients/intake.txt"
    s3.put_object(Bucket=resources.input_bucket, Key=key, Body=DOCUMENT.encode())
    ingest.handler(eventbridge_object_created(resources.input_bucket, key), lambda_context)
    message = drain_queue(resources.client("sqs"), resources.main_queue_url)[0]
    router.handler(sqs_event(("m1", message["Body"])), lambda_context)
    job = JobMessage.from_json(message["Body"])
    base = {
        "job_id": job.job_id,
        "started_at": job.started_at,
        "execution_name": job.run.execution_name,
        "bucket": resources.input_bucket,
        "output_bucket": resources.output_bucket,
        "trace": {},
    }
    status = {**base, "action": "status", "table": resources.tracking_table}
    finalize.handler({**status, "target": "DETECTING"}, lambda_context)
    detection = detect.handler({**base, "redaction_mode": mode, "file_key": key}, lambda_context)
    assert detection["outcome"] == "ok"
    mapping, redactions = {"mapping_s3_key": None}, None
    if mode == "synthetic":  # blackout redacted in the detection pass
        mapping = generate_synthetic.handler({**base, "files": [key], "detections": [detection]}, lambda_context)
        redaction = {**base, "redaction_mode": mode, "mapping_s3_key": mapping["mapping_s3_key"], "file_key": key}
        redactions = [redact.handler({**redaction, "detection": detection}, lambda_context)]
        finalize.handler({**status, "target": "REDACT_COMPLETE"}, lambda_context)
    check = finalize.handler(
        {
            **base, "action": "check", "phase": "complete", "files": [key], "unsupported": [], "redaction_mode": mode,
            "detections": [detection], "redactions": redactions, "mapping_s3_key": mapping["mapping_s3_key"],
        },
        lambda_context,
    )
    assert check["counts"]["entities"] == len(SEEDED)
    event = {
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "detail": {
            "executionArn": execution_arn(resources.state_machine_arn, job.run.execution_name),
            "status": "FAILED",
            "error": "States.TaskFailed",
            "cause": "redact failed",
            "input": json.dumps(base),
        },
    }
    workflow_tracker.handler(event, lambda_context)
    batch_trigger.handler({}, lambda_context)

    captured = capsys.readouterr()
    output = log_lines.getvalue() + captured.out + captured.err
    assert '"job_id"' in output and "_aws" in output  # the logs and EMF documents were captured
    span_text = json.dumps([dict(s.attributes or {}) | {"name": s.name} for s in spans.get_finished_spans()])
    assert "detect.file" in span_text
    redacted = s3.get_object(Bucket=resources.output_bucket, Key=key)["Body"].read().decode()
    for value in SEEDED.values():
        for form in forms(value):
            assert form not in output, "a seeded PII value reached a log line or metric"
            assert form not in span_text, "a seeded PII value reached a span"
            assert form not in redacted
