"""The sandbox event bus: Lambda targets, status-change events, S3 events, schedules, faults."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote_plus, unquote_plus

import boto3
import pytest

from sandbox.clock import TimeScale
from sandbox.eventbus import EventBus
from sandbox.runtime import LambdaRuntime
from tests.conftest import TOY_HANDLERS, toy_function, toy_role

REGION = "us-east-1"
STATUS_DETAIL_TYPE = "Step Functions Execution Status Change"
PASS_DEFINITION = {"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": {"ok": 1}, "End": True}}}
FAIL_DEFINITION = {"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Boom", "Cause": "it broke"}}}
WAIT_DEFINITION = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 30, "End": True}}}


# --------------------------------------------------------------------------- fixtures and helpers


@pytest.fixture
def aws(executing_aws: None) -> Iterator[None]:
    yield
    _drain_executions()


@pytest.fixture
def runtime(aws: None) -> Iterator[LambdaRuntime]:
    with LambdaRuntime(
        region=REGION, extra_sys_path=[TOY_HANDLERS], publish_logs=False, publish_metrics=False
    ) as rt:
        yield rt


@pytest.fixture
def recorded(runtime: LambdaRuntime) -> list[dict[str, Any]]:
    import sbx_evt_record  # importable: the runtime put toy_handlers on sys.path

    sbx_evt_record.EVENTS.clear()
    return sbx_evt_record.EVENTS


@pytest.fixture
def make_bus(runtime: LambdaRuntime) -> Iterator[Callable[..., EventBus]]:
    buses: list[EventBus] = []

    def make(**kwargs: Any) -> EventBus:
        kwargs.setdefault("poll_interval", 0.05)
        kwargs.setdefault("time_scale", TimeScale(0.02))
        bus = EventBus(runtime, region=REGION, **kwargs).start()
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        bus.stop()


def _drain_executions() -> None:
    """Never leave the mock with an execution running (their threads outlive it)."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    for machine in sfn.list_state_machines()["stateMachines"]:
        for ex in sfn.list_executions(stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING")[
            "executions"
        ]:
            sfn.stop_execution(executionArn=ex["executionArn"])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not any(
            sfn.list_executions(stateMachineArn=m["stateMachineArn"], statusFilter="RUNNING")["executions"]
            for m in sfn.list_state_machines()["stateMachines"]
        ):
            return
        time.sleep(0.05)


def make_function(name: str, handler: str = "sbx_evt_record.handler", timeout: int = 5) -> str:
    return toy_function(name, handler, role="sbx-evt-role", timeout=timeout)


def make_queue(name: str) -> tuple[str, str]:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def receive_all(url: str) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", region_name=REGION)
    out: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=60
        ).get("Messages", [])
        if not batch:
            return out
        out.extend(batch)


def make_rule(name: str, targets: list[dict[str, Any]], pattern: dict | None = None, **kwargs: Any) -> str:
    events = boto3.client("events", region_name=REGION)
    if pattern is not None:
        kwargs["EventPattern"] = json.dumps(pattern)
    arn = events.put_rule(Name=name, **kwargs)["RuleArn"]
    events.put_targets(Rule=name, Targets=targets)
    return arn


def make_state_machine(name: str, definition: dict) -> str:
    return boto3.client("stepfunctions", region_name=REGION).create_state_machine(
        name=name, definition=json.dumps(definition), roleArn=toy_role("sbx-evt-role")
    )["stateMachineArn"]


def start(machine_arn: str, name: str, payload: dict | None = None) -> str:
    return boto3.client("stepfunctions", region_name=REGION).start_execution(
        stateMachineArn=machine_arn, name=name, input=json.dumps(payload or {})
    )["executionArn"]


def wait_status(execution_arn: str, timeout: float = 5.0) -> dict[str, Any]:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    deadline = time.monotonic() + timeout
    while True:
        desc = sfn.describe_execution(executionArn=execution_arn)
        if desc["status"] != "RUNNING" or time.monotonic() > deadline:
            return desc
        time.sleep(0.02)


def of(recorded: list[dict[str, Any]], function: str) -> list[dict[str, Any]]:
    return [r["event"] for r in list(recorded) if r["function"] == function]


