"""Durations as people type them on the command line: 90s, 30m, 1h, 2d."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")


def parse_duration(text: str) -> timedelta:
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (use a number and s, m, h or d, e.g. 30m)")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
