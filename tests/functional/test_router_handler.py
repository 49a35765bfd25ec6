"""Router: slots, capacity waits, duplicate deliveries and StartExecution failures, on moto."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.exceptions import ClientError

from pipeline.config import CURRENT_FUNCTION
from pipeline.handlers import router
from pipeline.jobs import JobMessage, RunRef, format_timestamp
from pipeline.routing import Router, waited
from pipeline.status import JobStatus
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import TrackingStore
from tests.conftest import drain_queue, emf_totals, sqs_event

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)


def tracking(resources) -> TrackingStore:
    return TrackingStore(resources.tracking_table, resources.client("dynamodb"))


def semaphore(resources) -> Semaphore:
    return Semaphore(resources.coordination_table, resources.client("dynamodb"))


def queued_run(resources, job_id: str, files: list[str], second: int = 0) -> JobMessage:
    run = RunRef(job_id, format_timestamp(NOW.replace(second=second)))
    tracking(resources).create_run(run, files, resources.input_bucket, NOW)
    return JobMessage(run.job_id, run.started_at, resources.input_bucket)


def deliver(resources, lambda_context, *messages: JobMessage, ids: list[str] | None = None) -> dict:
    ids = ids or [f"m{i}" for i in range(len(messages))]
    return router.handler(sqs_event(*zip(ids, (m.to_json() for m in messages), strict=True)), lambda_context)


def running_executions(resources) -> list[dict]:
    sfn = resources.client("stepfunctions")
    return sfn.list_executions(stateMachineArn=resources.state_machine_arn, statusFilter="RUNNING")["executions"]


def test_a_queued_run_takes_a_slot_and_starts_its_named_execution(resources, lambda_context) -> None:
    message = queued_run(resources, "claims/", ["claims/a.txt", "claims/b.csv", "claims/scan.pdf"])
    assert deliver(resources, lambda_context, message) == {"batchItemFailures": []}
    record = tracking(resources).get_run(message.run)
    assert record is not None
    assert record.status is JobStatus.IN_PROGRESS
    assert record.execution_arn and record.execution_arn.endswith(message.run.execution_name)
    assert record.failed_files["unsupported"] == ["claims/scan.pdf"]
    assert set(semaphore(resources).read().holders) == {message.run.execution_name}
    assert [e["name"] for e in running_executions(resources)] == [message.run.execution_name]


def test_at_capacity_the_message_waits_count_unchanged_nothing_in_the_dlq(resources, lambda_context) -> None:
    first, second, third = (queued_run(resources, f"job{i}/", [f"job{i}/a.txt"]) for i in range(3))
    result = deliver(resources, lambda_context, first, second, third)
    assert result == {"batchItemFailures": []}  # waiting is not failing
    state = semaphore(resources).read()
    assert state.active_count == 2 == len(state.holders)
    waiting = drain_queue(resources.client("sqs"), resources.main_queue_url)
    assert [JobMessage.from_json(m["Body"]) for m in waiting] == [waited(third)]  # it counts its waits
    assert drain_queue(resources.client("sqs"), resources.dlq_url) == []
    assert tracking(resources).get_run(third.run).status is JobStatus.QUEUED  # type: ignore[union-attr]


def test_the_same_message_delivered_twice_starts_one_execution(resources, lambda_context) -> None:
    message = queued_run(resources, "claims/", ["claims/a.txt"])
    deliver(resources, lambda_context, message, ids=["first"])
    deliver(resources, lambda_context, message, ids=["redriven-new-id"])
    assert len(running_executions(resources)) == 1
    assert semaphore(resources).read().active_count == 1


def test_start_execution_failure_releases_the_slot_and_the_message_is_retried(
    resources, lambda_context, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = queued_run(resources, "claims/", ["claims/a.txt"])
    sfn = router.router()._executions._sfn  # the client the router really uses

    def refuse(**_: object) -> None:
        raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "try later"}}, "StartExecution")

    monkeypatch.setattr(sfn, "start_execution", refuse)
    with pytest.raises(BatchProcessingError):  # every record failed: the whole batch is retried
        deliver(resources, lambda_context, message)
    state = semaphore(resources).read()
    assert state.active_count == 0 and state.holders == {}
    monkeypatch.undo()


def test_a_redelivery_for_an_execution_that_already_ended_takes_no_slot(resources, lambda_context) -> None:
    message = queued_run(resources, "claims/", ["claims/a.txt"])
    deliver(resources, lambda_context, message)
    sfn = resources.client("stepfunctions")
    arn = tracking(resources).get_run(message.run).execution_arn  # type: ignore[union-attr]
    sfn.stop_execution(executionArn=arn)
    semaphore(resources).release(message.run.execution_name)  # what the tracker did
    # The ARN write was lost (router died after StartExecution): the redelivery records the ARN
    # of the execution it finds by name and takes no slot, so none can leak.
    resources.client("dynamodb").update_item(
        TableName=resources.tracking_table,
        Key={"job_id": {"S": message.job_id}, "started_at": {"S": message.started_at}},
        UpdateExpression="REMOVE execution_arn",
    )
    assert deliver(resources, lambda_context, message) == {"batchItemFailures": []}
    assert semaphore(resources).read().active_count == 0
    assert tracking(resources).get_run(message.run).execution_arn == arn  # type: ignore[union-attr]


def test_a_run_with_only_unsupported_files_completes_without_a_workflow(resources, lambda_context) -> None:
    message = queued_run(resources, "scans/", ["scans/a.pdf", "scans/b.png"])
    deliver(resources, lambda_context, message)
    record = tracking(resources).get_run(message.run)
    assert record is not None and record.status is JobStatus.COMPLETE
    assert record.failed_files["unsupported"] == ["scans/a.pdf", "scans/b.png"]
    assert running_executions(resources) == []
    assert semaphore(resources).read().active_count == 0


def test_malformed_and_unknown_messages_fail_alone(resources, lambda_context) -> None:
    good = queued_run(resources, "claims/", ["claims/a.txt"])
    unknown = JobMessage("ghost/", format_timestamp(NOW), resources.input_bucket)
    event = sqs_event(("bad", "{not json"), ("ghost", unknown.to_json()), ("good", good.to_json()))
    result = router.handler(event, lambda_context)
    assert sorted(f["itemIdentifier"] for f in result["batchItemFailures"]) == ["bad", "ghost"]
    assert tracking(resources).get_run(good.run).status is JobStatus.IN_PROGRESS  # type: ignore[union-attr]


def test_files_that_keep_arriving_after_their_folder_started_are_all_processed_in_some_run(
    resources, lambda_context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.handlers import _wiring, ingest
    from tests.conftest import eventbridge_object_created

    monkeypatch.setenv("MAX_CONCURRENT_WORKFLOWS", "5")
    _wiring.reset()

    sqs = resources.client("sqs")
    started: list[JobMessage] = []
    for wave in (["a.txt", "b.txt"], ["c.txt"], ["d.txt", "e.txt"]):  # each wave lands after the last run started
        for name in wave:
            ingest.handler(eventbridge_object_created(resources.input_bucket, f"claims/{name}"), lambda_context)
        messages = drain_queue(sqs, resources.main_queue_url)
        assert len(messages) == 1
        started.append(JobMessage.from_json(messages[0]["Body"]))
        deliver(resources, lambda_context, started[-1])
    runs = [tracking(resources).get_run(m.run) for m in started]
    assert all(r is not None and r.execution_arn for r in runs)
    processed = sorted(key for r in runs if r for key in r.files)
    assert processed == [f"claims/{n}" for n in ("a.txt", "b.txt", "c.txt", "d.txt", "e.txt")]
    assert len(running_executions(resources)) == 3


def test_a_router_without_its_state_machine_setting_takes_no_slot(resources, lambda_context, monkeypatch) -> None:
    from pipeline.handlers import _wiring

    message = queued_run(resources, "claims/", ["claims/a.txt"])
    monkeypatch.delenv("STATE_MACHINE_ARN")
    _wiring.reset()
    with pytest.raises(BatchProcessingError):
        deliver(resources, lambda_context, message)
    assert semaphore(resources).read().active_count == 0
    assert tracking(resources).get_run(message.run).status is JobStatus.QUEUED  # type: ignore[union-attr]


# -- every failed record is logged once and counted -----------------------------------------------


@pytest.fixture
def error_lines():
    """The JSON log lines at ERROR the powertools logger formats during the test."""
    import io
    import logging

    from pipeline.telemetry.logging import logger

    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logger.registered_formatter)
    handler.setLevel(logging.ERROR)
    logger.addHandler(handler)
    yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]
    logger.removeHandler(handler)




def test_every_failed_record_of_a_mixed_batch_leaves_one_log_line_and_a_metric(
    resources, lambda_context, monkeypatch: pytest.MonkeyPatch, capsys, error_lines
) -> None:
    good = queued_run(resources, "claims/", ["claims/a.txt"])
    refused = queued_run(resources, "refused/", ["refused/a.txt"], second=1)
    unknown = JobMessage("ghost/", format_timestamp(NOW), resources.input_bucket)
    sfn = router.router()._executions._sfn
    real_start = sfn.start_execution

    def start(**kwargs: object) -> dict:
        if kwargs["name"] == refused.run.execution_name:
            raise ClientError(
                {"Error": {"Code": "ExecutionLimitExceeded", "Message": "too many"}, "ResponseMetadata": {"HTTPStatusCode": 400}},
                "StartExecution",
            )
        return real_start(**kwargs)

    monkeypatch.setattr(sfn, "start_execution", start)
    event = sqs_event(
        ("bad-json", "{not json"),
        ("bad-version", json.dumps({"v": "two", "job_id": "claims/", "started_at": good.started_at, "bucket": "b"})),
        ("future-version", json.dumps({"v": 99, "job_id": "claims/", "started_at": good.started_at, "bucket": "b"})),
        ("ghost", unknown.to_json()),
        ("refused", refused.to_json()),
        ("good", good.to_json()),
    )
    capsys.readouterr()

    result = router.handler(event, lambda_context)

    failed = ["bad-json", "bad-version", "future-version", "ghost", "refused"]
    assert sorted(f["itemIdentifier"] for f in result["batchItemFailures"]) == failed
    lines = error_lines()
    assert sorted(line["message_id"] for line in lines) == failed, "one error line per failed record"
    reasons = {line["message_id"]: line["reason"] for line in lines}
    assert reasons == {
        "bad-json": "malformed_message",
        "bad-version": "malformed_message",
        "future-version": "unsupported_version",
        "ghost": "unknown_run",
        "refused": "start_execution_failed",
    }
    assert lines[-1]["job_id"] == "refused/" and lines[-1]["error_code"] == "ExecutionLimitExceeded"
    totals = emf_totals(capsys.readouterr().out)
    assert totals["RouterFailures"] == len(failed)
    assert totals["StartExecutionFailures"] == 1
    assert totals["MalformedMessages"] == 3
    assert totals["JobsStarted"] == 1
    assert tracking(resources).get_run(good.run).status is JobStatus.IN_PROGRESS  # type: ignore[union-attr]
    state = semaphore(resources).read()
    assert set(state.holders) == {good.run.execution_name}  # the refused start gave its slot back


# -- a run still filling: its record is re-sent shortly, the batch's others unaffected ---------------


def handler_router(lambda_context) -> Router:
    """The Router the handler uses (its collaborators are built per function)."""
    token = CURRENT_FUNCTION.set(lambda_context.function_name)
    try:
        return router.router()
    finally:
        CURRENT_FUNCTION.reset(token)


def keep_filling(monkeypatch: pytest.MonkeyPatch, resources, lambda_context, message: JobMessage) -> None:
    """After each of the router's looks at `message`'s run, one more file joins it (ingest)."""
    store = handler_router(lambda_context)._store
    real = store.get_run_and_slots
    joined = 0

    def look(run: RunRef, semaphore: Semaphore):
        nonlocal joined
        seen = real(run, semaphore)
        if run == message.run:
            joined += 1
            resources.client("dynamodb").update_item(
                TableName=resources.tracking_table,
                Key={"job_id": {"S": run.job_id}, "started_at": {"S": run.started_at}},
                UpdateExpression="ADD files :k",
                ExpressionAttributeValues={":k": {"SS": [f"{run.job_id}late{joined}.txt"]}},
            )
        return seen

    monkeypatch.setattr(store, "get_run_and_slots", look)


def delayed(resources) -> int:
    attributes = resources.client("sqs").get_queue_attributes(
        QueueUrl=resources.main_queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessagesDelayed"])


def test_a_run_still_filling_is_re_sent_with_a_delay_and_fails_nothing(
    resources, lambda_context, monkeypatch: pytest.MonkeyPatch, error_lines
) -> None:
    filling = queued_run(resources, "folder/", ["folder/a.txt"])
    other = queued_run(resources, "claims/", ["claims/a.txt"], second=1)
    keep_filling(monkeypatch, resources, lambda_context, filling)

    assert deliver(resources, lambda_context, filling, other) == {"batchItemFailures": []}

    assert delayed(resources) == 1  # the filling run's message, back after the short delay
    assert drain_queue(resources.client("sqs"), resources.main_queue_url) == []  # not at once
    assert tracking(resources).get_run(filling.run).status is JobStatus.QUEUED  # type: ignore[union-attr]
    assert [e["name"] for e in running_executions(resources)] == [other.run.execution_name]
    assert error_lines() == []


def test_a_re_send_that_fails_fails_only_its_own_record(
    resources, lambda_context, monkeypatch: pytest.MonkeyPatch, error_lines
) -> None:
    filling = queued_run(resources, "folder/", ["folder/a.txt"])
    other = queued_run(resources, "claims/", ["claims/a.txt"], second=1)
    keep_filling(monkeypatch, resources, lambda_context, filling)

    def unreachable(message: JobMessage, delay: int) -> None:
        raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "later"}}, "SendMessage")

    monkeypatch.setattr(handler_router(lambda_context), "_defer", unreachable)

    result = deliver(resources, lambda_context, filling, other, ids=["filling", "other"])

    assert result == {"batchItemFailures": [{"itemIdentifier": "filling"}]}
    assert [line["reason"] for line in error_lines()] == ["aws_error"]
    assert [e["name"] for e in running_executions(resources)] == [other.run.execution_name]


def test_two_invocations_at_once_each_report_their_own_failures(
    resources, lambda_context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox runs concurrent invocations on one module: B starts and ends while A is between
    its failed record and its last one. A must report exactly its failure (with a processor shared
    by the module, B's start wiped it: SQS then deleted the poison message as processed, or A failed
    its whole batch, done records too), and B none."""
    import threading

    from pipeline.jobs import MalformedMessageError

    a_failed, b_done = threading.Event(), threading.Event()

    def route(record) -> None:
        if record.body == "a-bad":
            a_failed.set()
            raise MalformedMessageError("not a job message")
        if record.body == "a-last":
            assert b_done.wait(30)

    monkeypatch.setattr(router, "_route", route)
    results: dict[str, object] = {}

    def invoke_a() -> None:
        try:
            results["a"] = router.handler(sqs_event(("a1", "a-bad"), ("a2", "a-last")), lambda_context)
        except BaseException as exc:  # a whole-batch failure would retry a2, which succeeded
            results["a"] = f"raised {type(exc).__name__}"

    a = threading.Thread(target=invoke_a)
    a.start()
    assert a_failed.wait(30)
    results["b"] = router.handler(sqs_event(("b1", "b-good")), lambda_context)
    b_done.set()
    a.join(30)

    assert results == {"a": {"batchItemFailures": [{"itemIdentifier": "a1"}]}, "b": {"batchItemFailures": []}}
