"""`pipeops alarms list` and `check` read what CloudWatch holds (moto here): states with their
runbooks, ALARM first; and the evaluator's verdict with the datapoints that decided it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from alarms.live import check_alarms, list_alarms

NOW = datetime.now(UTC).replace(second=30, microsecond=0)


def put_alarm(cloudwatch: Any, name: str, metric: str, description: str) -> None:
    cloudwatch.put_metric_alarm(
        AlarmName=name,
        AlarmDescription=description,
        Namespace="PipeOps",
        MetricName=metric,
        Dimensions=[{"Name": "function", "Value": "router"}],
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=3,
        DatapointsToAlarm=2,
        Threshold=0,
        ComparisonOperator="GreaterThanThreshold",
        TreatMissingData="notBreaching",
    )


def put_points(cloudwatch: Any, metric: str, values_by_minutes_ago: dict[int, float]) -> None:
    cloudwatch.put_metric_data(
        Namespace="PipeOps",
        MetricData=[
            {
                "MetricName": metric,
                "Dimensions": [{"Name": "function", "Value": "router"}],
                "Timestamp": NOW.replace(second=10) - timedelta(minutes=ago),
                "Value": value,
            }
            for ago, value in values_by_minutes_ago.items()
        ],
    )


def test_check_replays_each_alarm_over_the_metrics_and_shows_the_deciding_datapoints(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch")
    put_alarm(cloudwatch, "pipeops-RouterFailures", "RouterFailures", "Router failing.")
    put_alarm(cloudwatch, "pipeops-DlqNotEmpty", "MalformedMessages", "An old description. Runbook: router-failures.")  # the catalog says dlq-messages)
    put_alarm(cloudwatch, "other-stack-RouterFailures", "RouterFailures", "Not ours.")
    put_points(cloudwatch, "RouterFailures", {1: 2, 2: 1, 3: 0})  # 2 of the last 3 complete minutes breach
    put_points(cloudwatch, "MalformedMessages", {1: 0, 2: 0, 3: 1})

    checks = {check.name: check for check in check_alarms(cloudwatch, "pipeops", NOW)}

    assert set(checks) == {"pipeops-RouterFailures", "pipeops-DlqNotEmpty"}  # only this stack's alarms
    failing, quiet = checks["pipeops-RouterFailures"], checks["pipeops-DlqNotEmpty"]
    assert failing.verdict == "ALARM" and failing.runbook == "router-failures"
    assert [point["value"] for point in failing.datapoints] == [2.0, 1.0, 0.0]  # newest first
    assert [point["breaching"] for point in failing.datapoints] == [True, True, False]
    assert "2 out of the last 3 datapoints" in failing.reason
    assert quiet.verdict == "OK"


def test_list_puts_alarms_in_alarm_first_with_their_runbooks(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch")
    put_alarm(cloudwatch, "pipeops-RouterFailures", "RouterFailures", "A.")
    put_alarm(cloudwatch, "pipeops-DlqNotEmpty", "MalformedMessages", "B.")
    cloudwatch.set_alarm_state(AlarmName="pipeops-DlqNotEmpty", StateValue="ALARM", StateReason="Threshold Crossed")

    views = list_alarms(cloudwatch, "pipeops")

    assert [(view.name, view.state, view.runbook) for view in views] == [
        ("pipeops-DlqNotEmpty", "ALARM", "dlq-messages"),
        ("pipeops-RouterFailures", "OK", "router-failures"),
    ]
    assert views[0].metric == "PipeOps/MalformedMessages" and views[0].reason == "Threshold Crossed"


def test_check_fills_a_fill_alarm_and_leaves_other_metric_math_to_cloudwatch(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch")
    stat = {"Metric": {"Namespace": "PipeOps", "MetricName": "RouterFailures", "Dimensions": [{"Name": "function", "Value": "router"}]},
            "Period": 60, "Stat": "Sum"}  # fmt: skip
    common = {"EvaluationPeriods": 2, "Threshold": 0, "ComparisonOperator": "GreaterThanThreshold", "TreatMissingData": "ignore"}
    cloudwatch.put_metric_alarm(
        AlarmName="pipeops-Filled",
        Metrics=[{"Id": "m", "MetricStat": stat, "ReturnData": False}, {"Id": "f", "Expression": "FILL(m, 0)", "ReturnData": True}],
        **common,
    )
    cloudwatch.put_metric_alarm(
        AlarmName="pipeops-Rate",
        Metrics=[{"Id": "m", "MetricStat": stat, "ReturnData": False}, {"Id": "r", "Expression": "m / 60", "ReturnData": True}],
        **common,
    )
    put_points(cloudwatch, "RouterFailures", {4: 3})  # one failure, three minutes ago: 0s since

    [filled] = check_alarms(cloudwatch, "pipeops", NOW)  # the other expression is not judged here
    assert filled.name == "pipeops-Filled" and filled.verdict == "OK"
    assert [point["value"] for point in filled.datapoints] == [0.0, 0.0]


def test_a_reason_is_shortened_at_a_word_with_an_ellipsis() -> None:
    from alarms.text import shorten

    reason = "Threshold Crossed: 1 datapoint [0.0 (03/12/26 06:12:15, virtual 03/12/26 10:55:00)] was less than"
    assert shorten(reason, 200) == reason
    short = shorten(reason, 50)
    assert short == "Threshold Crossed: 1 datapoint [0.0 (03/12/26…" and len(short) <= 50
    assert reason.startswith(short.removesuffix("…")) and reason[len(short) - 1] == " "
    assert shorten("a" * 30, 10) == "a" * 9 + "…"  # one long word: cut inside, nothing else to do


def test_a_served_sandbox_tells_its_clock_and_aws_has_none() -> None:
    from alarms.live import sandbox_clock
    from sandbox.serving import GatedMotoServer, ReadinessGate

    gate = ReadinessGate()
    gate.open()
    origin = datetime(2026, 12, 3, 6, 0, tzinfo=UTC)
    server = GatedMotoServer(gate, routes={"/_sandbox/clock": lambda: {"origin": origin.isoformat(), "time_scale": 0.05}})
    server.start()
    try:
        host, port = server.get_host_and_port()
        clock = sandbox_clock(f"http://{host}:{port}")
    finally:
        server.stop()
    assert clock is not None and (clock.origin, clock.time_scale) == (origin, 0.05)
    assert clock.virtual(origin + timedelta(seconds=15)) == origin + timedelta(minutes=5)
    assert clock.stamp(origin + timedelta(minutes=5)) == "03/12/26 06:00:15, virtual 03/12/26 06:05:00"
    assert sandbox_clock(None) is None
    assert sandbox_clock(f"http://{host}:{port}") is None  # stopped: no clock, the wall clock is used
