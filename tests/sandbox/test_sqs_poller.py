"""The sandbox's SQS event source poller: AWS-like batches, partial failures, retries and the DLQ."""

from __future__ import annotations

import hashlib
import importlib
import json
import threading
import time

import boto3
import pytest

from sandbox.clock import TimeScale
from sandbox.runtime import LambdaRuntime
from sandbox.seams import sqs_native_mappings
from sandbox.sqs_poller import (
    _WAKES,
    _WAKES_LOCK,
    DEFAULT_CONCURRENCY,
    SqsEventSourcePoller,
    SqsMapping,
    _Wake,
    build_sqs_event,
    parse_batch_item_failures,
    pollers_for,
    receivable_in,
)
from tests.conftest import TOY_HANDLERS, toy_function

REGION = "us-east-1"
SCALE = TimeScale(0.25)  # batching window 4 s -> 1 s; visibility 2 s -> 0 s on failure


@pytest.fixture
def runtime(aws):
    with LambdaRuntime(
        region=REGION,
        time_scale=SCALE,
        extra_sys_path=[TOY_HANDLERS],
        publish_logs=False,
        publish_metrics=False,
    ) as rt:
        yield rt


@pytest.fixture
def recorder(runtime):
    module = importlib.import_module("sbx_sqs_recorder")  # the module the runtime imports too
    module.reset()
    yield module
    module.reset()


@pytest.fixture
def pollers():
    """Pollers made by a test; stopped even when the test fails (no thread outlives the mock)."""
    made: list[SqsEventSourcePoller] = []
    yield made
    for poller in made:
        poller.stop(timeout=5)


# --------------------------------------------------------------------------- helpers


def make_function(name: str, handler: str, timeout: int = 3) -> str:
    return toy_function(name, handler, role="sbx-sqs-role", timeout=timeout)


def make_queue(name: str, visibility: int = 2, max_receive: int = 2) -> tuple[str, str, str]:
    """(queue url, queue arn, dlq url)."""
    sqs = boto3.client("sqs", region_name=REGION)
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive)}
    url = sqs.create_queue(
        QueueName=name,
        Attributes={"VisibilityTimeout": str(visibility), "RedrivePolicy": json.dumps(redrive)},
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn, dlq_url


def make_mapping(
    function: str, queue_arn: str, *, window: int = 4, enabled: bool = True, batch_size: int = 10
) -> str:
    return boto3.client("lambda", region_name=REGION).create_event_source_mapping(
        EventSourceArn=queue_arn,
        FunctionName=function,
        BatchSize=batch_size,
        MaximumBatchingWindowInSeconds=window,
        FunctionResponseTypes=["ReportBatchItemFailures"],
        Enabled=enabled,
    )["UUID"]


def send(url: str, bodies: list[str], **extra) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    for start in range(0, len(bodies), 10):
        entries = [
            {"Id": str(i), "MessageBody": body, **extra} for i, body in enumerate(bodies[start : start + 10])
        ]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")


def counts(url: str) -> tuple[int, int]:
    attrs = boto3.client("sqs", region_name=REGION).get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])


def drain(url: str) -> list[dict]:
    sqs = boto3.client("sqs", region_name=REGION)
    out: list[dict] = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
            "Messages"
        )
        if not got:
            return out
        out.extend(got)


def start_poller(runtime: LambdaRuntime, pollers: list, **kwargs) -> SqsEventSourcePoller:
    """A started poller; short polls unless `poll_wait_seconds` is given, so that stop() is instant.

    One poller thread per mapping unless `concurrency` is given: the batch shapes these tests
    check are one poller's (concurrent pollers split a backlog between them, as AWS's do).
    """
    kwargs.setdefault("time_scale", SCALE)
    kwargs.setdefault("poll_wait_seconds", 0)
    kwargs.setdefault("concurrency", 1)
    poller = SqsEventSourcePoller(runtime, region=REGION, **kwargs)
    pollers.append(poller)
    return poller.start()


# --------------------------------------------------------------------------- moto's native path


