"""The DLQ redrive's shell on moto, the parts the sandbox cannot show: SQS's message move task
(moto has none, so a stand-in adds it to a moto client) and the pacing and holding of messages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.jobs import JobMessage, RunRef
from pipeline.stores.audit import AuditStore, AuditStream, audit_prefix
from pipeline.stores.tracking import TrackingStore
from runbooks.automation.dead_letters import DlqKind
from runbooks.automation.engine import reverify, run_redrive
from runbooks.automation.pacing import Pacer
from runbooks.automation.redrive import (
    MOVE_TASK_RATE,
    DlqEndpoints,
    DlqRedrive,
    follow_move_task,
    move_progress,
    queue_depth,
    unsupported,
)
from runbooks.automation.result import Verdict
from runbooks.catalog import Runbook
from stack.resources import StackResources
from tests.conftest import Resources

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class WithMoveTasks:
    """A moto SQS client plus the message move task API as AWS has it (moto raises NotImplementedError)."""

    def __init__(self, sqs: Any, running: list[str] | None = None) -> None:
        self._sqs = sqs
        self.started: list[dict[str, Any]] = []
        self.running = running or []
        self.completed: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sqs, name)

    def list_message_move_tasks(self, **kwargs: Any) -> dict[str, Any]:
        tasks = [(handle, "RUNNING") for handle in self.running] + [(handle, "COMPLETED") for handle in self.completed]
        return {"Results": [{"TaskHandle": handle, "Status": status} for handle, status in tasks]}

    def start_message_move_task(self, **kwargs: Any) -> dict[str, Any]:
        self.started.append(kwargs)
        self.running.append("task-1")
        return {"TaskHandle": "task-1"}


@pytest.fixture
def redrive(resources: Resources) -> DlqRedrive:
    sqs = resources.client("sqs")
    quarantine = sqs.create_queue(QueueName="pipeops-quarantine")["QueueUrl"]
    endpoints = DlqEndpoints(DlqKind.MAIN, resources.dlq_url, quarantine, source_url=resources.main_queue_url)
    ddb = resources.client("dynamodb")
    tracking = TrackingStore(resources.tracking_table, ddb)
    for index in range(3):
        run = RunRef(f"job-{index}.txt", f"2026-12-03T11:00:0{index}.000000Z")
        tracking.create_run(run, [run.job_id], resources.input_bucket, NOW)
        sqs.send_message(QueueUrl=resources.dlq_url, MessageBody=JobMessage(run.job_id, run.started_at, resources.input_bucket).to_json())
    return DlqRedrive(endpoints, sqs, None, AuditStore(resources.coordination_table, ddb, AuditStream.RUNBOOK), tracking, "arn:aws:iam::123456789012:user/op", lambda: NOW, Pacer(0))


def audits(resources: Resources) -> list[dict[str, Any]]:
    items = resources.client("dynamodb").scan(TableName=resources.coordination_table)["Items"]
    return [item for item in items if item["doc_key"]["S"].startswith(audit_prefix(AuditStream.RUNBOOK))]


def test_moto_has_no_move_task_so_the_redrive_receives_sends_and_deletes(redrive: DlqRedrive, resources: Resources) -> None:
    result = run_redrive(Runbook.DLQ_MESSAGES, redrive, apply=True)
    assert result.evidence["move_task"] == {"available": False, "running": []}
    assert result.exit_code == 0 and {a.detail.get("done") for a in result.actions} == {1}
    assert queue_depth(redrive.sqs, resources.main_queue_url)["visible"] == 3
    assert len(audits(resources)) == 3


def test_a_whole_dlq_is_moved_by_sqs_at_a_low_rate_and_the_caller_polls(redrive: DlqRedrive, resources: Resources) -> None:
    sqs = WithMoveTasks(redrive.sqs)
    redrive.sqs = sqs
    result = run_redrive(Runbook.DLQ_MESSAGES, redrive, apply=True)
    assert [task["MaxNumberOfMessagesPerSecond"] for task in sqs.started] == [MOVE_TASK_RATE]
    assert "DestinationArn" not in sqs.started[0]  # back to the queue each message came from
    assert {a.detail["task_handle"] for a in result.actions} == {"task-1"}
    # Nothing moved yet (the stand-in moves nothing): the messages were given back, not held.
    assert result.exit_code == 1 and result.verified is not None and result.verified["depth"]["visible"] == 3
    assert len(audits(resources)) == 3  # each run's redrive recorded before SQS moves it

    naps: list[float] = []

    def nap(seconds: float) -> None:  # SQS finishes the task while the caller waits
        naps.append(seconds)
        sqs.completed, sqs.running = sqs.running, []

    progress = list(follow_move_task(sqs, resources.dlq_url, "task-1", sleep=nap, interval=2))
    assert [p["Status"] for p in progress] == ["RUNNING", "COMPLETED"] and naps == [2]


def test_the_verdict_is_read_again_once_the_move_task_ends(
    redrive: DlqRedrive, resources: Resources, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pipeops runbook run --apply` follows the move task, then reads the DLQ again: the verdict
    the run returned ("remains": SQS had moved nothing yet) becomes the queue's ("cleared")."""
    from pipeops.commands.runbook import _settle

    sqs = WithMoveTasks(redrive.sqs)
    redrive.sqs = sqs
    result = run_redrive(Runbook.DLQ_MESSAGES, redrive, apply=True)
    assert result.verdict is Verdict.REMAINS

    def sqs_moves_them(seconds: float) -> None:  # what SQS does while the caller waits
        for message in sqs.receive_message(QueueUrl=resources.dlq_url, MaxNumberOfMessages=10)["Messages"]:
            sqs.send_message(QueueUrl=resources.main_queue_url, MessageBody=message["Body"])
            sqs.delete_message(QueueUrl=resources.dlq_url, ReceiptHandle=message["ReceiptHandle"])
        sqs.completed, sqs.running = sqs.running, []

    stack = StackResources(
        "pipeops", resources.input_bucket, resources.output_bucket, resources.tracking_table, resources.coordination_table,
        resources.main_queue_url, resources.dlq_url, "", "", QuarantineQueueUrl=redrive.endpoints.quarantine_url,
    )  # fmt: skip

    class Connection:
        def client(self, service: str) -> Any:
            return sqs

    import time

    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", lambda seconds: (slept.append(seconds), sqs_moves_them(seconds)))
    settled = _settle(result, Connection(), stack, show=False)  # type: ignore[arg-type]
    assert slept and settled.verdict is Verdict.CLEARED and settled.exit_code == 0
    assert settled.verified is not None and settled.verified["remaining"] == 0
    assert queue_depth(sqs, resources.main_queue_url)["visible"] == 3
    # Read while messages remain, the verdict stays "remains": it is the queue's, not the task's.
    sqs.send_message(QueueUrl=resources.dlq_url, MessageBody="late")
    assert reverify(settled, stack, Connection()).verdict is Verdict.REMAINS  # type: ignore[arg-type]