def status_pattern(**detail: list[str]) -> dict[str, Any]:
    pattern: dict[str, Any] = {"source": ["aws.states"], "detail-type": [STATUS_DETAIL_TYPE]}
    if detail:
        pattern["detail"] = detail
    return pattern


# --------------------------------------------------------------------------- moto facts we fill in


def test_moto_gaps_this_module_fills(aws: None) -> None:
    """Pins moto 5.2.5 (no bus started): Lambda targets fail put_events; S3's own event is not AWS-shaped."""
    fn_arn = toy_function("sbx-evt-plain", "x.handler", role="sbx-evt-role")
    make_rule("to-lambda", [{"Id": "l", "Arn": fn_arn}], {"source": ["custom"]})
    events = boto3.client("events", region_name=REGION)
    with pytest.raises(NotImplementedError):
        events.put_events(Entries=[{"Source": "custom", "DetailType": "x", "Detail": "{}"}])

    url, queue_arn = make_queue("sbx-evt-moto-s3")
    make_rule("s3-to-sqs", [{"Id": "q", "Arn": queue_arn}], {"source": ["aws.s3"]})
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="sbx-evt-moto")
    s3.put_bucket_notification_configuration(
        Bucket="sbx-evt-moto", NotificationConfiguration={"EventBridgeConfiguration": {}}
    )
    s3.put_object(Bucket="sbx-evt-moto", Key="a b.txt", Body=b"x")
    bodies = [json.loads(m["Body"]) for m in receive_all(url)]
    assert [b["detail-type"] for b in bodies] == ["Object Created", "Object Tags Added"]
    assert bodies[0]["detail"]["object"]["key"] == "a b.txt"  # not URL-encoded
    assert bodies[0]["detail"]["reason"] == "ObjectCreated"  # AWS: PutObject
    assert bodies[0]["id"] == bodies[1]["id"] == "17793124-05d4-b198-2fde-7ededc63b103"  # fixed id

    # moto delivers to DISABLED rules too, and a schedule-only rule matches every event
    disabled_url, disabled_arn = make_queue("sbx-evt-moto-disabled")
    make_rule("off", [{"Id": "q", "Arn": disabled_arn}], {"source": ["other"]}, State="DISABLED")
    sched_url, sched_arn = make_queue("sbx-evt-moto-sched")
    make_rule("sched", [{"Id": "q", "Arn": sched_arn}], ScheduleExpression="rate(1 hour)")
    events.put_events(Entries=[{"Source": "other", "DetailType": "x", "Detail": "{}"}])
    assert len(receive_all(disabled_url)) == 1 and len(receive_all(sched_url)) == 1


# --------------------------------------------------------------------------- status-change events


def test_status_rule_gets_running_then_succeeded_for_its_machine_only(make_bus, recorded) -> None:
    fn = make_function("sbx-evt-status")
    mine = make_state_machine("sbx-evt-mine", PASS_DEFINITION)
    other = make_state_machine("sbx-evt-other", PASS_DEFINITION)
    rule_arn = make_rule("status-mine", [{"Id": "t", "Arn": fn}], status_pattern(stateMachineArn=[mine]))
    bus = make_bus()

    execution = start(mine, "run-1", {"job_id": "j-1"})
    start(other, "run-1")
    assert wait_status(execution)["status"] == "SUCCEEDED"
    assert bus.wait_until_idle(10)

    got = of(recorded, "sbx-evt-status")
    assert [e["detail"]["status"] for e in got] == ["RUNNING", "SUCCEEDED"]
    running, succeeded = got
    for event in got:
        assert event["version"] == "0" and event["source"] == "aws.states"
        assert event["detail-type"] == STATUS_DETAIL_TYPE
        assert event["resources"] == [execution] and event["region"] == REGION
        assert event["account"] == execution.split(":")[4]
        assert event["time"].endswith("Z")
        assert event["detail"]["executionArn"] == execution
        assert event["detail"]["stateMachineArn"] == mine
        assert event["detail"]["name"] == "run-1"
        assert json.loads(event["detail"]["input"]) == {"job_id": "j-1"}
        assert event["detail"]["inputDetails"] == {"included": True}
        assert isinstance(event["detail"]["startDate"], int)
    assert running["id"] != succeeded["id"]
    assert running["detail"]["stopDate"] is None and running["detail"]["output"] is None
    assert succeeded["detail"]["stopDate"] >= succeeded["detail"]["startDate"]
    assert json.loads(succeeded["detail"]["output"]) == {"ok": 1}
    assert succeeded["detail"]["outputDetails"] == {"included": True}
    assert succeeded["detail"]["error"] is None and succeeded["detail"]["cause"] is None
    # the other machine's execution was emitted (the bus saw it) but matched no rule of ours
    assert {e["detail"]["stateMachineArn"] for e in bus.emitted_events()} == {mine, other}
    assert bus.stats["rules"]["status-mine"]["deliveries"] == 2
    assert rule_arn.endswith("rule/status-mine")


