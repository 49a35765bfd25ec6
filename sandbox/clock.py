"""Time scaling for the sandbox: shorter waits, same behaviour.

The sandbox runs real waits (Lambda timeouts, poll intervals, schedules) on a real clock. A
`TimeScale` with a factor below 1 shortens them so that tests and demos finish quickly: a Lambda
function with `Timeout: 60` and a factor of 0.05 is cut off after 3 real seconds. Code that
reports durations to a handler (e.g. `context.get_remaining_time_in_millis()`) converts real time
back to *virtual* time with `to_virtual`, so the handler sees the numbers it would see in AWS.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TimeScale:
    """A factor in (0, 1] that multiplies every sandbox wait; 1.0 means real time."""

    factor: float = 1.0

    def __post_init__(self) -> None:
        factor = float(self.factor)
        if not 0.0 < factor <= 1.0:
            raise ValueError(f"TimeScale factor must be in (0, 1], got {self.factor!r}")
        object.__setattr__(self, "factor", factor)

    @classmethod
    def real(cls) -> TimeScale:
        return cls(1.0)

    @property
    def is_real(self) -> bool:
        return self.factor == 1.0

    def scale(self, seconds: float) -> float:
        """Virtual seconds (as configured in AWS) -> real seconds to wait in the sandbox."""
        return float(seconds) * self.factor

    def to_virtual(self, real_seconds: float) -> float:
        """Real seconds elapsed in the sandbox -> the virtual seconds they stand for."""
        return float(real_seconds) / self.factor

    def sleep(self, seconds: float) -> None:
        """Sleep for `seconds` of virtual time."""
        if seconds > 0:
            time.sleep(self.scale(seconds))
