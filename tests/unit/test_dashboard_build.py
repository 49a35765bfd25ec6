"""The dashboards built from the catalogs: within CloudWatch's limits, every metric catalogued and
dimensioned as emitted, every alarm's threshold on the widget of its metric, and a DashboardBody
that CloudFormation's Fn::Sub turns into exactly the body drawn offline. Also how `pipeops
dashboard render` reads CloudWatch (moto), without a sandbox."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from alarms.catalog import AlarmSpec, build_catalog, function_timeouts
from alarms.cloudformation import COMPOSITE
from alarms.slo_alarms import burn_pairs
from dashboards.build import (
    JOB_ID_PLACEHOLDER,
    alarm_arn,
    drilldown_body,
    known_placeholder,
    log_group_names,
    operations_body,
    placeholders,
    resolve,
    resources,
)
from dashboards.limits import MAX_ALARMS_PER_WIDGET, MAX_METRICS_PER_WIDGET, MAX_WIDGETS, problems
from dashboards.metric_rows import MetricQuery, expand_metrics
from pipeline.stack import SERVICE_NAME
from pipeline.telemetry.aws_catalog import AWS_CATALOG, ResourceKind
from pipeline.telemetry.catalog import CATALOG, NAMESPACE, STANDARD_DIMENSIONS
from pipeops.cli import dashboard_app
from pipeops.dashboard import fetch_metrics, metric_key, metric_queries, stack_names
from stack.resources import StackResources
from stack.template import load_template

TEMPLATE = load_template()
SPECS = build_catalog(TEMPLATE)
OPERATIONS = operations_body(SPECS, TEMPLATE)
DRILLDOWN = drilldown_body(TEMPLATE)
ACCOUNT = "123456789012"
# The value each pseudo parameter and parameter placeholder takes in the samples; resources get a name.
SAMPLE_VALUES = {
    "AWS::Region": "eu-west-1",
    "AWS::Partition": "aws",
    "AWS::AccountId": ACCOUNT,
    "AWS::StackName": "ops-stack",
    "Stage": "prod",
    "MaxConcurrentWorkflows": "7",
}
RESOURCE_TYPES = {
    ResourceKind.QUEUE: "AWS::SQS::Queue",
    ResourceKind.FUNCTION: "AWS::Serverless::Function",
    ResourceKind.STATE_MACHINE: "AWS::Serverless::StateMachine",
    ResourceKind.TABLE: "AWS::DynamoDB::Table",
}


def sample_names(*bodies: dict[str, Any]) -> dict[str, str]:
    found = set().union(*(placeholders(body) for body in bodies))
    return {name: SAMPLE_VALUES.get(name, f"ops-stack-{name.replace('.', '-')}") for name in found}


def charts(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [widget for widget in body["widgets"] if widget["type"] == "metric"]


def rows(widget: dict[str, Any]) -> list[MetricQuery]:
    properties = widget["properties"]
    return expand_metrics(
        properties["metrics"], stat=properties.get("stat", "Average"), period=properties["period"]
    )


def expression(value: Any) -> str:
    """The alarm catalog's CloudFormation expression as the Fn::Sub text a dashboard carries."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return "${" + value["Ref"] + "}"
    logical_id, attribute = value["Fn::GetAtt"]
    return "${" + f"{logical_id}.{attribute}" + "}"


def shows(query: MetricQuery, spec: AlarmSpec) -> bool:
    watched = spec.watched
    dimensions = {(name, expression(value)) for name, value in watched.dimensions}
    return (query.namespace, query.name, set(query.dimensions)) == (
        watched.namespace,
        watched.name,
        dimensions,
    )


def fn_sub(text: str, names: dict[str, str]) -> str:
    """CloudFormation's Fn::Sub on a string: `${Name}` is replaced, `${!Literal}` becomes `${Literal}`."""
    return re.sub(r"\$\{(!?)([^}]*)\}", lambda m: "${" + m[2] + "}" if m[1] else names[m[2]], text)


