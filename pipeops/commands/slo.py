"""`pipeops slo`: the on-time objective per window, the budget left and the time to exhaustion."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from pipeops import render
from pipeops.commands.common import (
    EndpointOption,
    JsonOption,
    ProfileOption,
    RegionOption,
    StackOption,
    connect,
    fail,
)

if TYPE_CHECKING:
    from pipeops.slo import SloReport


def slo(
    target: Annotated[
        str | None, typer.Option(help="The objective in percent (default: the stack's SloTarget parameter).")
    ] = None,
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """The on-time objective: the bad share and burn rate over each alarm window, the error budget
    left over 28 days, and the time until it is gone at the current burn (from CloudWatch). Exit 0
    whatever the burn (a firing pair is an alarm: `pipeops alarms list` exits 1 on it); 2 on an
    error, such as a target the alarms cannot work at."""
    from pipeops.slo import stack_slo_report

    connection, resources = connect(stack_name, endpoint_url, region, profile)
    try:
        report = stack_slo_report(connection, resources, target, datetime.now(UTC))
    except ValueError as exc:
        raise fail(str(exc)) from None
    if as_json:
        render.emit_json("slo", report.to_dict())
    else:
        render.console.print(slo_table(report))


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _hours(value: float | None) -> str:
    if value is None:
        return "never"
    return f"{value / 24:.1f} d" if value >= 48 else f"{value:.1f} h"


def slo_table(report: SloReport) -> Table:
    """One row per window, the budget and the pairs in the caption."""
    table = Table(
        title=f"On time: {report.target}% of files over {report.budget_days} days; budget left "
        f"{report.budget_remaining:.1%} ({report.bad:g} bad of {report.good + report.bad:g} files), gone in "
        f"{_hours(report.exhaustion_hours)} at the 1h burn"
    )
    for column in ("window", "on time", "bad", "bad share", "burn rate", "budget gone in"):
        table.add_column(column, justify="right")
    for window in report.windows:
        share = "-" if window.bad_share is None else f"{window.bad_share:.2%}"
        table.add_row(window.window, f"{window.good:g}", f"{window.bad:g}", share, _number(window.burn_rate),
                      _hours(window.exhaustion_hours))
    firing = [f"{pair.name} ({pair.severity}, {pair.burn_rate:g}x)" for pair in report.pairs if pair.firing]
    table.caption = f"burning past a pair's rate in both its windows: {', '.join(firing) or 'none'}"
    return table