def test_a_selection_is_sent_by_hand_even_where_the_move_task_exists(redrive: DlqRedrive, resources: Resources) -> None:
    sqs = WithMoveTasks(redrive.sqs)
    redrive.sqs = sqs
    dry = run_redrive(Runbook.DLQ_MESSAGES, redrive, apply=False)
    chosen = dry.evidence["groups"][0]["group"]
    result = run_redrive(Runbook.DLQ_MESSAGES, redrive, apply=True, groups=[chosen])
    assert sqs.started == [] and [a.action.group for a in result.actions] == [chosen]
    assert result.exit_code == 1  # two groups remain
    assert queue_depth(sqs, resources.dlq_url) == {"visible": 2, "in_flight": 0, "delayed": 0}


def test_a_move_task_already_running_is_a_lost_race_not_a_second_task(redrive: DlqRedrive, resources: Resources) -> None:
    sqs = WithMoveTasks(redrive.sqs, running=["task-0"])
    redrive.sqs = sqs
    result = run_redrive(Runbook.DLQ_MESSAGES, redrive, apply=True)
    assert sqs.started == [] and {a.result.value for a in result.actions} == {"race_lost"}
    assert result.exit_code == 1 and audits(resources) == []
    assert queue_depth(sqs, resources.dlq_url)["visible"] == 3
    assert move_progress(sqs, resources.dlq_url) == [{"TaskHandle": "task-0", "Status": "RUNNING"}]


def test_unsupported_tells_a_missing_api_from_a_real_error() -> None:
    class Refused(Exception):
        def __init__(self, code: str, status: int) -> None:
            self.response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}

    assert unsupported(NotImplementedError())
    assert unsupported(Refused("InternalFailure", 500))  # a served moto
    assert not unsupported(Refused("AccessDenied", 403))