# -- limits -------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [OPERATIONS, DRILLDOWN], ids=["operations", "drilldown"])
def test_both_bodies_respect_cloudwatch_limits(body: dict[str, Any]) -> None:
    resolved = resolve(body, sample_names(body))
    assert problems(resolved) == []
    assert len(resolved["widgets"]) <= MAX_WIDGETS
    assert all(len(widget["properties"]["metrics"]) <= MAX_METRICS_PER_WIDGET for widget in charts(resolved))
    assert not placeholders(resolved)


def test_more_than_a_hundred_alarms_are_split_over_alarm_widgets() -> None:
    many = [
        replace(spec, logical_id=f"{spec.logical_id[:-5]}{copy}Alarm") for copy in range(3) for spec in SPECS
    ]
    body = operations_body(many, TEMPLATE)
    widgets = [widget for widget in body["widgets"] if widget["type"] == "alarm"]
    not_ok = [w for w in widgets if w["properties"].get("states")]
    every = [w for w in widgets if w["properties"]["title"].startswith("Every alarm")]
    # The objectives' 3 burn pairs are listed with the alarms not OK; every alarm adds their 6 windows.
    assert len(not_ok) == -(-(len(many) + 3) // MAX_ALARMS_PER_WIDGET) > 1
    assert len(every) == -(-(len(many) + 1 + 9) // MAX_ALARMS_PER_WIDGET) > 1
    assert sum(len(widget["properties"]["alarms"]) for widget in not_ok) == len(many) + 3
    assert sum(len(widget["properties"]["alarms"]) for widget in every) == len(many) + 1 + 9
    assert problems(resolve(body, sample_names(body))) == []


# -- metrics ------------------------------------------------------------------------------------


def test_every_metric_row_is_catalogued_with_the_dimensions_it_is_emitted_with() -> None:
    resources_ = TEMPLATE["Resources"]
    for widget in charts(OPERATIONS):
        for query in rows(widget):
            if query.expression is not None:
                continue  # metric math (the objectives row) over the rows checked here
            where = f"{widget['properties']['title']}: {query.name}"
            dimensions = dict(query.dimensions)
            assert len(dimensions) == len(query.dimensions), where
            if query.namespace == NAMESPACE:
                spec = CATALOG[query.name]  # type: ignore[index]
                assert (
                    tuple(name for name, _ in query.dimensions) == STANDARD_DIMENSIONS == spec.dimensions
                ), where
                assert dimensions["service"] == SERVICE_NAME, where
                assert dimensions["stage"] == "${Stage}", where
                assert dimensions["function"] in {"${" + emitter.value + "}" for emitter in spec.emitters}, (
                    where
                )
                continue
            matches = [
                aws
                for aws in AWS_CATALOG.values()
                if (aws.namespace, aws.name) == (query.namespace, query.name)
            ]
            assert len(matches) == 1, where
            aws = matches[0]
            ((name, value),) = query.dimensions
            assert name == aws.dimension, where
            logical_id = re.fullmatch(r"\$\{(\w+)(\.QueueName)?\}", value)
            assert logical_id, where
            assert bool(logical_id[2]) == (aws.kind is ResourceKind.QUEUE), where
            assert resources_[logical_id[1]]["Type"] == RESOURCE_TYPES[aws.kind], where


def test_a_metric_several_functions_emit_is_one_row_per_emitter() -> None:
    for widget in charts(OPERATIONS):
        shown: dict[tuple[str, str], set[str]] = {}
        for query in rows(widget):
            if query.namespace == NAMESPACE:
                shown.setdefault((query.name, query.stat), set()).add(dict(query.dimensions)["function"])
        for (name, _), functions in shown.items():
            if len(functions) > 1 or len(CATALOG[name].emitters) > 1:  # type: ignore[index]
                assert functions == {"${" + e.value + "}" for e in CATALOG[name].emitters}, (  # type: ignore[index]
                    f"{widget['properties']['title']}: {name} lacks an emitter"
                )


def test_every_catalogued_metric_is_on_the_operations_dashboard() -> None:
    shown = {(query.namespace, query.name) for widget in charts(OPERATIONS) for query in rows(widget)}
    assert {(NAMESPACE, metric.value) for metric in CATALOG} <= shown
    assert {(spec.namespace, spec.name) for spec in AWS_CATALOG.values()} <= shown


def test_each_function_p99_duration_is_drawn_against_its_timeout_beside_functions_of_the_same_timeout() -> None:
    timeouts = function_timeouts(TEMPLATE)
    for function, timeout in timeouts.items():
        (widget,) = [
            w
            for w in charts(OPERATIONS)
            if ("Duration", "p99", "${" + function + "}")
            in {(q.name, q.stat, dict(q.dimensions).get("FunctionName")) for q in rows(w)}
        ]
        values = [note["value"] for note in widget["properties"]["annotations"]["horizontal"]]
        assert timeout * 1000 in values, function
        drawn = {dict(q.dimensions)["FunctionName"] for q in rows(widget)}
        assert drawn == {"${" + f + "}" for f, t in timeouts.items() if t == timeout}, function


def test_the_semaphore_widget_draws_active_count_average_and_minimum_and_running_under_the_max() -> None:
    widget = next(w for w in charts(OPERATIONS) if any(q.name == "ConcurrencyActive" for q in rows(w)))
    assert {(q.name, q.stat) for q in rows(widget)} >= {
        ("ConcurrencyActive", "Average"),
        ("ConcurrencyActive", "Minimum"),
        ("WorkflowsRunning", "Maximum"),
    }
    resolved = resolve(widget, sample_names(widget))
    (limit,) = resolved["properties"]["annotations"]["horizontal"]
    assert (limit["label"], limit["value"]) == ("MaxConcurrentWorkflows", 7)


# -- alarms -------------------------------------------------------------------------------------


def labels(note: dict[str, Any], spec: AlarmSpec) -> bool:
    """Whether an annotation's label stands for `spec`: "A, B > 0" names it; "9 …Errors alarms > 0"
    stands for the alarms ending in Errors drawn on that widget."""
    names = note["label"].rsplit(" ", 2)[0]
    grouped = re.fullmatch(r"(\d+) …(\w+) alarms", names)
    if grouped:
        return spec.name_suffix.endswith(grouped[2]) and note["value"] == spec.threshold
    return spec.name_suffix in names.split(", ")


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.logical_id)
def test_each_alarm_threshold_is_drawn_on_a_widget_showing_its_metric(spec: AlarmSpec) -> None:
    drawn = [
        (widget, note)
        for widget in charts(OPERATIONS)
        if any(shows(q, spec) for q in rows(widget))
        for note in widget["properties"].get("annotations", {}).get("horizontal", [])
        if labels(note, spec)
    ]
    assert len(drawn) == 1, f"{spec.logical_id}: its threshold is drawn {len(drawn)} times"
    widget, note = drawn[0]
    assert note["value"] == spec.threshold
    assert any(
        shows(q, spec) and (q.stat, q.period) == (spec.statistic, spec.period) for q in rows(widget)
    ), (
        f"{spec.logical_id}: {widget['properties']['title']} does not show {spec.watched.name} {spec.statistic}"
    )


def test_the_page_opens_on_the_composite_and_the_alarms_not_ok_and_ends_with_every_alarm() -> None:
    widgets = OPERATIONS["widgets"]
    composite = alarm_arn(COMPOSITE.removesuffix("Alarm"))
    every = [alarm_arn(spec.name_suffix) for spec in SPECS]
    pairs = [alarm_arn(pair.name_suffix) for pair in burn_pairs()]  # the objectives' burn pairs
    windows = [alarm_arn(window.name_suffix) for pair in burn_pairs() for window in pair.windows]
    header, health, not_ok = widgets[:3]
    assert header["type"] == "text" and header["y"] == 0
    assert health["type"] == not_ok["type"] == "alarm" and health["y"] == not_ok["y"] == header["height"]
    assert health["properties"]["alarms"] == [composite]
    assert not_ok["properties"]["alarms"] == every + pairs
    assert not_ok["properties"]["states"] == ["ALARM", "INSUFFICIENT_DATA"]  # the healthy ones: not listed
    assert not_ok["properties"]["sortBy"] == "stateUpdatedTimestamp"
    last = widgets[-1]
    assert last["type"] == "alarm"
    assert sorted(last["properties"]["alarms"]) == sorted([composite, *every, *pairs, *windows])
    assert "states" not in last["properties"]
    resolved = resolve({"alarms": every}, sample_names(OPERATIONS))["alarms"]
    assert f"arn:aws:cloudwatch:eu-west-1:{ACCOUNT}:alarm:ops-stack-DlqNotEmpty" in resolved


def test_the_charts_behind_the_critical_alarms_come_first_and_only_they() -> None:
    critical = {spec.name_suffix for spec in SPECS if spec.critical}
    metric_charts = charts(OPERATIONS)
    first_section_y = min(w["y"] for w in metric_charts)
    sections = sorted({w["y"] for w in OPERATIONS["widgets"] if w["type"] == "text" and w["y"] > first_section_y})
    first = [w for w in metric_charts if w["y"] < sections[0]]
    carried = {
        spec.name_suffix
        for w in metric_charts
        for note in w["properties"].get("annotations", {}).get("horizontal", [])
        for spec in SPECS
        if labels(note, spec) and any(shows(q, spec) for q in rows(w))
    }
    assert critical <= carried
    for widget in metric_charts:
        carries = {
            spec.name_suffix
            for note in widget["properties"].get("annotations", {}).get("horizontal", [])
            for spec in SPECS
            if labels(note, spec) and any(shows(q, spec) for q in rows(widget))
        }
        assert (widget in first) == bool(carries & critical), widget["properties"]["title"]


def test_the_page_is_far_shorter_than_a_tile_per_alarm_and_a_chart_row_per_function() -> None:
    rows_tall = max(w["y"] + w["height"] for w in OPERATIONS["widgets"])
    # 40 px a row offline: about 3,100 px (it was 5,440 with 45 alarm tiles on top); the objectives
    # row takes 5 of them, and FilesLost's chart one more row of critical charts.
    assert rows_tall <= 78


# -- the run drill-down -------------------------------------------------------------------------


def test_the_drilldown_queries_every_function_log_group_for_errors_with_run_and_file() -> None:
    groups = log_group_names(TEMPLATE)
    assert set(groups) == set(function_timeouts(TEMPLATE))
    for function, group in groups.items():
        declared = TEMPLATE["Resources"][f"{function}LogGroup"]["Properties"]["LogGroupName"]
        assert group == declared["Fn::Sub"] == "/aws/lambda/${" + function + "}"
    logs = {
        w["properties"]["title"]: w["properties"]["query"] for w in DRILLDOWN["widgets"] if w["type"] == "log"
    }
    errors = logs["Errors: job, run and file"]
    assert all(f"SOURCE '{group}'" in errors for group in groups.values())
    assert all(field in errors for field in ("job_id", "execution_name", "file_key", "level = 'ERROR'"))
    (timeline,) = [query for title, query in logs.items() if title.startswith("One run's timeline")]
    assert f"filter job_id = '{JOB_ID_PLACEHOLDER}'" in timeline and "sort @timestamp asc" in timeline
    texts = [w["properties"]["markdown"] for w in DRILLDOWN["widgets"] if w["type"] == "text"]
    assert any(JOB_ID_PLACEHOLDER in text and "replace" in text for text in texts)


# -- CloudFormation -----------------------------------------------------------------------------


def test_resources_are_two_dashboards_named_after_the_stack() -> None:
    generated = resources(SPECS, TEMPLATE)
    assert set(generated) == {"OperationsDashboard", "RunDrilldownDashboard"}
    names = {logical: r["Properties"]["DashboardName"]["Fn::Sub"] for logical, r in generated.items()}
    assert names == {
        "OperationsDashboard": "${AWS::StackName}-operations",
        "RunDrilldownDashboard": "${AWS::StackName}-run-drilldown",
    }
    assert all(r["Type"] == "AWS::CloudWatch::Dashboard" for r in generated.values())


@pytest.mark.parametrize(
    ("logical_id", "body"), [("OperationsDashboard", OPERATIONS), ("RunDrilldownDashboard", DRILLDOWN)]
)
def test_every_unescaped_dollar_brace_of_a_body_is_a_template_placeholder(
    logical_id: str, body: dict
) -> None:
    text = resources(SPECS, TEMPLATE)[logical_id]["Properties"]["DashboardBody"]["Fn::Sub"]
    pseudo = {"AWS::Region", "AWS::StackName", "AWS::AccountId", "AWS::Partition"}
    for name in re.findall(r"\$\{([^!}][^}]*)\}", text):
        logical, _, attribute = name.partition(".")
        assert (
            name in pseudo
            or name in TEMPLATE["Parameters"]
            or (not attribute and name in TEMPLATE["Resources"])
            or (attribute.isalnum() and logical in TEMPLATE["Resources"])
        ), f"{logical_id}: ${{{name}}} is neither a parameter, a resource nor a pseudo parameter"
    # What CloudFormation makes of the string is the body drawn offline, number placeholders included.
    names = sample_names(body)
    assert json.loads(fn_sub(text, names)) == resolve(body, names)


def test_a_dollar_brace_that_is_no_placeholder_is_escaped_for_fn_sub() -> None:
    from dashboards.build import body_text

    body = {
        "widgets": [
            {"type": "text", "properties": {"markdown": "cost ${total} in ${AWS::Region} ${Nope.Attr}"}}
        ]
    }
    text = body_text(body, TEMPLATE)
    assert "${!total}" in text and "${AWS::Region}" in text and "${!Nope.Attr}" in text
    assert json.loads(fn_sub(text, {"AWS::Region": "us-east-1"}))["widgets"][0]["properties"]["markdown"] == (
        "cost ${total} in us-east-1 ${Nope.Attr}"
    )
    assert known_placeholder("MainQueue.QueueName", TEMPLATE) and not known_placeholder("total", TEMPLATE)


def test_resolve_names_every_missing_placeholder_and_placeholders_skips_escapes() -> None:
    body = {"a": ["${X} and ${Y.Z}", {"b": "${!Literal} ${AWS::Region}"}]}
    assert placeholders(body) == {"X", "Y.Z", "AWS::Region"}
    with pytest.raises(KeyError, match=r"X, Y\.Z"):
        resolve(body, {"AWS::Region": "r"})
    assert resolve(body, {"X": "1", "Y.Z": "2", "AWS::Region": "r"}) == {
        "a": ["1 and 2", {"b": "${Literal} r"}]
    }


# -- the render command's view of CloudWatch (moto, no sandbox) ----------------------------------


def test_stack_names_resolve_every_placeholder_of_both_bodies() -> None:
    outputs = {
        "InputBucketName": "in",
        "OutputBucketName": "out",
        "TrackingTableName": "ops-tracking",
        "CoordinationTableName": "ops-coordination",
        "MainQueueUrl": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/ops-main",
        "DeadLetterQueueUrl": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/ops-dlq",
        "TrackerDeadLetterQueueUrl": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/ops-tracker-dlq",
        "IngestDeadLetterQueueUrl": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/ops-ingest-dlq",
        "ScheduledDeadLetterQueueUrl": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/ops-scheduled-dlq",
        "QuarantineQueueUrl": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/ops-quarantine",
        "StateMachineArn": f"arn:aws-cn:states:cn-north-1:{ACCOUNT}:stateMachine:ops",
        **{f"{function}Name": f"ops-{function}" for function in function_timeouts(TEMPLATE)},
    }
    names = stack_names(
        StackResources.from_outputs("ops", outputs), {"Stage": "prod"}, "cn-north-1", TEMPLATE
    )
    resolved = resolve(OPERATIONS, names)
    resolve(DRILLDOWN, names)
    assert names["MainQueue.QueueName"] == "ops-main" and names["RouterFunction"] == "ops-RouterFunction"
    assert (names["AWS::Partition"], names["AWS::AccountId"], names["Stage"]) == ("aws-cn", ACCOUNT, "prod")
    semaphore = next(w for w in charts(resolved) if w["properties"]["title"].startswith("Semaphore"))
    assert semaphore["properties"]["annotations"]["horizontal"][0]["value"] == 10  # the parameter's default


def put(cloudwatch: Any, name: str, values: list[float], dimensions: dict[str, str], at: datetime) -> None:
    cloudwatch.put_metric_data(
        Namespace="AWS/Lambda",
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                "Value": value,
                "Timestamp": at,
            }
            for value in values
        ],
    )