def test_failed_and_aborted_executions(make_bus, recorded) -> None:
    fn = make_function("sbx-evt-terminal")
    failing = make_state_machine("sbx-evt-fail", FAIL_DEFINITION)
    waiting = make_state_machine("sbx-evt-wait", WAIT_DEFINITION)
    make_rule("terminal", [{"Id": "t", "Arn": fn}], status_pattern(status=["FAILED", "ABORTED", "TIMED_OUT"]))
    bus = make_bus()

    failed = start(failing, "f-1")
    aborted = start(waiting, "w-1")
    wait_status(failed)
    time.sleep(0.1)
    boto3.client("stepfunctions", region_name=REGION).stop_execution(executionArn=aborted)
    wait_status(aborted)
    assert bus.wait_until_idle(10)

    by_arn = {e["detail"]["executionArn"]: e for e in of(recorded, "sbx-evt-terminal")}
    assert set(by_arn) == {failed, aborted}
    assert by_arn[failed]["detail"]["status"] == "FAILED"
    assert by_arn[failed]["detail"]["error"] == "Boom" and by_arn[failed]["detail"]["cause"] == "it broke"
    assert by_arn[failed]["detail"]["output"] is None and by_arn[failed]["detail"]["outputDetails"] is None
    assert by_arn[aborted]["detail"]["status"] == "ABORTED"
    assert isinstance(by_arn[aborted]["detail"]["stopDate"], int)
    # every status of every execution emitted exactly once, RUNNING first
    statuses = [(e["detail"]["executionArn"], e["detail"]["status"]) for e in bus.emitted_events()]
    assert statuses.count((failed, "RUNNING")) == 1 and statuses.count((failed, "FAILED")) == 1
    assert statuses.index((aborted, "RUNNING")) < statuses.index((aborted, "ABORTED"))


# --------------------------------------------------------------------------- put_events -> Lambda


def test_put_events_reaches_lambda_targets_asynchronously_with_their_input(make_bus, recorded) -> None:
    whole, path, const, xform = (make_function(f"sbx-evt-{n}") for n in ("whole", "path", "const", "xform"))
    url, queue_arn = make_queue("sbx-evt-side")
    pattern = {"source": ["pipeops.test"], "detail": {"kind": ["upload"]}}
    make_rule(
        "custom",
        [
            {"Id": "whole", "Arn": whole},
            {"Id": "path", "Arn": path, "InputPath": "$.detail"},
            {"Id": "const", "Arn": const, "Input": '{"fixed": true}'},
            {
                "Id": "xform",
                "Arn": xform,
                "InputTransformer": {
                    "InputPathsMap": {"k": "$.detail.key"},
                    "InputTemplate": '{"key": "<k>", "src": "transformed"}',
                },
            },
            {"Id": "queue", "Arn": queue_arn},
        ],
        pattern,
    )
    disabled_fn = make_function("sbx-evt-disabled")
    make_rule("disabled", [{"Id": "d", "Arn": disabled_fn}], pattern, State="DISABLED")
    scheduled_fn = make_function("sbx-evt-sched-only")
    make_rule("sched-only", [{"Id": "s", "Arn": scheduled_fn}], ScheduleExpression="rate(1 day)")
    bus = make_bus()

    resp = boto3.client("events", region_name=REGION).put_events(
        Entries=[
            {
                "Source": "pipeops.test",
                "DetailType": "Upload",
                "Detail": json.dumps({"kind": "upload", "key": "k1"}),
            },
            {"Source": "pipeops.test", "DetailType": "Upload", "Detail": json.dumps({"kind": "other"})},
        ]
    )
    assert resp["FailedEntryCount"] == 0
    assert bus.wait_until_idle(10)

    [event] = of(recorded, "sbx-evt-whole")
    assert event["source"] == "pipeops.test" and event["detail"] == {"kind": "upload", "key": "k1"}
    assert event["id"] == resp["Entries"][0]["EventId"] and event["time"].endswith("Z")
    assert "ingestion-time" not in event
    assert of(recorded, "sbx-evt-path") == [{"kind": "upload", "key": "k1"}]
    assert of(recorded, "sbx-evt-const") == [{"fixed": True}]
    assert of(recorded, "sbx-evt-xform") == [{"key": "k1", "src": "transformed"}]
    assert of(recorded, "sbx-evt-disabled") == [] and of(recorded, "sbx-evt-sched-only") == []
    [message] = receive_all(url)  # moto's own SQS delivery still works next to Lambda targets
    body = json.loads(message["Body"])
    assert body["detail"]["key"] == "k1" and body["account"] == event["account"]
    assert body["time"] == event["time"] and "ingestion-time" not in body