def test_moto_native_delivery_is_neutralised_and_the_mapping_stays_registered(recorder, runtime):
    from moto.sqs.models import Queue

    url, arn, _ = make_queue("native")
    make_function("sbx-sqs-native", "sbx_sqs_recorder.handler")
    uuid = make_mapping("sbx-sqs-native", arn)
    original = Queue.__dict__["add_message"]

    # The seam exists: without the patch moto invokes inside send_message (one message per invoke).
    send(url, ["delivered-by-moto"])
    assert [c["bodies"] for c in recorder.calls("sbx-sqs-native")] == [["delivered-by-moto"]]
    assert counts(url) == (0, 0)

    with sqs_native_mappings.disabled():
        assert sqs_native_mappings.installed()
        send(url, ["stays-queued"])
        assert len(recorder.calls("sbx-sqs-native")) == 1  # no synchronous invocation any more
        assert counts(url) == (1, 0)
        listed = boto3.client("lambda", region_name=REGION).list_event_source_mappings(EventSourceArn=arn)
        assert [(m["UUID"], m["State"]) for m in listed["EventSourceMappings"]] == [(uuid, "Enabled")]
    assert Queue.__dict__["add_message"] is original and not sqs_native_mappings.installed()


# --------------------------------------------------------------------------- batches


