"""Every metric an alarm or a dashboard widget names is emitted by some code path, checked on a
sandbox run that takes those paths. An alarm on a metric nothing emits can never fire.

One sandbox, one workload that takes the healthy paths and the ones that page: a capacity wait,
an unsupported, an empty and a non-UTF-8 file, a task that crashes on a file, a poison message, a
repeated message, an execution that fails, a job in each redaction mode (blackout redacts in the
detect task, synthetic runs the mapping and the redact task), and reconciler runs. Then each
(namespace, metric, dimensions) row the alarms and the operations dashboard name must exist in
CloudWatch. The exceptions are listed with the reason a realtime sandbox cannot emit them and the
test that covers them instead.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from alarms.catalog import build_catalog
from dashboards.build import operations_body, resolve
from dashboards.metric_rows import expand_metrics
from pipeline.jobs import JobMessage
from pipeline.status import JobStatus
from pipeops.dashboard import stack_names, stack_parameters
from stack.resources import Connection
from stack.template import load_template
from tests.conftest import runs, wait_for

pytestmark = pytest.mark.slow

# Rows no realtime sandbox run can emit, by (namespace, metric, emitter or resource logical id).
NOT_IN_A_REALTIME_SANDBOX = {
    ("PipeOps", "JobsQueued", "BatchTriggerFunction"): "batch mode only (tests/functional/test_batch_trigger_handler.py)",
    ("PipeOps", "BatchJobsScheduled", "BatchTriggerFunction"): "batch mode only (test_batch_trigger_handler.py)",
    ("PipeOps", "StaleJobsReclaimed", "BatchTriggerFunction"): "batch mode only (test_batch_trigger_handler.py)",
    ("PipeOps", "SlotsReleased", "BatchTriggerFunction"): "batch mode only (test_batch_trigger_handler.py)",
    ("PipeOps", "JobsFailed", "BatchTriggerFunction"): "batch mode only (test_batch_trigger_handler.py)",
    ("PipeOps", "StartExecutionFailures", "RouterFunction"): "a refused StartExecution (test_router_handler.py)",
    ("PipeOps", "SlotsReleased", "RouterFunction"): "a refused StartExecution (test_router_handler.py)",
    ("PipeOps", "StaleStatusWrites", "WorkflowTrackerFunction"): "a backwards status write (test_tracker_handler.py)",
    ("PipeOps", "DuplicateReleases", "WorkflowTrackerFunction"): "a duplicated status event (test_pipeline_e2e.py)",
    ("PipeOps", "DuplicateDeliveries", "IngestFunction"): "a redelivered S3 event (tests/functional/test_ingest_races.py)",
    ("PipeOps", "FilesMissed", "FinalizeFunction"): "a run ended past FileDeadlineMinutes, or with failed files (test_deadline_counts.py)",
    ("PipeOps", "FilesMissed", "WorkflowTrackerFunction"): "a run failed (test_deadline_counts.py)",
    ("AWS/States", "ExecutionsTimedOut", "PipelineStateMachine"): "an execution past TimeoutSeconds (600 s at least here)",
    ("AWS/States", "ExecutionsAborted", "PipelineStateMachine"): "a stopped execution (test_reconcile_sandbox.py)",
    ("AWS/States", "ExecutionThrottled", "PipelineStateMachine"): "AWS publishes it only on throttling; moto never throttles",
}
ONLY_ON_THROTTLING = {"Throttles", "ReadThrottleEvents", "WriteThrottleEvents", "ConditionalCheckFailedRequests"}
BATCH_ONLY_FUNCTION = "BatchTriggerFunction"  # its schedule is disabled in realtime mode


def emitted(sandbox: Any) -> set[tuple[str, str, frozenset[tuple[str, str]]]]:
    cloudwatch = sandbox.client("cloudwatch")
    found = set()
    for page in cloudwatch.get_paginator("list_metrics").paginate():
        for metric in page["Metrics"]:
            dims = frozenset((d["Name"], d["Value"]) for d in metric.get("Dimensions", []))
            found.add((metric["Namespace"], metric["MetricName"], dims))
    return found


def test_every_metric_an_alarm_or_widget_names_is_emitted(make_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline.handlers.detect as detect_handler
    import pipeline.handlers.finalize as finalize_handler

    real_detect = detect_handler.detect_file

    def crash_on_one_file(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event["file_key"] == "mixed/crash.txt":  # the task fails: its Catch hands the file to Finalize
            raise RuntimeError("injected: detection crashed")
        return real_detect(event, *args, **kwargs)

    monkeypatch.setattr(detect_handler, "detect_file", crash_on_one_file)

    sandbox = make_sandbox(MaxConcurrentWorkflows="1")
    bucket = sandbox.outputs["InputBucketName"]
    s3, sqs = sandbox.client("s3"), sandbox.client("sqs")
    sqs.set_queue_attributes(QueueUrl=sandbox.outputs["MainQueueUrl"], Attributes={"VisibilityTimeout": "20"})

    # The one slot is taken until the router has waited for it once: a capacity wait on any machine,
    # however its jobs' timings fall (under load they can run one after another, never meeting).
    from datetime import UTC, datetime

    from pipeline.jobs import format_timestamp
    from pipeline.stores.semaphore import AcquireResult, Semaphore

    gate = Semaphore(sandbox.outputs["CoordinationTableName"], sandbox.client("dynamodb"))
    taken = gate.acquire("held-by-the-test", format_timestamp(datetime.now(UTC)), 1)  # young: no reconciler frees it
    assert taken is AcquireResult.ACQUIRED

    # Healthy paths, one slot for two jobs (a capacity wait), and the files that are not redacted.
    for key, body in {
        "one.txt": b"mail ann@corp.example, call 555-201-3344\n",
        "two.txt": b"mail bob@corp.example\n",
        "mixed/scan.pdf": b"%PDF-1.4",
        "mixed/empty.txt": b"",
        "mixed/legacy.txt": b"\xff\xfe\x00latin-1 \xe9t\xe9",
        "mixed/ok.txt": b"card 4111 1111 1111 1111\n",
        "mixed/crash.txt": b"mail dee@corp.example\n",
    }.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    sqs.send_message(QueueUrl=sandbox.outputs["MainQueueUrl"], MessageBody='{"v": 1, "job_id": 42')  # poison
    wait_for(lambda: any(name == "CapacityWaits" for _, name, _ in emitted(sandbox)), 120, every=0.2)
    gate.release("held-by-the-test")
    assert sandbox.wait_until_idle(300)
    [done] = [run for run in runs(sandbox) if run.job_id == "one.txt"]
    assert done.status is JobStatus.COMPLETE
    sqs.send_message(  # a repeated message for a finished run: a duplicate delivery
        QueueUrl=sandbox.outputs["MainQueueUrl"], MessageBody=JobMessage(done.job_id, done.started_at, bucket).to_json()
    )

    # An execution that fails: its account and verdict (PrepareComplete) raises, the workflow's
    # Catch marks it FAILED (a blackout run writes no other status through the finalize function).
    real_finalize = finalize_handler.finalize

    def fail_the_verdict(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event.get("job_id") == "doomed.txt":
            raise RuntimeError("injected: the run's account fails")
        return real_finalize(event, *args, **kwargs)

    monkeypatch.setattr(finalize_handler, "finalize", fail_the_verdict)
    s3.put_object(Bucket=bucket, Key="doomed.txt", Body=b"mail cy@corp.example\n")
    wait_for(lambda: any(r.job_id == "doomed.txt" and r.status.is_terminal for r in runs(sandbox)), 300, every=0.2)
    [doomed] = [run for run in runs(sandbox) if run.job_id == "doomed.txt"]
    assert doomed.status is JobStatus.FAILED
    assert sandbox.wait_until_idle(120)

    # A synthetic-mode job: the operator switches the router's RedactionMode (the stack parameter
    # it reads); the mapping and the redact task run only in that mode. As on AWS, the updated
    # function's next invocation starts fresh (sandbox.runtime: on_fresh_environments).
    lambda_client = sandbox.client("lambda")
    router = sandbox.outputs["RouterFunctionName"]
    variables = lambda_client.get_function_configuration(FunctionName=router)["Environment"]["Variables"]
    lambda_client.update_function_configuration(
        FunctionName=router, Environment={"Variables": variables | {"REDACTION_MODE": "synthetic"}}
    )
    s3.put_object(Bucket=bucket, Key="synthetic.txt", Body=b"mail eve@corp.example, call 555-201-3344\n")
    wait_for(lambda: any(r.job_id == "synthetic.txt" and r.status.is_terminal for r in runs(sandbox)), 300, every=0.2)
    [synthetic] = [run for run in runs(sandbox) if run.job_id == "synthetic.txt"]
    assert synthetic.status is JobStatus.COMPLETE and synthetic.mapping_s3_key
    # The reconciler's metrics (it also runs on its schedule): a dry run, and an applying pass, the
    # only kind that counts (and emits) FilesOverdue; the pipeline is at rest, so it repairs nothing.
    for dry_run in (True, False):
        invoked = sandbox.client("lambda").invoke(
            FunctionName=sandbox.outputs["ReconcilerFunctionName"], Payload=json.dumps({"dry_run": dry_run}).encode()
        )
        assert "FunctionError" not in invoked
    # The runbook function runs only when a person or an Automation document asks: a dry run feeds it.
    asked = sandbox.client("lambda").invoke(
        FunctionName=sandbox.outputs["RunbookFunctionName"], Payload=json.dumps({"RunbookId": "dlq-messages", "DryRun": True}).encode()
    )
    assert "FunctionError" not in asked
    assert sandbox.wait_until_idle(120)

    template = load_template()
    specs = build_catalog(template)
    connection = Connection.resolve(None, None, None)
    resources = connection.resources()
    names = stack_names(resources, stack_parameters(connection, resources.stack_name), "us-east-1", template)
    body = resolve(operations_body(specs, template), names)
    logical = {value: key for key, value in names.items()}  # physical name -> logical id
    named: set[tuple[str, str, frozenset[tuple[str, str]]]] = set()
    for widget in body["widgets"]:
        properties = widget.get("properties", {})
        if widget.get("type") != "metric":
            continue
        for query in expand_metrics(properties["metrics"], stat=properties.get("stat", "Average"), period=properties.get("period", 300)):
            if query.expression is None:
                named.add((query.namespace, query.name, frozenset(query.dimensions)))
    for spec in specs:
        dims = frozenset((name, names[_ref(value)]) for name, value in spec.watched.dimensions if _ref(value))
        static = frozenset((name, value) for name, value in spec.watched.dimensions if isinstance(value, str))
        named.add((spec.watched.namespace, spec.watched.name, dims | static))

    seen = emitted(sandbox)
    missing = []
    for namespace, name, dims in sorted(named, key=str):
        if (namespace, name, dims) in seen:
            continue
        owner = next((logical.get(v, v) for k, v in dims if k in ("function", "FunctionName", "StateMachineArn")), "")
        if (namespace, name, owner) in NOT_IN_A_REALTIME_SANDBOX or name in ONLY_ON_THROTTLING:
            continue
        if owner == BATCH_ONLY_FUNCTION:
            continue
        if namespace == "AWS/DynamoDB":
            continue  # neither moto nor the sandbox publishes AWS/DynamoDB metrics
        missing.append(f"{namespace} {name} {dict(dims)}")
    assert missing == [], "named by an alarm or widget, emitted by nothing on this run:\n" + "\n".join(missing)
    assert len(named) > 80


def _ref(value: Any) -> str | None:
    """The logical id an alarm dimension refers to (Ref or GetAtt), or None for a literal."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return ".".join(value["Fn::GetAtt"])
    return None
