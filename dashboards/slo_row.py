"""The operations dashboard's objectives row, from the objectives (`alarms.slos`).

One single-value widget per window of the burn-rate policy, and one for the 28-day budget. Each
widget has its own time range (`start`, `setPeriodToTimeRange`), so it shows the window exactly as
the alarms and `pipeops slo` read it, the last hour or the last 28 days up to now, whatever range
the dashboard shows. The burn rate and the budget are metric math over the indicator counts with
the deployed `SloTarget` (a template parameter, substituted by Fn::Sub).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alarms.slo_alarms import emitters, indicator_metric
from alarms.slos import BUDGET_DAYS, DAY_SECONDS, TARGET_PARAMETER, WINDOWS, Indicator, window_label

BUDGET_SECONDS = BUDGET_DAYS * DAY_SECONDS
SECTION = (
    f"## Objectives: files done within FileDeadlineMinutes, target ${{{TARGET_PARAMETER}}}% over {BUDGET_DAYS} days "
    "(burn rate: 1 = the budget lasts the 28 days; pages at 14.4 over 1 h, 6 over 6 h)"
)
BUDGET_TITLE = f"Error budget left, last {BUDGET_DAYS} days"
_ALLOWED = f"(1 - ${{{TARGET_PARAMETER}}} / 100)"  # the error budget's share of the files


def relative_start(seconds: int) -> str:
    """The widget's `start`, the window before now: -P28D, -PT6H, -PT5M."""
    if seconds % DAY_SECONDS == 0:
        return f"-P{seconds // DAY_SECONDS}D"
    if seconds % 3_600 == 0:
        return f"-PT{seconds // 3_600}H"
    return f"-PT{seconds // 60}M"


def burn_title(seconds: int) -> str:
    return f"Burn rate, last {window_label(seconds)}"


def _counts(seconds: int) -> list[list[Any]]:
    """good, missed, overdue (hidden), each the sum over its emitters, then bad, total and share."""
    rows: list[list[Any]] = []
    for indicator, query_id in ((Indicator.ON_TIME, "good"), (Indicator.MISSED, "missed"), (Indicator.OVERDUE, "overdue")):
        parts = []
        for number, emitter in enumerate(emitters(indicator), 1):
            watched = indicator_metric(indicator, emitter)
            flat = [
                part
                for name, value in watched.dimensions
                for part in (name, value if isinstance(value, str) else "${" + str(value["Ref"]) + "}")
            ]
            part_id = f"{query_id}{number}"
            parts.append(part_id)
            rows.append(
                [watched.namespace, watched.name, *flat, {"stat": "Sum", "period": seconds, "id": part_id, "visible": False}]
            )
        summed = ", ".join(f"FILL({part}, 0)" for part in parts)
        rows.append([{"expression": f"SUM([{summed}])", "id": query_id, "visible": False}])
    # SUM adds the members that have a value (alarms/slo_alarms.py BAD_EXPRESSION says why).
    rows.append([{"expression": "SUM([missed, overdue])", "id": "bad", "visible": False}])
    rows.append([{"expression": "SUM([good, bad])", "id": "total", "visible": False}])
    rows.append([{"expression": "bad / total", "id": "share", "label": "bad share of the files due"}])
    return rows


@dataclass(frozen=True)
class Tile:
    """One single-value widget over the last `seconds`."""

    title: str
    seconds: int
    result: dict[str, Any]  # the expression row that gives the headline number

    def widget(self, x: int, y: int, width: int, height: int, region: str) -> dict[str, Any]:
        return {
            "type": "metric",
            "x": x,
            "y": y,
            "width": width,
            "height": height,
            "properties": {
                "title": self.title,
                "view": "singleValue",
                "region": region,
                "period": self.seconds,
                "start": relative_start(self.seconds),
                "setPeriodToTimeRange": True,
                "metrics": [*_counts(self.seconds), [self.result]],
            },
        }


def tiles() -> list[Tile]:
    """The budget first, then one burn rate per window, longest first."""
    budget = Tile(
        BUDGET_TITLE,
        BUDGET_SECONDS,
        {"expression": f"1 - share / {_ALLOWED}", "id": "budget", "label": "share of the budget left"},
    )
    burns = [
        Tile(burn_title(seconds), seconds, {"expression": f"share / {_ALLOWED}", "id": "burn", "label": "burn rate"})
        for seconds in sorted(WINDOWS, reverse=True)
    ]
    return [budget, *burns]
