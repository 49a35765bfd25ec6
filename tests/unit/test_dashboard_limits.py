"""CloudWatch's dashboard-body limits, checked offline before PutDashboard would reject the body."""

from __future__ import annotations

from typing import Any

import pytest

from dashboards.limits import Cell, place, problems

ARN = "arn:aws:cloudwatch:us-east-1:123456789012:alarm:{}"


def metric(x: int, y: int, width: int = 6, height: int = 6, **properties: Any) -> dict[str, Any]:
    props = {
        "region": "us-east-1",
        "metrics": [["PipeOps", "JobsFailed", "service", "pipeops"]],
        **properties,
    }
    return {"type": "metric", "x": x, "y": y, "width": width, "height": height, "properties": props}


def one_problem(widget: dict[str, Any]) -> str:
    found = problems({"widgets": [widget]})
    assert len(found) == 1, found
    return found[0]


def test_a_well_formed_body_of_every_widget_type_has_no_problems() -> None:
    body = {
        "widgets": [
            metric(0, 0, 12, 6, stat="p99", period=60, view="singleValue"),
            {"type": "text", "x": 12, "y": 0, "width": 12, "height": 2, "properties": {"markdown": "# ops"}},
            {
                "type": "alarm",
                "x": 12,
                "y": 2,
                "width": 12,
                "height": 4,
                "properties": {"alarms": [ARN.format("a")]},
            },
            {
                "type": "log",
                "x": 0,
                "y": 6,
                "width": 24,
                "height": 6,
                "properties": {"region": "us-east-1", "query": "SOURCE 'x' | fields @message"},
            },
        ]
    }
    assert problems(body) == []


def test_an_empty_widgets_array_is_allowed_but_a_missing_one_is_not() -> None:
    assert problems({"widgets": []}) == []
    assert problems({}) == ["the dashboard body needs a 'widgets' array (it may be empty)"]
    assert problems([]) == ["the dashboard body must be a JSON object"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("widget", "expected"),
    [
        (metric(20, 0, width=6), "x + width = 26 runs past the 24-column grid"),
        (metric(0, 0, width=0), "width=0 must be 1..24"),
        (metric(0, 0, width=25), "width=25 must be 1..24"),
        (metric(0, 0, height=1001), "height=1001 must be 1..1000"),
        (metric(24, 0, width=1), "x=24 is off the 24-column grid (0..23)"),
        (metric(0, -1), "y=-1 is negative"),
        (metric(0, 0, width="6"), "'width' must be an integer, not '6'"),
        (metric(0, 0, height=0), "height=0 must be 1..1000"),
    ],
)
def test_the_24_column_grid(widget: dict[str, Any], expected: str) -> None:
    assert one_problem(widget).endswith(expected)


def test_the_default_width_of_6_counts_against_the_grid() -> None:
    widget = metric(20, 0)
    del widget["width"]
    assert one_problem(widget).endswith("x + width = 26 runs past the 24-column grid")


def test_y_without_x_is_rejected() -> None:
    widget = metric(0, 3)
    del widget["x"]
    assert one_problem(widget).endswith("'x' is required when 'y' is given")


def test_at_most_500_widgets() -> None:
    widgets = [metric(0, row, 24, 1) for row in range(501)]
    assert problems({"widgets": widgets}) == ["501 widgets: a dashboard holds at most 500"]
    assert problems({"widgets": widgets[:500]}) == []


def test_at_most_500_metrics_per_widget_counting_shorthand_rows() -> None:
    rows: list[list[Any]] = [["PipeOps", "JobsFailed", "function", "f0"]]
    rows += [[".", ".", ".", f"f{n}"] for n in range(1, 501)]
    assert one_problem(metric(0, 0, metrics=rows)).endswith("501 metrics: a metric widget holds at most 500")
    assert problems({"widgets": [metric(0, 0, metrics=rows[:500])]}) == []


