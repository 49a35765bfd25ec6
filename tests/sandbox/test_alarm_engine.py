"""sandbox.alarm_engine: moto's alarms move (and notify) as CloudWatch would move them.

Time is driven explicitly: the engine gets a fake clock and an origin, metric datapoints carry
explicit timestamps, and `evaluate_now()` runs a pass. Nothing sleeps.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.cloudwatch.models import MetricAggregatedDatum, MetricDatum
from moto.server import ThreadedMotoServer

from alarms.evaluate import AlarmState, aggregate
from sandbox.alarm_engine import (
    AlarmEngine,
    AlarmRuleSyntaxError,
    And,
    Constant,
    Not,
    Or,
    StateIs,
    datum_samples,
    evaluate_alarm_rule,
    parse_alarm_rule,
    rule_alarm_names,
    to_real,
    to_virtual,
)
from sandbox.clock import TimeScale
from sandbox.deploy import DeployError, deploy
from sandbox.sandbox import Sandbox
from sandbox.seams import composite_alarms

REGION = "us-east-1"
ACCOUNT = "123456789012"
T0 = datetime(2026, 1, 1, tzinfo=UTC)  # the engine's origin, on a minute boundary
FAST = TimeScale(0.05)  # one virtual minute = 3 real seconds
DIMENSIONS = [{"Name": "Service", "Value": "router"}]


class FakeClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def at(self, real_seconds: float) -> None:
        self.now = T0 + timedelta(seconds=real_seconds)


@pytest.fixture
def moto_env(aws_env: None) -> Iterator[None]:
    composite_alarms.install()
    with mock_aws():
        yield


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def engine(moto_env: None, clock: FakeClock) -> AlarmEngine:
    return AlarmEngine(region=REGION, time_scale=FAST, clock=clock, origin=T0)


def client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)


def subscribed_queue(name: str, *, raw: bool = False) -> tuple[str, str]:
    """A topic and a queue subscribed to it: (topic ARN, queue URL)."""
    sqs, sns = client("sqs"), client("sns")
    url = sqs.create_queue(QueueName=f"{name}-inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topic = sns.create_topic(Name=f"{name}-topic")["TopicArn"]
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "true"} if raw else {},
    )
    return topic, url


def notifications(queue_url: str) -> list[tuple[str, dict[str, Any]]]:
    """(Subject, alarm message) of every SNS notification waiting in the queue, consumed."""
    sqs = client("sqs")
    found = []
    while True:
        batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not batch:
            return found
        for message in batch:
            envelope = json.loads(message["Body"])
            found.append((envelope["Subject"], json.loads(envelope["Message"])))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def put(
    value: float, real_seconds: float, *, dimensions: list[dict[str, str]] = DIMENSIONS, **metric: Any
) -> None:
    client("cloudwatch").put_metric_data(
        Namespace=metric.pop("namespace", "Sbx"),
        MetricData=[
            {
                "MetricName": metric.pop("name", "Errors"),
                "Dimensions": dimensions,
                "Timestamp": T0 + timedelta(seconds=real_seconds),
                "Value": value,
                **metric,
            }
        ],
    )


def put_alarm(name: str, **overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "AlarmName": name,
        "Namespace": "Sbx",
        "MetricName": "Errors",
        "Dimensions": DIMENSIONS,
        "Statistic": "Sum",
        "Period": 60,
        "EvaluationPeriods": 1,
        "Threshold": 0.0,
        "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": "notBreaching",
    } | overrides
    client("cloudwatch").put_metric_alarm(**props)
    return described(name)


def described(name: str) -> dict[str, Any]:
    found = client("cloudwatch").describe_alarms(
        AlarmNames=[name], AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    (alarm,) = found["MetricAlarms"] + found["CompositeAlarms"]
    return alarm


# --------------------------------------------------------------------------- metric alarms


def test_an_alarm_fires_on_breaching_data_and_recovers_with_notifications(engine, clock) -> None:
    topic, inbox = subscribed_queue("ops")
    alarm = put_alarm("router-errors", AlarmActions=[topic], OKActions=[topic], AlarmDescription="errors")
    assert (alarm["StateValue"], alarm["StateReason"]) == (
        "OK",
        "Unchecked: Initial alarm creation",
    )  # moto's

    put(5, 1.0)  # real T0+1 s = virtual T0+20 s: the first virtual minute
    put(7, 1.5, dimensions=[*DIMENSIONS, {"Name": "Extra", "Value": "x"}])  # another metric: not counted
    put(9, 1.5, namespace="Other")  # another namespace: not counted
    clock.at(3.0)  # virtual T0+60 s: the first minute is complete
    (transition,) = engine.evaluate_now()
    assert (transition.old_state, transition.new_state) == (AlarmState.INSUFFICIENT_DATA, AlarmState.ALARM)
    assert transition.notified == (topic,)

    alarm = described("router-errors")
    assert alarm["StateValue"] == "ALARM"
    assert alarm["StateReason"] == (
        "Threshold Crossed: 1 datapoint [5.0 (01/01/26 00:00:00)] was greater than the threshold (0.0) "
        "(minimum 1 datapoint for INSUFFICIENT_DATA -> ALARM transition)."
    )
    data = json.loads(alarm["StateReasonData"])
    assert data == {
        "version": "1.0",
        "queryDate": "2026-01-01T00:01:00.000+0000",
        "startDate": "2026-01-01T00:00:00.000+0000",
        "statistic": "Sum",
        "period": 60,
        "recentDatapoints": [5.0],
        "threshold": 0.0,
        "evaluatedDatapoints": [
            {"timestamp": "2026-01-01T00:00:00.000+0000", "sampleCount": 1.0, "value": 5.0}
        ],
    }

    ((subject, message),) = notifications(inbox)
    assert subject == 'ALARM: "router-errors" in US East (N. Virginia)'
    assert message["AlarmName"] == "router-errors"
    assert message["AlarmDescription"] == "errors"
    assert message["AWSAccountId"] == ACCOUNT
    assert (message["NewStateValue"], message["OldStateValue"]) == ("ALARM", "INSUFFICIENT_DATA")
    assert message["NewStateReason"] == alarm["StateReason"]
    assert message["StateChangeTime"] == "2026-01-01T00:00:03.000+0000"
    assert message["Region"] == "US East (N. Virginia)"
    assert message["AlarmArn"] == f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:router-errors"
    assert (message["AlarmActions"], message["OKActions"], message["InsufficientDataActions"]) == (
        [topic],
        [topic],
        [],
    )
    assert message["Trigger"] == {
        "MetricName": "Errors",
        "Namespace": "Sbx",
        "StatisticType": "Statistic",
        "Statistic": "SUM",
        "Unit": None,
        "Dimensions": [{"value": "router", "name": "Service"}],
        "Period": 60,
        "EvaluationPeriods": 1,
        "DatapointsToAlarm": 1,
        "ComparisonOperator": "GreaterThanThreshold",
        "Threshold": 0.0,
        "TreatMissingData": "notBreaching",
        "EvaluateLowSampleCountPercentile": "",
    }

    assert engine.evaluate_now() == []  # still breaching in the same minute: no transition, no message
    assert notifications(inbox) == []

    put(0, 4.0)  # virtual T0+80 s: the second minute, back to 0
    clock.at(6.0)  # virtual T0+120 s
    (transition,) = engine.evaluate_now()
    assert (transition.old_state, transition.new_state) == (AlarmState.ALARM, AlarmState.OK)
    alarm = described("router-errors")
    assert alarm["StateValue"] == "OK"
    assert alarm["StateReason"].startswith(
        "Threshold Crossed: 1 datapoint [0.0 (01/01/26 00:00:03, virtual 01/01/26 00:01:00)] was not greater"
    )
    assert alarm["StateReason"].endswith("(minimum 1 datapoint for ALARM -> OK transition).")
    ((subject, message),) = notifications(inbox)
    assert subject == 'OK: "router-errors" in US East (N. Virginia)'
    assert (message["NewStateValue"], message["OldStateValue"]) == ("OK", "ALARM")
    assert list(engine.transitions)[-1] is transition


def test_missing_data_decides_as_configured_and_the_initial_state_is_insufficient_data(engine, clock) -> None:
    topic, inbox = subscribed_queue("heartbeat")
    put_alarm("heartbeat-lost", TreatMissingData="breaching", AlarmActions=[topic])
    put_alarm("quiet", TreatMissingData="missing", InsufficientDataActions=[topic], AlarmActions=[topic])
    put_alarm("disabled", TreatMissingData="breaching", AlarmActions=[topic], ActionsEnabled=False)
    clock.at(3.0)
    transitions = {t.alarm_name: t for t in engine.evaluate_now()}

    assert set(transitions) == {"heartbeat-lost", "disabled"}  # "quiet" stays where AWS starts it
    heartbeat = described("heartbeat-lost")
    assert heartbeat["StateValue"] == "ALARM"
    assert heartbeat["StateReason"].startswith(
        "Threshold Crossed: no datapoints were received for 1 period and 1 missing datapoint was treated as [Breaching]"
    )
    quiet = described("quiet")
    assert quiet["StateValue"] == "INSUFFICIENT_DATA"  # set, silently: it is no transition
    assert quiet["StateReason"].startswith("Insufficient Data: no datapoints were received")
    assert transitions["disabled"].notified == ()  # ActionsEnabled false: state moves, nothing published
    assert described("disabled")["StateValue"] == "ALARM"
    assert [(s, m["AlarmName"], m["NewStateValue"]) for s, m in notifications(inbox)] == [
        ('ALARM: "heartbeat-lost" in US East (N. Virginia)', "heartbeat-lost", "ALARM")
    ]

    put(1, 4.0)  # the quiet alarm's metric breaches in the second virtual minute
    clock.at(6.0)
    (transition,) = engine.evaluate_now()
    assert (transition.alarm_name, transition.old_state, transition.new_state) == (
        "quiet",
        AlarmState.INSUFFICIENT_DATA,
        AlarmState.ALARM,
    )
    ((_, message),) = notifications(inbox)
    assert (message["AlarmName"], message["OldStateValue"]) == ("quiet", "INSUFFICIENT_DATA")


def test_an_updated_alarm_keeps_its_state_as_in_aws(engine, clock) -> None:
    put_alarm("kept", TreatMissingData="breaching")
    clock.at(3.0)
    engine.evaluate_now()
    assert described("kept")["StateValue"] == "ALARM"
    put_alarm("kept", TreatMissingData="breaching", Threshold=1.0)  # moto resets it to Unchecked OK
    assert described("kept")["StateValue"] == "OK"
    assert engine.evaluate_now() == []  # AWS keeps the state on update: still ALARM, no transition
    assert described("kept")["StateValue"] == "ALARM"


def test_time_scale_maps_15_real_seconds_of_samples_onto_300_virtual_seconds(engine, clock) -> None:
    assert to_virtual(T0 + timedelta(seconds=15), T0, FAST) == T0 + timedelta(seconds=300)
    assert to_real(T0 + timedelta(seconds=300), T0, FAST) == T0 + timedelta(seconds=15)
    assert to_virtual(T0 - timedelta(seconds=1), T0, FAST) == T0 - timedelta(seconds=20)
    assert engine.interval == pytest.approx(3.0)  # ticks every virtual minute

    put_alarm("five-minutes", EvaluationPeriods=5, DatapointsToAlarm=5, TreatMissingData="missing")
    for k in range(5):  # one datapoint every 3 real seconds, over 15 real seconds
        put(k + 1, 1.5 + 3 * k)
    clock.at(15.0)
    assert engine.virtual_now() == T0 + timedelta(seconds=300)
    (transition,) = engine.evaluate_now()
    assert transition.new_state is AlarmState.ALARM
    assert transition.reason.startswith(
        "Threshold Crossed: 5 out of the last 5 datapoints [5.0 (01/01/26 00:00:12, virtual 01/01/26 00:04:00)"
    )
    data = json.loads(transition.reason_data)
    assert [p["timestamp"] for p in data["evaluatedDatapoints"]] == [
        f"2026-01-01T00:0{minute}:00.000+0000" for minute in (4, 3, 2, 1, 0)
    ]
    assert data["recentDatapoints"] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_statistic_sets_count_as_weighted_samples() -> None:
    moment = T0 + timedelta(seconds=10)
    aggregated = MetricAggregatedDatum("Sbx", "Latency", 1.0, 5.0, 4.0, 10.0, [], moment)
    single = MetricDatum("Sbx", "Latency", 7.0, [], moment.replace(tzinfo=None))  # moto stores naive UTC
    expected = {"Sum": 17.0, "Average": 17.0 / 5, "SampleCount": 5.0, "Minimum": 1.0, "Maximum": 7.0}
    for statistic, value in expected.items():
        samples = datum_samples(aggregated, statistic) + datum_samples(single, statistic)
        assert all(s.timestamp.tzinfo is not None for s in samples)
        assert aggregate(samples, statistic, 60, T0, T0 + timedelta(minutes=1)) == {T0: pytest.approx(value)}
    assert datum_samples(aggregated, "p99") == []  # no percentile from a statistic set
    assert len(datum_samples(single, "p99")) == 1


def test_an_alarm_on_statistic_values_is_evaluated(engine, clock) -> None:
    put_alarm("slow", Statistic="Average", Threshold=2.0, Unit="Milliseconds")
    client("cloudwatch").put_metric_data(
        Namespace="Sbx",
        MetricData=[
            {
                "MetricName": "Errors",
                "Dimensions": DIMENSIONS,
                "Timestamp": T0 + timedelta(seconds=1),
                "StatisticValues": {"Sum": 12.0, "Minimum": 1.0, "Maximum": 5.0, "SampleCount": 4.0},
                "Unit": "Milliseconds",
            },
            {
                "MetricName": "Errors",
                "Dimensions": DIMENSIONS,
                "Timestamp": T0,
                "Value": 100.0,
                "Unit": "Count",
            },
        ],
    )
    clock.at(3.0)
    (transition,) = engine.evaluate_now()  # average 3.0 (the Count datum has another unit)
    assert transition.new_state is AlarmState.ALARM
    assert json.loads(transition.reason_data)["evaluatedDatapoints"][0] == {
        "timestamp": "2026-01-01T00:00:00.000+0000",
        "sampleCount": 4.0,
        "value": 3.0,
    }


def test_alarms_that_cannot_be_evaluated_offline_are_left_alone_and_told_once(engine, clock, caplog) -> None:
    client("cloudwatch").put_metric_alarm(
        AlarmName="error-rate",
        EvaluationPeriods=1,
        Threshold=1.0,
        ComparisonOperator="GreaterThanThreshold",
        Metrics=[
            {
                "Id": "e",
                "MetricStat": {
                    "Metric": {"Namespace": "Sbx", "MetricName": "Errors"},
                    "Period": 60,
                    "Stat": "Sum",
                },
                "ReturnData": False,
            },
            {"Id": "rate", "Expression": "RATE(e)", "ReturnData": True},  # a function not modelled
        ],
    )
    client("cloudwatch").put_composite_alarm(AlarmName="quorum", AlarmRule='AT_LEAST(2, ALARM, ("a", "b"))')
    clock.at(3.0)
    with caplog.at_level(logging.INFO, logger="sandbox.alarm_engine"):
        engine.evaluate_now()
        engine.evaluate_now()
    assert described("error-rate")["StateReason"] == "Unchecked: Initial alarm creation"  # untouched
    assert described("quorum")["StateReason"] == "Unchecked: Initial alarm creation"
    told = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert sum("error-rate" in m and "metric-math" in m for m in told) == 1
    assert sum("quorum" in m and "AT_LEAST" in m for m in told) == 1


def fill_queries(namespace: str = "AWS/DynamoDB", name: str = "WriteThrottleEvents", fill: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "Id": "m",
            "MetricStat": {
                "Metric": {"Namespace": namespace, "MetricName": name, "Dimensions": DIMENSIONS},
                "Period": 60,
                "Stat": "Sum",
            },
            "ReturnData": False,
        },
        {"Id": "filled", "Expression": f"FILL(m, {fill})", "ReturnData": True},
    ]


def test_a_fill_alarm_on_a_throttle_metric_returns_to_ok_after_its_episode(engine, clock) -> None:
    """DynamoDB publishes throttles only while they happen, and CloudWatch ignores missing data on its
    alarms: the bare alarm keeps its ALARM for good; FILL(m, 0) brings it back to OK."""
    topic, inbox = subscribed_queue("throttles")
    common = {
        "EvaluationPeriods": 2,
        "Threshold": 0.0,
        "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": "notBreaching",
        "AlarmActions": [topic],
        "OKActions": [topic],
    }
    client("cloudwatch").put_metric_alarm(AlarmName="filled", Metrics=fill_queries(), **common)
    put_alarm("bare", Namespace="AWS/DynamoDB", MetricName="WriteThrottleEvents", **common)
    for real_second in (1, 4):  # throttles in the first two virtual minutes
        put(2, real_second, namespace="AWS/DynamoDB", name="WriteThrottleEvents")
    clock.at(6.0)
    assert {t.alarm_name: t.new_state for t in engine.evaluate_now()} == {
        "filled": AlarmState.ALARM,
        "bare": AlarmState.ALARM,
    }
    clock.at(12.0)  # two virtual minutes without a throttle
    assert {t.alarm_name: t.new_state for t in engine.evaluate_now()} == {"filled": AlarmState.OK}
    assert described("bare")["StateValue"] == "ALARM"  # latched
    clock.at(60.0)  # the episode has left every range: the filled alarm has nothing to fill, stays OK
    assert engine.evaluate_now() == []
    assert described("filled")["StateValue"] == "OK" and described("bare")["StateValue"] == "ALARM"
    sent = {(m["AlarmName"], m["NewStateValue"]): m for _, m in notifications(inbox)}
    assert sorted(sent) == [("bare", "ALARM"), ("filled", "ALARM"), ("filled", "OK")]
    [stat, expression] = sent["filled", "OK"]["Trigger"]["Metrics"]
    assert expression["Expression"] == "FILL(m, 0)" and stat["MetricStat"]["Metric"]["MetricName"] == "WriteThrottleEvents"
    assert sent["bare", "ALARM"]["Trigger"]["MetricName"] == "WriteThrottleEvents"


def test_a_filled_heartbeat_is_quiet_before_its_first_datapoint_and_pages_when_it_stops(engine, clock) -> None:
    client("cloudwatch").put_metric_alarm(
        AlarmName="heartbeat",
        Metrics=fill_queries("Sbx", "Runs"),
        EvaluationPeriods=3,
        Threshold=1.0,
        ComparisonOperator="LessThanThreshold",
        TreatMissingData="ignore",
    )
    clock.at(30.0)  # ten virtual minutes, no heartbeat yet: nothing to fill, the state is kept
    assert engine.evaluate_now() == []
    assert described("heartbeat")["StateValue"] == "INSUFFICIENT_DATA"
    for minute in range(10, 14):
        put(1, 3 * minute + 1, name="Runs")
    clock.at(3 * 14)
    assert [t.new_state for t in engine.evaluate_now()] == [AlarmState.OK]
    clock.at(3 * 17)  # three minutes without one
    [stopped] = engine.evaluate_now()
    assert stopped.new_state is AlarmState.ALARM and "0.0 (" in stopped.reason
    clock.at(3 * 40)  # long gone from the range: ignore keeps the ALARM
    assert engine.evaluate_now() == [] and described("heartbeat")["StateValue"] == "ALARM"


def test_alarms_check_judges_on_the_engines_clock_and_agrees_with_it(engine, clock) -> None:
    from alarms.live import SandboxClock, check_alarms

    put_alarm("pipeops-Heartbeat", MetricName="Runs", Period=300, EvaluationPeriods=2, Threshold=1.0,
              ComparisonOperator="LessThanThreshold", TreatMissingData="breaching")  # fmt: skip
    put_alarm("pipeops-Errors", EvaluationPeriods=1)
    for k in range(8):  # a heartbeat every virtual 5 minutes (15 real seconds)
        put(1, 15 * k + 2, name="Runs")
    put(3, 100)  # errors in virtual minute 33
    clock.at(15 * 8)  # 2 real minutes: no real 5-minute period is complete yet
    engine.evaluate_now()
    states = {name: described(name)["StateValue"] for name in ("pipeops-Heartbeat", "pipeops-Errors")}
    assert states == {"pipeops-Heartbeat": "OK", "pipeops-Errors": "OK"}

    on_the_wall = {c.name: c for c in check_alarms(client("cloudwatch"), "pipeops", clock())}
    # what the check judged before it knew the clock: real periods, the newest ending at the real minute
    assert on_the_wall["pipeops-Heartbeat"].datapoints[0]["period_start"] == "2025-12-31T23:57:00+00:00"
    sandbox = SandboxClock.from_dict(engine.clock_info())
    checks = {c.name: c for c in check_alarms(client("cloudwatch"), "pipeops", clock(), sandbox)}
    assert {name: check.verdict for name, check in checks.items()} == states
    assert "(01/01/26 00:01:45, virtual 01/01/26 00:35:00)" in checks["pipeops-Heartbeat"].reason

    put(2, 15 * 8 + 1)  # errors in the minute now running
    clock.at(15 * 8 + 3)
    engine.evaluate_now()
    checks = {c.name: c for c in check_alarms(client("cloudwatch"), "pipeops", clock(), sandbox)}
    assert described("pipeops-Errors")["StateValue"] == checks["pipeops-Errors"].verdict == "ALARM"


# --------------------------------------------------------------------------- metric math: burn rates

SLO_DIMENSIONS = [{"Name": "Service", "Value": "pipeline"}]


def burn_rate_queries(window: int) -> list[dict[str, Any]]:
    """The SLO burn-rate alarm's Metrics: bad / total over one window, guarded by 10 events."""

    def stat(query_id: str, metric: str, function: str) -> dict[str, Any]:
        dimensions = [{"Name": "Function", "Value": function}, *SLO_DIMENSIONS]
        return {
            "Id": query_id,
            "MetricStat": {
                "Metric": {"Namespace": "PipeOps", "MetricName": metric, "Dimensions": dimensions},
                "Period": window,
                "Stat": "Sum",
            },
            "ReturnData": False,
        }

    return [
        stat("good", "FilesOnTime", "tracker"),
        stat("late", "FilesLate", "tracker"),
        stat("overdue", "FilesOverdue", "reconciler"),
        {"Id": "bad", "Expression": "FILL(late, 0) + FILL(overdue, 0)", "ReturnData": False},
        {"Id": "total", "Expression": "FILL(good, 0) + bad", "ReturnData": False},
        {"Id": "burn", "Expression": "IF(total >= 10, bad / total, 0)", "ReturnData": True},
    ]