def test_25_messages_arrive_in_batches_of_at_most_ten_with_the_lambda_event_shape(recorder, runtime, pollers):
    from aws_lambda_powertools.utilities.parser.models import SqsModel

    url, arn, dlq_url = make_queue("batches")
    function_arn = make_function("sbx-sqs-batches", "sbx_sqs_recorder.handler")
    uuid = make_mapping("sbx-sqs-batches", arn)
    bodies = [f"msg-{i:02d}" for i in range(25)]
    attributes = {
        "traceparent": {"DataType": "String", "StringValue": "00-abc-def-01"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    }
    with sqs_native_mappings.disabled():  # nothing may be delivered before the poller runs
        send(url, bodies, MessageAttributes=attributes)

    poller = start_poller(runtime, pollers, poll_wait_seconds=1)  # the default: 1 s long polls
    assert [m.uuid for m in poller.mappings] == [uuid]
    assert poller.wait_until_idle(timeout=10)

    calls = recorder.calls("sbx-sqs-batches")
    assert [len(c["ids"]) for c in calls] == [10, 10, 5]  # the last one after the batching window
    assert sorted(b for c in calls for b in c["bodies"]) == bodies
    assert counts(url) == (0, 0) and drain(dlq_url) == []
    stats = poller.stats.for_mapping(uuid)
    assert (stats.batches, stats.messages_delivered, stats.messages_deleted, stats.messages_failed) == (
        3,
        25,
        25,
        0,
    )
    assert stats.function_errors == stats.sqs_errors == 0

    event = calls[0]["event"]
    SqsModel.model_validate(event)  # powertools' schema of the Lambda SQS event
    record = event["Records"][0]
    assert list(record) == [
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfMessageAttributes",
        "md5OfBody",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
    ]
    assert (record["eventSource"], record["eventSourceARN"], record["awsRegion"]) == ("aws:sqs", arn, REGION)
    assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest()
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert {"SentTimestamp", "ApproximateFirstReceiveTimestamp", "SenderId"} <= set(record["attributes"])
    assert int(record["attributes"]["ApproximateFirstReceiveTimestamp"]) >= int(
        record["attributes"]["SentTimestamp"]
    )
    assert record["messageAttributes"] == {
        "traceparent": {
            "stringValue": "00-abc-def-01",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "String",
        },
        "blob": {"binaryValue": "AAE=", "stringListValues": [], "binaryListValues": [], "dataType": "Binary"},
    }
    # every invocation went through the runtime, to the mapping's function
    assert all(r.function_name == "sbx-sqs-batches" for r in runtime.invocations)
    assert function_arn.endswith(":sbx-sqs-batches")


def test_a_batch_size_above_ten_is_gathered_from_several_receives(recorder, runtime, pollers):
    url, arn, _ = make_queue("big-batch")
    make_function("sbx-sqs-big", "sbx_sqs_recorder.handler")
    make_mapping("sbx-sqs-big", arn, window=4, batch_size=25)
    with sqs_native_mappings.disabled():
        send(url, [f"m{i}" for i in range(30)])
    poller = start_poller(runtime, pollers)
    assert poller.wait_until_idle(timeout=10)
    assert [len(c["ids"]) for c in recorder.calls("sbx-sqs-big")] == [25, 5]


def test_the_batching_window_gathers_messages_that_arrive_later(recorder, runtime, pollers):
    url, arn, _ = make_queue("window")
    make_function("sbx-sqs-window", "sbx_sqs_recorder.handler")
    make_mapping("sbx-sqs-window", arn, window=4)  # x 0.25 = 1 s real
    poller = start_poller(runtime, pollers)

    send(url, ["first"])
    time.sleep(0.3)
    send(url, ["second", "third"])
    assert poller.wait_until_idle(timeout=10)

    assert [sorted(c["bodies"]) for c in recorder.calls("sbx-sqs-window")] == [["first", "second", "third"]]


# --------------------------------------------------------------------------- failures


def test_a_reported_item_failure_is_retried_alone_and_then_lands_in_the_dlq(recorder, runtime, pollers):
    # Real time (no visibility compression): moto's own visibility timeout and redrive at work.
    url, arn, dlq_url = make_queue("partial", visibility=1, max_receive=2)
    make_function("sbx-sqs-partial", "sbx_sqs_recorder.handler")
    uuid = make_mapping("sbx-sqs-partial", arn, window=0)
    with sqs_native_mappings.disabled():
        send(url, ["ok-1", "ok-2", "fail-me", "ok-3", "ok-4"])

    poller = start_poller(runtime, pollers, time_scale=TimeScale(1.0))
    first = recorder  # readability
    deadline = time.monotonic() + 5
    while not first.calls("sbx-sqs-partial") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not poller.idle()  # the failed message is in flight until its visibility timeout
    assert poller.wait_until_idle(timeout=10)

    calls = recorder.calls("sbx-sqs-partial")
    assert sorted(calls[0]["bodies"]) == ["fail-me", "ok-1", "ok-2", "ok-3", "ok-4"]
    assert [(c["bodies"], c["receive_counts"]) for c in calls[1:]] == [(["fail-me"], [2])]
    dead = drain(dlq_url)
    assert [m["Body"] for m in dead] == ["fail-me"]
    assert counts(url) == (0, 0)
    stats = poller.stats.for_mapping(uuid)
    assert (stats.batches, stats.messages_deleted, stats.messages_failed, stats.function_errors) == (
        2,
        4,
        2,
        0,
    )
    assert stats.visibility_compressed == 0


def test_a_handler_that_raises_fails_the_whole_batch_which_is_redelivered(recorder, runtime, pollers):
    url, arn, dlq_url = make_queue("raises", visibility=2, max_receive=3)
    make_function("sbx-sqs-raises", "sbx_sqs_recorder.raise_on_first_delivery")
    uuid = make_mapping("sbx-sqs-raises", arn, window=0)
    with sqs_native_mappings.disabled():
        send(url, ["a", "b", "c"])

    poller = start_poller(runtime, pollers)  # scaled: visibility 2 s -> 0 s after the failure
    assert poller.wait_until_idle(timeout=10)

    calls = recorder.calls("sbx-sqs-raises")
    assert [(sorted(c["bodies"]), c["receive_counts"]) for c in calls] == [
        (["a", "b", "c"], [1, 1, 1]),
        (["a", "b", "c"], [2, 2, 2]),
    ]
    assert [r.error_type for r in runtime.invocations] == ["RuntimeError", None]
    assert counts(url) == (0, 0) and drain(dlq_url) == []
    stats = poller.stats.for_mapping(uuid)
    assert (stats.batches, stats.function_errors, stats.messages_failed, stats.messages_deleted) == (
        2,
        1,
        3,
        3,
    )
    assert stats.visibility_compressed == 3


def test_an_unknown_item_identifier_fails_the_whole_batch(recorder, runtime, pollers):
    url, arn, _ = make_queue("unknown-id", visibility=2, max_receive=3)
    make_function("sbx-sqs-unknown", "sbx_sqs_recorder.unknown_identifier_on_first_delivery")
    uuid = make_mapping("sbx-sqs-unknown", arn, window=0)
    with sqs_native_mappings.disabled():
        send(url, ["x", "y"])

    poller = start_poller(runtime, pollers)
    assert poller.wait_until_idle(timeout=10)

    calls = recorder.calls("sbx-sqs-unknown")
    assert [c["receive_counts"] for c in calls] == [[1, 1], [2, 2]]
    stats = poller.stats.for_mapping(uuid)
    assert (stats.function_errors, stats.messages_failed, stats.messages_deleted) == (0, 2, 2)


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (None, set()),
        ({}, set()),
        ({"batchItemFailures": None}, set()),
        ({"batchItemFailures": []}, set()),
        ({"batchItemFailures": [{"itemIdentifier": "a"}, {"itemIdentifier": "b"}]}, {"a", "b"}),
        ({"batchItemFailures": [{"itemIdentifier": "zzz"}]}, None),  # not in the batch
        ({"batchItemFailures": [{"itemIdentifier": ""}]}, None),
        ({"batchItemFailures": [{"itemIdentifier": None}]}, None),
        ({"batchItemFailures": [{"itemId": "a"}]}, None),  # bad key name
        ({"batchItemFailures": ["a"]}, None),
        ({"batchItemFailures": "a"}, None),
        ("not json", None),
        ([{"itemIdentifier": "a"}], None),
    ],
)
def test_batch_item_failures_are_parsed_as_aws_does(payload, expected):
    assert parse_batch_item_failures(payload, ["a", "b", "c"]) == expected


