"""bench.served_reads renders reported numbers, never judged goals, and no prose (it is written by hand)."""

from __future__ import annotations

from bench.served_reads import Results, Timing, cpu_rows, figures, render, rows


def _timing(what: str, *seconds: float, cpu: tuple[float, float] | None = (1.0, 0.5)) -> Timing:
    client, server = ([cpu[0]] * len(seconds), [cpu[1]] * len(seconds)) if cpu else ([], [])
    return Timing(what, list(seconds), [0] * len(seconds), client, server)


RESULTS = Results(
    started_at="2026-01-01 00:00 UTC",
    version=_timing("version", 0.2, 0.3, 0.25, cpu=None),
    fresh={"dashboard render": _timing("render", 1.0), "status": _timing("status", 1.0)},
    aged={"dashboard render": _timing("render", 3.0), "status": _timing("status", 1.5)},
    large={"status": _timing("status", 2.0, 2.5, 2.1, cpu=(1.3, 0.9))},
    observed_seconds=60, observed_datapoints=2_000, loaded_datapoints=240_000, load_seconds=50,
    age_minutes=120, records=100_000, seed_seconds=150, writes=154, uploads=67, tracebacks=2, load="1.0",
    idle_fresh=0.01, idle_aged=0.02,
)


def test_every_row_is_reported_none_is_judged() -> None:
    found = rows(RESULTS)
    assert [row.goal for row in found] == ["-"] * 4
    assert found[1].now == "3.00x (3.00 s vs 1.00 s)"  # a slower aged sandbox is reported, not failed
    assert found[3].now == "2.10 s (max 2.50)"


def test_the_section_is_tables_and_its_figures_come_from_the_run() -> None:
    text = render(RESULTS)
    assert "goals met" not in text and "What is slow" not in text and "| met |" not in text
    assert "| `pipeops status` against a served sandbox with 100,000 records, writes flowing | 2.10 s (max 2.50) |" in text
    assert dict(figures(RESULTS))["moto tracebacks in the sandbox's stderr"] == "2"
    assert cpu_rows(RESULTS)[0] == ("`pipeops status at 100,000 records`", "2.10 s", "1.30 s", "0.90 s")
    assert "| `pipeops status at 100,000 records` | 2.10 s | 1.30 s | 0.90 s |" in text
