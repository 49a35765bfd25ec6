"""CloudWatch's compact `metrics` rows of a dashboard widget, expanded into explicit queries.

Its own module because both the offline limit checks (dashboards/limits.py: a body whose rows do
not parse is a problem) and the renderer (dashboards/render.py: what to fetch and draw) read the
rows, and the renderer builds on the limits' grid: with the syntax here, each imports it, and
neither imports the other's caller.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_STAT = "Average"
DEFAULT_PERIOD = 300
_HEX_COLOR = re.compile(r"#(?:[0-9a-fA-F]{3}){1,2}")


@dataclass(frozen=True)
class MetricQuery:
    """One expanded row of a metric widget: what to fetch and how to draw it. Hashable, to memoize on."""

    namespace: str
    name: str
    dimensions: tuple[tuple[str, str], ...] = ()
    stat: str = DEFAULT_STAT
    period: int = DEFAULT_PERIOD
    label: str = ""
    color: str | None = None
    visible: bool = True
    expression: str | None = None  # metric math: listed, never computed offline
    id: str | None = None


def expand_metrics(
    rows: Sequence[Any], *, stat: str = DEFAULT_STAT, period: int = DEFAULT_PERIOD
) -> list[MetricQuery]:
    """Expand CloudWatch's compact `metrics` rows into explicit queries.

    A row is `[namespace, name, dimName, dimValue, ..., {options}]`; `"."` repeats the value at
    the same position in the previous row, and a leading `"..."` (the console's form) repeats all
    of the previous row but the trailing values given. Options (`stat`, `period`, `label`,
    `color`, `visible`, `id`) override the widget's `stat`/`period`. A row that is only
    `{"expression": ...}` is metric math. Raises ValueError naming the bad row.
    """
    queries: list[MetricQuery] = []
    previous: list[str] | None = None
    for number, row in enumerate(rows):
        if not isinstance(row, list) or not row:
            raise ValueError(f"metrics row {number}: must be a non-empty array, not {row!r}")
        *values, last = row
        options = last if isinstance(last, Mapping) else {}
        if not isinstance(last, Mapping):
            values.append(last)
        if any(isinstance(value, Mapping) for value in values):
            raise ValueError(f"metrics row {number}: only the last element may be an options object")
        defaults = (_row_stat(options, stat, number), _row_period(options, period, number))
        if not values and "expression" in options:
            queries.append(_expression(options, *defaults))
            continue
        previous = _resolve(values, previous, number)
        queries.append(_query(previous, options, *defaults))
    return queries


def _resolve(values: list[Any], previous: list[str] | None, number: int) -> list[str]:
    """Replace the `"."`/`"..."` shorthands with the previous row's values."""
    if values[:1] == ["..."]:
        if previous is None or len(values) - 1 > len(previous):
            raise ValueError(f"metrics row {number}: '...' needs a longer previous metric row")
        values = previous[: len(previous) - (len(values) - 1)] + values[1:]
    resolved = []
    for position, value in enumerate(values):
        if value == ".":
            if previous is None or position >= len(previous):
                raise ValueError(f"metrics row {number}: '.' at position {position} has no previous value")
            value = previous[position]
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"metrics row {number}: {value!r} is not a name or value")
        resolved.append(str(value))
    if len(resolved) < 2 or len(resolved) % 2:
        raise ValueError(
            f"metrics row {number}: needs namespace, metric name and name/value dimension pairs, got {resolved!r}"
        )
    return resolved


def _query(values: list[str], options: Mapping[str, Any], stat: str, period: int) -> MetricQuery:
    namespace, name, *flat = values
    dimensions = tuple(zip(flat[::2], flat[1::2], strict=True))
    default_label = name + (f" {' '.join(value for _, value in dimensions)}" if dimensions else "")
    return MetricQuery(
        namespace=namespace,
        name=name,
        dimensions=dimensions,
        stat=stat,
        period=period,
        label=str(options.get("label") or default_label),
        color=safe_color(options.get("color")),
        visible=options.get("visible", True) is not False,
        id=_optional_str(options.get("id")),
    )


def _expression(options: Mapping[str, Any], stat: str, period: int) -> MetricQuery:
    expression = str(options["expression"])
    return MetricQuery(
        namespace="",
        name="",
        stat=stat,
        period=period,
        label=str(options.get("label") or expression),
        color=safe_color(options.get("color")),
        visible=options.get("visible", True) is not False,
        expression=expression,
        id=_optional_str(options.get("id")),
    )


def _row_stat(options: Mapping[str, Any], default: str, number: int) -> str:
    value = options.get("stat", default)
    if not isinstance(value, str) or not value:
        raise ValueError(f"metrics row {number}: stat must be a string, not {value!r}")
    return value


def _row_period(options: Mapping[str, Any], default: int, number: int) -> int:
    value = options.get("period", default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"metrics row {number}: period must be a positive integer, not {value!r}")
    return value


def safe_color(value: Any) -> str | None:
    """A `#rgb`/`#rrggbb` colour, or None: anything else could smuggle CSS into an attribute."""
    return value if isinstance(value, str) and _HEX_COLOR.fullmatch(value) else None


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
