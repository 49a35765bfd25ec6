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
# DLQ runbook quarantines, a hand-edited count the scheduled reconciler sets right, and status
# events lost to the tracker's DLQ (their slots held) that its runbook replays: each kind of
# detection and remedy once, each fault seconds long, each detection independent of how fast the
# machine is. Not a fault the pipeline absorbs with no alarm (status-events-duplicated, in the full
# game day): its verdict, no alarm at all for its whole window, also judges every other alarm's
# precision with traffic flowing, and under CPU load CounterDrift can fire on slots merely in transit
# (taken and not started yet, or ended and not released yet) at three reconciler runs in a row.
SHORT_FAULTS: tuple[str, ...] = ("router-crash-after-start", "poison-messages", "counter-negative", "tracker-dlq-events")


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
