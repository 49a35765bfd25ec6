"""Render a CloudWatch dashboard body as one self-contained HTML page: the ops dashboard, offline.

On call, the console may be out of reach (the laptop sandbox, an expired session), so this draws the
same body from any metric source as inline SVG made here: no script, no font, nothing fetched. A
Content-Security-Policy of `default-src 'none'` makes that a property of the page, not a promise.
Every widget sits on the 24-column grid at fixed pixel sizes (`layout`), so a screenshot can be
checked pixel by pixel.

Above the grid, one line counts the alarms by state and names those in ALARM (the body's own alarm
widgets list them). The drawn window starts shortly before the first datapoint of any chart (at
most the window asked for, at least `MIN_WINDOW`): a young sandbox's minutes are not squeezed
against the right edge of three hours. Counters (Sum, SampleCount) are drawn as one bar per
period while a period is a few pixels wide; other series (and counters over long windows) as
lines broken where periods are missing, a lone point as a dot.
"""

from __future__ import annotations

import html
import math
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dashboards.limits import GRID_COLUMNS, Cell, place, problems
from dashboards.metric_rows import DEFAULT_PERIOD, DEFAULT_STAT, MetricQuery, expand_metrics, safe_color

# --- page geometry (pixels) -------------------------------------------------------------------
COL_PX = 50  # one grid column: 24 columns make a 1200 px dashboard
ROW_PX = 40  # one grid row: the default 6-row widget is 240 px tall
GUTTER_PX = 4  # each widget is inset this much inside its cells (8 px between neighbours)
PAGE_PAD_PX = 16
HEADER_PX = 40  # page title and time window
ALARM_LINE_PX = ROW_PX  # the one line above the grid that counts the alarms by state
SECTION_GAP_PX = 8
WIDGET_TITLE_PX = 24
LEGEND_PX = 36
PLOT_LEFT_PX, PLOT_RIGHT_PX, PLOT_TOP_PX, PLOT_BOTTOM_PX = 52, 12, 10, 22
PROBLEM_LINE_PX = 18

CHROMIUM = "/usr/bin/chromium"
INSTALL_HINT = "install it with: apt-get install -y --no-install-recommends chromium"
# CloudWatch's default series palette order (category10).
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
ANNOTATION_COLOR = "#d13212"
STATE_ORDER = {"ALARM": 0, "INSUFFICIENT_DATA": 1, "OK": 2}
COUNTER_STATS = frozenset({"Sum", "SampleCount"})  # drawn as bars: a count per period
MIN_BAR_PX = 3.0  # narrower periods (long windows): counters are drawn as lines, broken at gaps
GAP_PERIODS = 1.5  # a line breaks where consecutive points are further apart than this many periods
MIN_WINDOW = timedelta(minutes=5)
ALARM_COLUMN_PX = 280  # an alarm list flows into columns this wide


@dataclass(frozen=True)
class AlarmBadge:
    """An alarm's current state, as the page shows it (the caller reads alarms; the page only draws)."""

    name: str
    state: str
    reason: str = ""
    runbook: str = ""


@dataclass(frozen=True)
class Box:
    """A rectangle in page pixels."""

    left: int
    top: int
    width: int
    height: int

    @property
    def right(self) -> int:
        return self.left + self.width

    @property
    def bottom(self) -> int:
        return self.top + self.height


@dataclass(frozen=True)
class WidgetBox:
    """Where widget `index` is drawn; `plot` is the data area of a time-series chart, else None."""

    index: int
    cell: Cell
    outer: Box
    plot: Box | None


@dataclass(frozen=True)
class Layout:
    """The page's pixel geometry, shared by the renderer and anything that inspects a screenshot."""

    width: int
    height: int
    grid_top: int
    widgets: tuple[WidgetBox, ...]


Points = Sequence[tuple[datetime, float]]
Fetch = Callable[[MetricQuery, datetime, datetime], Points]
Logs = Callable[[str], Sequence[Mapping[str, str]]]


# --- geometry -----------------------------------------------------------------------------------


def layout(body: Mapping[str, Any], *, alarm_count: int = 0) -> Layout:
    """Pixel boxes of every widget: column c starts at PAGE_PAD_PX + c*COL_PX, row r at grid_top + r*ROW_PX.

    `alarm_count` is accepted for callers of the page with a strip of alarm badges; the alarms now
    take one line whatever their number."""
    widgets = _widgets(body)
    cells = place(widgets)
    grid_top = PAGE_PAD_PX + HEADER_PX + ALARM_LINE_PX + SECTION_GAP_PX
    boxes = tuple(
        WidgetBox(index, cell, _outer(cell, grid_top), _plot_box(widget, _outer(cell, grid_top)))
        for index, (widget, cell) in enumerate(zip(widgets, cells, strict=True))
    )
    grid_rows = max((cell.bottom for cell in cells), default=0)
    width = 2 * PAGE_PAD_PX + GRID_COLUMNS * COL_PX
    height = grid_top + grid_rows * ROW_PX + _problems_height(len(problems(body))) + PAGE_PAD_PX
    return Layout(width, height, grid_top, boxes)


