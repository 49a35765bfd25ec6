"""Counted, stackable patches of moto's classes and modules: how every sandbox seam goes on and off.

Sandboxes nest (a test's in-process sandbox inside another, the CLI's server beside the tests), so
a set of patches is installed once however many sandboxes ask for it and restored by the last one
to leave: one `uninstall()` per `install()`. Patches stack across sets (`moto_seams`, `limits`,
`dynamodb_query` wrap some of the same moto methods): install in order and uninstall in reverse,
last on first off. A wrapper of a set that is off but still sits under a later set's wrapper
must pass straight through: its code checks `installed`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Patch:
    """`owner.name` replaced by `make(original)`, where `original` is the attribute as `owner`
    stores it (`vars(owner)[name]`: a staticmethod stays a staticmethod, a module global is the
    object itself)."""

    owner: Any
    name: str
    make: Callable[[Any], Any]


class CountedPatches:
    """One named set of patches, installed on the first `install()` and restored on the last
    `uninstall()`. Each replacement is marked with the attribute `marker` (True), so a test can
    see what is patched. `patches` is called at install time, so moto is imported only then.
    `after_install` / `before_uninstall` run inside the lock, for sets that bring a nested set
    or that drop caches of moto objects when they go."""

    def __init__(
        self,
        patches: Callable[[], Iterable[Patch]],
        *,
        marker: str,
        after_install: Callable[[], None] | None = None,
        before_uninstall: Callable[[], None] | None = None,
        after_uninstall: Callable[[], None] | None = None,
    ) -> None:
        self._patches = patches
        self._marker = marker
        self._after_install = after_install
        self._before_uninstall = before_uninstall
        self._after_uninstall = after_uninstall
        self._lock = threading.Lock()
        self._originals: list[tuple[Any, str, Any]] = []
        self.count = 0

    def installed(self) -> bool:
        return self.count > 0

    def install(self) -> None:
        with self._lock:
            self.count += 1
            if self.count > 1:
                return
            for patch in self._patches():
                original = vars(patch.owner)[patch.name]
                replacement = patch.make(original)
                _mark(replacement, self._marker)
                self._originals.append((patch.owner, patch.name, original))
                setattr(patch.owner, patch.name, replacement)
            if self._after_install is not None:
                self._after_install()

    def uninstall(self) -> None:
        with self._lock:
            if self.count == 0:
                return
            self.count -= 1
            if self.count:
                return
            if self._before_uninstall is not None:
                self._before_uninstall()
            for owner, name, original in reversed(self._originals):
                setattr(owner, name, original)
            self._originals.clear()
            if self._after_uninstall is not None:
                self._after_uninstall()


def _mark(replacement: Any, marker: str) -> None:
    target = replacement.__func__ if isinstance(replacement, staticmethod) else replacement
    with contextlib.suppress(AttributeError, TypeError):  # a builtin or slotted object: no mark
        setattr(target, marker, True)
