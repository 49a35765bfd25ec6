"""bench.goals: every goal bench in one table, a failing bench visible rather than dropped."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from bench.goal_row import GoalRow
from bench.goals import GOAL_BENCHES, REPORTED_BENCHES, BenchOutcome, main, render, run_benches
from bench.sections import sections

MACHINE = {"usable_cores": 2, "cpu_model": "Test CPU", "memory_gb": 24, "python": "3.11.7", "load": "2.00"}


def _module(*rows: GoalRow) -> SimpleNamespace:
    return SimpleNamespace(measure=lambda: list(rows))


def test_each_bench_runs_once_in_order_and_a_raising_bench_is_reported_not_dropped() -> None:
    called: list[str] = []

    def load(module: str) -> Any:
        called.append(module)
        if module == "bench.broken":
            return SimpleNamespace(measure=lambda: (_ for _ in ()).throw(RuntimeError("moto fell over")))
        return _module(GoalRow("calls", "11", "<= 12", True))

    outcomes = run_benches(["first", "broken", "last"], load=load)

    assert called == ["bench.first", "bench.broken", "bench.last"]
    assert [o.error for o in outcomes] == [None, "RuntimeError: moto fell over", None]
    assert [len(o.rows) for o in outcomes] == [1, 0, 1]


def test_the_table_has_one_line_per_row_says_which_goals_are_missed_and_names_the_machine() -> None:
    outcomes = [
        BenchOutcome("api_calls", (GoalRow("calls, one job", "11", "<= 12", True, "counted by operation"),), 3.0),
        BenchOutcome("imports", (GoalRow("cold import", "+75 ms", "<= +60 ms", False),), 9.0),
        BenchOutcome("status_scale", (), 1.0, error="KeyError: 'x'"),
    ]

    body = render(outcomes, MACHINE, "2026-12-01 04:00 UTC")

    assert "1 of 2 goals met" in body
    assert "| calls, one job | 11 | <= 12 | yes | `bench.api_calls` |" in body
    assert "| cold import | +75 ms | <= +60 ms | **no** | `bench.imports` |" in body
    assert "`bench.status_scale` failed: KeyError: 'x'" in body
    assert "counted by operation" in body
    assert "2 usable cores (Test CPU)" in body


def test_a_pipe_in_a_value_cannot_break_the_table() -> None:
    body = render([BenchOutcome("x", (GoalRow("a|b", "1", "2", True),), 0.0)], MACHINE, "now")

    assert "| a\\|b | 1 | 2 | yes |" in body


def test_main_writes_only_its_own_section_and_exits_nonzero_when_a_goal_is_missed(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "PERFORMANCE.md"
    out.write_text("# Perf\n\n<!-- bench:other -->\nkept\n<!-- /bench:other -->\n", encoding="utf-8")
    monkeypatch.setattr("bench.goals.machine_with_load", lambda: MACHINE)
    monkeypatch.setattr(
        "bench.goals.run_benches",
        lambda names: [BenchOutcome(names[0], (GoalRow("m", "1", "0", False),), 0.0)],
    )

    code = main(["--only", GOAL_BENCHES[0], "--out", str(out)])

    written = sections(out.read_text(encoding="utf-8"))
    assert code == 1
    assert "kept" in written["other"]
    assert "| m | 1 | 0 | **no** |" in written["goals"]


def test_an_unknown_bench_name_is_refused_before_anything_runs(tmp_path: Any) -> None:
    assert main(["--only", "nope", "--out", str(tmp_path / "p.md")]) == 2
    assert not (tmp_path / "p.md").exists()


def test_a_dash_row_and_every_row_of_a_reported_bench_are_context_never_counted() -> None:
    """The simulator's speed (bench.sandbox_ratio) is reported, not judged, whatever its row says."""
    outcomes = [
        BenchOutcome("api_calls", (GoalRow("calls", "12", "<= 12", True), GoalRow("coordination", "9", "-", True)), 1.0),
        BenchOutcome("sandbox_ratio", (GoalRow("ratio", "40%", ">= 50%", False),), 1.0),
    ]

    body = render(outcomes, MACHINE, "now")

    assert "1 of 1 goals met" in body
    goals_table, reported_table = body.split("Reported, not goals")
    assert "| calls | 12 | <= 12 | yes | `bench.api_calls` |" in goals_table
    assert "ratio" not in goals_table and "coordination" not in goals_table
    assert "| ratio | 40% | `bench.sandbox_ratio` |" in reported_table
    assert "| coordination | 9 | `bench.api_calls` |" in reported_table


def test_a_missed_goal_fails_the_run_but_a_slow_simulator_does_not(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bench.goals.machine_with_load", lambda: MACHINE)
    rows = {"sandbox_ratio": GoalRow("ratio", "10%", ">= 50%", False), "api_calls": GoalRow("calls", "14", "<= 12", False)}
    monkeypatch.setattr("bench.goals.run_benches", lambda names: [BenchOutcome(n, (rows[n],), 0.0) for n in names])

    assert "sandbox_ratio" in REPORTED_BENCHES and "sandbox_ratio" not in GOAL_BENCHES
    assert main(["--only", "sandbox_ratio", "--out", str(tmp_path / "a.md")]) == 0
    assert main(["--only", "api_calls,sandbox_ratio", "--out", str(tmp_path / "b.md")]) == 1


def test_render_reads_back_what_json_wrote(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bench.goals.machine_with_load", lambda: MACHINE)
    monkeypatch.setattr(
        "bench.goals.run_benches", lambda names: [BenchOutcome(names[0], (GoalRow("m", "1", "<= 2", True),), 2.0)]
    )
    first, again = tmp_path / "a.md", tmp_path / "b.md"
    saved = tmp_path / "goals.json"

    assert main(["--only", GOAL_BENCHES[0], "--out", str(first), "--json", str(saved)]) == 0
    assert main(["--render", str(saved), "--out", str(again)]) == 0

    assert sections(first.read_text(encoding="utf-8")) == sections(again.read_text(encoding="utf-8"))
