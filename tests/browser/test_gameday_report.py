"""The game day's HTML report in a real browser: headless Chromium lays it out and each fault's
timeline is drawn (its metric line and its alarm's ALARM band), one below the other."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboards.render import CHROMIUM, screenshot
from pipeops.gameday.model import Action, AlarmChange, FaultObservation, FaultSpec, GameDayResult, Point
from pipeops.gameday.report import SERIES_COLOUR, STATE_COLOURS, render_html
from pipeops.gameday.verdict import judge
from tests.browser.png import Image, read_png


def observation(name: str, alarm: str, offset: float) -> FaultObservation:
    """A fault seen from all-OK to OK: its alarm fires 3 s after the injection, OK 4 s later."""
    start = offset
    return FaultObservation(
        fault=FaultSpec(name, f"{name} injected by hand", (alarm,), None),
        started_at=start,
        injected_at=start + 1,
        changes=(AlarmChange(alarm, "OK", "ALARM", start + 4, (start + 4) * 200), AlarmChange(alarm, "ALARM", "OK", start + 8, (start + 8) * 200)),
        notified=(alarm,),
        cleared_at=start + 5,
        ok_at=start + 8.5,
        ended_at=start + 10,
        actions=(Action(f"inject {name}", start + 1), Action(f"clear {name}", start + 5)),
        series={alarm: tuple(Point(start + t, v) for t, v in ((0, 0), (2, 0), (3, 4), (5, 6), (7, 1), (9, 0)))},
    )


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def rows_with(image: Image, colour: tuple[int, int, int]) -> list[int]:
    return [y for y in range(image.height) if any(image.rgb(x, y) == colour for x in range(0, image.width, 2))]


def clusters(rows: list[int], gap: int = 40) -> int:
    """Groups of rows separated by more than `gap` px: one per timeline."""
    return sum(1 for before, after in zip([-10_000, *rows], rows, strict=False) if after - before > gap)


@pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"Chromium is not installed at {CHROMIUM} (apt-get install -y --no-install-recommends chromium)",
)
def test_the_report_draws_a_timeline_per_fault(tmp_path: Path) -> None:
    faults = [observation("count-below-holders", "CounterBelowRunning", 10.0), observation("poison", "DlqNotEmpty", 30.0)]
    result = GameDayResult(0.005, True, faults, [judge(f, 0.005) for f in faults], [], 8.0, 45.0, 3, ["Time scale 0.005."])
    page = tmp_path / "gameday.html"
    page.write_text(render_html(result), encoding="utf-8")

    image = read_png(screenshot(page, tmp_path / "gameday.png", 1000, 1400))

    series_rows = rows_with(image, hex_rgb(SERIES_COLOUR))
    alarm_rows = rows_with(image, hex_rgb(STATE_COLOURS["ALARM"]))
    assert clusters(series_rows) == 2, series_rows  # each timeline's metric line
    assert clusters(alarm_rows) == 2, alarm_rows  # each timeline's ALARM band
    assert min(series_rows) < min(alarm_rows)  # the metric above its alarm's band
