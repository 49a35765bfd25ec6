"""The lifecycle every background part of the sandbox shares: one daemon thread, started once,
stopped by an event, joined within a timeout.

A thread that overruns the timeout is left behind (daemon: it never blocks interpreter exit) and
said so in the log. `Periodic` is the common case, a pass every `interval` seconds that may fail
without ending the thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Self

LOG = logging.getLogger("sandbox")


class BackgroundThread:
    """One daemon thread running `_run` until `_stop` is set. Subclasses write `_run` (it must
    return soon after `_stop` is set) and may override `_interrupt` to wake a `_run` that waits on
    something else than `_stop`; they extend `start` / `stop` with what goes on and off with it."""

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        """Start the thread (once: a running part is left as it is)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> bool:
        """Signal, wake and join the thread within `timeout`; True when it has ended."""
        self._stop.set()
        self._interrupt()
        thread, self._thread = self._thread, None
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        if thread.is_alive():
            LOG.warning("%s still running after %.1f s (daemon, left behind)", thread.name, timeout)
            return False
        return True

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _interrupt(self) -> None:
        """Wake the thread for `stop` (it already waits on `_stop` unless told otherwise)."""

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        raise NotImplementedError


class Periodic(BackgroundThread):
    """Calls `tick()` every `interval` real seconds until stopped; a failing pass is logged to
    `log` with `failure`, and the next one runs as usual. `tick` is the method a subclass writes,
    or the callable given."""

    def __init__(
        self,
        thread_name: str,
        interval: float,
        log: logging.Logger,
        failure: str,
        tick: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(thread_name)
        self.interval = interval
        self._log = log
        self._failure = failure
        self._tick = tick

    def tick(self) -> object:
        if self._tick is None:
            raise NotImplementedError
        return self._tick()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:  # never let the part die, never raise out of the thread
                self._log.warning(self._failure, exc_info=True)
