"""Durations as people type them on the command line: 90s, 30m, 1h, 2d."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
# How far back any window may reach: past it, `now - window` leaves datetime's range (or asks
# AWS for years nothing is kept for; audit records live 30 days, execution history 90).
MAX_DURATION = timedelta(days=3650)


def parse_duration(text: str, *, option: str = "duration", maximum: timedelta = MAX_DURATION) -> timedelta:
    """`text` as a timedelta; ValueError naming `option` and the accepted form otherwise."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{option} {text!r} is not a duration: use a number and s, m, h or d, e.g. 30m")
    number, unit = float(match.group(1)), _UNITS[match.group(2)]
    if number > maximum / timedelta(**{unit: 1}):
        raise ValueError(f"{option} {text!r} reaches too far back: at most {maximum.days}d")
    return timedelta(**{unit: number})
