"""The telemetry-cost goal row (bench/telemetry_cost.py) says met only when ours costs no more than bare."""

from __future__ import annotations

from bench.telemetry_cost import rows

MEDIANS = {
    "ours": 50.0, "bare": 60.0, "ours_wrapper": 3.0, "ours_wrapper_metric": 12.0, "ours_log": 25.0,
    "bare_log": 25.0, "bare_metric": 16.0, "bare_span": 4.0, "ratio_parts": 1.02,
}


def test_met_when_ours_costs_no_more_than_the_bare_libraries_in_the_same_rounds() -> None:
    [row] = rows({"default": MEDIANS | {"ratio_bare": 0.85}}, repeat=41, number=200)
    assert row.met and row.now.startswith("50 µs = 0.85 of the bare libraries (60 µs")
    assert "summed 45.0" in row.detail and "1.02" in row.detail


def test_missed_when_ours_costs_more_and_the_sdk_scenario_is_reported_beside_it() -> None:
    [row] = rows(
        {"default": MEDIANS | {"ratio_bare": 1.08}, "sdk": MEDIANS | {"ours": 90.0, "ratio_bare": 1.1}},
        repeat=41,
        number=200,
    )
    assert not row.met
    assert "With an SDK TracerProvider set" in row.detail and "ours 90 µs" in row.detail