# --------------------------------------------------------------------------- failures


def test_eventbridge_mode_retries_a_failing_target_then_dead_letters_it(make_bus, recorded) -> None:
    fn = make_function("sbx-evt-failing", "sbx_evt_record.failing")
    dlq_url, dlq_arn = make_queue("sbx-evt-dlq")
    rule_arn = make_rule(
        "tracker",
        [
            {
                "Id": "tracker",
                "Arn": fn,
                "RetryPolicy": {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600},
                "DeadLetterConfig": {"Arn": dlq_arn},
            }
        ],
        {"source": ["pipeops.test"]},
    )
    bus = make_bus(handler_errors="eventbridge")

    sent = bus.emit({"source": "pipeops.test", "detail-type": "Ping", "detail": {"n": 1}})
    assert bus.wait_until_idle(10)

    assert len(of(recorded, "sbx-evt-failing")) == 3  # first attempt + 2 retries
    [message] = receive_all(dlq_url)
    assert json.loads(message["Body"]) == sent
    attrs = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    assert attrs["RULE_ARN"] == rule_arn and attrs["TARGET_ARN"] == fn
    assert attrs["ERROR_CODE"] == "ERROR_FROM_TARGET"
    assert "tracker store is unavailable" in attrs["ERROR_MESSAGE"]
    assert attrs["EXHAUSTED_RETRY_CONDITION"] == "MaximumRetryAttempts" and attrs["RETRY_ATTEMPTS"] == "2"
    stats = bus.stats["rules"]["tracker"]
    assert (stats["invocations"], stats["failures"], stats["retries"], stats["dead_lettered"]) == (3, 3, 2, 1)


def test_default_mode_follows_lambda_async_semantics(make_bus, recorded) -> None:
    fn = make_function("sbx-evt-async-failing", "sbx_evt_record.failing")
    dest_url, dest_arn = make_queue("sbx-evt-on-failure")
    dlq_url, dlq_arn = make_queue("sbx-evt-rule-dlq")
    boto3.client("lambda", region_name=REGION).put_function_event_invoke_config(
        FunctionName="sbx-evt-async-failing",
        MaximumRetryAttempts=1,
        DestinationConfig={"OnFailure": {"Destination": dest_arn}},
    )
    missing = fn.replace("sbx-evt-async-failing", "sbx-evt-deleted")
    policy = {"MaximumRetryAttempts": 5, "MaximumEventAgeInSeconds": 3600}
    make_rule(
        "async",
        [
            {"Id": "fails", "Arn": fn, "RetryPolicy": policy, "DeadLetterConfig": {"Arn": dlq_arn}},
            {"Id": "gone", "Arn": missing, "RetryPolicy": policy, "DeadLetterConfig": {"Arn": dlq_arn}},
        ],
        {"source": ["pipeops.test"]},
    )
    bus = make_bus(time_scale=TimeScale(0.005))  # Lambda's 60 s retry delay -> 0.3 s

    sent = bus.emit({"source": "pipeops.test", "detail-type": "Ping", "detail": {}})
    assert bus.wait_until_idle(10)

    # the handler error is Lambda's: 1 + MaximumRetryAttempts runs, then the OnFailure destination
    assert len(of(recorded, "sbx-evt-async-failing")) == 2
    [record] = [json.loads(m["Body"]) for m in receive_all(dest_url)]
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 2
    assert record["requestPayload"] == sent
    assert record["responsePayload"]["errorType"] == "TargetUnavailableError"
    # a target EventBridge cannot reach goes to the rule's DLQ at once, without retries
    [message] = receive_all(dlq_url)
    attrs = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    assert attrs["TARGET_ARN"] == missing and attrs["ERROR_CODE"] == "NO_RESOURCE"
    assert attrs["RETRY_ATTEMPTS"] == "0" and "EXHAUSTED_RETRY_CONDITION" not in attrs
    stats = bus.stats["rules"]["async"]
    assert (stats["on_failure"], stats["dead_lettered"], stats["dropped"]) == (1, 1, 0)