def test_event_records_carry_fifo_attributes_and_list_values():
    message = {
        "MessageId": "m1",
        "ReceiptHandle": "rh",
        "Body": "{}",
        "MD5OfBody": "99914b932bd37a50b76c8b3f2b0aa9e5",
        "Attributes": {"ApproximateReceiveCount": "3", "MessageGroupId": "g", "SentTimestamp": "1"},
        "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "7"}},
    }
    event = build_sqs_event([message], "arn:aws:sqs:eu-west-1:123456789012:q.fifo", "eu-west-1")
    record = event["Records"][0]
    assert record["attributes"]["MessageGroupId"] == "g"
    assert "md5OfMessageAttributes" not in record  # SQS did not send one
    assert record["messageAttributes"]["n"] == {
        "stringValue": "7",
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "Number",
    }
    assert record["awsRegion"] == "eu-west-1"


# --------------------------------------------------------------------------- lifecycle and resilience


def test_stop_returns_promptly_and_leaves_no_thread_or_patch_behind(recorder, runtime, pollers):
    from moto.sqs.models import Queue

    original = Queue.__dict__["add_message"]
    _, arn, _ = make_queue("stopping")
    make_function("sbx-sqs-stop", "sbx_sqs_recorder.handler")
    make_mapping("sbx-sqs-stop", arn)
    poller = start_poller(runtime, pollers, poll_wait_seconds=1)
    threads = poller.threads
    assert len(threads) == 1 and threads[0].daemon and threads[0].is_alive()
    assert Queue.__dict__["add_message"] is not original
    time.sleep(0.2)  # the worker is inside a long poll

    assert poller.stop(timeout=5)  # True: every worker joined within the timeout
    assert not threads[0].is_alive()
    assert not [t for t in threading.enumerate() if t.name.startswith("sqs-poller")]
    assert Queue.__dict__["add_message"] is original
    assert poller.stop(timeout=1)  # idempotent

    short = start_poller(runtime, pollers)  # poll_wait_seconds=0: short polls, stop at once
    time.sleep(0.3)
    assert short.stop(timeout=5)


def test_a_disabled_mapping_is_not_polled_until_enabled_and_refreshed(recorder, runtime, pollers):
    url, arn, _ = make_queue("disabled")
    make_function("sbx-sqs-disabled", "sbx_sqs_recorder.handler")
    uuid = make_mapping("sbx-sqs-disabled", arn, window=0, enabled=False)
    poller = start_poller(runtime, pollers)
    assert poller.mappings == []
    send(url, ["waiting"])
    time.sleep(0.3)
    assert recorder.calls("sbx-sqs-disabled") == [] and counts(url) == (1, 0)

    boto3.client("lambda", region_name=REGION).update_event_source_mapping(UUID=uuid, Enabled=True)
    poller.refresh()
    assert [m.uuid for m in poller.mappings] == [uuid]
    assert poller.wait_until_idle(timeout=10)
    assert [c["bodies"] for c in recorder.calls("sbx-sqs-disabled")] == [["waiting"]]


