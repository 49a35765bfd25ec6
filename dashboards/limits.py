"""CloudWatch's documented dashboard-body limits, checked offline.

PutDashboard rejects a body that breaks these, and the console silently stacks overlapping widgets;
checking here turns both into a unit-test failure instead of a failed deploy or a hidden graph.
The grid geometry (`Cell`, `place`) lives here too, so the checker and the renderer agree on where
every widget is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dashboards.metric_rows import expand_metrics

GRID_COLUMNS = 24
MAX_WIDGETS = 500
MAX_METRICS_PER_WIDGET = 500
MAX_ALARMS_PER_WIDGET = 100
MAX_HEIGHT = 1000
DEFAULT_WIDTH = 6
DEFAULT_HEIGHT = 6
WIDGET_TYPES = frozenset({"metric", "text", "log", "alarm", "explorer", "custom"})
METRIC_VIEWS = frozenset({"timeSeries", "singleValue", "gauge", "bar", "pie"})
# Periods CloudWatch accepts: high-resolution 1/5/10/30 s, otherwise a multiple of 60 s.
HIGH_RESOLUTION_PERIODS = frozenset({1, 5, 10, 30})


@dataclass(frozen=True)
class Cell:
    """A widget's rectangle on the 24-column grid, in grid units."""

    x: int
    y: int
    width: int
    height: int

    @property
    def right(self) -> int:
        return self.x + self.width

    @property
    def bottom(self) -> int:
        return self.y + self.height

    def overlaps(self, other: Cell) -> bool:
        return (
            self.x < other.right and other.x < self.right and self.y < other.bottom and other.y < self.bottom
        )


def problems(body: Mapping[str, Any]) -> list[str]:
    """Every way `body` breaks CloudWatch's documented limits; empty when PutDashboard would accept it."""
    if not isinstance(body, Mapping):
        return ["the dashboard body must be a JSON object"]
    widgets = body.get("widgets")
    if not isinstance(widgets, list):
        return ["the dashboard body needs a 'widgets' array (it may be empty)"]
    found: list[str] = []
    if len(widgets) > MAX_WIDGETS:
        found.append(f"{len(widgets)} widgets: a dashboard holds at most {MAX_WIDGETS}")
    for index, widget in enumerate(widgets):
        found.extend(_widget_problems(index, widget))
    found.extend(_overlaps(widgets))
    return found


def place(widgets: Sequence[Any]) -> list[Cell]:
    """Each widget's cell: its own x/y/width/height, or the next free place when x or y is omitted.

    Out-of-range sizes are clamped, so a body with problems still lays out (the renderer shows the
    problems rather than refusing to draw the dashboard an on-call engineer needs).
    """
    cells: list[Cell | None] = [None] * len(widgets)
    occupied = _Occupancy()
    pending: list[int] = []
    for index, widget in enumerate(widgets):
        spec = widget if isinstance(widget, Mapping) else {}
        width, height = _size(spec)
        x, y = _int(spec.get("x")), _int(spec.get("y"))
        if x is not None and y is not None:
            cell = Cell(min(max(x, 0), GRID_COLUMNS - width), max(y, 0), width, height)
            cells[index] = cell
            occupied.add(cell)
        else:
            pending.append(index)
    cursor = (0, 0)
    for index in pending:
        spec = widgets[index] if isinstance(widgets[index], Mapping) else {}
        width, height = _size(spec)
        x = _int(spec.get("x"))
        column = None if x is None else min(max(x, 0), GRID_COLUMNS - width)
        cell = occupied.first_fit(width, height, column, cursor)
        cells[index] = cell
        occupied.add(cell)
        cursor = (cell.right, cell.y)
    return [cell for cell in cells if cell is not None]