def test_percentiles_moto_cannot_compute_are_reported_and_the_rest_is_read(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    end = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    put(cloudwatch, "Duration", [10, 20, 300], {"FunctionName": "f"}, end - timedelta(seconds=30))
    queries = expand_metrics(
        [
            ["AWS/Lambda", "Duration", "FunctionName", "f", {"stat": "p99"}],
            ["AWS/Lambda", "Duration", "FunctionName", "f", {"stat": "Maximum"}],
            ["AWS/Lambda", "Duration", "FunctionName", "g", {"stat": "p50"}],
        ],
        period=60,
    )
    fetched = fetch_metrics(cloudwatch, queries, end - timedelta(minutes=10), end)
    series = [fetched.series[metric_key(query)] for query in queries]
    assert [[value for _, value in points] for points in series] == [[], [300.0], []]
    notes = " ".join(fetched.notes)
    # moto's GetMetricData fails on a percentile (TypeError); its GetMetricStatistics ignores
    # ExtendedStatistics. Only the p99 of a metric that has data is reported, not g's p50.
    assert "GetMetricData could not compute p50, p99" in notes
    assert "1 p99 series have no datapoints although the same metrics have data" in notes


def test_get_metric_data_is_asked_at_most_500_queries_a_call(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    end = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    put(cloudwatch, "Invocations", [1, 1], {"FunctionName": "f0"}, end - timedelta(seconds=30))
    rows_ = [["AWS/Lambda", "Invocations", "FunctionName", f"f{n}", {"stat": "Sum"}] for n in range(1001)]
    fetched = fetch_metrics(cloudwatch, expand_metrics(rows_, period=60), end - timedelta(minutes=5), end)
    assert fetched.calls == 3
    assert len(fetched.series) == 1001 and [
        v for _, v in fetched.series[metric_key(expand_metrics(rows_[:1], period=60)[0])]
    ] == [2.0]


def test_metric_queries_are_the_rows_the_page_fetches() -> None:
    body = {
        "widgets": [
            {"type": "text", "properties": {"markdown": "x"}},
            {
                "type": "metric",
                "properties": {
                    "region": "r",
                    "stat": "Sum",
                    "metrics": [
                        ["N", "A", "d", "1"],
                        [".", "B", ".", ".", {"visible": False}],
                        [{"expression": "m1*2"}],
                    ],
                },
            },
        ]
    }
    assert [(q.name, q.stat, q.period) for q in metric_queries(body)] == [("A", "Sum", 300)]


def test_render_without_a_stack_is_a_clear_error(aws: None, tmp_path: Any) -> None:
    result = CliRunner().invoke(
        dashboard_app, ["render", "--out", str(tmp_path / "ops.html"), "--stack", "nope"]
    )
    assert result.exit_code == 2
    assert "no stack 'nope'" in " ".join(result.output.split())
    assert not (tmp_path / "ops.html").exists()