def publish_files(outcomes: str, first_minute: int) -> None:
    """Three files a virtual minute from ``first_minute`` (one a real second), each ``g`` (on time)
    or ``l`` (late) publishing FilesOnTime and FilesLate; the reconciler's FilesOverdue (0) every
    virtual 5 minutes. One PutMetricData call per minute."""
    cloudwatch = client("cloudwatch")
    for minute in range(len(outcomes) // 3):
        data = []
        for k, outcome in enumerate(outcomes[3 * minute : 3 * minute + 3]):
            moment = T0 + timedelta(seconds=3 * (first_minute + minute) + k + 0.5)
            dimensions = [{"Name": "Function", "Value": "tracker"}, *SLO_DIMENSIONS]
            data += [
                {"MetricName": "FilesOnTime", "Dimensions": dimensions, "Timestamp": moment, "Value": float(outcome == "g")},
                {"MetricName": "FilesLate", "Dimensions": dimensions, "Timestamp": moment, "Value": float(outcome == "l")},
            ]
        if (first_minute + minute) % 5 == 0:
            dimensions = [{"Name": "Function", "Value": "reconciler"}, *SLO_DIMENSIONS]
            moment = T0 + timedelta(seconds=3 * (first_minute + minute) + 0.2)
            data.append({"MetricName": "FilesOverdue", "Dimensions": dimensions, "Timestamp": moment, "Value": 0.0})
        cloudwatch.put_metric_data(Namespace="PipeOps", MetricData=data)


def test_a_burn_rate_pair_pages_on_sustained_failures_and_recovers(engine, clock) -> None:
    """1-h and 5-min burn-rate alarms (14.4 x a 1% budget) joined by a composite: an hour on time,
    then every file late from virtual minute 60. The sliding hour reaches 14.4% late at minute
    69 (27 late of 180), the 5 minutes at once: the composite pages at 69, not at the top of an
    hour. Files on time again from minute 75 clear the 5-minute alarm at 80 and the page with it."""
    topic, inbox = subscribed_queue("slo")
    cloudwatch = client("cloudwatch")
    for name, window in (("slo-fast-1h", 3600), ("slo-fast-5m", 300)):
        cloudwatch.put_metric_alarm(
            AlarmName=name, Metrics=burn_rate_queries(window), EvaluationPeriods=1, DatapointsToAlarm=1,
            Threshold=0.144, ComparisonOperator="GreaterThanOrEqualToThreshold", TreatMissingData="notBreaching",
        )  # fmt: skip
    cloudwatch.put_composite_alarm(
        AlarmName="slo-fast-page",
        AlarmRule='ALARM("slo-fast-1h") AND ALARM("slo-fast-5m")',
        AlarmActions=[topic],
        OKActions=[topic],
    )
    publish_files("g" * 180, 0)
    publish_files("l" * 45, 60)
    publish_files("g" * 60, 75)

    states: dict[int, dict[str, str]] = {}
    for minute in range(1, 96):
        clock.at(3 * minute)  # each virtual minute, as CloudWatch evaluates
        engine.evaluate_now()
        states[minute] = {name: described(name)["StateValue"] for name in ("slo-fast-1h", "slo-fast-5m", "slo-fast-page")}

    assert states[60] == {"slo-fast-1h": "OK", "slo-fast-5m": "OK", "slo-fast-page": "OK"}
    assert states[61]["slo-fast-5m"] == "ALARM" and states[61]["slo-fast-page"] == "OK"
    assert states[68]["slo-fast-1h"] == "OK"  # 24 late of 180: 13.3%
    assert states[69] == {"slo-fast-1h": "ALARM", "slo-fast-5m": "ALARM", "slo-fast-page": "ALARM"}
    assert states[79]["slo-fast-page"] == "ALARM"
    assert states[80] == {"slo-fast-1h": "ALARM", "slo-fast-5m": "OK", "slo-fast-page": "OK"}
    paged = [(subject.split(":")[0], message["NewStateValue"]) for subject, message in notifications(inbox)]
    assert paged == [("OK", "OK"), ("ALARM", "ALARM"), ("OK", "OK")]
    reason = json.loads(described("slo-fast-1h")["StateReasonData"])
    assert reason["period"] == 3600 and reason["evaluatedDatapoints"][0]["value"] >= 0.144


# --------------------------------------------------------------------------- composite alarms


def test_a_composite_alarm_goes_to_alarm_when_a_child_does(engine, clock) -> None:
    topic, inbox = subscribed_queue("pager")
    put_alarm("child-a")
    child_b = put_alarm("child-b", MetricName="Throttles")
    cloudwatch = client("cloudwatch")
    cloudwatch.put_composite_alarm(
        AlarmName="service-down",
        AlarmRule=f'ALARM("child-a") OR ALARM({child_b["AlarmArn"]})',
        AlarmActions=[topic],
        OKActions=[topic],
        AlarmDescription="page someone",
    )
    cloudwatch.put_composite_alarm(AlarmName="escalate", AlarmRule="ALARM(service-down) AND NOT OK(child-a)")
    clock.at(3.0)
    first = {t.alarm_name: t.new_state for t in engine.evaluate_now()}
    assert first == {
        "child-a": AlarmState.OK,
        "child-b": AlarmState.OK,
        "service-down": AlarmState.OK,
        "escalate": AlarmState.OK,
    }
    ((subject, message),) = notifications(inbox)  # INSUFFICIENT_DATA -> OK: the OK action runs
    assert (subject, message["OldStateValue"]) == (
        'OK: "service-down" in US East (N. Virginia)',
        "INSUFFICIENT_DATA",
    )

    put(3, 4.0)  # child-a's metric breaches in the second virtual minute
    clock.at(6.0)
    moved = {t.alarm_name: t for t in engine.evaluate_now()}
    assert {name: t.new_state for name, t in moved.items()} == {
        "child-a": AlarmState.ALARM,
        "service-down": AlarmState.ALARM,
        "escalate": AlarmState.ALARM,  # a composite of a composite, in the same pass
    }
    composite = described("service-down")
    child_arn = f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:child-a"
    assert composite["StateValue"] == "ALARM"
    assert (
        composite["StateReason"]
        == f"{child_arn} transitioned to ALARM at Thursday 01 January, 2026 00:00:06 UTC"
    )
    assert json.loads(composite["StateReasonData"]) == {
        "triggeringAlarms": [
            {"arn": child_arn, "state": {"value": "ALARM", "timestamp": "2026-01-01T00:00:06.000+0000"}}
        ]
    }
    ((subject, message),) = notifications(inbox)
    assert subject == 'ALARM: "service-down" in US East (N. Virginia)'
    assert message["AlarmRule"] == f'ALARM("child-a") OR ALARM({child_b["AlarmArn"]})'
    assert message["TriggeringChildren"] == [
        {"Arn": child_arn, "State": {"Value": "ALARM", "Timestamp": "2026-01-01T00:00:06.000+0000"}}
    ]
    assert (message["NewStateValue"], message["OldStateValue"], message["AlarmDescription"]) == (
        "ALARM",
        "OK",
        "page someone",
    )
    assert "Trigger" not in message


@pytest.mark.parametrize(
    ("rule", "states", "expected"),
    [
        ('ALARM("a")', {"a": "ALARM"}, True),
        ("ALARM(a)", {"a": "OK"}, False),
        ("ALARM(a)", {}, False),  # an alarm that does not exist is in no state
        ('OK("my alarm")', {"my alarm": "OK"}, True),
        ("INSUFFICIENT_DATA(a)", {"a": "INSUFFICIENT_DATA"}, True),
        ('ALARM("arn:aws:cloudwatch:us-east-1:123456789012:alarm:a")', {"a": "ALARM"}, True),
        ("ALARM(arn:aws:cloudwatch:us-east-1:123456789012:alarm:a)", {"a": "ALARM"}, True),
        ("ALARM(a) AND OK(b)", {"a": "ALARM", "b": "ALARM"}, False),
        (
            "ALARM(a) OR ALARM(b) AND OK(c)",
            {"a": "ALARM", "b": "OK", "c": "ALARM"},
            True,
        ),  # AND binds tighter
        ("(ALARM(a) OR ALARM(b)) AND OK(c)", {"a": "ALARM", "b": "OK", "c": "ALARM"}, False),
        ("NOT ALARM(a) AND NOT ALARM(b)", {"a": "OK", "b": "OK"}, True),
        ("NOT (ALARM(a) OR ALARM(b))", {"a": "OK", "b": "ALARM"}, False),
        ("TRUE", {}, True),
        ("FALSE OR NOT FALSE", {}, True),
        ("  ALARM( a )AND(TRUE)  ", {"a": "ALARM"}, True),
    ],
)
def test_the_rule_parser_evaluates_the_composite_grammar(
    rule: str, states: dict[str, str], expected: bool
) -> None:
    assert evaluate_alarm_rule(parse_alarm_rule(rule), states) is expected


def test_the_rule_parser_builds_the_tree_and_names_the_alarms() -> None:
    rule = parse_alarm_rule('ALARM(a) OR NOT OK("b") AND TRUE OR INSUFFICIENT_DATA(a)')
    assert rule == Or(
        (
            StateIs(AlarmState.ALARM, "a"),
            And((Not(StateIs(AlarmState.OK, "b")), Constant(True))),
            StateIs(AlarmState.INSUFFICIENT_DATA, "a"),
        )
    )
    assert rule_alarm_names(rule) == ["a", "b"]


@pytest.mark.parametrize(
    "rule",
    [
        "",
        "   ",
        "ALARM(a",
        "ALARM()",
        'ALARM("a)',
        "ALARM(a) AND",
        "ALARM(a) ALARM(b)",
        "alarm(a)",
        "AT_LEAST(2, ALARM, (a, b))",
        "(TRUE",
        "TRUE)",
    ],
)
def test_the_rule_parser_rejects_what_it_does_not_know(rule: str) -> None:
    with pytest.raises(AlarmRuleSyntaxError):
        parse_alarm_rule(rule)


# --------------------------------------------------------------------------- the thread


def test_the_background_thread_survives_a_failing_pass_and_stops(moto_env, clock, caplog) -> None:
    engine = AlarmEngine(region=REGION, time_scale=FAST, clock=clock, origin=T0, interval=0.01)
    calls: list[int] = []
    second = threading.Event()
    original = engine._describe_alarms

    def flaky() -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("moto went away")
        second.set()
        return original()

    engine._describe_alarms = flaky  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="sandbox.alarm_engine"):
        engine.start()
        try:
            assert second.wait(10), "the engine did not run again after a failed pass"
            assert engine.running
        finally:
            engine.stop()
    assert not engine.running
    assert any(r.levelno == logging.WARNING and "pass failed" in r.getMessage() for r in caplog.records)


