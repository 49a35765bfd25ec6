"""The fault catalog the game day runs (pipeops.faults), bound to one sandbox, and the short form.

The catalog belongs to pipeops.faults; this module only reads it and drives it through its
`inject` / `clear` functions against a `FaultTarget` (the served sandbox's endpoint and the
stack's resources).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pipeops.gameday.model import FaultSpec
from stack.resources import StackResources

# The short form in the default suite: a router crash the reconciler repairs, poison messages the
# DLQ runbook redrives (and quarantines), a hand-edited count, and a duplicate the pipeline absorbs
# with no alarm: each kind of detection and remedy once, each fault seconds long.
SHORT_FAULTS: tuple[str, ...] = ("router-crash-after-start", "poison-messages", "counter-negative", "status-events-duplicated")


class CatalogMissing(LookupError):
    """pipeops.faults is not there: no fault can be injected."""


def faults_module() -> ModuleType:
    try:
        return importlib.import_module("pipeops.faults")
    except ModuleNotFoundError as exc:
        if exc.name not in ("pipeops.faults",):
            raise
        raise CatalogMissing("the fault catalog (pipeops.faults) is not installed") from None


def catalog() -> Mapping[str, Any]:
    """name -> fault, in the catalog's order (empty when there is no catalog yet)."""
    try:
        return dict(faults_module().FAULTS)
    except CatalogMissing:
        return {}


def chosen(names: Sequence[str] | None, *, short: bool) -> list[FaultSpec]:
    """The faults to run: those named, else the short form's, else every one; KeyError names an
    unknown one."""
    faults = catalog()
    if names:
        unknown = [name for name in names if name not in faults]
        if unknown:
            raise KeyError(f"no fault named {', '.join(unknown)}: known: {', '.join(faults) or 'none'}")
        picked = list(names)
    elif short:
        picked = [name for name in SHORT_FAULTS if name in faults]
    else:
        picked = list(faults)
    return [FaultSpec.of(faults[name]) for name in picked]


@dataclass
class CatalogDriver:
    """Injects and clears catalog faults on one sandbox, as `pipeops sandbox fault` does."""

    endpoint_url: str
    resources: StackResources

    def _target(self) -> Any:
        module = faults_module()
        return module.FaultTarget(self.endpoint_url, self.resources)

    def inject(self, name: str) -> None:
        faults_module().inject(self._target(), name)

    def clear(self, name: str) -> None:
        faults_module().clear(self._target(), name)
