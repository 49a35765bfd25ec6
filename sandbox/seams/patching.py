"""Counted, stackable patches of moto's classes and modules: how every sandbox seam goes on and off.

Sandboxes nest (a test's in-process sandbox inside another, the CLI's server beside the tests), so
a set of patches is installed once however many sandboxes ask for it and restored by the last one
to leave: one `uninstall()` per `install()`. Patches stack across sets (`seams`, `limits`,
`dynamodb_query` wrap some of the same moto methods): install in order and uninstall in reverse,
last on first off. A wrapper of a set that is off but still sits under a later set's wrapper
must pass straight through: its code checks `installed` (or, for a routed seam, finds no part).
A replacement someone else wrapped since it went on (a test counting botocore calls) is left
under their wrapper at uninstall and reused, not wrapped again, at the next install.

`RoutedSeam` is the shape of the seams that hand moto's calls to a part of the sandbox (the Lambda
runtime, the event bus, the IAM check): on while a part is attached, off when the last leaves.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_ABSENT: Any = object()  # an attribute moto does not have: the seam adds it, uninstall removes it


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
        self._originals: list[tuple[Any, str, Any, Any]] = []  # owner, name, original, replacement
        self._in_chain: dict[tuple[int, str], tuple[Any, Any]] = {}  # wrapped since: (original, ours)
        self.count = 0

    def installed(self) -> bool:
        return self.count > 0

    def install(self) -> None:
        with self._lock:
            self.count += 1
            if self.count > 1:
                return
            for patch in self._patches():
                original, replacement = self._in_chain.pop((id(patch.owner), patch.name), (None, None))
                if replacement is None:
                    original = vars(patch.owner).get(patch.name, _ABSENT)
                    replacement = patch.make(None if original is _ABSENT else original)
                    _mark(replacement, self._marker)
                    setattr(patch.owner, patch.name, replacement)
                self._originals.append((patch.owner, patch.name, original, replacement))
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
            for owner, name, original, replacement in reversed(self._originals):
                if vars(owner).get(name) is not replacement:  # wrapped since: ours stays under it
                    self._in_chain[(id(owner), name)] = (original, replacement)
                elif original is _ABSENT:
                    delattr(owner, name)
                else:
                    setattr(owner, name, original)
            self._originals.clear()
            if self._after_uninstall is not None:
                self._after_uninstall()


class RoutedSeam(Generic[T]):
    """Patches that route moto's calls to parts of the sandbox: on when the first part attaches,
    off when the last detaches (active before patched, unpatched before inactive). A replacement
    reads `current()` (the last attached) or `parts()`; none attached means a caller was on its
    way in while the part left: it calls moto's own. `single` names the part when only one may be
    attached in a process at a time."""

    def __init__(self, patches: Callable[[], Iterable[Patch]], *, single: str | None = None) -> None:
        self._patches = CountedPatches(patches, marker="__pipeops_seam__")
        self._single = single
        self._lock = threading.Lock()
        self._parts: tuple[T, ...] = ()

    def attach(self, part: T) -> None:
        with self._lock:
            if any(existing is part for existing in self._parts):
                return
            if self._single and self._parts:
                raise RuntimeError(f"another {self._single} is already installed in this process")
            self._parts = (*self._parts, part)
            self._patches.install()

    def detach(self, part: T) -> None:
        with self._lock:
            if not any(existing is part for existing in self._parts):
                return
            self._patches.uninstall()
            self._parts = tuple(existing for existing in self._parts if existing is not part)

    def current(self) -> T | None:
        parts = self._parts
        return parts[-1] if parts else None

    def parts(self) -> tuple[T, ...]:
        return self._parts

    def attached(self) -> bool:
        return bool(self._parts)


def _mark(replacement: Any, marker: str) -> None:
    target = replacement.__func__ if isinstance(replacement, staticmethod) else replacement
    target = target.fget if isinstance(target, property) else target
    with contextlib.suppress(AttributeError, TypeError):  # a builtin or slotted object: no mark
        setattr(target, marker, True)
