"""The pure parts of faults: the share decision, spec validation and JSON, the board's registry and
the catalog of named faults against the alarm and runbook catalogs."""

from __future__ import annotations

import threading

import pytest

from alarms.catalog import build_catalog
from pipeops.faults import FAULTS, FaultError, fault_named
from sandbox.clock import TimeScale
from sandbox.faults import (
    ApiFault,
    CallCrash,
    EventFault,
    FaultBoard,
    FaultSpecError,
    FunctionFault,
    ShareCounter,
    spec_from_json,
    spec_to_json,
)
from sandbox.faults.board import throttle_metrics
from sandbox.faults.specs import decide
from sandbox.seams.handler_calls import error_payload
from stack.template import load_template


@pytest.mark.parametrize(
    ("share", "pattern"),
    [(1.0, "1111111111"), (0.5, "1010101010"), (0.3, "1001001000"), (0.1, "1000000000"), (0.25, "1000100010")],
)
def test_a_share_faults_the_first_match_then_exactly_its_proportion(share: float, pattern: str) -> None:
    assert "".join("1" if decide(n, share) else "0" for n in range(1, 11)) == pattern
    hits = sum(decide(n, share) for n in range(1, 1001))
    assert hits == round(1000 * share)


def test_a_share_counter_is_exact_across_threads() -> None:
    counter = ShareCounter(0.5)
    threads = [threading.Thread(target=lambda: [counter.hit() for _ in range(250)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (counter.matched, counter.faulted) == (1000, 500)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: FunctionFault(name="Bad Name", function="F"), "kebab-case"),
        (lambda: FunctionFault(name="f", function="F", share=0), "share 0 is not in (0, 1]"),
        (lambda: FunctionFault(name="f", function="F", share=1.5), "share 1.5"),
        (lambda: FunctionFault(name="f", function="F", for_seconds=-1), "for_seconds -1"),
        (lambda: FunctionFault(name="f", function=""), "names no function"),
        (lambda: FunctionFault(name="f", function="F", effect="delay"), "delay_seconds > 0"),
        (lambda: FunctionFault(name="f", function="F", effect="explode"), "effect 'explode'"),  # type: ignore[arg-type]
        (lambda: ApiFault(name="a", service="DynamoDB"), "service 'DynamoDB'"),
        (lambda: ApiFault(name="a", service="dynamodb", operation="update_item"), "operation 'update_item'"),
        (lambda: ApiFault(name="a", service="dynamodb", status=200), "status 200"),
        (lambda: CallCrash(name="c", function="F", service="states", operation=""), "operation ''"),
        (lambda: CallCrash(name="c", function="F", service="states", operation="StartExecution", when="during"), "when"),  # type: ignore[arg-type]
        (lambda: EventFault(name="e", source="s3"), "source 's3'"),
        (lambda: EventFault(name="e", source="aws.s3", effect="delay"), "delay_seconds > 0"),
    ],
)
def test_a_spec_that_cannot_work_is_refused_saying_why(make: object, says: str) -> None:
    with pytest.raises(FaultSpecError, match=None) as raised:
        make()  # type: ignore[operator]
    assert says in str(raised.value)


def test_specs_travel_as_json_and_unknown_fields_are_named() -> None:
    specs = [
        FunctionFault(name="f", function="RouterFunction", effect="delay", delay_seconds=5, share=0.5, for_seconds=60),
        ApiFault(name="a", service="dynamodb", operation="UpdateItem", callers=("RouterFunction",)),
        CallCrash(name="c", function="RouterFunction", service="states", operation="StartExecution", when="after"),
        EventFault(name="e", source="aws.states", effect="lose"),
    ]
    for spec in specs:
        assert spec_from_json(spec_to_json(spec)) == spec
    with pytest.raises(FaultSpecError, match="has no field colour"):
        spec_from_json({"kind": "event", "name": "e", "source": "aws.s3", "colour": "red"})
    with pytest.raises(FaultSpecError, match="kind 'meteor' is not one of"):
        spec_from_json({"kind": "meteor", "name": "m"})