class _Occupancy:
    """Taken grid cells as one 24-bit mask per row, so first-fit placement stays cheap."""

    def __init__(self) -> None:
        self._rows: dict[int, int] = {}

    def add(self, cell: Cell) -> None:
        mask = ((1 << cell.width) - 1) << cell.x
        for row in range(cell.y, cell.bottom):
            self._rows[row] = self._rows.get(row, 0) | mask

    def free(self, x: int, y: int, width: int, height: int) -> bool:
        mask = ((1 << width) - 1) << x
        return all(not self._rows.get(row, 0) & mask for row in range(y, y + height))

    def first_fit(self, width: int, height: int, column: int | None, cursor: tuple[int, int]) -> Cell:
        """The first free spot in reading order from `cursor` (CloudWatch's "next available position")."""
        start_x, y = cursor
        while True:
            columns = [column] if column is not None else range(GRID_COLUMNS - width + 1)
            for x in columns:
                if x >= start_x and self.free(x, y, width, height):
                    return Cell(x, y, width, height)
            start_x, y = 0, y + 1


def _size(spec: Mapping[str, Any]) -> tuple[int, int]:
    width = _int(spec.get("width"))
    height = _int(spec.get("height"))
    width = DEFAULT_WIDTH if width is None else min(max(width, 1), GRID_COLUMNS)
    height = DEFAULT_HEIGHT if height is None else min(max(height, 1), MAX_HEIGHT)
    return width, height


