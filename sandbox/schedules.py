"""EventBridge schedule expressions for the sandbox: `rate(...)` rules firing on a scaled clock.

moto stores a rule's `ScheduleExpression` and never fires it. `ScheduleTable` keeps, for every
ENABLED schedule rule, when it is next due on the real (monotonic) clock: one period after the
rule was first seen enabled (as in AWS, where a new `rate` rule first fires one period after it is
created), then every period. The period is the virtual one (`rate(5 minutes)` = 300 s) multiplied
by the sandbox's `TimeScale`. Disabling a rule forgets it, so re-enabling starts a fresh period;
changing its expression does the same. `cron(...)` expressions are not evaluated: the table logs
one warning per rule and never fires it (use `EventBus.fire_schedule`).

Single-threaded by design: the event bus's timer thread owns its table.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import uuid
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from sandbox.clock import TimeScale

LOG = logging.getLogger("sandbox.schedules")

SCHEDULED_EVENT_DETAIL_TYPE = "Scheduled Event"

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


def rate_seconds(expression: str) -> float | None:
    """The period of a `rate(N unit)` expression in virtual seconds; None for `cron(...)`.

    Raises ValueError for anything else (including `rate(0 minutes)`).
    """
    text = expression.strip()
    if text.startswith("cron(") and text.endswith(")"):
        return None
    match = _RATE.match(text)
    if not match:
        raise ValueError(f"unsupported schedule expression {expression!r}")
    value = int(match.group(1))
    if value <= 0:
        raise ValueError(f"a rate must be positive: {expression!r}")
    return float(value * _UNIT_SECONDS[match.group(2).rstrip("s")])


def iso_time(when: dt.datetime | float | None = None) -> str:
    """EventBridge's envelope time format: `2024-05-01T12:00:00Z` (UTC, whole seconds)."""
    if when is None:
        when = dt.datetime.now(tz=dt.UTC)
    elif isinstance(when, int | float):
        when = dt.datetime.fromtimestamp(float(when), tz=dt.UTC)
    elif when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduled_event(rule_arn: str, account: str, region: str) -> dict[str, Any]:
    """The event EventBridge sends to a schedule rule's targets."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": SCHEDULED_EVENT_DETAIL_TYPE,
        "source": "aws.events",
        "account": account,
        "time": iso_time(),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }


@dataclass
class _Entry:
    expression: str
    period: float  # real seconds
    next_due: float  # monotonic


class ScheduleTable:
    """When each ENABLED `rate` rule is next due (real monotonic seconds)."""

    def __init__(self, time_scale: TimeScale) -> None:
        self.time_scale = time_scale
        self._entries: dict[Hashable, _Entry] = {}
        self._unsupported: dict[Hashable, str] = {}

    def sync(self, rules: Iterable[tuple[Hashable, str, bool]], now: float) -> None:
        """Reconcile with the current rules: (key, expression, enabled) for every schedule rule."""
        present: set[Hashable] = set()
        for key, expression, enabled in rules:
            if not enabled:
                continue
            present.add(key)
            entry = self._entries.get(key)
            if entry is not None and entry.expression == expression:
                continue
            if self._unsupported.get(key) == expression:
                continue
            try:
                period = rate_seconds(expression)
            except ValueError as exc:
                period = None
                reason = str(exc)
            else:
                reason = "cron expressions are not evaluated by the sandbox"
            if period is None:
                self._entries.pop(key, None)
                self._unsupported[key] = expression
                LOG.warning(
                    "schedule rule %s (%s) will not fire on its own: %s; use EventBus.fire_schedule()",
                    key,
                    expression,
                    reason,
                )
                continue
            real = self.time_scale.scale(period)
            self._entries[key] = _Entry(expression, real, now + real)
            LOG.info("schedule rule %s (%s) fires every %.3f s real", key, expression, real)
        for key in set(self._entries) - present:
            del self._entries[key]
        for key in set(self._unsupported) - present:
            del self._unsupported[key]

    def pop_due(self, now: float) -> list[Hashable]:
        """Keys due at `now`, each advanced by one period (a late table does not fire a burst)."""
        due: list[Hashable] = []
        for key, entry in self._entries.items():
            if entry.next_due <= now:
                due.append(key)
                entry.next_due += entry.period
                if entry.next_due <= now:
                    entry.next_due = now + entry.period
        return due

    def next_due(self) -> float | None:
        return min((e.next_due for e in self._entries.values()), default=None)

    def period_of(self, key: Hashable) -> float | None:
        entry = self._entries.get(key)
        return entry.period if entry else None