def test_the_board_resolves_names_matches_by_share_and_clears() -> None:
    board = FaultBoard(resolve={"RouterFunction": "stack-Router-1"}.get)  # type: ignore[arg-type]
    board.inject(FunctionFault(name="slow", function="RouterFunction", effect="error", share=0.5))
    assert board.function_fault("other") is None
    assert [board.function_fault("stack-Router-1") is not None for _ in range(4)] == [True, False, True, False]
    [listed] = board.active()
    assert (listed["function"], listed["matched"], listed["faulted"]) == ("stack-Router-1", 4, 2)
    ended: list[str] = []
    board.on_clear(lambda spec: ended.append(spec.name))
    assert board.clear("nope") == []
    assert board.clear() == ["slow"] and ended == ["slow"]
    assert board.function_fault("stack-Router-1") is None and board.active() == []


def test_a_fault_with_a_duration_ends_by_itself_and_says_so() -> None:
    board = FaultBoard(TimeScale(0.001))  # 50 virtual seconds: 50 real milliseconds
    ended = threading.Event()
    board.on_clear(lambda _spec: ended.set())
    board.inject(EventFault(name="held", source="aws.states", effect="hold", for_seconds=50))
    assert board.event_fault("aws.states", "any-rule") is not None
    assert ended.wait(30), "the fault never expired"
    assert board.active() == [] and board.event_fault("aws.states", "any-rule") is None
    assert [entry["action"] for entry in board.history] == ["inject", "expire"]


def test_api_faults_match_service_operation_and_callers() -> None:
    board = FaultBoard()
    board.inject(ApiFault(name="t", service="dynamodb", operation="UpdateItem", callers=("router",)))
    assert board.api_fault("router", "dynamodb", "UpdateItem") is not None
    assert board.api_fault("tracker", "dynamodb", "UpdateItem") is None
    assert board.api_fault("router", "dynamodb", "GetItem") is None
    assert board.api_fault("router", "states", "UpdateItem") is None


def test_a_throttle_is_counted_where_aws_counts_it() -> None:
    transaction = {"TransactItems": [{"Update": {"TableName": "coord"}}, {"Put": {"TableName": "tracking"}}]}
    metrics = throttle_metrics("dynamodb", "TransactWriteItems", transaction, "us-east-1")
    assert [(ns, d["MetricName"], d["Dimensions"][0]["Value"]) for ns, d in metrics] == [
        ("AWS/DynamoDB", "WriteThrottleEvents", "coord"),
        ("AWS/DynamoDB", "WriteThrottleEvents", "tracking"),
    ]
    [(_, read)] = throttle_metrics("dynamodb", "Query", {"TableName": "tracking"}, "us-east-1")
    assert read["MetricName"] == "ReadThrottleEvents"
    [(ns, start)] = throttle_metrics("states", "StartExecution", {"stateMachineArn": "arn:sm"}, "us-east-1")
    assert (ns, start["MetricName"]) == ("AWS/States", "ExecutionThrottled")
    assert throttle_metrics("sqs", "SendMessage", {}, "us-east-1") == []


def test_error_answers_have_each_protocols_shape() -> None:
    headers, body = error_payload("json", "ThrottlingException", "Rate exceeded")
    assert headers["x-amzn-ErrorType"] == "ThrottlingException" and b'"__type": "ThrottlingException"' in body
    _, xml = error_payload("query", "Throttling", "Rate <exceeded>")
    assert b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>" in xml and b"&lt;exceeded&gt;" in xml
    _, s3 = error_payload("rest-xml", "SlowDown", "Please reduce your request rate.")
    assert s3.startswith(b"<Error><Code>SlowDown</Code>")


def test_every_named_fault_names_real_alarms_and_runbooks_and_kebab_case() -> None:
    from alarms.slo_alarms import burn_pairs, window_alarm_ids

    alarm_ids = {spec.name_suffix for spec in build_catalog(load_template())}
    alarm_ids |= {pair.name_suffix for pair in burn_pairs()} | window_alarm_ids()  # the objective's alarms
    for name, fault in FAULTS.items():
        assert fault.name == name and name == name.lower() and " " not in name
        assert fault.description and "\n" not in fault.description
        unknown = (set(fault.expected_alarms) | set(fault.quiet_alarms) | ({fault.timed_from} if fault.timed_from else set())) - alarm_ids
        assert not unknown, f"{name} expects alarms the catalog lacks: {unknown}"
        assert (fault.specs is None) != (fault.write is None), name
        if fault.specs is not None:  # its primitives are valid specs named after it
            assert all(spec.name == name for spec in fault.specs(name, 0.5, 60.0))


def test_an_unknown_fault_name_lists_the_names() -> None:
    with pytest.raises(FaultError) as raised:
        fault_named("router-crash")
    assert "router-crash-before-start" in str(raised.value) and "stale-run" in str(raised.value)
