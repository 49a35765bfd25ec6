"""sandbox.background: one daemon thread per part, started once, stopped and joined."""

from __future__ import annotations

import logging
import threading

import pytest

from sandbox.background import BackgroundThread, Periodic

LOG = logging.getLogger("test.background")


def test_a_periodic_part_keeps_ticking_through_a_failing_pass_and_stops(caplog: pytest.LogCaptureFixture) -> None:
    ticks: list[int] = []
    third = threading.Event()

    def tick() -> None:
        ticks.append(len(ticks))
        if len(ticks) == 1:
            raise RuntimeError("first pass fails")
        if len(ticks) >= 3:
            third.set()

    part = Periodic("test-periodic", 0.01, LOG, "pass failed", tick=tick)
    assert part.start() is part and part.start() is part  # started once
    assert third.wait(5), "the part stopped ticking after a failing pass"
    assert part.running
    assert part.stop(timeout=5) and not part.running
    count = len(ticks)
    assert part.stop(timeout=5)  # a second stop is harmless
    assert len(ticks) == count
    assert any(r.levelno == logging.WARNING and r.getMessage() == "pass failed" for r in caplog.records)


def test_stop_wakes_a_thread_that_waits_on_something_else() -> None:
    class Waiter(BackgroundThread):
        def __init__(self) -> None:
            super().__init__("test-waiter")
            self.wake = threading.Event()

        def _run(self) -> None:
            while not self._stop.is_set():
                self.wake.wait()

        def _interrupt(self) -> None:
            self.wake.set()

    with Waiter() as waiter:
        assert waiter.running
    assert not waiter.running


def test_a_thread_that_overruns_its_timeout_is_left_behind_and_said_so(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    class Stubborn(BackgroundThread):
        def _run(self) -> None:
            release.wait(10)

    part = Stubborn("test-stubborn").start()
    try:
        assert not part.stop(timeout=0.05)
        assert any("test-stubborn still running" in r.getMessage() for r in caplog.records)
    finally:
        release.set()
