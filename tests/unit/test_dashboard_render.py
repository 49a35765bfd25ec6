"""The offline dashboard: a CloudWatch body drawn as one self-contained HTML page of inline SVG."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest

from dashboards.metric_rows import MetricQuery, expand_metrics
from dashboards.render import (
    COL_PX,
    GUTTER_PX,
    MIN_WINDOW,
    PAGE_PAD_PX,
    ROW_PX,
    AlarmBadge,
    Box,
    ChromiumMissing,
    fit_start,
    layout,
    render_html,
    screenshot,
)

START = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
END = START + timedelta(hours=1)
ARN = "arn:aws:cloudwatch:us-east-1:123456789012:alarm:{}"


class Elements(HTMLParser):
    """Every start tag with its attributes, and the page's text, so tests can check the DOM."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str, **wanted: str) -> list[dict[str, str | None]]:
        return [
            attrs
            for name, attrs in self.tags
            if name == tag and all(attrs.get(key.replace("_", "-")) == value for key, value in wanted.items())
        ]


def ramp(query: MetricQuery, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    """One point a minute, 0 to 60."""
    return [(start + timedelta(minutes=m), float(m)) for m in range(61)]


def nothing(query: MetricQuery, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    return []


def metric_widget(
    x: int = 0, y: int = 0, width: int = 12, height: int = 6, **properties: Any
) -> dict[str, Any]:
    props: dict[str, Any] = {"region": "us-east-1", "metrics": [["PipeOps", "JobsFailed"]], **properties}
    return {"type": "metric", "x": x, "y": y, "width": width, "height": height, "properties": props}


def render(widgets: Sequence[dict[str, Any]], fetch: Any = ramp, **kwargs: Any) -> str:
    return render_html({"widgets": list(widgets)}, fetch, start=START, end=END, **kwargs)


# --- the compact metrics syntax -----------------------------------------------------------------


def test_dots_repeat_the_previous_rows_values_and_options_override_widget_defaults() -> None:
    rows = [
        ["PipeOps", "JobDuration", "service", "pipeops", "function", "router"],
        [".", ".", ".", ".", ".", "tracker", {"stat": "p99", "label": "tracker p99", "period": 60}],
        [".", "QueueWait", ".", ".", ".", "."],
    ]
    assert expand_metrics(rows, stat="Maximum", period=3600) == [
        MetricQuery(
            "PipeOps",
            "JobDuration",
            (("service", "pipeops"), ("function", "router")),
            "Maximum",
            3600,
            "JobDuration pipeops router",
        ),
        MetricQuery(
            "PipeOps",
            "JobDuration",
            (("service", "pipeops"), ("function", "tracker")),
            "p99",
            60,
            "tracker p99",
        ),
        MetricQuery(
            "PipeOps",
            "QueueWait",
            (("service", "pipeops"), ("function", "tracker")),
            "Maximum",
            3600,
            "QueueWait pipeops tracker",
        ),
    ]


def test_documented_defaults_are_average_over_five_minutes() -> None:
    (query,) = expand_metrics([["AWS/Lambda", "Errors", {"color": "#ff0000", "id": "m1", "visible": False}]])
    assert (query.stat, query.period, query.label) == ("Average", 300, "Errors")
    assert (query.color, query.id, query.visible, query.dimensions) == ("#ff0000", "m1", False, ())


def test_the_consoles_leading_ellipsis_repeats_all_but_the_trailing_values() -> None:
    rows = [["AWS/Lambda", "Errors", "FunctionName", "ingest"], ["...", "router"]]
    assert [query.dimensions for query in expand_metrics(rows)] == [
        (("FunctionName", "ingest"),),
        (("FunctionName", "router"),),
    ]


def test_metric_math_rows_are_kept_and_do_not_become_the_previous_row() -> None:
    rows = [
        ["PipeOps", "JobsFailed", {"id": "m1"}],
        [{"expression": "m1 * 2", "label": "doubled", "id": "e1"}],
        [".", "JobsSucceeded"],
    ]
    _, expression, third = expand_metrics(rows)
    assert (expression.expression, expression.label, expression.id) == ("m1 * 2", "doubled", "e1")
    assert (third.namespace, third.name) == ("PipeOps", "JobsSucceeded")


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[".", "Errors"]], "metrics row 0: '.' at position 0 has no previous value"),
        ([["PipeOps", "Errors", "service"]], "metrics row 0: needs namespace, metric name and name/value"),
        ([["PipeOps", {"stat": "Sum"}, "Errors"]], "metrics row 0: only the last element may be an options"),
        ([["PipeOps", "Errors", {"period": "60"}]], "metrics row 0: period must be a positive integer"),
        ([["PipeOps", "Errors"], "PipeOps"], "metrics row 1: must be a non-empty array"),
    ],
)
def test_malformed_rows_raise_naming_the_row(rows: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        expand_metrics(rows)


# --- layout -------------------------------------------------------------------------------------


def test_widgets_sit_on_the_grid_at_fixed_pixels_per_unit() -> None:
    widgets = [metric_widget(0, 0, 6, 6), metric_widget(6, 2, 12, 4)]
    geometry = layout({"widgets": widgets}, alarm_count=0)
    second = geometry.widgets[1]
    assert geometry.width == 2 * PAGE_PAD_PX + 24 * COL_PX
    assert second.outer == Box(
        PAGE_PAD_PX + 6 * COL_PX + GUTTER_PX,
        geometry.grid_top + 2 * ROW_PX + GUTTER_PX,
        12 * COL_PX - 2 * GUTTER_PX,
        4 * ROW_PX - 2 * GUTTER_PX,
    )
    assert second.plot is not None
    assert second.outer.left < second.plot.left and second.plot.right <= second.outer.right
    assert second.outer.top < second.plot.top and second.plot.bottom < second.outer.bottom
    page = render(widgets)
    (div,) = Elements(page).all("div", data_index="1")
    box = second.outer
    assert f"left:{box.left}px;top:{box.top}px;width:{box.width}px;height:{box.height}px" in str(div["style"])


def test_the_alarms_take_one_line_above_the_grid_however_many_there_are() -> None:
    body = {"widgets": [metric_widget()]}
    tops = {layout(body, alarm_count=count).grid_top for count in (0, 1, 4, 45, 200)}
    assert len(tops) == 1 and tops.pop() <= PAGE_PAD_PX + 2 * ROW_PX + GUTTER_PX * 2


# --- charts -------------------------------------------------------------------------------------


def test_each_series_is_a_polyline_and_the_svg_counts_series_and_points() -> None:
    rows = [["PipeOps", "JobsFailed", "function", "a"], [".", ".", ".", "b"], [".", ".", ".", "empty"]]

    def fetch(query: MetricQuery, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
        return [] if query.dimensions[0][1] == "empty" else ramp(query, start, end)

    page = render([metric_widget(metrics=rows)], fetch)
    dom = Elements(page)
    (svg,) = dom.all("svg", **{"class": "chart"})
    assert (svg["data-widget"], svg["data-series"], svg["data-points"]) == ("0", "2", "122")
    assert len(dom.all("polyline", **{"class": "series"})) == 2


def test_points_outside_the_window_and_non_finite_values_are_not_drawn() -> None:
    def fetch(query: MetricQuery, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
        return [
            (start - timedelta(minutes=1), 1.0),
            (start, 2.0),
            (start, float("nan")),
            (end + timedelta(seconds=1), 3.0),
        ]

    (svg,) = Elements(render([metric_widget()], fetch)).all("svg", **{"class": "chart"})
    assert svg["data-points"] == "1"


def test_horizontal_annotations_are_dashed_lines_with_their_label_at_their_value() -> None:
    annotations = {"horizontal": [{"value": 30, "label": "p99 budget", "color": "#00ff00"}]}
    widgets = [metric_widget(annotations=annotations)]
    page = render(widgets)
    dom = Elements(page)
    (line,) = dom.all("line", **{"class": "annotation"})
    assert line["stroke"] == "#00ff00" and line["stroke-dasharray"]
    plot = layout({"widgets": widgets}, alarm_count=0).widgets[0].plot
    assert plot is not None
    # The ramp reaches 60, so the y axis runs 0..60 and 30 sits half way down the plot.
    assert float(str(line["y1"])) == pytest.approx(plot.height / 2, abs=0.1)
    assert "p99 budget" in dom.text


def test_a_threshold_above_the_data_stretches_the_axis_and_hidden_ones_are_skipped() -> None:
    annotations = {
        "horizontal": [{"value": 500, "label": "max"}, {"value": 5, "label": "off", "visible": False}]
    }
    dom = Elements(render([metric_widget(annotations=annotations)]))
    assert len(dom.all("line", **{"class": "annotation"})) == 1
    assert "500" in dom.text and "off" not in dom.text


def test_an_empty_series_says_no_data_in_the_legend_and_an_empty_chart_says_it_in_the_plot() -> None:
    dom = Elements(render([metric_widget()], nothing))
    (svg,) = dom.all("svg", **{"class": "chart"})
    assert (svg["data-series"], svg["data-points"]) == ("0", "0")
    assert dom.all("polyline") == []
    assert dom.text.count("no data") == 2  # the legend entry and the plot


def test_single_value_shows_the_latest_point_by_time() -> None:
    def fetch(query: MetricQuery, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
        if query.name == "Missing":
            return []
        return [(start + timedelta(minutes=5), 7.0), (start + timedelta(minutes=1), 1.0)]

    rows = [["PipeOps", "JobsFailed", {"label": "failed"}], ["PipeOps", "Missing"]]
    dom = Elements(render([metric_widget(view="singleValue", metrics=rows)], fetch))
    text = "".join(dom.text)
    assert "failed" in text and "7" in text and "no data" in text
    (values,) = dom.all("div", data_widget="0")
    assert (values["data-series"], values["data-points"]) == ("1", "2")


# --- escaping and self-containment ----------------------------------------------------------------


HOSTILE = '<script>alert("x")</script>'


def test_every_piece_of_text_is_escaped() -> None:
    widgets = [
        metric_widget(title=HOSTILE, metrics=[["PipeOps", "JobsFailed", {"label": HOSTILE}]]),
        {"type": "text", "x": 12, "y": 0, "width": 12, "height": 6, "properties": {"markdown": HOSTILE}},
        {
            "type": "log",
            "x": 0,
            "y": 6,
            "width": 24,
            "height": 4,
            "properties": {"region": "r", "query": HOSTILE},
        },
    ]
    page = render(
        widgets,
        title=HOSTILE,
        alarms=[AlarmBadge(HOSTILE, "ALARM", HOSTILE, HOSTILE)],
        logs=lambda query: [{HOSTILE: HOSTILE}],
    )
    assert "<script" not in page
    assert page.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") >= 9


def test_the_page_loads_nothing_from_anywhere() -> None:
    widgets = [
        metric_widget(annotations={"horizontal": [{"value": 10, "label": "threshold"}]}),
        {
            "type": "text",
            "x": 12,
            "y": 0,
            "width": 12,
            "height": 6,
            "properties": {"markdown": "# runbooks/dlq.md"},
        },
    ]
    page = render(widgets, alarms=[AlarmBadge("dlq-depth", "ALARM", "Threshold crossed", "runbooks/dlq.md")])
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"\b(src|href)\s*=|@import|<script|<link|<img|<iframe", page, re.IGNORECASE)
    assert "content=\"default-src 'none'; style-src 'unsafe-inline'\"" in page


def test_urls_in_the_body_stay_inert_text() -> None:
    markdown = '[runbook](https://example.com/x) <img src="https://example.com/p.png">'
    page = render(
        [{"type": "text", "x": 0, "y": 0, "width": 24, "height": 2, "properties": {"markdown": markdown}}]
    )
    dom = Elements(page)
    assert not [attrs for _, attrs in dom.tags if {"src", "href"} & set(attrs)]
    assert dom.all("img") == [] and markdown in "".join(dom.text)


def test_a_colour_that_is_not_a_hex_code_is_ignored() -> None:
    rows = [["PipeOps", "JobsFailed", {"color": "red;background:url(https://example.com/x)"}]]
    page = render([metric_widget(metrics=rows)])
    assert "example.com" not in page
    (line,) = Elements(page).all("polyline")
    assert line["stroke"] == "#1f77b4"


def test_the_same_input_renders_the_same_bytes() -> None:
    widgets = [
        metric_widget(),
        {"type": "text", "x": 12, "y": 0, "width": 12, "height": 2, "properties": {"markdown": "a"}},
    ]
    alarms = [AlarmBadge("b", "OK", ""), AlarmBadge("a", "ALARM", "")]
    assert render(widgets, alarms=alarms) == render(widgets, alarms=list(reversed(alarms)))


# --- alarms, logs, the rest -----------------------------------------------------------------------


def test_the_alarm_line_counts_each_state_alarm_first_and_names_the_alarms_in_alarm() -> None:
    alarms = [
        AlarmBadge("queue-age", "OK", "fine"),
        AlarmBadge("heartbeat", "INSUFFICIENT_DATA", "no data"),
        AlarmBadge("dlq-depth", "ALARM", "Threshold Crossed", "runbooks/dlq.md"),
        AlarmBadge("b-errors", "ALARM", "Threshold Crossed"),
        AlarmBadge("router", "OK", "fine"),
    ]
    dom = Elements(render([metric_widget()], alarms=alarms))
    chips = [attrs["data-state"] for attrs in dom.all("span") if "chip" in str(attrs.get("class"))]
    assert chips == ["ALARM", "INSUFFICIENT_DATA", "OK"]
    text = "".join(dom.text)
    assert "2 ALARM: b-errors, dlq-depth" in text and "1 INSUFFICIENT_DATA" in text and "2 OK" in text
    assert "queue-age" not in text  # healthy alarms are a count, not a tile each


def test_no_alarms_supplied_is_said_not_hidden() -> None:
    assert "No alarm states were supplied." in render([metric_widget()])


def test_an_alarm_widget_shows_the_states_of_its_alarms_filtered_and_sorted() -> None:
    arns = [ARN.format(name) for name in ("queue-age", "dlq-depth", "not-supplied")]
    widget = {"type": "alarm", "x": 0, "y": 0, "width": 6, "height": 4, "properties": {"alarms": arns}}
    alarms = [AlarmBadge("queue-age", "OK", ""), AlarmBadge("dlq-depth", "ALARM", "")]
    items = Elements(render([widget], alarms=alarms)).all("li")
    assert [item["data-alarm"] for item in items] == ["dlq-depth", "not-supplied", "queue-age"]
    widget["properties"] |= {"sortBy": "stateUpdatedTimestamp", "states": ["OK", "UNKNOWN"]}
    items = Elements(render([widget], alarms=alarms)).all("li")
    assert [item["data-alarm"] for item in items] == ["queue-age", "not-supplied"]


def test_an_alarm_widget_filtered_to_alarms_not_ok_counts_the_healthy_ones_it_leaves_out() -> None:
    arns = [ARN.format(name) for name in ("a", "b", "c", "d")]
    properties = {"alarms": arns, "states": ["ALARM", "INSUFFICIENT_DATA"], "sortBy": "stateUpdatedTimestamp"}
    widget = {"type": "alarm", "x": 0, "y": 0, "width": 18, "height": 3, "properties": properties}
    alarms = [AlarmBadge("a", "OK"), AlarmBadge("b", "ALARM"), AlarmBadge("c", "OK"), AlarmBadge("d", "OK")]
    dom = Elements(render([widget], alarms=alarms))
    assert [item["data-alarm"] for item in dom.all("li")] == ["b"]
    assert "not listed: 3 OK" in "".join(dom.text)
    quiet = Elements(render([widget], alarms=[AlarmBadge(n, "OK") for n in "abcd"]))
    assert quiet.all("li") == [] and "no alarms in the selected states" in "".join(quiet.text)


def test_an_alarm_widget_of_one_alarm_is_one_big_badge_of_its_state() -> None:
    widget = {"type": "alarm", "x": 0, "y": 0, "width": 6, "height": 3, "properties": {"alarms": [ARN.format("all")]}}
    dom = Elements(render([widget], alarms=[AlarmBadge("all", "ALARM", "child in ALARM")]))
    (badge,) = dom.all("div", data_alarm="all")
    assert "big" in str(badge["class"]) and "st-alarm" in str(badge["class"]) and badge["data-state"] == "ALARM"


# --- the window and how sparse series are drawn -----------------------------------------------


def test_the_window_starts_shortly_before_the_first_datapoint_of_any_chart() -> None:
    late = START + timedelta(minutes=40)

    def recent(query: MetricQuery, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
        return [(late + timedelta(minutes=m), 1.0) for m in range(20)]

    page = render([metric_widget()], recent)
    assert "2024-05-01 09:38 to 2024-05-01 10:00 UTC (fitted to the data; asked from 09:00)" in page
    assert fit_start([], START, END) == START  # no data: the window asked for
    assert fit_start([END - timedelta(minutes=1)], START, END) == END - MIN_WINDOW
    assert fit_start([START + timedelta(minutes=1)], START, END) == START


def test_counters_are_bars_one_per_period_and_other_series_break_where_periods_are_missing() -> None:
    rows = [
        ["PipeOps", "JobsFailed", {"stat": "Sum", "period": 60, "label": "failed"}],
        ["PipeOps", "QueueWait", {"stat": "Maximum", "period": 60, "label": "wait"}],
    ]
    minutes = (0, 1, 2, 30, 50, 51)  # three, a lone one, two: far apart

    def sparse(query: MetricQuery, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
        return [(start + timedelta(minutes=m), float(m % 5)) for m in minutes]

    dom = Elements(render([metric_widget(metrics=rows)], sparse))
    (bars,) = dom.all("g", data_label="failed")
    assert "bars" in str(bars["class"])
    rects = [tag for tag, attrs in dom.tags if tag == "rect"]
    assert len(rects) >= len(minutes)  # a bar per datapoint (plus the clip path's rectangle)
    lines = dom.all("polyline", data_label="wait")
    assert len(lines) == 2  # 0-1-2 and 50-51: never a slope across the empty minutes
    assert len(dom.all("circle")) == 1  # the lone point at 30


def test_a_log_widget_shows_its_query_and_rows_when_it_can_run_them() -> None:
    query = "SOURCE '/aws/lambda/router' | fields @timestamp, @message | limit 2"
    widget = {
        "type": "log",
        "x": 0,
        "y": 0,
        "width": 24,
        "height": 6,
        "properties": {"region": "r", "query": query},
    }
    asked: list[str] = []

    def logs(text: str) -> list[dict[str, str]]:
        asked.append(text)
        return [{"@timestamp": "10:00", "@message": "boom"}, {"@timestamp": "10:01", "level": "ERROR"}]

    assert "fields @timestamp, @message" in render([widget]) and "<table>" not in render([widget])
    dom = Elements(render([widget], logs=logs))
    assert asked == [query]
    assert len(dom.all("th")) == 3 and len(dom.all("tr")) == 3


def test_a_body_with_problems_still_renders_and_lists_them() -> None:
    widgets = [metric_widget(0, 0, 12, 6), metric_widget(6, 0, 12, 6)]
    page = render(widgets)
    assert "breaks CloudWatch limits" in page and "widgets 0 and 1 overlap" in page
    assert len(Elements(page).all("svg", **{"class": "chart"})) == 2


def test_metric_math_is_listed_but_not_fetched() -> None:
    fetched: list[MetricQuery] = []

    def fetch(query: MetricQuery, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
        fetched.append(query)
        return ramp(query, start, end)

    rows = [["PipeOps", "JobsFailed", {"id": "m1"}], [{"expression": "m1 * 2", "label": "doubled"}]]
    page = render([metric_widget(metrics=rows)], fetch)
    assert [query.name for query in fetched] == ["JobsFailed"]
    assert "doubled" in page and "metric math: not computed offline" in page


def test_the_window_must_not_be_empty() -> None:
    with pytest.raises(ValueError, match="must be after start"):
        render_html({"widgets": []}, ramp, start=END, end=START)


def test_screenshot_names_how_to_install_chromium_when_it_is_missing(tmp_path: Any) -> None:
    with pytest.raises(ChromiumMissing, match="apt-get install -y --no-install-recommends chromium"):
        screenshot(tmp_path / "a.html", tmp_path / "a.png", 100, 100, chromium=str(tmp_path / "no-chromium"))


def test_time_labels_fit_the_chart_and_show_dates_for_long_windows() -> None:
    def labels(days: float, width: int) -> list[str]:
        end = START + timedelta(days=days)
        page = render_html({"widgets": [metric_widget(width=width)]}, ramp, start=START, end=end)
        return re.findall(r'y="\d+" text-anchor="(?:middle|end)">([^<]+)</text>', page)

    assert labels(1 / 24, 12) == ["09:00", "09:10", "09:20", "09:30", "09:40", "09:50", "10:00"]
    assert labels(2, 6) == ["05-02", "05-03"]
    assert labels(2, 24) == ["05-01 12:00", "05-02 00:00", "05-02 12:00", "05-03 00:00"]
