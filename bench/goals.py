"""Every product goal of the project, measured one bench after another, written to docs/PERFORMANCE.md.

    .venv/bin/python -m bench.goals                        # goals and reported numbers: several minutes on 2 cores
    .venv/bin/python -m bench.goals --only api_calls --out /tmp/perf.md
    .venv/bin/python -m bench.goals --json goals.json      # keep the rows as JSON too

A goal is about the product: AWS API calls per job, items a command or a reconcile pass reads,
what our code costs a Lambda invocation. The simulator's own speed (`bench.sandbox_ratio`: the
sandbox against bare moto) is measured and reported next to the goals, never judged as one: it
says how fast the tests run, not how the pipeline behaves on AWS.

Each bench is a module of `bench` with `measure() -> list[GoalRow]`; they run one after another in
this one process, on this one machine, so their numbers can be read side by side. The tables go into
the `<!-- bench:goals -->` section of docs/PERFORMANCE.md (see bench.sections) with the machine it ran
on and the load beside it; the rest of the file is left alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.goal_row import GoalRow
from bench.sections import write_section

SECTION = "goals"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "docs" / "PERFORMANCE.md"

# Order of the goals table: the order of the rows.
GOAL_BENCHES: tuple[str, ...] = ("api_calls", "status_scale", "reconcile", "telemetry_cost", "imports")
# Benches whose rows are reported, never goals (the simulator's speed).
REPORTED_BENCHES: tuple[str, ...] = ("sandbox_ratio",)
BENCHES: tuple[str, ...] = GOAL_BENCHES + REPORTED_BENCHES


@dataclasses.dataclass(frozen=True)
class BenchOutcome:
    """What one goal bench gave: its rows, or the error that stopped it, and how long it took."""

    name: str
    rows: tuple[GoalRow, ...]
    seconds: float
    error: str | None = None


def run_benches(names: Sequence[str], load: Callable[[str], Any] = importlib.import_module) -> list[BenchOutcome]:
    """Run each named bench's `measure()`; a bench that raises is reported, never hides the others."""
    outcomes: list[BenchOutcome] = []
    for name in names:
        started = time.perf_counter()
        try:
            rows = tuple(load(f"bench.{name}").measure())
            error = None
        except Exception as exc:  # reported in the table: a failed bench must be visible, not skipped
            rows, error = (), f"{type(exc).__name__}: {exc}"
        outcomes.append(BenchOutcome(name, rows, time.perf_counter() - started, error))
        print(f"bench.{name}: {len(rows)} rows in {outcomes[-1].seconds:.0f} s" + (f" ({error})" if error else ""))
    return outcomes


def is_goal(row: GoalRow, bench: str = "") -> bool:
    """A row of a reported bench, or whose goal is "-" (or starts with "- "), is shown for
    context, not counted as a goal."""
    return bench not in REPORTED_BENCHES and not (row.goal.strip() == "-" or row.goal.startswith("- "))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(outcomes: Sequence[BenchOutcome], machine: Mapping[str, Any], started_at: str) -> str:
    """The section body: the goals table, the reported numbers, how each row was measured. Pure."""
    rows = [(outcome.name, row) for outcome in outcomes for row in outcome.rows]
    goals = [(name, row) for name, row in rows if is_goal(row, name)]
    reported = [(name, row) for name, row in rows if not is_goal(row, name)]
    met = sum(row.met for _, row in goals)
    lines = [
        "## Product goals, measured",
        "",
        f"Measured by `python -m bench.goals` on {started_at}, one bench after another on one machine. "
        f"{met} of {len(goals)} goals met.",
        "",
        f"Machine: {machine.get('usable_cores', '?')} usable cores ({machine.get('cpu_model') or 'unknown CPU'}), "
        f"{machine.get('memory_gb', '?')} GiB, Python {machine.get('python', '?')}, {machine.get('platform', '?')}, "
        f"moto {machine.get('moto', '?')}, boto3 {machine.get('boto3', '?')}; load average at the start "
        f"{machine.get('load', '?')}.",
        "",
        "| measure | now | goal | met | bench |",
        "|---|---|---|:---:|---|",
    ]
    lines += [f"| {_cell(row.measure)} | {_cell(row.now)} | {_cell(row.goal)} | {_met(row)} | `bench.{name}` |" for name, row in goals]
    for outcome in (outcome for outcome in outcomes if outcome.error):
        lines.append(f"| `bench.{outcome.name}` failed: {_cell(outcome.error or '')} | - | - | **no** | |")
    if reported:
        lines += ["", "Reported, not goals (context, and the simulator's own speed):", "", "| measure | now | bench |", "|---|---|---|"]
        lines += [f"| {_cell(row.measure)} | {_cell(row.now)} | `bench.{name}` |" for name, row in reported]
    details = [(name, row) for name, row in rows if row.detail]
    if details:
        lines += ["", "How each row was measured:", ""]
        lines += [f"- **{row.measure}** (`bench.{name}`): {row.detail.strip()}" for name, row in details]
    lines += ["", "Time each bench took: " + ", ".join(f"`{o.name}` {o.seconds:.0f} s" for o in outcomes) + "."]
    return "\n".join(lines)


def _met(row: GoalRow) -> str:
    return "yes" if row.met else "**no**"


def machine_with_load() -> dict[str, Any]:
    from bench.e2e import machine_facts

    facts = machine_facts()
    if hasattr(os, "getloadavg"):
        facts["load"] = " / ".join(f"{value:.2f}" for value in os.getloadavg())
    return facts


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.goals", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated benches to run")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the Markdown file to write the section into")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument("--render", type=Path, default=None, help="only re-render the section from a --json file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(names) - set(BENCHES))
    if unknown:
        print(f"unknown bench(es): {', '.join(unknown)}; known: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    if args.render:
        machine, started_at, outcomes = load_results(json.loads(args.render.read_text(encoding="utf-8")))
    else:
        machine = machine_with_load()
        started_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        outcomes = run_benches(names)
    body = render(outcomes, machine, started_at)
    write_section(args.out, SECTION, body)
    if args.json and not args.render:
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine,
                    "started_at": started_at,
                    "benches": [
                        {
                            "name": o.name,
                            "seconds": o.seconds,
                            "error": o.error,
                            "rows": [dataclasses.asdict(row) for row in o.rows],
                        }
                        for o in outcomes
                    ],
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    print(body)
    all_met = all(row.met for o in outcomes for row in o.rows if is_goal(row, o.name))
    return 0 if all_met and not any(o.error for o in outcomes) else 1


def load_results(saved: Mapping[str, Any]) -> tuple[dict[str, Any], str, list[BenchOutcome]]:
    """What `--json` wrote, back as (machine, started_at, outcomes). Pure."""
    outcomes = [
        BenchOutcome(
            bench["name"], tuple(GoalRow(**row) for row in bench["rows"]), float(bench["seconds"]), bench.get("error")
        )
        for bench in saved["benches"]
    ]
    return dict(saved["machine"]), str(saved["started_at"]), outcomes


if __name__ == "__main__":
    raise SystemExit(main())