def _widgets(body: Mapping[str, Any]) -> list[Any]:
    widgets = body.get("widgets") if isinstance(body, Mapping) else None
    return widgets if isinstance(widgets, list) else []


def _problems_height(count: int) -> int:
    return SECTION_GAP_PX + PROBLEM_LINE_PX * (count + 1) if count else 0


def _outer(cell: Cell, grid_top: int) -> Box:
    return Box(
        PAGE_PAD_PX + cell.x * COL_PX + GUTTER_PX,
        grid_top + cell.y * ROW_PX + GUTTER_PX,
        cell.width * COL_PX - 2 * GUTTER_PX,
        cell.height * ROW_PX - 2 * GUTTER_PX,
    )


def _plot_box(widget: Any, outer: Box) -> Box | None:
    if not _is_chart(widget):
        return None
    svg = _chart_svg_size(outer)
    return Box(
        outer.left + PLOT_LEFT_PX,
        outer.top + WIDGET_TITLE_PX + PLOT_TOP_PX,
        max(svg[0] - PLOT_LEFT_PX - PLOT_RIGHT_PX, 1),
        max(svg[1] - PLOT_TOP_PX - PLOT_BOTTOM_PX, 1),
    )


def _is_chart(widget: Any) -> bool:
    if not isinstance(widget, Mapping) or widget.get("type") != "metric":
        return False
    properties = _properties(widget)
    return properties.get("view", "timeSeries") != "singleValue" and "metrics" in properties


def _chart_svg_size(outer: Box) -> tuple[int, int]:
    return outer.width, max(outer.height - WIDGET_TITLE_PX - LEGEND_PX, PLOT_TOP_PX + PLOT_BOTTOM_PX + 1)


