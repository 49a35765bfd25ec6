"""The fault catalog the game day runs (pipeops.faults), bound to one sandbox, and the short form.

The catalog belongs to pipeops.faults; this module only reads it and drives it through its
`inject` / `clear` functions against a `FaultTarget` (the served sandbox's endpoint and the
stack's resources).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipeops.faults import FAULTS, SLO_SCENARIO, FaultTarget, NamedFault, clear, inject
from pipeops.gameday.model import FaultSpec
from stack.resources import StackResources

# The short form in the default suite: the detect function failing its invocations (a crash in the
# workflow: its executions fail, their runs FAILED with a reason), poison messages the DLQ runbook
# quarantines, a hand-edited count the scheduled reconciler sets right, and status events lost to
# the tracker's DLQ (their slots held) that its runbook replays. Each detection counts an event
# (one failed execution, one message in a DLQ, one reconciler run), never a rate, so a slow machine
# delays it and cannot hide it. Not the router crashes: RouterErrors wants errors in 3 of 5 minutes,
# 1.5 s real at the game day's time scale, which a starved router does not produce while the crash
# keeps failing job messages into the DLQ. Not a fault absorbed with no alarm at all
# (status-events-duplicated): it proves a silence, which costs its whole duration. Both stay in the
# full game day.
SHORT_FAULTS: tuple[str, ...] = ("function-errors", "poison-messages", "counter-negative", "tracker-dlq-events")


def catalog() -> Mapping[str, NamedFault]:
    """name -> fault, in the catalog's order."""
    return dict(FAULTS)


def chosen(names: Sequence[str] | None, *, short: bool, slo: bool = False) -> list[FaultSpec]:
    """The faults to run: those named, else the short form's, else the objective's scenario
    (`slo`), else every cause fault; KeyError names an unknown one."""
    faults = catalog()
    if names:
        unknown = [name for name in names if name not in faults]
        if unknown:
            raise KeyError(f"no fault named {', '.join(unknown)}: known: {', '.join(faults) or 'none'}")
        picked = list(names)
    elif short:
        picked = list(SHORT_FAULTS)
    elif slo:
        picked = list(SLO_SCENARIO)
    else:
        picked = [name for name in faults if name not in SLO_SCENARIO]
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
