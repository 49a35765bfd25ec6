"""Per-invocation capture of stdout/stderr for handlers that share one interpreter.

`sys.stdout` and `sys.stderr` are process globals, and loggers often bind them once (powertools'
`Logger` gives its `StreamHandler` the `sys.stdout` of the moment it is constructed). So instead of
swapping the streams per invocation, the sandbox installs a *routing proxy* once, before any
handler module is imported. A write goes to the `InvocationCapture` bound to the calling thread
(`capturing(...)`), or, when the thread is not running a handler, to the stream that was there
before the proxy.

Limits (documented, not hidden):
- Routing is per thread. Threads a handler starts itself are not bound, so their output goes to
  the real stream, not to the invocation's logs.
- A capture that has been closed (the invocation finished, e.g. timed out while its worker thread
  kept running) drops further writes and counts them in `dropped_chars`; it never leaks them into
  another invocation, because the binding belongs to the abandoned worker thread alone.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

_routing = threading.local()


def _now_ms() -> int:
    return int(time.time() * 1000)


class InvocationCapture:
    """The output of one invocation, as timestamped lines. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: list[tuple[int, str]] = []
        self._partial: list[str] = []
        self._partial_ts: int | None = None
        self._closed = False
        self.dropped_chars = 0

    @property
    def closed(self) -> bool:
        return self._closed

    def write(self, text: str) -> int:
        if not text:
            return 0
        with self._lock:
            if self._closed:
                self.dropped_chars += len(text)
                return len(text)
            now = _now_ms()
            pieces = text.split("\n")
            for piece in pieces[:-1]:
                self._partial.append(piece)
                self._lines.append((self._partial_ts or now, "".join(self._partial)))
                self._partial = []
                self._partial_ts = None
            if pieces[-1]:
                if self._partial_ts is None:
                    self._partial_ts = now
                self._partial.append(pieces[-1])
        return len(text)

    def add_line(self, line: str, timestamp_ms: int | None = None) -> None:
        """Append a whole line (used by the runner for its own lines, e.g. [ERROR] reports)."""
        with self._lock:
            if not self._closed:
                self._lines.append((timestamp_ms or _now_ms(), line))

    def lines(self) -> list[tuple[int, str]]:
        """Complete lines so far (a trailing partial line is included only after `close`)."""
        with self._lock:
            return list(self._lines)

    def close(self) -> list[tuple[int, str]]:
        """Stop capturing; flush a trailing partial line and return every line."""
        with self._lock:
            if not self._closed:
                if self._partial:
                    self._lines.append((self._partial_ts or _now_ms(), "".join(self._partial)))
                    self._partial = []
                self._closed = True
            return list(self._lines)


def current_capture() -> InvocationCapture | None:
    return getattr(_routing, "capture", None)


@contextlib.contextmanager
def capturing(capture: InvocationCapture) -> Iterator[InvocationCapture]:
    """Route this thread's stdout/stderr writes to `capture` for the duration of the block."""
    previous = current_capture()
    _routing.capture = capture
    try:
        yield capture
    finally:
        _routing.capture = previous


class RoutingStream(io.TextIOBase):
    """A text stream that writes to the calling thread's capture, else to the real stream."""

    def __init__(self, real: TextIO, name: str) -> None:
        super().__init__()
        self._real = real
        self._name = name

    @property
    def real(self) -> TextIO:
        return self._real

    @property
    def name(self) -> str:
        return self._name

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._real, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._real, "errors", None)

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def isatty(self) -> bool:
        capture = current_capture()
        return False if capture is not None else bool(getattr(self._real, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self._real.fileno()

    def write(self, text: str) -> int:
        capture = current_capture()
        if capture is not None:
            return capture.write(text)
        return self._real.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if current_capture() is None:
            with contextlib.suppress(Exception):
                self._real.flush()

    def close(self) -> None:  # never close the real stream on behalf of a handler
        pass

    @property
    def closed(self) -> bool:
        return False

    def __getattr__(self, item: str) -> Any:
        return getattr(self._real, item)


class StdioRouting:
    """Puts routing proxies on sys.stdout/sys.stderr; `remove()` restores what was there.

    `install()` is idempotent and cheap, so the runtime calls it again at every invocation: code
    that swaps sys.stdout behind our back (pytest suspends and resumes its capture between test
    phases, restoring *its* stream) gets a proxy put back before the next handler runs. Proxies
    share the same per-thread routing, so a logger bound to an older proxy still writes to the
    right invocation.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._installed: list[tuple[str, RoutingStream, TextIO]] = []

    def install(self) -> None:
        with self._lock:
            for name in ("stdout", "stderr"):
                current = getattr(sys, name)
                if isinstance(current, RoutingStream) or current is None:
                    continue
                proxy = RoutingStream(current, f"<sandbox {name}>")
                self._installed.append((name, proxy, current))
                setattr(sys, name, proxy)

    def remove(self) -> None:
        with self._lock:
            for name, proxy, previous in reversed(self._installed):
                # Restore only if nobody replaced our proxy meanwhile; otherwise leave it: a proxy
                # with no capture bound is a plain pass-through.
                if getattr(sys, name) is proxy:
                    setattr(sys, name, previous)
            self._installed.clear()
