"""One row of the performance-goals table: what a bench measured against its goal.

Each goal bench module exposes `measure() -> list[GoalRow]`; `bench.goals` runs them all in one run
and writes the table into docs/PERFORMANCE.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GoalRow:
    measure: str  # what was measured, e.g. "handler API calls, one single-file job"
    now: str  # the measured value, formatted with its unit
    goal: str  # the goal, as the issue states it
    met: bool
    detail: str = ""  # how it was measured, or what the number is made of