def test_the_engine_works_against_a_served_moto(monkeypatch, clock) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    composite_alarms.install()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        cloudwatch = boto3.client(
            "cloudwatch",
            region_name=REGION,
            endpoint_url=endpoint,
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
        cloudwatch.put_metric_alarm(
            AlarmName="served",
            Namespace="Sbx",
            MetricName="Errors",
            Statistic="Sum",
            Period=60,
            EvaluationPeriods=1,
            Threshold=0.0,
            ComparisonOperator="GreaterThanThreshold",
        )
        cloudwatch.put_composite_alarm(AlarmName="served-composite", AlarmRule="ALARM(served)")
        cloudwatch.put_metric_data(
            Namespace="Sbx",
            MetricData=[{"MetricName": "Errors", "Value": 2.0, "Timestamp": T0 + timedelta(seconds=1)}],
        )
        engine = AlarmEngine(region=REGION, endpoint_url=endpoint, time_scale=FAST, clock=clock, origin=T0)
        clock.at(3.0)
        assert {t.alarm_name: t.new_state for t in engine.evaluate_now()} == {
            "served": AlarmState.ALARM,
            "served-composite": AlarmState.ALARM,
        }
        states = cloudwatch.describe_alarms(AlarmTypes=["MetricAlarm", "CompositeAlarm"])
        assert [a["StateValue"] for a in states["MetricAlarms"] + states["CompositeAlarms"]] == [
            "ALARM",
            "ALARM",
        ]
    finally:
        # The served backends are this process's: reset them for whoever runs next.
        host, port = server.get_host_and_port()
        urllib.request.urlopen(
            urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST")
        ).close()
        server.stop()


# --------------------------------------------------------------------------- deploy and sandbox

MINI_TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Resources:
  Inbox:
    Type: AWS::SQS::Queue
  RawInbox:
    Type: AWS::SQS::Queue
  Composite:
    Type: AWS::CloudWatch::CompositeAlarm
    Properties:
      AlarmRule: !Sub 'ALARM("${Errors.Arn}") OR ALARM("${Nested}")'
      AlarmActions: [!Ref Topic]
      ActionsSuppressor: !Ref Errors
  Nested:
    Type: AWS::CloudWatch::CompositeAlarm
    Properties:
      AlarmName: !Sub "${AWS::StackName}-nested"
      AlarmRule: "FALSE"
  Topic:
    Type: AWS::SNS::Topic
    Properties:
      Subscription:
        - Protocol: sqs
          Endpoint: !GetAtt Inbox.Arn
  RawSubscription:
    Type: AWS::SNS::Subscription
    Properties:
      TopicArn: !Ref Topic
      Protocol: sqs
      Endpoint: !GetAtt RawInbox.Arn
      RawMessageDelivery: true
  Errors:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Namespace: Sbx
      MetricName: Errors
      Statistic: Sum
      Period: 60
      EvaluationPeriods: 1
      Threshold: 0
      ComparisonOperator: GreaterThanThreshold
      TreatMissingData: breaching
      AlarmActions: [!Ref Topic]
  Board:
    Type: AWS::CloudWatch::Dashboard
    Properties:
      DashboardBody: !Sub '{"widgets":[{"type":"text","properties":{"markdown":"alarms to ${Topic}"}}]}'
"""


def test_deploy_creates_composite_alarms_and_subscriptions_the_engine_then_moves(
    moto_env, clock, tmp_path: Path
) -> None:
    template = tmp_path / "template.yaml"
    template.write_text(MINI_TEMPLATE, encoding="utf-8")
    mini = deploy("mini", template_path=template)
    errors, composite = mini.resources["Errors"], mini.resources["Composite"]
    assert mini.resources["Nested"] == "mini-nested"
    assert mini.skipped == {"Composite.ActionsSuppressor": "not modelled by the sandbox's alarm engine"}
    errors_arn = f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{errors}"  # Fn::GetAtt Errors.Arn
    assert described(composite)["AlarmRule"] == f'ALARM("{errors_arn}") OR ALARM("mini-nested")'
    attributes = client("sns").get_subscription_attributes(SubscriptionArn=mini.resources["RawSubscription"])[
        "Attributes"
    ]
    assert attributes["RawMessageDelivery"] == "true"
    (board,) = client("cloudwatch").list_dashboards()["DashboardEntries"]
    body = json.loads(
        client("cloudwatch").get_dashboard(DashboardName=board["DashboardName"])["DashboardBody"]
    )
    assert body["widgets"][0]["properties"]["markdown"] == f"alarms to {mini.resources['Topic']}"

    engine = AlarmEngine(region=REGION, time_scale=FAST, clock=clock, origin=T0)
    clock.at(3.0)
    moved = {t.alarm_name: t.new_state for t in engine.evaluate_now()}
    assert moved == {errors: AlarmState.ALARM, composite: AlarmState.ALARM, "mini-nested": AlarmState.OK}
    assert sorted(m["AlarmName"] for _, m in notifications(mini.resources["Inbox"])) == sorted(
        [errors, composite]
    )
    raw = client("sqs").receive_message(QueueUrl=mini.resources["RawInbox"], MaxNumberOfMessages=10)[
        "Messages"
    ]
    assert sorted(json.loads(m["Body"])["AlarmName"] for m in raw) == sorted(
        [errors, composite]
    )  # raw: the alarm JSON


def test_deploy_rejects_a_dashboard_body_that_is_not_json(moto_env, tmp_path: Path) -> None:
    template = tmp_path / "template.yaml"
    template.write_text(
        'Resources:\n  Board:\n    Type: AWS::CloudWatch::Dashboard\n    Properties:\n      DashboardBody: "{widgets"\n',
        encoding="utf-8",
    )
    with pytest.raises(DeployError, match="Board: DashboardBody is not valid JSON"):
        deploy("bad-board", template_path=template)


def test_the_sandbox_runs_the_engine(aws_env: None) -> None:
    with Sandbox() as sandbox:
        engine = sandbox.alarms
        _the_engine_moves_an_alarm_of_the_sandbox(sandbox, engine)
    assert sandbox.alarms is None and not engine.running


def _the_engine_moves_an_alarm_of_the_sandbox(sandbox: Sandbox, engine: AlarmEngine | None) -> None:
    assert engine is not None and engine.running
    assert engine.interval == pytest.approx(sandbox.time_scale.scale(60))
    sqs, sns = sandbox.client("sqs"), sandbox.client("sns")
    url = sqs.create_queue(QueueName="alarm-inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topic = sns.create_topic(Name="alarm-topic")["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    sandbox.client("cloudwatch").put_metric_alarm(
        AlarmName="no-heartbeat",
        Namespace="Sbx",
        MetricName="Heartbeat",
        Statistic="SampleCount",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1.0,
        ComparisonOperator="LessThanThreshold",
        TreatMissingData="breaching",
        AlarmActions=[topic],
    )
    engine.evaluate_now()  # the background thread may have got there first: either way it is in ALARM
    alarm = sandbox.client("cloudwatch").describe_alarms(AlarmNames=["no-heartbeat"])["MetricAlarms"][0]
    assert alarm["StateValue"] == "ALARM"
    bodies = [
        json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    ]
    assert [json.loads(b["Message"])["NewStateValue"] for b in bodies] == ["ALARM"]


# --------------------------------------------------------------------------- reading moto's backend


def _same(engine_value: Any, api_value: Any) -> bool:
    if isinstance(api_value, datetime):  # the API's: aware, to the millisecond; the backend's: naive UTC
        exact = engine_value.replace(tzinfo=UTC)
        return exact.replace(microsecond=exact.microsecond // 1000 * 1000) == api_value.astimezone(UTC)
    return bool(engine_value == api_value)


def test_the_engine_reads_alarms_from_the_backend_as_describe_alarms_lists_them(engine) -> None:
    topic, _inbox = subscribed_queue("ops")
    props = {
        "AlarmName": "p99",
        "Namespace": "Sbx",
        "MetricName": "Duration",
        "Dimensions": DIMENSIONS,
        "ExtendedStatistic": "p99",
        "EvaluateLowSampleCountPercentile": "ignore",
        "Unit": "Milliseconds",
        "Period": 300,
        "EvaluationPeriods": 3,
        "DatapointsToAlarm": 2,
        "Threshold": 250.5,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "TreatMissingData": "breaching",
        "AlarmActions": [topic],
        "InsufficientDataActions": [topic],
        "ActionsEnabled": False,
        "AlarmDescription": "slow",
    }
    client("cloudwatch").put_metric_alarm(**props)
    put_alarm("errors", OKActions=[topic])
    client("cloudwatch").put_composite_alarm(
        AlarmName="any", AlarmRule='ALARM("p99") OR ALARM(errors)', AlarmActions=[topic]
    )
    client("cloudwatch").set_alarm_state(AlarmName="errors", StateValue="ALARM", StateReason="by hand")

    metric, composite = engine._describe_alarms()
    found = client("cloudwatch").describe_alarms(AlarmTypes=["MetricAlarm", "CompositeAlarm"])
    assert sorted(a["AlarmName"] for a in metric) == sorted(a["AlarmName"] for a in found["MetricAlarms"])
    assert [a["AlarmName"] for a in composite] == [a["AlarmName"] for a in found["CompositeAlarms"]]
    api = {a["AlarmName"]: a for a in found["MetricAlarms"] + found["CompositeAlarms"]}
    for view in metric + composite:
        listed = api[view["AlarmName"]]
        for key, value in view.items():
            if key == "Metrics":
                continue
            assert key in listed, (view["AlarmName"], key)
            assert _same(value, listed[key]), (view["AlarmName"], key, value, listed[key])
        # every member the engine or the evaluator reads is there when DescribeAlarms has it
        used = {
            "Statistic",
            "ExtendedStatistic",
            "Period",
            "EvaluationPeriods",
            "DatapointsToAlarm",
            "Threshold",
            "ComparisonOperator",
            "TreatMissingData",
            "EvaluateLowSampleCountPercentile",
            "Namespace",
            "MetricName",
            "Dimensions",
            "Unit",
            "AlarmRule",
            "StateValue",
            "StateReason",
            "StateUpdatedTimestamp",
            "ActionsEnabled",
            "AlarmActions",
            "OKActions",
            "InsufficientDataActions",
            "AlarmDescription",
            "AlarmConfigurationUpdatedTimestamp",
        }
        assert {k for k in used if listed.get(k) not in (None, [])} <= set(view), view["AlarmName"]


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the alarms the engine judges (runs `evaluate_samples` for), in order."""
    import sandbox.alarm_engine as alarm_engine

    names: list[str] = []
    original = alarm_engine.evaluate_samples

    def counting(rule: Any, *args: Any, **kwargs: Any) -> Any:
        names.append(rule.name)
        return original(rule, *args, **kwargs)

    monkeypatch.setattr(alarm_engine, "evaluate_samples", counting)
    return names


def test_an_alarm_is_judged_again_only_when_what_its_verdict_depends_on_changed(engine, clock, judged) -> None:
    put_alarm("router-errors")
    put(5, 1.0)
    clock.at(3.0)
    (transition,) = engine.evaluate_now()
    assert transition.new_state is AlarmState.ALARM
    assert judged == ["router-errors"]
    engine.evaluate_now()  # its new state is news once: judged again, the same verdict
    judged.clear()

    engine.evaluate_now()
    clock.at(4.0)  # later, but within the same virtual minute: the same window
    engine.evaluate_now()
    assert judged == []  # nothing changed: not judged, no transition

    put(1, 4.0, dimensions=[*DIMENSIONS, {"Name": "Extra", "Value": "x"}])  # another metric's datapoint
    assert engine.evaluate_now() == [] and judged == []

    put(0, 4.5)  # its own metric has a new datapoint
    assert engine.evaluate_now() == [] and judged == ["router-errors"]  # still the first window
    judged.clear()

    clock.at(6.0)  # the next virtual minute: the window moved
    (transition,) = engine.evaluate_now()
    assert transition.new_state is AlarmState.OK and judged == ["router-errors"]
    engine.evaluate_now()
    judged.clear()

    client("cloudwatch").set_alarm_state(AlarmName="router-errors", StateValue="ALARM", StateReason="by hand")
    (transition,) = engine.evaluate_now()  # its state changed from outside: judged, and put right
    assert (transition.old_state, transition.new_state) == (AlarmState.ALARM, AlarmState.OK)
    assert judged == ["router-errors"]


def test_an_alarm_without_any_datapoint_is_not_judged_again_as_its_window_moves(engine, clock, judged) -> None:
    put_alarm("quiet", TreatMissingData="missing")
    clock.at(3.0)
    assert engine.evaluate_now() == []  # no data: INSUFFICIENT_DATA, set silently
    engine.evaluate_now()
    assert described("quiet")["StateValue"] == "INSUFFICIENT_DATA"
    judged.clear()
    for real_seconds in (6.0, 9.0, 30.0):  # window after window, still no datapoint anywhere
        clock.at(real_seconds)
        assert engine.evaluate_now() == []
    assert judged == []

    put(5, 30.5)  # its first datapoint: judged again from now on, window by window
    clock.at(33.0)
    (transition,) = engine.evaluate_now()
    assert transition.new_state is AlarmState.ALARM and judged == ["quiet"]
