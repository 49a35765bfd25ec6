"""What one runbook run found, decided, did and saw afterwards: plain data for the CLI's `--json`
(envelope kind `runbook`) and for an Automation document's outputs.

Exit rule (`exit_code`): 0 when the condition is cleared or was absent, 1 when it remains (a dry
run that found something included), 2 on error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Verdict(StrEnum):
    ABSENT = "absent"  # nothing to do: the condition was not there
    CLEARED = "cleared"  # it was there, it is gone
    REMAINS = "remains"  # still there (a dry run, a partial selection, a move still running)
    ERROR = "error"


EXIT_CODES = {Verdict.ABSENT: 0, Verdict.CLEARED: 0, Verdict.REMAINS: 1, Verdict.ERROR: 2}


class ActionResult(StrEnum):
    APPLIED = "applied"
    SKIPPED = "skipped"  # a dry run
    RACE_LOST = "race_lost"  # the world changed since the diagnosis (another run got there first)
    FAILED = "failed"  # the remedy was tried and did not work (e.g. a replay that raised)


@dataclass(frozen=True)
class PlannedAction:
    """One step of a plan: what to do to which target and why; `count` messages or items."""

    kind: str
    target: str
    reason: str
    group: str = ""
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "reason": self.reason, "group": self.group, "count": self.count}


@dataclass(frozen=True)
class ActionOutcome:
    """What became of a planned action; `detail` is PII-safe (ids, counts, error codes)."""

    action: PlannedAction
    result: ActionResult
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return self.action.to_dict() | {"result": self.result.value, "detail": dict(self.detail)}


@dataclass(frozen=True)
class RunbookResult:
    """One run of one runbook. `verified` is None when nothing was applied (dry run, or an error)."""

    id: str
    evidence: Mapping[str, Any]
    plan: Sequence[PlannedAction]
    actions: Sequence[ActionOutcome]
    verdict: Verdict
    verified: Mapping[str, Any] | None = None
    applied: bool = False
    error: str = ""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "evidence": dict(self.evidence),
            "plan": [action.to_dict() for action in self.plan],
            "actions": [outcome.to_dict() for outcome in self.actions],
            "verified": dict(self.verified) if self.verified is not None else None,
            "verdict": self.verdict.value,
            "applied": self.applied,
            "error": self.error,
        }
