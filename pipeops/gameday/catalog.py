"""The fault catalog the game day runs (pipeops.faults), bound to one sandbox, and the short form.

The catalog belongs to pipeops.faults; this module only reads it and drives it through its
`inject` / `clear` functions against a `FaultTarget` (the served sandbox's endpoint and the
stack's resources).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipeops.faults import FAULTS, FaultTarget, NamedFault, clear, inject
from pipeops.gameday.model import FaultSpec
from stack.resources import StackResources

# The short form in the default suite: a router crash the reconciler repairs, poison messages the
# DLQ runbook redrives (and quarantines), a hand-edited count, and a duplicate the pipeline absorbs
# with no alarm: each kind of detection and remedy once, each fault seconds long.
SHORT_FAULTS: tuple[str, ...] = ("router-crash-after-start", "poison-messages", "counter-negative", "status-events-duplicated")


def catalog() -> Mapping[str, NamedFault]:
    """name -> fault, in the catalog's order."""
    return dict(FAULTS)


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
        picked = list(SHORT_FAULTS)
    else:
        picked = list(faults)
    return [FaultSpec.of(faults[name]) for name in picked]


@dataclass
class CatalogDriver:
    """Injects and clears catalog faults on one sandbox, as `pipeops sandbox fault` does."""

    endpoint_url: str
    resources: StackResources

    def _target(self) -> FaultTarget:
        return FaultTarget(self.endpoint_url, self.resources)

    def inject(self, name: str) -> None:
        inject(self._target(), name)

    def clear(self, name: str) -> None:
        clear(self._target(), name)