# --------------------------------------------------------------------------- S3


def test_put_object_in_an_eventbridge_bucket_reaches_the_ingest_rule_once(make_bus, recorded) -> None:
    ingest = make_function("sbx-evt-ingest")
    everything = make_function("sbx-evt-all-s3")
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="sbx-evt-input")
    s3.create_bucket(Bucket="sbx-evt-quiet")  # EventBridge not enabled
    s3.put_bucket_notification_configuration(
        Bucket="sbx-evt-input", NotificationConfiguration={"EventBridgeConfiguration": {}}
    )
    make_rule(
        "ingest",
        [{"Id": "ingest", "Arn": ingest}],
        {
            "source": ["aws.s3"],
            "detail-type": ["Object Created"],
            "detail": {"bucket": {"name": ["sbx-evt-input"]}},
        },
    )
    make_rule("all-s3", [{"Id": "all", "Arn": everything}], {"source": ["aws.s3"]})
    bus = make_bus()

    key = "incoming/Q3 report (é+ü)/données.csv"
    etag = s3.put_object(Bucket="sbx-evt-input", Key=key, Body=b"a,b\n1,2\n")["ETag"].strip('"')
    s3.put_object(Bucket="sbx-evt-quiet", Key="nothing.csv", Body=b"x")
    assert bus.wait_until_idle(10)

    [event] = of(recorded, "sbx-evt-ingest")
    assert event["source"] == "aws.s3" and event["detail-type"] == "Object Created"
    assert event["resources"] == ["arn:aws:s3:::sbx-evt-input"] and event["region"] == REGION
    detail = event["detail"]
    assert detail["bucket"] == {"name": "sbx-evt-input"}
    assert detail["object"]["key"] == quote_plus(key, safe="/") and unquote_plus(detail["object"]["key"]) == key
    assert detail["object"]["key"].startswith("incoming/Q3+report+%28")  # folders kept, the rest encoded
    assert detail["object"]["size"] == 8 and detail["object"]["etag"] == etag
    assert detail["reason"] == "PutObject" and detail["version"] == "0"
    assert len(detail["request-id"]) == 16 and detail["requester"] == event["account"]
    # exactly one S3 event per put: moto's spurious "Object Tags Added" is not forwarded
    assert [e["detail-type"] for e in of(recorded, "sbx-evt-all-s3")] == ["Object Created"]


# --------------------------------------------------------------------------- schedules


