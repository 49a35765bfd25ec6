"""A pace for writes: at most `per_second` a second, waited out by the caller's process.

The CLI waits here; a Lambda never would (docs/ARCHITECTURE.md#workflow: nothing in a Lambda
sleeps to wait) and is given `per_second=0` (no pacing) with a small batch instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Pacer:
    per_second: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _next: float = field(default=0.0, init=False)

    def wait(self) -> None:
        """Return once the next write may go; 0 or less per second never waits."""
        if self.per_second <= 0:
            return
        now = self.clock()
        if now < self._next:
            self.sleep(self._next - now)
            now = self._next
        self._next = now + 1.0 / self.per_second
