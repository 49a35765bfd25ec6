"""`pipeops gameday`: every known fault on a fresh sandbox, with detection, notification and repair measured."""

from __future__ import annotations

from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from pipeops import render
from pipeops.commands.common import JsonOption, fail

if TYPE_CHECKING:
    from pipeops.gameday.model import GameDayResult


def gameday(
    faults: Annotated[str | None, typer.Option("--faults", help="Comma-separated fault names (default: every cause fault; --slo for the objective's).")] = None,
    short: Annotated[bool, typer.Option("--short", help="The short form of the default test suite (3-4 faults).")] = False,
    slo: Annotated[bool, typer.Option("--slo", help="The objective's scenario: the burn pairs fire, or stay quiet (about 7 min).")] = False,
    report: Annotated[Path | None, typer.Option("--report", help="Write the HTML report (timelines) here.")] = None,
    disable_alarm: Annotated[
        list[str] | None, typer.Option("--disable-alarm", help="Run without this alarm (repeatable): its faults must fail.")
    ] = None,
    record: Annotated[bool, typer.Option("--record", help="Record a full run in docs/GAMEDAY.json and regenerate docs/GAMEDAY.md.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Run a game day on a fresh in-process sandbox: a healthy phase, then each fault in turn.

    Per fault: every alarm OK, inject, wait for the expected alarm, check its notification, clear,
    apply its runbook or let the reconciler repair, wait for OK, check the invariants. Exits 1 when
    a fault goes undetected, an invariant breaks or an alarm fires on healthy traffic; 2 on bad input.
    """
    from pipeops.gameday import docs
    from pipeops.gameday.catalog import chosen
    from pipeops.gameday.report import render_html
    from pipeops.gameday.runner import play
    from pipeops.gameday.timing import GameDaySettings

    names = [name.strip() for name in faults.split(",") if name.strip()] if faults else None
    if record and (names or short or disable_alarm):
        raise fail("--record keeps a full run (or the --slo scenario) only: drop --faults, --short and --disable-alarm")
    try:
        specs = chosen(names, short=short, slo=slo)
    except KeyError as exc:
        raise fail(str(exc.args[0])) from None
    if not specs:
        raise fail("no fault to run: the fault catalog (pipeops.faults) is empty or missing")
    disabled = tuple(dict.fromkeys(disable_alarm or ()))
    settings = GameDaySettings.short_form(disabled=disabled) if short else GameDaySettings(disabled=disabled)
    with render.console.status("game day", spinner="dots") if not as_json else nullcontext() as shown:
        def progress(text: str) -> None:
            if shown is not None:
                shown.update(f"game day: {text}")
                render.console.print(f"[dim]{datetime.now():%H:%M:%S}[/dim] {escape(text)}", highlight=False)

        result = play(specs, settings, progress)
    if report is not None:
        report.write_text(render_html(result), encoding="utf-8")
    if record:
        docs.write(result, slo=slo)
    if as_json:
        render.emit_json("gameday", result.to_dict())
    else:
        _print(result, report)
    if not result.passed:
        raise typer.Exit(1)


def _print(result: GameDayResult, report: Path | None) -> None:
    from rich.table import Table

    table = Table(title=f"game day: {len(result.faults)} fault(s) in {result.seconds:.0f} s (time scale {result.time_scale:g})")
    for column in ("fault", "alarm", "detect", "notified", "remedy", "repair", "invariants", "verdict"):
        table.add_column(column, overflow="fold")
    for v in result.verdicts:
        detect = f"{v.detect_real:.1f} s ({(v.detect_virtual or 0) / 60:.1f} vmin)" if v.detect_real is not None else "-"
        detect += f"; {v.timed_text}" if v.timed_text else ""
        repair = f"{v.repair_real:.1f} s ({(v.repair_virtual or 0) / 60:.1f} vmin)" if v.repair_real is not None else "-"
        table.add_row(v.fault, v.alarm or ("none (absorbed)" if v.absorbed else "[red]none[/red]"), detect, "-" if v.absorbed else ("yes" if v.notified else "[red]no[/red]"), v.remedy,
                      repair, "held" if v.invariants_held else "[red]broken[/red]", "[green]pass[/green]" if v.passed else "[red]fail[/red]")
    render.console.print(table)
    for note in result.sandbox_timings:
        render.console.print(f"- {note}", highlight=False)
    if report is not None:
        render.console.print(f"report: {report}")
    if result.problems:
        render.console.print("[red]the game day failed:[/red]")
        for problem in result.problems:
            render.console.print(f"  {problem}", markup=False)
    else:
        render.console.print("[green]every fault detected, notified and repaired; invariants held; no false alarm[/green]")