def test_rate_schedule_fires_on_the_scaled_clock_and_on_demand(make_bus, recorded, caplog) -> None:
    fn = make_function("sbx-evt-batch")
    rule_arn = make_rule("every-minute", [{"Id": "b", "Arn": fn}], ScheduleExpression="rate(1 minute)")
    make_rule("nightly", [{"Id": "n", "Arn": fn}], ScheduleExpression="cron(0 2 * * ? *)")
    caplog.set_level(logging.WARNING, logger="sandbox.schedules")
    bus = make_bus(time_scale=TimeScale(0.01))  # 60 s -> 0.6 s

    fired = bus.fire_schedule("every-minute")
    assert bus.wait_until_idle(5)
    assert of(recorded, "sbx-evt-batch") == [fired]
    assert fired["detail-type"] == "Scheduled Event" and fired["source"] == "aws.events"
    assert fired["resources"] == [rule_arn] and fired["detail"] == {}

    deadline = time.monotonic() + 3
    while len(of(recorded, "sbx-evt-batch")) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    timer_fired = of(recorded, "sbx-evt-batch")[1]
    assert timer_fired["resources"] == [rule_arn] and timer_fired["id"] != fired["id"]
    assert any("nightly" in r.getMessage() and "will not fire" in r.getMessage() for r in caplog.records)

    boto3.client("events", region_name=REGION).disable_rule(Name="every-minute")
    time.sleep(0.15)  # > one schedule sync
    count = len(of(recorded, "sbx-evt-batch"))
    time.sleep(0.9)  # > one period
    assert len(of(recorded, "sbx-evt-batch")) == count


# --------------------------------------------------------------------------- fault injection


def test_duplicate_delivery_and_paused_rule(make_bus, recorded) -> None:
    fn = make_function("sbx-evt-tracker")
    machine = make_state_machine("sbx-evt-dup", PASS_DEFINITION)
    make_rule(
        "tracker",
        [{"Id": "t", "Arn": fn}],
        status_pattern(stateMachineArn=[machine], status=["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"]),
    )
    bus = make_bus()

    bus.duplicate_next(lambda e: e["detail"].get("status") == "SUCCEEDED")
    first = start(machine, "dup-1")
    wait_status(first)
    assert bus.wait_until_idle(10)
    got = of(recorded, "sbx-evt-tracker")
    assert len(got) == 2 and got[0] == got[1]  # same event, same id, delivered twice
    bus.redeliver(got[0]["id"])
    assert bus.wait_until_idle(10)
    assert len(of(recorded, "sbx-evt-tracker")) == 3

    bus.pause_rule("tracker")  # tracker outage: deliveries are held
    second = start(machine, "dup-2")
    wait_status(second)
    assert bus.wait_until_idle(10)  # held deliveries do not keep the bus busy
    assert len(of(recorded, "sbx-evt-tracker")) == 3
    assert bus.stats["held"] == 1 and bus.paused_rules == {"tracker": "hold"}
    assert bus.resume_rule("tracker") == 1
    assert bus.wait_until_idle(10)
    assert of(recorded, "sbx-evt-tracker")[-1]["detail"]["executionArn"] == second


def test_paused_rule_with_failures_goes_through_retry_policy(make_bus, recorded) -> None:
    fn = make_function("sbx-evt-outage")
    dlq_url, dlq_arn = make_queue("sbx-evt-outage-dlq")
    policy = {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 60}
    make_rule(
        "outage",
        [{"Id": "o", "Arn": fn, "RetryPolicy": policy, "DeadLetterConfig": {"Arn": dlq_arn}}],
        {"source": ["pipeops.test"]},
    )
    bus = make_bus()
    bus.pause_rule("outage", fail=True)

    bus.emit({"source": "pipeops.test", "detail-type": "Ping", "detail": {}})
    assert bus.wait_until_idle(10)

    assert of(recorded, "sbx-evt-outage") == []
    [message] = receive_all(dlq_url)
    attrs = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    assert attrs["ERROR_CODE"] == "THROTTLING" and attrs["RETRY_ATTEMPTS"] == "3"
    assert bus.stats["rules"]["outage"]["failures"] == 4


# --------------------------------------------------------------------------- lifecycle


def test_stop_is_prompt_and_restores_moto(make_bus, runtime) -> None:
    from moto.events.models import Rule
    from moto.s3 import notifications

    original_send = Rule.__dict__["send_to_targets"]
    bus = make_bus()
    assert Rule.__dict__["send_to_targets"] is not original_send
    with pytest.raises(RuntimeError):
        EventBus(runtime, region=REGION).start()  # one bus per process

    bus.stop(timeout=2)
    assert not [t for t in threading.enumerate() if t.name.startswith(("sandbox-eventbus", "sandbox-sfn"))]
    assert Rule.__dict__["send_to_targets"] is original_send
    assert notifications._send_event_bridge_message.__module__ == "moto.s3.notifications"
    with pytest.raises(RuntimeError):
        bus.emit({"source": "x", "detail-type": "y"})


