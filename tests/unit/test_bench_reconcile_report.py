"""The reconcile benchmark's section renderer and its counting, on fixed input (no moto, no timing)."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest

from bench.reconcile import (
    HEADING,
    SECTION,
    CallMeter,
    Sample,
    attribute_bytes,
    conclusion,
    item_bytes,
    read_units,
    render_section,
    write_section,
)


def _sample(ms: float, *, scan: bool, items_read: int, units: float, cpu: float | None = None) -> dict[str, Any]:
    calls = {"dynamodb GetItem": 1, "sfn ListExecutions": 2, "sfn DescribeExecution": 2}
    op_ms = {"dynamodb GetItem": 2.0, "sfn ListExecutions": 30.0, "sfn DescribeExecution": 4.0}
    if scan:
        calls["dynamodb Scan"] = 90
        op_ms["dynamodb Scan"] = ms - 40
    else:
        calls["dynamodb Query"] = 8
        op_ms["dynamodb Query"] = ms - 40
    return {
        "ms": ms,
        "cpu_ms": cpu if cpu is not None else ms * 0.8,
        "calls": calls,
        "op_ms": op_ms,
        "items_read": items_read,
        "items_returned": 209,
        "bytes_read": 1000,
        "read_units": units,
        "errors": 0,
        "findings": ["count_mismatch:semaphore", "leaked_slot:a", "leaked_slot:b"],
    }


def _row(mode: str, runs: int, times: list[float], *, items_read: int, units: float) -> dict[str, Any]:
    return {
        "mode": mode,
        "runs": runs,
        "items": runs + runs // 10,
        "heads": runs // 10,
        "table_mb": runs * 0.00088,
        "mean_item_bytes": 880,
        "active_runs": 208,
        "running_executions": 200,
        "holders": 202,
        "stable": True,
        "samples": [_sample(t, scan=mode == "naive", items_read=items_read, units=units) for t in times],
    }


RESULTS: dict[str, Any] = {
    "meta": {
        "date": "2026-01-01 00:00 UTC",
        "command": "python -m bench.reconcile",
        "sizes": [10000, 100000],
        "repeat": 3,
        "naive_budget_s": 60.0,
        "running": 200,
        "queued": 6,
        "usable_cores": 2,
        "moto": "5.2.5",
        "load_start": [1.0, 0.5, 0.25],
        "load_s": {"10000": 12.0, "100000": 98.0},
        "duration_s": 240.0,
    },
    "rows": [
        _row("proper", 10000, [300.0, 280.0, 350.0], items_read=209, units=23.0),
        _row("naive", 10000, [5000.0, 5200.0, 4900.0], items_read=11001, units=1190.0),
        _row("proper", 100000, [2100.0, 2000.0, 2300.0], items_read=209, units=23.0),
        _row("naive", 100000, [61000.0], items_read=110001, units=11900.0),
    ],
}


def test_section_has_heading_method_and_one_row_per_size_and_mode() -> None:
    text = render_section(RESULTS)
    assert text.startswith(HEADING + "\n")
    assert "`python -m bench.reconcile`" in text and "2026-01-01 00:00 UTC" in text
    assert "240 s in all, of which 110 s loading the table (10,000 records 12 s, 100,000 records 98 s)" in text
    assert "load average 1.0 at the start" in text and "competed for the cores" not in text
    assert "**Method.**" in text and "sparse `active-jobs` index" in text and "60 s of naive passes" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 5  # header + 2 sizes x 2 modes
    assert rows[1].startswith("| 10,000 (11,000) | 208 | 200 | **proper** | 300 (280-350) | 240 | 13: dynamodb Query 8 (260 ms)")
    assert rows[1].endswith("| 209 | 23.0 |")
    assert "| 100,000 (110,000) | 208 | 200 | **naive** | 61,000 (1 pass) | 48,800 | 95: dynamodb Scan 90 (60,960 ms)" in rows[4]
    assert rows[4].endswith("| 110,001 | 11,900 |")
    assert "110,000 items, ~88.0 MB (880 bytes an item on average)" in text
    assert "varied between passes" not in text


def test_operations_are_listed_slowest_first() -> None:
    row = render_section(RESULTS).splitlines()
    proper = next(line for line in row if line.startswith("| 100,000") and "proper" in line)
    cell = proper.split(" | ")[6]
    assert cell.index("dynamodb Query") < cell.index("sfn ListExecutions") < cell.index("sfn DescribeExecution")
    assert cell.index("sfn DescribeExecution") < cell.index("dynamodb GetItem")


def test_conclusion_states_equal_reads_the_ratio_and_moto_slowness() -> None:
    text = conclusion(RESULTS)
    assert "At 100,000 run records the proper reconcile read 209 items (~23.0 read units) in 13 calls" in text
    assert "exactly as many as at 10,000 (209)" in text
    assert "the naive one read 110,001 items (~11,900 read units, 526x) in 95 calls" in text
    assert "took 61,000 ms against 2,100 ms (29x)" in text
    assert "the proper pass still grew from 300 to 2,100 ms (2,060 ms of it in Query)" in text
    assert "moto answers a Query on a GSI by sorting and walking every item" in text
    assert "each of the naive pass's 90 Scan pages cost ~542 ms of CPU" in text  # 48,800 ms / 90


def test_conclusion_flags_reads_that_grow_and_skips_moto_when_flat() -> None:
    results = copy.deepcopy(RESULTS)
    for sample in results["rows"][2]["samples"]:
        sample["items_read"] = 400
        sample["ms"] = 320.0
    text = conclusion(results)
    assert "NOT the same as at 10,000 (209)" in text
    assert "moto answers" not in text and "Scan pages cost" in text
    assert conclusion({}) == "No measurements."
    one_size = {"rows": [r for r in RESULTS["rows"] if r["runs"] == 100000]}
    assert "as many as" not in conclusion(one_size) and "526x" in conclusion(one_size)


def test_unstable_passes_are_said_and_missing_fields_do_not_break_rendering() -> None:
    results = copy.deepcopy(RESULTS)
    results["rows"][0]["stable"] = False
    for row in results["rows"]:
        for sample in row["samples"]:
            sample.pop("cpu_ms")
    results["meta"].pop("naive_budget_s")
    text = render_section(results)
    assert "Calls or items read varied between passes of one mode." in text
    assert "the time budget" in text
    results["meta"]["load_start"] = [5.0, 4.0, 3.0]
    assert "other processes competed for the cores" in render_section(results)
    assert render_section({}).startswith(HEADING)


def test_write_section_replaces_only_its_own_block(tmp_path) -> None:
    out = tmp_path / "PERFORMANCE.md"
    out.write_text("# Performance\n\nThe e2e report.\n")
    write_section(out, RESULTS)
    first = out.read_text()
    assert first.startswith("# Performance\n\nThe e2e report.\n\n<!-- bench:reconcile -->\n" + HEADING)
    write_section(out, RESULTS)
    assert out.read_text() == first
    assert first.count(f"<!-- bench:{SECTION} -->") == 1


def test_item_sizes_follow_the_dynamodb_rules() -> None:
    assert attribute_bytes({"S": "héllo"}) == 6
    assert attribute_bytes({"N": "1799999999"}) == 6  # 10 digits: 5 + 1
    assert attribute_bytes({"BOOL": True}) == attribute_bytes({"NULL": True}) == 1
    assert attribute_bytes({"SS": ["ab", "c"]}) == 3
    assert attribute_bytes({"L": [{"S": "ab"}]}) == 3 + 1 + 2
    assert attribute_bytes({"M": {"k": {"S": "ab"}}}) == 3 + 1 + 1 + 2
    assert item_bytes({"job_id": {"S": "a/"}, "n": {"N": "5"}}) == 6 + 2 + 1 + 2
    with pytest.raises(ValueError):
        attribute_bytes({"X": 1})


def test_read_units_round_up_to_4kb_and_halve_for_eventual_reads() -> None:
    assert read_units(0, consistent=True) == 1.0
    assert read_units(4096, consistent=False) == 0.5
    assert read_units(4097, consistent=False) == 1.0
    assert read_units(1_000_000, consistent=False) == 122.5  # 245 steps of 4 KB


def _model(service: str, name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, service_model=SimpleNamespace(service_name=service))


def test_call_meter_counts_calls_items_and_units_per_operation() -> None:
    meter = CallMeter(lambda: 1000.0)
    meter.sample = sample = Sample(ms=0.0)
    item = {"job_id": {"S": "a/"}, "status": {"S": "DETECTING"}}
    calls = [
        (_model("dynamodb", "GetItem"), {"ConsistentRead": True}, {"Item": item}),
        (_model("dynamodb", "Query"), {}, {"Items": [item, item], "Count": 2, "ScannedCount": 2}),
        (_model("dynamodb", "Scan"), {}, {"Items": [item], "Count": 1, "ScannedCount": 5000}),
        (_model("stepfunctions", "ListExecutions"), {}, {"executions": []}),
    ]
    for model, params, parsed in calls:
        context: dict[str, Any] = {}
        meter._params(params=params, context=context)
        assert meter._before(model=model, context=context) is None  # a value would short-circuit the call
        meter._after(model=model, parsed=parsed, context=context)
    assert dict(sample.calls) == {
        "dynamodb GetItem": 1,
        "dynamodb Query": 1,
        "dynamodb Scan": 1,
        "sfn ListExecutions": 1,
    }
    assert set(sample.op_ms) == set(sample.calls)
    assert sample.items_read == 1 + 2 + 5000 and sample.items_returned == 1 + 2 + 1
    assert sample.bytes_read == 23 + 46 + 5_000_000
    assert sample.read_units == 1.0 + 0.5 + read_units(5_000_000, consistent=False)
    meter.sample = None
    meter._before(model=_model("dynamodb", "GetItem"), context={})  # outside a pass: not counted
    assert sum(sample.calls.values()) == 4