def test_sqs_api_errors_are_logged_and_retried_not_fatal(recorder, runtime, pollers):
    sqs = boto3.client("sqs", region_name=REGION)
    url, arn, _ = make_queue("flaky")
    make_function("sbx-sqs-flaky", "sbx_sqs_recorder.handler")
    uuid = make_mapping("sbx-sqs-flaky", arn, window=0)
    sqs.delete_queue(QueueUrl=url)  # the worker's receives now fail with QueueDoesNotExist

    poller = start_poller(runtime, pollers, max_error_backoff=0.4)
    deadline = time.monotonic() + 5
    while poller.stats.for_mapping(uuid).sqs_errors < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert poller.stats.for_mapping(uuid).sqs_errors >= 2
    assert "QueueDoesNotExist" in (poller.stats.last_error(uuid) or "")
    assert poller.threads[0].is_alive()

    url = sqs.create_queue(QueueName="flaky", Attributes={"VisibilityTimeout": "2"})["QueueUrl"]
    send(url, ["after-recovery"])
    assert poller.wait_until_idle(timeout=10)
    assert [c["bodies"] for c in recorder.calls("sbx-sqs-flaky")] == [["after-recovery"]]


def test_an_empty_queue_costs_no_receive_and_a_message_sent_to_it_is_still_taken(
    recorder, runtime, pollers, monkeypatch
):
    from botocore.client import BaseClient

    url, arn, _ = make_queue("peeked")
    make_function("sbx-sqs-peeked", "sbx_sqs_recorder.handler")
    uuid = make_mapping("sbx-sqs-peeked", arn, window=0)
    receives: list[str] = []
    original = BaseClient._make_api_call

    def counting(client, operation, params):
        if operation == "ReceiveMessage":
            receives.append(params["QueueUrl"])
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counting)
    poller = start_poller(runtime, pollers)
    deadline = time.monotonic() + 10
    while poller.stats.for_mapping(uuid).empty_receives < 3 and time.monotonic() < deadline:
        time.sleep(0.02)

    assert poller.stats.for_mapping(uuid).empty_receives >= 3  # it looked, several times
    assert receives == []  # and no look was a ReceiveMessage: moto's queue held nothing receivable

    send(url, ["after-the-looks"])
    assert poller.wait_until_idle(timeout=10)
    assert [c["bodies"] for c in recorder.calls("sbx-sqs-peeked")] == [["after-the-looks"]]
    assert receives and set(receives) == {url}  # a receive took it, as SQS decides


def test_wait_until_idle_times_out_while_messages_wait_for_a_stopped_poller(recorder, runtime, pollers):
    url, arn, _ = make_queue("quiet")
    make_function("sbx-sqs-quiet", "sbx_sqs_recorder.handler")
    make_mapping("sbx-sqs-quiet", arn, window=0)
    poller = start_poller(runtime, pollers)
    assert poller.wait_until_idle(timeout=5)  # empty queue: idle at once
    poller.stop()
    with sqs_native_mappings.disabled():
        send(url, ["nobody-home"])
    # messages waiting for a stopped poller are work not done
    assert not poller.idle()
    assert not poller.wait_until_idle(timeout=0.3)
    poller.start()
    assert poller.wait_until_idle(timeout=5)
    assert [c["bodies"] for c in recorder.calls("sbx-sqs-quiet")] == [["nobody-home"]]


# --------------------------------------------------------------------------- wake-on-send


def test_receivable_in_is_the_rest_of_the_delay_and_never_negative():
    assert receivable_in(10_500.0, 10.0) == 0.5
    assert receivable_in(9_000.0, 10.0) == 0.0
    assert receivable_in(0.0, 10.0) == 0.0  # never delayed


def test_a_wake_ends_a_wait_once_a_due_time_has_come_and_consumes_it():
    wake = _Wake()
    wake.at(time.monotonic() - 1)  # already due
    wake.at(time.monotonic() + 3600)  # not yet
    wake.wait(60)  # returns for the due one (else this test would sit out the minute)
    assert len(wake._due) == 1  # the later one is kept
    wake.stop()
    wake.wait(60)  # stopped: returns at once
    assert len(wake._due) == 1