def test_an_event_arriving_the_instant_the_bus_installs_is_delivered(
    runtime, recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S3 events may arrive on another thread as soon as the seams are in: they must be queued
    for the workers, not fail on an empty shard list (ZeroDivisionError) or be dropped."""
    from sandbox.seams import eventbridge_routes

    target = make_function("sbx-evt-early")
    make_rule("early", [{"Id": "t", "Arn": target}], {"source": ["pipeops.test"]})
    attach = eventbridge_routes.SEAM.attach

    def attach_then_emit(bus: EventBus) -> None:
        attach(bus)
        bus.emit({"source": "pipeops.test", "detail-type": "Early", "detail": {"n": 1}})

    monkeypatch.setattr(eventbridge_routes.SEAM, "attach", attach_then_emit)
    bus = EventBus(runtime, region=REGION, poll_interval=0.05, time_scale=TimeScale(0.02)).start()
    try:
        assert bus.wait_until_idle(10)
        assert [e["detail"] for e in of(recorded, "sbx-evt-early")] == [{"n": 1}]
    finally:
        bus.stop()


# --------------------------------------------------------------------------- costs


def _wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_status_events_come_from_moto_hooks_not_from_polling_each_execution(make_bus, recorded) -> None:
    fn = make_function("sbx-evt-hooked")
    machine = make_state_machine("sbx-evt-hooked", PASS_DEFINITION)
    failing = make_state_machine("sbx-evt-hooked-fail", FAIL_DEFINITION)
    make_rule("status-hooked", [{"Id": "t", "Arn": fn}], status_pattern(stateMachineArn=[machine, failing]))
    bus = make_bus(poll_interval=60.0)  # the watcher's safety-net full round: once at start, then 60 s on
    calls: list[str] = []
    bus._client("stepfunctions").meta.events.register(
        "before-call", lambda model, **_: calls.append(model.name)
    )
    assert _wait_for(lambda: bus._watcher.full_rounds >= 1, 10)
    calls.clear()

    executions = [start(machine, f"run-{i}") for i in range(4)] + [start(failing, "bad")]
    expected = {arn: ["RUNNING", "FAILED" if arn.endswith(":bad") else "SUCCEEDED"] for arn in executions}

    def statuses() -> dict[str, list[str]]:
        got: dict[str, list[str]] = {}
        for event in of(recorded, "sbx-evt-hooked"):
            got.setdefault(event["detail"]["executionArn"], []).append(event["detail"]["status"])
        return got

    assert _wait_for(lambda: statuses() == expected, 20), statuses()
    assert bus._watcher.full_rounds == 1  # no round ran: each start and end was reported by a hook
    assert "ListExecutions" not in calls
    assert calls.count("DescribeExecution") <= 2 * len(executions)  # a look at each start and end


def test_a_blocked_rule_does_not_hold_another_rules_deliveries(make_bus, recorded) -> None:
    import sbx_block

    sbx_block.GATE.clear()
    sbx_block.ENTERED.clear()
    slow = make_function("sbx-evt-blocked", "sbx_block.handler", timeout=900)
    fast = make_function("sbx-evt-free")
    make_rule("backlogged", [{"Id": "slow", "Arn": slow}], {"source": ["test.backlog"]})
    make_rule("free", [{"Id": "fast", "Arn": fast}], {"source": ["test.free"]})
    bus = make_bus(workers=2)
    try:
        for i in range(12):  # every worker of the backlogged rule blocked, the rest queued behind them
            bus.emit({"source": "test.backlog", "detail-type": "x", "detail": {"i": i}})
        assert _wait_for(lambda: len(sbx_block.ENTERED) == 2, 10)
        bus.emit({"source": "test.free", "detail-type": "x", "detail": {"free": True}})
        assert _wait_for(lambda: bool(of(recorded, "sbx-evt-free")), 10)
        assert not sbx_block.GATE.is_set() and len(sbx_block.ENTERED) == 2  # still blocked meanwhile
        assert bus.stats["rules"]["backlogged"]["deliveries"] == 0
    finally:
        sbx_block.GATE.set()
    assert bus.wait_until_idle(30)
    assert bus.stats["rules"]["backlogged"]["deliveries"] == 12
