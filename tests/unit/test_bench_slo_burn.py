"""bench.slo_burn's pure part: the computed times and the section, from a recorded run."""

from __future__ import annotations

import pytest

from bench.slo_burn import (
    FAST,
    SLOW,
    BurnRun,
    computed,
    computed_at_rates,
    figures,
    render,
    run_rows,
    since_first_failed,
)


def a_run(**fields: object) -> BurnRun:
    base = BurnRun(
        started_at="2026-12-03 21:00 UTC", load="1.00 / 1.00 / 1.00", time_scale=0.005, upload_every=0.5,
        healthy_good=150, healthy_bad=0, healthy_seconds=111.0, injected_at=111.0, first_failed_at=112.0,
        outage_bad=10, outage_good=1, ended_at=125.0, fast_at=114.5, slow_at=122.0, slow_state_at_fast="OK",
        healthy_alarms=[], fast_window=(20.0, 4.0),
    )
    for name, value in fields.items():
        setattr(base, name, value)
    return base


def test_the_computed_times_are_the_policys_at_a_total_outage() -> None:
    assert computed(FAST) == pytest.approx(518.4) and computed(SLOW) == pytest.approx(1296.0)
    # The same file rate before and during the outage: the plain computation.
    assert computed_at_rates(FAST, 30.0, 30.0) == pytest.approx(518.4)
    # Failed runs end at a slower pace than done ones: the window's bad share grows slower.
    slower = computed_at_rates(FAST, 25.0, 16.0)
    assert slower is not None and slower > 518.4
    assert computed_at_rates(FAST, 25.0, 0.0) is None


def test_a_run_is_timed_from_its_first_failed_file_in_virtual_seconds() -> None:
    run = a_run()
    assert since_first_failed(run, run.fast_at) == pytest.approx(500.0)
    assert since_first_failed(a_run(first_failed_at=None), 114.5) is None
    fast, slow = run_rows(run)
    assert fast[1:] == ("518 s", "500 s", "2.5 s") and slow[1:] == ("1,296 s", "2,000 s", "10.0 s")


def test_the_section_says_whether_the_page_fired_in_time_and_the_slow_pair_stayed_quiet() -> None:
    shown = dict(figures(a_run()))
    assert shown["FastBurn fired within its computed time"] == "yes (0.96x the computed time)"
    assert shown["SlowBurn's state when FastBurn fired"] == "OK"
    assert shown["FastBurn's 1 h window when it fired: bad / files (share; threshold 0.144)"] == "4 / 24 (0.167)"
    late = dict(figures(a_run(fast_at=116.0)))  # 800 s: more than a minute past the computed time
    assert late["FastBurn fired within its computed time"].startswith("no")
    text = render([a_run(), a_run(fast_at=None)])
    assert "Run 2 (2026-12-03 21:00 UTC, load average at the start 1.00 / 1.00 / 1.00):" in text and "| FilesOnTimeFastBurn (14.4x over 1 h AND 5 min) | 518 s | - | - |" in text