@pytest.mark.parametrize(
    ("widget", "expected"),
    [
        ({"x": 0, "y": 0, "properties": {}}, "'type' must be one of"),
        ({"type": "metric", "x": 0, "y": 0}, "'properties' is required and must be an object"),
        ({"type": "metric", "x": 0, "y": 0, "properties": {"region": "us-east-1"}}, "'metrics' is required"),
        ({"type": "metric", "x": 0, "y": 0, "properties": {"metrics": []}}, "'region' is required"),
        ({"type": "text", "x": 0, "y": 0, "properties": {}}, "'markdown' is required for a text widget"),
        (
            {"type": "alarm", "x": 0, "y": 0, "properties": {"alarms": []}},
            "'alarms' (an array of alarm ARNs)",
        ),
        ({"type": "log", "x": 0, "y": 0, "properties": {"region": "us-east-1"}}, "'query' (a Logs Insights"),
        ({"type": "log", "x": 0, "y": 0, "properties": {"query": "fields @message"}}, "'region' is required"),
    ],
)
def test_required_fields(widget: dict[str, Any], expected: str) -> None:
    assert expected in one_problem(widget)


def test_an_alarm_graph_needs_no_metrics_array() -> None:
    widget = metric(0, 0, annotations={"alarms": [ARN.format("a")]})
    del widget["properties"]["metrics"]
    assert problems({"widgets": [widget]}) == []


def test_malformed_metric_rows_periods_views_and_annotations_are_reported() -> None:
    assert "'.' at position 0 has no previous value" in one_problem(metric(0, 0, metrics=[[".", "Errors"]]))
    assert "dimension pairs" in one_problem(metric(0, 0, metrics=[["PipeOps", "Errors", "service"]]))
    assert "period=90 must be 1, 5, 10, 30 or a multiple of 60" in one_problem(metric(0, 0, period=90))
    assert "'view' must be one of" in one_problem(metric(0, 0, view="heatmap"))
    bad = {"horizontal": [{"label": "no value"}]}
    assert "needs a numeric 'value'" in one_problem(metric(0, 0, annotations=bad))


def test_alarm_widgets_hold_at_most_100_alarm_arns() -> None:
    arns = [ARN.format(n) for n in range(101)]
    widget = {"type": "alarm", "x": 0, "y": 0, "properties": {"alarms": arns}}
    assert one_problem(widget).endswith("101 alarms: an alarm widget holds at most 100")
    widget["properties"]["alarms"] = ["dlq-depth"]
    assert one_problem(widget).endswith("'dlq-depth' is not an alarm ARN")


def test_overlapping_widgets_are_named_but_touching_ones_are_fine() -> None:
    touching = [metric(0, 0, 12, 6), metric(12, 0, 12, 6), metric(0, 6, 24, 2)]
    assert problems({"widgets": touching}) == []
    overlapping = [metric(0, 0, 12, 6), metric(11, 5, 6, 6)]
    assert problems({"widgets": overlapping}) == ["widgets 0 and 1 overlap: (0,0 12x6) and (11,5 6x6)"]


def test_problems_name_the_widget_by_index_and_title() -> None:
    assert one_problem(metric(0, 0, width=30, title="Errors")).startswith("widget 0 ('Errors'): ")


def test_widgets_without_a_position_flow_into_the_next_free_place() -> None:
    widgets = [
        metric(0, 0, 12, 6),
        {"type": "text", "width": 12, "height": 3, "properties": {"markdown": "a"}},
        {"type": "text", "width": 18, "height": 2, "properties": {"markdown": "b"}},
        {"type": "text", "properties": {"markdown": "c"}},  # the documented 6x6 default
    ]
    assert place(widgets) == [Cell(0, 0, 12, 6), Cell(12, 0, 12, 3), Cell(0, 6, 18, 2), Cell(18, 6, 6, 6)]
    assert problems({"widgets": widgets}) == []


def test_auto_placement_goes_around_explicit_widgets() -> None:
    widgets = [
        {"type": "text", "properties": {"markdown": "flows"}, "width": 24, "height": 2},
        metric(0, 0, 24, 4),
    ]
    assert place(widgets) == [Cell(0, 4, 24, 2), Cell(0, 0, 24, 4)]
