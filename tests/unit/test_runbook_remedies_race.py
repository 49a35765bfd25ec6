"""Two re-runs of one failed run that both decided before either wrote (two terminals at once):
one conditional transaction wins, the other is a lost race: one new run, one message, one audit
record. On moto's DynamoDB and SQS, no pipeline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipeline.jobs import RunRef, format_timestamp
from pipeline.status import JobStatus
from pipeline.stores.audit import AuditStream, audit_prefix
from pipeline.stores.tracking import TrackingStore
from runbooks.automation.remedy_request import RemedyRequest
from runbooks.automation.rerun_plan import plan_reruns
from runbooks.automation.reruns import Rerun, read_candidates
from runbooks.automation.result import ActionResult
from runbooks.catalog import Runbook
from stack.resources import StackResources
from tests.conftest import Resources, drain_queue

NOW = datetime.now(UTC)


def test_two_reruns_decided_at_once_start_one_new_run(resources: Resources) -> None:
    store = TrackingStore(resources.tracking_table, resources.client("dynamodb"))
    failed = RunRef("reports/", format_timestamp(NOW - timedelta(minutes=5)))
    assert store.create_run(failed, ["reports/a.txt"], resources.input_bucket, NOW - timedelta(minutes=5))
    assert store.transition(failed, JobStatus.FAILED, NOW - timedelta(minutes=4), fields={"error": "States.TaskFailed"})
    stack = StackResources.from_outputs(
        "s",
        {
            "InputBucketName": resources.input_bucket,
            "OutputBucketName": resources.output_bucket,
            "TrackingTableName": resources.tracking_table,
            "CoordinationTableName": resources.coordination_table,
            "MainQueueUrl": resources.main_queue_url,
            "DeadLetterQueueUrl": resources.dlq_url,
            "StateMachineArn": resources.state_machine_arn,
            "RouterFunctionName": "router",
        },
    )
    request = RemedyRequest(Runbook.EXECUTIONS_FAILED, stack, resources, True, "tester", lambda: datetime.now(UTC))

    [candidate] = read_candidates(request, NOW - timedelta(hours=1))
    [action], refused = plan_reruns([candidate], [candidate.id])
    assert refused == {}
    first, second = Rerun(request).apply(action, candidate), Rerun(request).apply(action, candidate)

    assert (first.result, second.result) == (ActionResult.APPLIED, ActionResult.RACE_LOST)
    runs = store.runs_of("reports/")
    assert len(runs) == 2 and {r.status for r in runs} == {JobStatus.QUEUED, JobStatus.FAILED}
    [message] = drain_queue(resources.client("sqs"), resources.main_queue_url)  # one announcement
    assert first.detail["rerun"].split("@")[1] in message["Body"]
    items = resources.client("dynamodb").scan(TableName=resources.coordination_table)["Items"]
    assert [i["action"]["S"] for i in items if i["doc_key"]["S"].startswith(audit_prefix(AuditStream.RUNBOOK))] == ["rerun_run"]
    [after] = read_candidates(request, NOW - timedelta(hours=1))
    assert after.blocked.startswith("re-run already")