def test_a_send_tells_the_workers_of_that_queue_when_the_message_becomes_receivable(aws):
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="woken")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    other = boto3.client("sqs", region_name=REGION).create_queue(QueueName="other")["QueueUrl"]
    wake = _Wake()
    with sqs_native_mappings.disabled():
        with _WAKES_LOCK:
            _WAKES.setdefault(arn, set()).add(wake)
        try:
            sqs.send_message(QueueUrl=other, MessageBody="not for this queue")
            assert wake._due == []
            before = time.monotonic()
            sqs.send_message(QueueUrl=url, MessageBody="now")
            sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
        finally:
            with _WAKES_LOCK:
                _WAKES.pop(arn, None)
    now_due, later_due = sorted(wake._due)
    assert now_due <= time.monotonic()
    assert later_due >= before + 55  # when the 60 s delay ends, not at once


# --------------------------------------------------------------------------- concurrent batches


def _mapping(**fields) -> SqsMapping:
    return SqsMapping(
        uuid="u",
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:f",
        queue_arn="arn:aws:sqs:us-east-1:123456789012:q",
        **fields,
    )


def test_the_pollers_of_a_mapping_are_capped_by_its_maximum_concurrency_and_reserved_concurrency():
    assert DEFAULT_CONCURRENCY == 5  # what AWS starts an SQS event source mapping with
    assert pollers_for(_mapping(), 5, None) == 5
    assert pollers_for(_mapping(maximum_concurrency=2), 5, None) == 2
    assert pollers_for(_mapping(maximum_concurrency=20), 5, None) == 5
    assert pollers_for(_mapping(), 5, 3) == 3
    assert pollers_for(_mapping(maximum_concurrency=2), 5, 1) == 1
    assert pollers_for(_mapping(), 5, 0) == 0  # throttled: AWS invokes nothing
    assert (
        SqsMapping.from_config(
            {
                "UUID": "u",
                "FunctionArn": "f",
                "EventSourceArn": "q",
                "ScalingConfig": {"MaximumConcurrency": 3},
            }
        ).maximum_concurrency
        == 3
    )
    assert (
        SqsMapping.from_config({"UUID": "u", "FunctionArn": "f", "EventSourceArn": "q"}).maximum_concurrency
        is None
    )


def test_concurrent_batches_each_hold_their_own_messages(runtime, pollers):
    import sbx_block

    sbx_block.GATE.clear()
    sbx_block.ENTERED.clear()
    url, arn, dlq_url = make_queue("concurrent", visibility=120)
    make_function("sbx-sqs-concurrent", "sbx_block.handler", timeout=120)  # 30 s real: never cut off
    uuid = make_mapping("sbx-sqs-concurrent", arn, window=0, batch_size=1)
    with sqs_native_mappings.disabled():
        send(url, [f"m{i}" for i in range(5)])
    poller = start_poller(runtime, pollers, concurrency=3)
    try:
        assert len(poller.threads) == 3
        deadline = time.monotonic() + 10
        while len(sbx_block.ENTERED) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(sbx_block.ENTERED) == 3  # three batches at once, each blocked in the handler
        assert poller.in_flight_batches == 3
        assert counts(url) == (2, 3)  # each held message is invisible to the other pollers
        assert not poller.idle()
    finally:
        sbx_block.GATE.set()
    assert poller.wait_until_idle(timeout=10)
    assert len(sbx_block.ENTERED) == 5  # every message delivered once, none twice
    stats = poller.stats.for_mapping(uuid)
    assert (stats.batches, stats.messages_deleted, stats.messages_failed) == (5, 5, 0)
    assert counts(url) == (0, 0) and drain(dlq_url) == []


def test_a_mapping_polls_with_no_more_batches_than_its_function_may_run(runtime, pollers):
    _, arn, _ = make_queue("reserved")
    lam = boto3.client("lambda", region_name=REGION)
    make_function("sbx-sqs-reserved", "sbx_sqs_recorder.handler")
    lam.put_function_concurrency(FunctionName="sbx-sqs-reserved", ReservedConcurrentExecutions=2)
    make_mapping("sbx-sqs-reserved", arn)
    poller = start_poller(runtime, pollers, concurrency=5)
    assert len(poller.threads) == 2

    lam.put_function_concurrency(FunctionName="sbx-sqs-reserved", ReservedConcurrentExecutions=0)
    before = poller.threads
    poller.refresh()  # throttled: its pollers stop, and none takes their place
    for thread in before:
        thread.join(5)
    assert not any(t.is_alive() for t in before)
    assert [t for t in poller.threads if t.is_alive()] == []
