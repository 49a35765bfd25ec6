"""The rendered dashboard in a real browser: Chromium's screenshot shows each chart's series where the grid says.

Unit tests check the HTML; only pixels show that the page actually lays out and draws. Each series
has its own colour, so a colour found inside one chart's plot (and in no other) proves both.
"""

from __future__ import annotations

import math
import re
import struct
import zlib
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dashboards.metric_rows import MetricQuery
from dashboards.render import CHROMIUM, AlarmBadge, Box, layout, render_html, screenshot
from tests.browser.png import Image, read_png

START = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
END = START + timedelta(hours=3)
PAGE_BACKGROUND = (0xF2, 0xF3, 0xF3)
WHITE = (0xFF, 0xFF, 0xFF)
# Two series per chart, twelve colours far from each other and from the page's own greys and reds.
COLOURS = (
    ("#e6194b", "#3cb44b"),
    ("#4363d8", "#f58231"),
    ("#911eb4", "#42d4f4"),
    ("#f032e6", "#9a6324"),
    ("#000075", "#808000"),
    ("#469990", "#bfef45"),
)
EMPTY = "#bfef45"  # this series returns no points: its colour must not appear anywhere


def synthetic_body() -> dict[str, Any]:
    charts = [
        {
            "type": "metric",
            "x": (index % 3) * 8,
            "y": 2 + (index // 3) * 6,
            "width": 8,
            "height": 6,
            "properties": {
                "title": f"chart {index}",
                "region": "us-east-1",
                "stat": "Sum",
                "period": 60,
                "metrics": [
                    ["PipeOps", f"Metric{index}", "function", "a", {"color": first, "label": f"{index}a"}],
                    [".", ".", ".", "b", {"color": second, "label": f"{index}b"}],
                ],
                "annotations": {"horizontal": [{"value": 100, "label": "threshold", "color": "#000000"}]},
            },
        }
        for index, (first, second) in enumerate(COLOURS)
    ]
    header = [
        {
            "type": "text",
            "x": 0,
            "y": 0,
            "width": 12,
            "height": 2,
            "properties": {"markdown": "# on call\nsee runbooks/"},
        },
        {
            "type": "metric",
            "x": 12,
            "y": 0,
            "width": 12,
            "height": 2,
            "properties": {
                "view": "singleValue",
                "region": "us-east-1",
                "metrics": [["PipeOps", "JobsFailed"]],
            },
        },
    ]
    return {"widgets": header + charts}


def synthetic_series(query: MetricQuery, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    """A sine per series, a minute apart, phase-shifted so the two lines of a chart mostly part."""
    index = int(query.name.removeprefix("Metric")) if query.name.startswith("Metric") else 0
    second = query.dimensions[-1:] == (("function", "b"),)
    if query.color == EMPTY:
        return []
    minutes = int((end - start).total_seconds() // 60)
    return [
        (start + timedelta(minutes=m), 60 + 40 * math.sin(m / 25 + index) + (50 if second else 0))
        for m in range(0, minutes + 1)
    ]


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def colours_in(image: Image, box: Box) -> Counter[tuple[int, int, int]]:
    return image.colour_counts(box.left, box.top, box.right, box.bottom)


def near(counts: Counter[tuple[int, int, int]], colour: str, tolerance: int = 16) -> int:
    """Pixels within `tolerance` of `colour` on every channel (the line's core; edges are blended)."""
    target = hex_rgb(colour)
    return sum(
        n
        for rgb, n in counts.items()
        if max(abs(a - b) for a, b in zip(rgb, target, strict=True)) <= tolerance
    )


@pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"Chromium is not installed at {CHROMIUM} (apt-get install -y --no-install-recommends chromium)",
)
def test_every_chart_draws_its_own_series_inside_its_grid_rectangle(tmp_path: Path) -> None:
    body = synthetic_body()
    alarms = [
        AlarmBadge("dlq-depth", "ALARM", "Threshold Crossed", "runbooks/dlq.md"),
        AlarmBadge("heartbeat", "OK", ""),
    ]
    page = render_html(body, synthetic_series, start=START, end=END, alarms=alarms, title="screenshot test")
    geometry = layout(body, alarm_count=len(alarms))
    html_path = tmp_path / "dashboard.html"
    html_path.write_text(page, encoding="utf-8")

    png = screenshot(html_path, tmp_path / "dashboard.png", geometry.width, geometry.height)
    image = read_png(png)

    assert (image.width, image.height) == (geometry.width, geometry.height)
    charts = [box for box in geometry.widgets if box.plot is not None]
    assert len(charts) == len(COLOURS)
    counts = {box.index: colours_in(image, box.plot) for box in charts if box.plot is not None}
    for box, pair in zip(charts, COLOURS, strict=True):
        assert box.plot is not None
        for colour in pair:
            if colour == EMPTY:
                assert near(counts[box.index], colour) == 0, f"widget {box.index}: the empty series was drawn"
                continue
            drawn = near(counts[box.index], colour)
            assert drawn >= box.plot.width // 2, (
                f"widget {box.index}: only {drawn} px of {colour} in its plot"
            )
            elsewhere = {other: near(found, colour) for other, found in counts.items() if other != box.index}
            assert not any(elsewhere.values()), f"{colour} of widget {box.index} drawn in {elsewhere}"
    # The boxes are where the grid says: white inside each widget's corners, page background in the gutter.
    for box in geometry.widgets:
        outer = box.outer
        assert image.rgb(outer.left + 1, outer.bottom - 2) == WHITE
        assert image.rgb(outer.right - 2, outer.top + 1) == WHITE
        assert image.rgb(outer.right + 3, outer.top + 10) == PAGE_BACKGROUND
    series_counts = [int(n) for n in re.findall(r'<svg class="chart"[^>]*data-series="(\d+)"', page)]
    assert series_counts == [2, 2, 2, 2, 2, 1]


def encode_png(width: int, height: int, pixels: list[bytes], filters: list[int], channels: int) -> bytes:
    """A minimal PNG writer for the reader's own test: each row stored with the given filter type."""
    bpp, previous, raw = channels, bytes(width * channels), bytearray()
    for row, kind in zip(pixels, filters, strict=True):
        out = bytearray()
        for i, value in enumerate(row):
            left = row[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            predictor = [0, left, up, (left + up) >> 1, _paeth(left, up, corner)][kind]
            out.append((value - predictor) & 0xFF)
        raw += bytes([kind]) + out
        previous = row

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return (
            struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 6 if channels == 4 else 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(raw)))
        + chunk(b"IEND", b"")
    )


def _paeth(left: int, up: int, corner: int) -> int:
    estimate = left + up - corner
    options = [
        (abs(estimate - left), 0, left),
        (abs(estimate - up), 1, up),
        (abs(estimate - corner), 2, corner),
    ]
    return min(options)[2]


@pytest.mark.parametrize("channels", [3, 4])
def test_the_png_reader_undoes_every_filter(tmp_path: Path, channels: int) -> None:
    width, height = 7, 5
    pixels = [
        bytes((x * 37 + y * 91 + c * 53) % 256 for x in range(width) for c in range(channels))
        for y in range(height)
    ]
    path = tmp_path / "filters.png"
    path.write_bytes(encode_png(width, height, pixels, [0, 1, 2, 3, 4], channels))
    image = read_png(path)
    assert (image.width, image.height, image.channels) == (width, height, channels)
    assert list(image.rows) == pixels
    assert image.rgb(3, 4) == tuple(pixels[4][3 * channels : 3 * channels + 3])