def _int(value: Any) -> int | None:
    """An integer grid value, or None (JSON true/false are not numbers here)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _name(index: int, widget: Any) -> str:
    properties = widget.get("properties") if isinstance(widget, Mapping) else None
    title = properties.get("title") if isinstance(properties, Mapping) else None
    return f"widget {index}" + (f" ({title!r})" if isinstance(title, str) and title else "")


def _widget_problems(index: int, widget: Any) -> list[str]:
    name = _name(index, widget)
    if not isinstance(widget, Mapping):
        return [f"{name}: a widget must be a JSON object"]
    found = [f"{name}: {problem}" for problem in _geometry_problems(widget)]
    kind = widget.get("type")
    if kind not in WIDGET_TYPES:
        found.append(f"{name}: 'type' must be one of {sorted(WIDGET_TYPES)}, not {kind!r}")
    properties = widget.get("properties")
    if not isinstance(properties, Mapping):
        found.append(f"{name}: 'properties' is required and must be an object")
        return found
    checks = {
        "metric": _metric_problems,
        "text": _text_problems,
        "alarm": _alarm_problems,
        "log": _log_problems,
    }
    check = checks.get(kind) if isinstance(kind, str) else None
    if check is not None:
        found.extend(f"{name}: {problem}" for problem in check(properties))
    return found


def _geometry_problems(widget: Mapping[str, Any]) -> list[str]:
    found = []
    for key in ("x", "y", "width", "height"):
        if key in widget and _int(widget[key]) is None:
            found.append(f"'{key}' must be an integer, not {widget[key]!r}")
    x, y = _int(widget.get("x")), _int(widget.get("y"))
    width, height = _int(widget.get("width")), _int(widget.get("height"))
    if "y" in widget and "x" not in widget:
        found.append("'x' is required when 'y' is given")
    if x is not None and not 0 <= x < GRID_COLUMNS:
        found.append(f"x={x} is off the {GRID_COLUMNS}-column grid (0..{GRID_COLUMNS - 1})")
    if y is not None and y < 0:
        found.append(f"y={y} is negative")
    if width is not None and not 1 <= width <= GRID_COLUMNS:
        found.append(f"width={width} must be 1..{GRID_COLUMNS}")
    if height is not None and not 1 <= height <= MAX_HEIGHT:
        found.append(f"height={height} must be 1..{MAX_HEIGHT}")
    effective_width = DEFAULT_WIDTH if width is None else width
    if (
        x is not None
        and 0 <= x < GRID_COLUMNS
        and 1 <= effective_width <= GRID_COLUMNS
        and x + effective_width > GRID_COLUMNS
    ):
        found.append(f"x + width = {x + effective_width} runs past the {GRID_COLUMNS}-column grid")
    return found


def _metric_problems(properties: Mapping[str, Any]) -> list[str]:
    found = []
    annotations = properties.get("annotations")
    alarm_graph = isinstance(annotations, Mapping) and bool(annotations.get("alarms"))
    metrics = properties.get("metrics")
    if metrics is None and not alarm_graph:
        found.append("'metrics' is required for a metric widget")
    elif metrics is not None and not isinstance(metrics, list):
        found.append("'metrics' must be an array of arrays")
    elif metrics is not None:
        if len(metrics) > MAX_METRICS_PER_WIDGET:
            found.append(f"{len(metrics)} metrics: a metric widget holds at most {MAX_METRICS_PER_WIDGET}")
        try:
            expand_metrics(metrics)
        except ValueError as error:
            found.append(str(error))
    if not isinstance(properties.get("region"), str) or not properties.get("region"):
        found.append("'region' is required for a metric widget")
    view = properties.get("view", "timeSeries")
    if view not in METRIC_VIEWS:
        found.append(f"'view' must be one of {sorted(METRIC_VIEWS)}, not {view!r}")
    if "period" in properties:
        found.extend(_period_problems(properties["period"]))
    if "stat" in properties and not isinstance(properties["stat"], str):
        found.append(f"'stat' must be a string, not {properties['stat']!r}")
    found.extend(_annotation_problems(annotations))
    return found


def _period_problems(period: Any) -> list[str]:
    value = _int(period)
    if value is None or value <= 0 or (value not in HIGH_RESOLUTION_PERIODS and value % 60):
        return [f"period={period!r} must be 1, 5, 10, 30 or a multiple of 60 seconds"]
    return []


def _annotation_problems(annotations: Any) -> list[str]:
    if annotations is None:
        return []
    if not isinstance(annotations, Mapping):
        return ["'annotations' must be an object"]
    found = []
    for item in annotations.get("horizontal", []) or []:
        ends = item if isinstance(item, list) else [item]
        for end in ends:
            value = end.get("value") if isinstance(end, Mapping) else None
            if isinstance(value, bool) or not isinstance(value, int | float):
                found.append(f"horizontal annotation {item!r} needs a numeric 'value'")
                break
    return found


def _text_problems(properties: Mapping[str, Any]) -> list[str]:
    return [] if isinstance(properties.get("markdown"), str) else ["'markdown' is required for a text widget"]


def _alarm_problems(properties: Mapping[str, Any]) -> list[str]:
    alarms = properties.get("alarms")
    if not isinstance(alarms, list) or not alarms:
        return ["'alarms' (an array of alarm ARNs) is required for an alarm widget"]
    found = []
    if len(alarms) > MAX_ALARMS_PER_WIDGET:
        found.append(f"{len(alarms)} alarms: an alarm widget holds at most {MAX_ALARMS_PER_WIDGET}")
    found.extend(f"{arn!r} is not an alarm ARN" for arn in alarms if not _is_alarm_arn(arn))
    return found


def _log_problems(properties: Mapping[str, Any]) -> list[str]:
    found = []
    if not isinstance(properties.get("query"), str) or not properties.get("query"):
        found.append("'query' (a Logs Insights query) is required for a log widget")
    if not isinstance(properties.get("region"), str) or not properties.get("region"):
        found.append("'region' is required for a log widget")
    return found


def _is_alarm_arn(arn: Any) -> bool:
    return isinstance(arn, str) and arn.startswith("arn:") and ":alarm:" in arn


def _overlaps(widgets: list[Any]) -> list[str]:
    cells = place(widgets)
    found = []
    for first in range(len(cells)):
        for second in range(first + 1, len(cells)):
            if cells[first].overlaps(cells[second]):
                a, b = cells[first], cells[second]
                found.append(
                    f"widgets {first} and {second} overlap: "
                    f"({a.x},{a.y} {a.width}x{a.height}) and ({b.x},{b.y} {b.width}x{b.height})"
                )
    return found