def _properties(widget: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = widget.get("properties")
    return properties if isinstance(properties, Mapping) else {}


# --- the page -----------------------------------------------------------------------------------


def render_html(
    body: Mapping[str, Any],
    fetch: Fetch,
    *,
    start: datetime,
    end: datetime,
    alarms: Sequence[AlarmBadge] = (),
    title: str = "pipeops",
    logs: Logs | None = None,
) -> str:
    """The whole dashboard as one HTML string; the same inputs always give the same bytes.

    `fetch(query, start, end)` returns a metric's (timestamp, value) points; `logs(query)` the rows
    of a Logs Insights query (log widgets show only the query without it). Use aware UTC datetimes.
    """
    if end <= start:
        raise ValueError(f"end ({end.isoformat()}) must be after start ({start.isoformat()})")
    geometry = layout(body, alarm_count=len(alarms))
    widgets = _widgets(body)
    fetched = _prefetch(widgets, fetch, start, end)
    drawn_start = fit_start([points[0][0] for points in fetched.values() if points], start, end)
    context = _Context(lambda query, *_: fetched.get(query, ()), drawn_start, end, alarms, logs)
    parts = [
        _header(title, drawn_start, end, asked=start),
        _alarm_strip(alarms),
        *(_widget(widgets[box.index], box, context) for box in geometry.widgets),
        _problems_section(problems(body), geometry),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head>\n"
        f'<body><div class="page" style="width:{geometry.width}px;height:{geometry.height}px">\n'
        + "\n".join(part for part in parts if part)
        + "\n</div></body></html>\n"
    )


def _prefetch(
    widgets: Sequence[Any], fetch: Fetch, start: datetime, end: datetime
) -> dict[MetricQuery, list[tuple[datetime, float]]]:
    """Every drawn series once, its finite points inside [start, end], oldest first."""
    found: dict[MetricQuery, list[tuple[datetime, float]]] = {}
    for widget in widgets:
        if not isinstance(widget, Mapping) or widget.get("type") != "metric":
            continue
        properties = _properties(widget)
        try:
            queries = expand_metrics(
                _list(properties.get("metrics")),
                stat=given if isinstance(given := properties.get("stat"), str) else DEFAULT_STAT,
                period=_int_or(properties.get("period"), DEFAULT_PERIOD),
            )
        except ValueError:
            continue  # the widget says why it cannot be drawn
        for query in queries:
            if query.visible and query.expression is None and query not in found:
                found[query] = sorted(
                    (moment, float(value))
                    for moment, value in fetch(query, start, end)
                    if start <= moment <= end and math.isfinite(float(value))
                )
    return found


def fit_start(firsts: Sequence[datetime], start: datetime, end: datetime) -> datetime:
    """Where the drawn window starts: a tenth of the data's span (at least a minute) before its
    first point, never before `start`, and at least `MIN_WINDOW` before `end`. Pure."""
    if not firsts:
        return start
    first = min(firsts)
    fitted = min(first - max((end - first) / 10, timedelta(minutes=1)), end - MIN_WINDOW)
    return max(start, fitted)


@dataclass(frozen=True)
class _Context:
    fetch: Fetch
    start: datetime
    end: datetime
    alarms: Sequence[AlarmBadge]
    logs: Logs | None


_CSS = (
    "*{box-sizing:border-box}"
    "html,body{margin:0;padding:0;background:#f2f3f3;color:#16191f;"
    "font:12px/1.35 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif}"
    ".page{position:relative;overflow:hidden}"
    ".abs{position:absolute;overflow:hidden}"
    ".head{display:flex;align-items:baseline;gap:16px}"
    ".head h1{margin:0;font-size:20px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}"
    ".head .window{color:#545b64;white-space:nowrap}"
    ".badge{padding:6px 10px;border-radius:4px;color:#fff}"
    ".badge b,.badge .reason,.badge .runbook{display:block;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}"
    ".badge .reason{font-size:11px}.badge .runbook{font-size:11px;opacity:.9}"
    ".st-alarm{background:#d13212}.st-insufficient{background:#8d6605}.st-ok{background:#1d8102}"
    ".st-other{background:#545b64}"
    ".noalarms{color:#545b64;padding:10px 0}"
    ".alarmline{display:flex;align-items:center;gap:8px;white-space:nowrap}"
    ".chip{padding:4px 10px;overflow:hidden;text-overflow:ellipsis}"
    ".big{position:absolute;left:8px;right:8px;top:4px;bottom:8px;padding:8px 12px;font-size:13px}"
    ".big b{display:block;font-size:22px}.big span{display:block;white-space:nowrap;overflow:hidden;"
    "text-overflow:ellipsis}.big .reason{font-size:11px;opacity:.9}"
    ".fold{margin:4px 0 0}"
    ".w{background:#fff;box-shadow:0 0 0 1px #d5dbdb}"
    ".wt{position:absolute;left:0;top:0;right:0;height:24px;padding:4px 8px;font-weight:600;"
    "white-space:nowrap;overflow:hidden;text-overflow:ellipsis}"
    ".wb{position:absolute;left:0;right:0;top:24px;bottom:0;overflow:auto;padding:4px 8px}"
    ".chart{position:absolute;left:0;top:24px;font-size:10px}"
    ".chart text{fill:#545b64}"
    ".legend{position:absolute;left:0;right:0;bottom:0;height:36px;margin:0;padding:2px 8px;list-style:none;"
    "overflow:auto;display:flex;flex-wrap:wrap;align-content:flex-start;gap:0 12px;font-size:11px}"
    ".legend li{white-space:nowrap}"
    ".sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}"
    ".nodata{color:#687078;font-style:italic}"
    ".singles{display:flex;flex-wrap:wrap;gap:8px 24px}"
    ".single .v{font-size:24px;line-height:1.1;font-weight:300}"
    "pre{margin:0;white-space:pre-wrap;word-break:break-word;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}"
    "table{border-collapse:collapse;margin-top:6px;font-size:11px}"
    "td,th{border-bottom:1px solid #eaeded;padding:2px 6px;text-align:left;vertical-align:top}"
    ".alarmlist{margin:0;padding:0;list-style:none;column-gap:16px}.alarmlist li{margin:2px 0;"
    "white-space:nowrap;overflow:hidden;text-overflow:ellipsis;break-inside:avoid}"
    ".alarmlist .badge{display:inline-block;padding:1px 6px;margin-right:6px;font-size:11px}"
    ".problems{color:#8d6605}.problems ul{margin:0;padding-left:18px}"
    ".problems li{height:18px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}"
)


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _style(box: Box) -> str:
    return f"left:{box.left}px;top:{box.top}px;width:{box.width}px;height:{box.height}px"


def _header(title: str, start: datetime, end: datetime, *, asked: datetime | None = None) -> str:
    box = Box(PAGE_PAD_PX, PAGE_PAD_PX, GRID_COLUMNS * COL_PX, HEADER_PX)
    window = f"{_utc(start):%Y-%m-%d %H:%M} to {_utc(end):%Y-%m-%d %H:%M} UTC"
    if asked is not None and asked < start:
        window += f" (fitted to the data; asked from {_utc(asked):%H:%M})"
    return (
        f'<header class="abs head" style="{_style(box)}"><h1>{_esc(title)}</h1>'
        f'<span class="window">{_esc(window)}</span></header>'
    )


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


# --- alarms -------------------------------------------------------------------------------------


def _by_state(alarms: Sequence[AlarmBadge]) -> list[AlarmBadge]:
    """ALARM first, then INSUFFICIENT_DATA, OK, anything else; by name within a state."""
    return sorted(alarms, key=lambda alarm: (STATE_ORDER.get(alarm.state, len(STATE_ORDER)), alarm.name))


def _state_class(state: str) -> str:
    return {"ALARM": "st-alarm", "INSUFFICIENT_DATA": "st-insufficient", "OK": "st-ok"}.get(state, "st-other")


def _alarm_strip(alarms: Sequence[AlarmBadge]) -> str:
    """One line: how many alarms in each state, and the names of those in ALARM."""
    box = Box(PAGE_PAD_PX, PAGE_PAD_PX + HEADER_PX, GRID_COLUMNS * COL_PX, ALARM_LINE_PX)
    if not alarms:
        return f'<section class="abs noalarms" style="{_style(box)}">No alarm states were supplied.</section>'
    counts: dict[str, int] = {}
    for alarm in alarms:
        counts[alarm.state] = counts.get(alarm.state, 0) + 1
    chips = []
    for state in sorted(counts, key=lambda state: STATE_ORDER.get(state, len(STATE_ORDER))):
        names = ""
        if state == "ALARM":
            names = ": " + ", ".join(alarm.name for alarm in _by_state(alarms) if alarm.state == "ALARM")
        chips.append(
            f'<span class="badge chip {_state_class(state)}" data-state="{_esc(state)}">'
            f"{counts[state]} {_esc(state)}{_esc(names)}</span>"
        )
    return f'<section class="abs alarmline" style="{_style(box)}">{"".join(chips)}</section>'


def _alarm_name(arn: Any) -> str:
    text = str(arn)
    return text.split(":alarm:", 1)[1] if ":alarm:" in text else text


def _alarm_list(
    arns: Sequence[Any], properties: Mapping[str, Any], alarms: Sequence[AlarmBadge], columns: int = 1
) -> str:
    """The listed alarms' states, filtered by `states` and ordered by `sortBy` like the console; the
    alarms the filter leaves out are counted by state. One alarm alone fills the widget."""
    known = {alarm.name: alarm for alarm in alarms}
    listed = [
        known.get(_alarm_name(arn), AlarmBadge(_alarm_name(arn), "UNKNOWN", "state not supplied"))
        for arn in arns
    ]
    states = properties.get("states")
    shown = (
        [alarm for alarm in listed if alarm.state in states]
        if isinstance(states, list) and states
        else listed
    )
    if properties.get("sortBy") in ("stateUpdatedTimestamp", "timestamp"):
        shown = _by_state(shown)
    else:
        shown = sorted(shown, key=lambda alarm: alarm.name)
    folded: dict[str, int] = {}
    for alarm in listed:
        if alarm not in shown:
            folded[alarm.state] = folded.get(alarm.state, 0) + 1
    fold = ", ".join(f"{count} {state}" for state, count in sorted(folded.items()))
    fold_line = f'<p class="nodata fold">not listed: {_esc(fold)}</p>' if fold else ""
    if len(listed) == 1 and shown:
        (alarm,) = shown
        return (
            f'<div class="big badge {_state_class(alarm.state)}" data-alarm="{_esc(alarm.name)}" '
            f'data-state="{_esc(alarm.state)}"><b>{_esc(alarm.state)}</b><span>{_esc(alarm.name)}</span>'
            f'<span class="reason">{_esc(alarm.reason)}</span></div>'
        )
    if not shown:
        return f'<p class="nodata">no alarms in the selected states</p>{fold_line}'
    items = "".join(
        f'<li data-alarm="{_esc(alarm.name)}"><span class="badge {_state_class(alarm.state)}">{_esc(alarm.state)}</span>'
        f"{_esc(alarm.name)}</li>"
        for alarm in shown
    )
    return f'<ul class="alarmlist" style="columns:{max(columns, 1)}">{items}</ul>{fold_line}'


# --- widgets ------------------------------------------------------------------------------------


def _widget(widget: Any, box: WidgetBox, context: _Context) -> str:
    spec = widget if isinstance(widget, Mapping) else {}
    properties = _properties(spec)
    kind = spec.get("type")
    attributes = (
        f'class="abs w" style="{_style(box.outer)}" data-index="{box.index}" data-type="{_esc(kind)}"'
    )
    if kind == "text":
        return f'<div {attributes}><div class="wb" style="top:0"><pre>{_esc(properties.get("markdown", ""))}</pre></div></div>'
    title = f'<div class="wt">{_esc(_title(spec, properties))}</div>'
    if kind == "metric":
        inner = _metric_widget(properties, box, context)
    elif kind == "alarm":
        columns = box.outer.width // ALARM_COLUMN_PX
        inner = f'<div class="wb">{_alarm_list(_list(properties.get("alarms")), properties, context.alarms, columns)}</div>'
    elif kind == "log":
        inner = f'<div class="wb">{_log_widget(properties, context)}</div>'
    else:
        inner = f'<div class="wb nodata">widget type {_esc(repr(kind))} is not drawn offline</div>'
    return f"<div {attributes}>{title}{inner}</div>"


def _title(widget: Mapping[str, Any], properties: Mapping[str, Any]) -> str:
    title = properties.get("title")
    if isinstance(title, str) and title:
        return title
    kind = widget.get("type")
    if kind == "metric":
        try:
            names = dict.fromkeys(
                query.name or query.label for query in expand_metrics(_list(properties.get("metrics")))
            )
        except ValueError:
            names = {}
        return ", ".join(names) or "metric"
    return {"alarm": "Alarm status", "log": "Logs Insights"}.get(str(kind), str(kind or "widget"))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _log_widget(properties: Mapping[str, Any], context: _Context) -> str:
    query = str(properties.get("query", ""))
    parts = [f"<pre>{_esc(query)}</pre>"]
    if context.logs is not None and query:
        rows = list(context.logs(query))
        columns = list(dict.fromkeys(key for row in rows for key in row))
        if rows:
            head = "".join(f"<th>{_esc(column)}</th>" for column in columns)
            body = "".join(
                "<tr>" + "".join(f"<td>{_esc(row.get(column, ''))}</td>" for column in columns) + "</tr>"
                for row in rows
            )
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        else:
            parts.append('<p class="nodata">no data: the query returned no rows</p>')
    return "".join(parts)


@dataclass(frozen=True)
class _Series:
    query: MetricQuery
    color: str
    points: tuple[tuple[datetime, float], ...]


def _metric_widget(properties: Mapping[str, Any], box: WidgetBox, context: _Context) -> str:
    try:
        queries = expand_metrics(
            _list(properties.get("metrics")),
            stat=given if isinstance(given := properties.get("stat"), str) else DEFAULT_STAT,
            period=_int_or(properties.get("period"), DEFAULT_PERIOD),
        )
    except ValueError as error:
        return f'<div class="wb nodata">cannot draw: {_esc(error)}</div>'
    annotations = properties.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    if not queries and annotations.get("alarms"):
        return f'<div class="wb">{_alarm_list(_list(annotations.get("alarms")), {}, context.alarms)}</div>'
    series = _fetch_all(queries, context)
    if properties.get("view") == "singleValue" or box.plot is None:
        return _single_values(series, queries, box.index)
    return _chart(series, queries, properties, annotations, box, context)


def _int_or(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _fetch_all(queries: Sequence[MetricQuery], context: _Context) -> list[_Series]:
    """Fetch every visible plain metric, keeping finite points inside the window, oldest first."""
    series = []
    drawn = [query for query in queries if query.visible and query.expression is None]
    for position, query in enumerate(drawn):
        raw = context.fetch(query, context.start, context.end)
        points = sorted(
            (moment, float(value))
            for moment, value in raw
            if context.start <= moment <= context.end and math.isfinite(float(value))
        )
        series.append(_Series(query, query.color or PALETTE[position % len(PALETTE)], tuple(points)))
    return series


def _data_attributes(index: int, series: Sequence[_Series]) -> str:
    with_points = sum(1 for one in series if one.points)
    total = sum(len(one.points) for one in series)
    return f'data-widget="{index}" data-series="{with_points}" data-points="{total}"'


def _legend(series: Sequence[_Series], queries: Sequence[MetricQuery]) -> str:
    items = []
    for one in series:
        empty = "" if one.points else ' <span class="nodata">no data</span>'
        items.append(
            f'<li><span class="sw" style="background:{one.color}"></span>{_esc(one.query.label)}{empty}</li>'
        )
    for query in queries:
        if query.expression is not None and query.visible:
            items.append(
                f'<li>{_esc(query.label)} <span class="nodata">metric math: not computed offline</span></li>'
            )
    return f'<ul class="legend">{"".join(items)}</ul>'


def _single_values(series: Sequence[_Series], queries: Sequence[MetricQuery], index: int) -> str:
    blocks = []
    for one in series:
        value = _number(one.points[-1][1], digits=4) if one.points else '<span class="nodata">no data</span>'
        blocks.append(
            f'<div class="single"><div><span class="sw" style="background:{one.color}"></span>'
            f'{_esc(one.query.label)}</div><div class="v">{value}</div></div>'
        )
    blocks.extend(
        f'<div class="single"><div>{_esc(query.label)}</div><div class="nodata">metric math: not computed offline</div></div>'
        for query in queries
        if query.expression is not None and query.visible
    )
    content = "".join(blocks) or '<p class="nodata">no metrics</p>'
    return f'<div class="wb singles" {_data_attributes(index, series)}>{content}</div>'


# --- the time-series chart ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Scale:
    """Maps (time, value) into the plot's own pixel coordinates."""

    start: datetime
    end: datetime
    low: float
    high: float
    width: int
    height: int

    def x(self, moment: datetime) -> float:
        return (moment - self.start) / (self.end - self.start) * self.width

    def y(self, value: float) -> float:
        return self.height - (value - self.low) / (self.high - self.low) * self.height


def _chart(
    series: Sequence[_Series],
    queries: Sequence[MetricQuery],
    properties: Mapping[str, Any],
    annotations: Mapping[str, Any],
    box: WidgetBox,
    context: _Context,
) -> str:
    assert box.plot is not None
    width, height = _chart_svg_size(box.outer)
    horizontal = _horizontal_annotations(annotations)
    ticks = _value_ticks(series, horizontal, properties.get("yAxis"))
    scale = _Scale(context.start, context.end, ticks[0], ticks[-1], box.plot.width, box.plot.height)
    parts = [
        *_y_axis(ticks, scale),
        *_time_axis(scale),
        # The plot area, clipped so a yAxis min/max override cannot draw over the axes.
        f'<clipPath id="plot-{box.index}"><rect width="{scale.width}" height="{scale.height}"/></clipPath>',
        f'<g class="plot" transform="translate({PLOT_LEFT_PX} {PLOT_TOP_PX})" clip-path="url(#plot-{box.index})">',
        *_bands(horizontal, scale),
        *_vertical_annotations(annotations, scale),
        *_series_marks(series, scale),
        *_annotation_lines(horizontal, scale),
        "</g>",
    ]
    if not any(one.points for one in series):
        parts.append(
            f'<text x="{PLOT_LEFT_PX + scale.width / 2:.1f}" y="{PLOT_TOP_PX + scale.height / 2:.1f}" '
            'text-anchor="middle" font-size="14" class="nodata">no data</text>'
        )
    note = properties.get("view", "timeSeries")
    if note != "timeSeries":
        parts.append(
            f'<text x="{width - PLOT_RIGHT_PX}" y="9" text-anchor="end">{_esc(note)} view drawn as lines</text>'
        )
    svg = (
        f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'{_data_attributes(box.index, series)} role="img">' + "".join(parts) + "</svg>"
    )
    return svg + _legend(series, queries)


def _series_marks(series: Sequence[_Series], scale: _Scale) -> list[str]:
    """Counters as bars (side by side within a period when several share a chart) while a period is
    at least MIN_BAR_PX wide; the rest, and counters over long windows, as lines."""
    counters = [
        one
        for one in series
        if one.points and one.query.stat in COUNTER_STATS and _bar_px(one, scale) >= MIN_BAR_PX
    ]
    marks = [_bars(one, scale, counters.index(one), len(counters)) for one in counters]
    marks += [_lines(one, scale) for one in series if one.points and one not in counters]
    return marks


def _bar_px(one: _Series, scale: _Scale) -> float:
    return scale.width * one.query.period / max((scale.end - scale.start).total_seconds(), 1.0)


def _bars(one: _Series, scale: _Scale, slot: int, slots: int) -> str:
    """One bar per datapoint, spanning its period (a datapoint's time is its period's start); a zero
    is a thin bar on the baseline, so a counter that was read as 0 differs from one with no data."""
    period = timedelta(seconds=one.query.period)
    base = scale.y(max(scale.low, 0.0))
    rects = []
    for moment, value in one.points:
        left, right = scale.x(moment), min(scale.x(moment + period), float(scale.width))
        width = max(right - left, 2.0) / slots
        top = min(scale.y(value), base - 1.5)
        rects.append(
            f'<rect x="{left + slot * width:.1f}" y="{top:.1f}" width="{max(width - 0.5, 1.0):.1f}" '
            f'height="{max(base - top, 1.5):.1f}"/>'
        )
    return (
        f'<g class="series bars" data-label="{_esc(one.query.label)}" fill="{one.color}">'
        + "".join(rects)
        + "</g>"
    )


def _lines(one: _Series, scale: _Scale) -> str:
    """A line through consecutive periods, broken where periods are missing; a lone point is a dot."""
    gap = timedelta(seconds=one.query.period * GAP_PERIODS)
    runs: list[list[tuple[datetime, float]]] = []
    for point in one.points:
        if runs and point[0] - runs[-1][-1][0] <= gap:
            runs[-1].append(point)
        else:
            runs.append([point])
    parts = []
    for run in runs:
        if len(run) == 1:
            moment, value = run[0]
            parts.append(
                f'<circle cx="{scale.x(moment):.1f}" cy="{scale.y(value):.1f}" r="3" fill="{one.color}"/>'
            )
            continue
        coords = " ".join(f"{scale.x(moment):.1f},{scale.y(value):.1f}" for moment, value in run)
        parts.append(
            f'<polyline class="series" data-label="{_esc(one.query.label)}" points="{coords}" fill="none" '
            f'stroke="{one.color}" stroke-width="2" stroke-linejoin="round" stroke-linecap="round"/>'
        )
    return "".join(parts)


@dataclass(frozen=True)
class _Annotation:
    value: float
    label: str
    color: str
    fill: str | None
    band_to: float | None = None


def _horizontal_annotations(annotations: Mapping[str, Any]) -> list[_Annotation]:
    """Visible horizontal annotations; a two-element array is a band between its two values."""
    found = []
    for item in _list(annotations.get("horizontal")):
        ends = item if isinstance(item, list) else [item]
        if not ends or not all(isinstance(end, Mapping) and _is_number(end.get("value")) for end in ends):
            continue
        first = ends[0]
        if first.get("visible", True) is False:
            continue
        label = first.get("label")
        found.append(
            _Annotation(
                value=float(first["value"]),
                label=str(label) if label else _number(float(first["value"]), digits=4),
                color=safe_color(first.get("color")) or ANNOTATION_COLOR,
                fill=first.get("fill") if first.get("fill") in ("above", "below") else None,
                band_to=float(ends[1]["value"]) if len(ends) > 1 else None,
            )
        )
    return found


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _annotation_lines(horizontal: Sequence[_Annotation], scale: _Scale) -> list[str]:
    lines = []
    for note in horizontal:
        for value in (note.value,) if note.band_to is None else (note.value, note.band_to):
            y = scale.y(value)
            lines.append(
                f'<line class="annotation" x1="0" x2="{scale.width}" y1="{y:.1f}" y2="{y:.1f}" '
                f'stroke="{note.color}" stroke-width="1.5" stroke-dasharray="6 4"/>'
            )
        label_y = max(scale.y(max(note.value, note.band_to or note.value)) - 3, 10)
        lines.append(
            f'<text x="{scale.width - 4}" y="{label_y:.1f}" text-anchor="end" style="fill:{note.color}">'
            f"{_esc(note.label)}</text>"
        )
    return lines


def _bands(horizontal: Sequence[_Annotation], scale: _Scale) -> list[str]:
    """Shading for bands and `fill: above/below`, drawn under the series."""
    shapes = []
    for note in horizontal:
        if note.band_to is not None:
            edges = (scale.y(note.value), scale.y(note.band_to))
        elif note.fill == "above":
            edges = (0.0, scale.y(note.value))
        elif note.fill == "below":
            edges = (scale.y(note.value), float(scale.height))
        else:
            continue
        top, bottom = min(edges), max(edges)
        shapes.append(
            f'<rect x="0" y="{top:.1f}" width="{scale.width}" height="{bottom - top:.1f}" '
            f'fill="{note.color}" fill-opacity="0.12"/>'
        )
    return shapes


def _vertical_annotations(annotations: Mapping[str, Any], scale: _Scale) -> list[str]:
    """Dashed vertical lines at ISO-8601 `value` timestamps inside the window."""
    lines = []
    for item in _list(annotations.get("vertical")):
        first = item[0] if isinstance(item, list) and item else item
        if not isinstance(first, Mapping) or first.get("visible", True) is False:
            continue
        try:
            moment = _utc(datetime.fromisoformat(str(first.get("value"))))
        except ValueError:
            continue
        if not _utc(scale.start) <= moment <= _utc(scale.end):
            continue
        x = (moment - _utc(scale.start)) / (_utc(scale.end) - _utc(scale.start)) * scale.width
        color = safe_color(first.get("color")) or ANNOTATION_COLOR
        lines.append(
            f'<line class="annotation" x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{scale.height}" stroke="{color}" '
            f'stroke-width="1.5" stroke-dasharray="6 4"/>'
            f'<text x="{x + 3:.1f}" y="10" style="fill:{color}">{_esc(first.get("label", ""))}</text>'
        )
    return lines


def _value_ticks(series: Sequence[_Series], horizontal: Sequence[_Annotation], y_axis: Any) -> list[float]:
    """Round y-axis ticks covering every point and threshold; from zero for non-negative data."""
    values = [value for one in series for _, value in one.points]
    values += [note.value for note in horizontal] + [
        note.band_to for note in horizontal if note.band_to is not None
    ]
    left = y_axis.get("left") if isinstance(y_axis, Mapping) else None
    left = left if isinstance(left, Mapping) else {}
    low = min(values, default=0.0)
    high = max(values, default=1.0)
    low = min(low, 0.0)
    if _is_number(left.get("min")):
        low = float(left["min"])
    if _is_number(left.get("max")):
        high = float(left["max"])
    return _nice_ticks(low, high)


def _nice_ticks(low: float, high: float, target: int = 5) -> list[float]:
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step + 1e-9) * step
    count = math.ceil((high - first) / step - 1e-9)
    return [float(f"{first + i * step:.12g}") for i in range(count + 1)]  # no 0.30000000000000004


def _y_axis(ticks: Sequence[float], scale: _Scale) -> list[str]:
    parts = []
    for tick in ticks:
        y = PLOT_TOP_PX + scale.y(tick)
        parts.append(
            f'<line x1="{PLOT_LEFT_PX}" x2="{PLOT_LEFT_PX + scale.width}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#eaeded" stroke-width="1"/>'
            f'<text x="{PLOT_LEFT_PX - 6}" y="{y + 3:.1f}" text-anchor="end">{_number(tick)}</text>'
        )
    return parts


_TIME_STEPS = tuple(
    timedelta(seconds=s)
    for s in (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)
)


def _time_axis(scale: _Scale) -> list[str]:
    """Ticks on round UTC times, as many as fit without labels colliding (at most 6).

    The date appears when the window spans days; at a step of a day or more it is all there is.
    """
    start, end = _utc(scale.start), _utc(scale.end)
    span = end - start
    room = max(min(6, scale.width // _label_px("%m-%d")), 1)
    longest = _TIME_STEPS[-1] * math.ceil(span / _TIME_STEPS[-1] / room)  # weeks, for long windows
    step, pattern = next(
        (
            (step, pattern)
            for step, pattern in _time_steps(span)
            if span / step <= min(6, scale.width // _label_px(pattern))
        ),
        (longest, "%m-%d"),
    )
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    tick = epoch + math.ceil((start - epoch) / step) * step
    baseline = PLOT_TOP_PX + scale.height
    parts = [
        f'<line x1="{PLOT_LEFT_PX}" x2="{PLOT_LEFT_PX + scale.width}" y1="{baseline}" y2="{baseline}" '
        'stroke="#879596" stroke-width="1"/>'
    ]
    while tick <= end:
        x = PLOT_LEFT_PX + (tick - start) / span * scale.width
        anchor = "end" if x > PLOT_LEFT_PX + scale.width - 20 else "middle"  # keep the last label inside
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{baseline}" y2="{baseline + 4}" stroke="#879596"/>'
            f'<text x="{x:.1f}" y="{baseline + 15}" text-anchor="{anchor}">{tick:{pattern}}</text>'
        )
        tick += step
    return parts


def _time_steps(span: timedelta) -> list[tuple[timedelta, str]]:
    """Each candidate tick step with the label format it would use."""
    within_day = "%H:%M" if span <= timedelta(days=1) else "%m-%d %H:%M"
    return [(step, "%m-%d" if step >= timedelta(days=1) else within_day) for step in _TIME_STEPS]


def _label_px(pattern: str) -> int:
    """Room for one time label at 10 px: about 6 px a character, plus a gap."""
    return len(f"{datetime(2024, 12, 31, 23, 59):{pattern}}") * 6 + 12


def _number(value: float, digits: int = 3) -> str:
    """Compact and deterministic: 1500 → 1.5k, 0.25 → 0.25, 2e9 → 2G."""
    magnitude = abs(value)
    for divisor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= divisor:
            return f"{value / divisor:.{digits}g}{suffix}"
    return f"{value:.{digits}g}"


def _problems_section(found: Sequence[str], geometry: Layout) -> str:
    if not found:
        return ""
    height = _problems_height(len(found)) - SECTION_GAP_PX
    top = geometry.height - PAGE_PAD_PX - height
    box = Box(PAGE_PAD_PX, top, GRID_COLUMNS * COL_PX, height)
    items = "".join(f"<li>{_esc(problem)}</li>" for problem in found)
    return (
        f'<section class="abs problems" style="{_style(box)}">'
        f"<b>This dashboard body breaks CloudWatch limits:</b><ul>{items}</ul></section>"
    )


# --- screenshots --------------------------------------------------------------------------------


class ChromiumMissing(RuntimeError):
    """Chromium is needed for screenshots and is not installed."""


def screenshot(
    html_path: str | Path,
    png_path: str | Path,
    width: int,
    height: int,
    *,
    chromium: str = CHROMIUM,
    timeout: float = 120,
) -> Path:
    """Take a `width`x`height` PNG of a rendered page with headless Chromium (no network, no GPU)."""
    if not Path(chromium).exists():
        raise ChromiumMissing(f"screenshots need Chromium at {chromium}; {INSTALL_HINT}")
    page = Path(html_path).resolve()
    target = Path(png_path).resolve()
    target.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="pipeops-chromium-") as profile:
        command = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", "--force-device-scale-factor=1", f"--user-data-dir={profile}",
            "--hide-scrollbars", f"--window-size={width},{height}", f"--screenshot={target}", page.as_uri(),
        ]  # fmt: skip
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as error:
            raise RuntimeError(f"Chromium took more than {timeout:.0f} s to screenshot {page}") from error
    if result.returncode != 0 or not target.exists():
        tail = "\n".join(result.stderr.splitlines()[-10:])
        raise RuntimeError(f"Chromium failed to screenshot {page} (exit {result.returncode}):\n{tail}")
    return target
