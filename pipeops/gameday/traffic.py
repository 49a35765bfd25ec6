"""The game day's traffic: the demo's sample files, uploaded in waves on a thread while faults come
and go, every key once (a folder per wave), so each file's outcome can be accounted for."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Files of a wave: a folder job of the samples' small text files, one unsupported (a PDF) and the
# rest redactable, so every outcome kind the invariants name is exercised.
WAVE_SAMPLES = ("claims/claim-0141.txt", "claims/scan-0141.pdf", "welcome.txt")
# While a fault acts, waves come faster and lighter: an error-rate alarm (errors in 3 of 5
# one-minute periods) needs a failing invocation in most virtual minutes.
LIGHT_WAVE = ("welcome.txt",)


@dataclass
class Traffic:
    """Uploads a wave every `interval` real seconds until stopped; `pause()` holds it (the shell
    pauses it to let the pipeline come to rest before the counter check)."""

    put: Callable[[str, bytes], None]  # (key, body) -> the object uploaded to the input bucket
    files: Mapping[str, Path]  # sample key -> local file
    interval: float = 2.0
    samples: tuple[str, ...] = WAVE_SAMPLES
    keys: list[str] = field(default_factory=list)  # every key uploaded, in order
    errors: list[str] = field(default_factory=list)
    _label: str = "healthy"
    _running: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None
    _waves: Any = field(default_factory=itertools.count)

    def start(self) -> Traffic:
        self._running.set()
        self._thread = threading.Thread(target=self._loop, name="gameday-traffic", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._running.set()
        if self._thread:
            self._thread.join(timeout=30)

    def pause(self) -> None:
        self._running.clear()
        with self._lock:  # a wave being uploaded finishes first
            pass

    def resume(self, label: str, *, interval: float | None = None, samples: tuple[str, ...] | None = None) -> None:
        """Waves again, labelled `label` (the phase), optionally at another pace and size."""
        self._label = label
        self.interval = interval or self.interval
        self.samples = samples or self.samples
        self._running.set()

    def wave(self) -> None:
        """One wave now: a folder named after the phase and the wave's number."""
        with self._lock:
            folder = f"gameday-{_safe(self._label)}-{next(self._waves):03d}"
            if not self._running.is_set():  # paused while this wave waited for the lock
                return
            for sample in self.samples:
                path = self.files.get(sample)
                if path is None:
                    continue
                key = f"{folder}/{Path(sample).name}"
                try:
                    self.put(key, path.read_bytes())
                    self.keys.append(key)
                except Exception as exc:  # a fault may refuse an upload: that file was never uploaded
                    self.errors.append(f"{key}: {type(exc).__name__}")

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._running.wait()
            if self._stop.is_set():
                return
            self.wave()
            self._stop.wait(self.interval)


def _safe(label: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in label.lower())[:30]
