"""What a DLQ redrive would do, decided from the evidence alone. Pure: no AWS, no clock.

Per group of dead letters (same reason, same run):

- a main-DLQ message that names no run the router can start (`NEVER_ROUTABLE`) is quarantined:
  redriving it can only fail again;
- a group whose run was redriven before (an audit record says so) failed again after that
  redrive: it is quarantined with that reason instead of cycling. A redriven message gets a new
  MessageId, and the router's re-send on a capacity wait drops message attributes, so the mark
  that survives is the run's, in the audit trail;
- anything else is redriven: main-DLQ messages go back to the main queue (the run's deterministic
  execution name lets it start at most once, whatever copies arrive), ingest and tracker events
  are replayed through their own function.

A whole main DLQ redriven at once may use SQS's message move task (`use_move_task`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from runbooks.automation.dead_letters import NEVER_ROUTABLE, DeadLetter, DlqKind
from runbooks.automation.result import PlannedAction

MAX_SAMPLES = 3


class RedriveAction(StrEnum):
    REDRIVE = "redrive"  # back to the main queue
    REPLAY = "replay"  # through the event's own function (ingest, tracker)
    QUARANTINE = "quarantine"  # parked, with its reason, in the quarantine queue


@dataclass(frozen=True)
class Group:
    """Dead letters of one reason and one run, as evidence: counts and ids only."""

    id: str
    reason: str
    run: str
    count: int
    samples: tuple[Mapping[str, str], ...]
    redriven_at: str = ""  # when this run was last redriven ("" never)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.id,
            "reason": self.reason,
            "run": self.run,
            "count": self.count,
            "samples": [dict(sample) for sample in self.samples],
            "redriven_at": self.redriven_at or None,
        }


def group_letters(letters: Sequence[DeadLetter], redriven: Mapping[str, str]) -> list[Group]:
    """Letters grouped by (reason, run), largest group first; `redriven` maps a run to when it was
    last redriven. Each group keeps up to MAX_SAMPLES samples: message id and target."""
    by_group: dict[str, list[DeadLetter]] = {}
    for letter in letters:
        by_group.setdefault(letter.group, []).append(letter)
    groups = [
        Group(
            id=group,
            reason=members[0].reason,
            run=members[0].run,
            count=len(members),
            samples=tuple({"message_id": m.message_id, "target": m.target} for m in members[:MAX_SAMPLES]),
            redriven_at=redriven.get(members[0].run, "") if members[0].run else "",
        )
        for group, members in by_group.items()
    ]
    return sorted(groups, key=lambda g: (-g.count, g.reason, g.run))


def plan_redrive(kind: DlqKind, groups: Sequence[Group], selected: Collection[str] | None = None) -> list[PlannedAction]:
    """One action per selected group (None: every group), in the groups' order."""
    return [_decide(kind, group) for group in groups if selected is None or group.id in selected]


def _decide(kind: DlqKind, group: Group) -> PlannedAction:
    def action(what: RedriveAction, reason: str) -> PlannedAction:
        return PlannedAction(what.value, group.run or group.reason, reason, group.id, group.count)

    if kind is DlqKind.MAIN and group.reason in NEVER_ROUTABLE:
        return action(RedriveAction.QUARANTINE, f"{group.reason}: no redrive can route it")
    if group.redriven_at:
        return action(RedriveAction.QUARANTINE, f"failed again after a redrive at {group.redriven_at}")
    if kind is DlqKind.MAIN:
        return action(RedriveAction.REDRIVE, f"{group.reason}: back to the main queue; the run starts at most once")
    return action(RedriveAction.REPLAY, f"{group.reason}: replayed through the {kind.value} function")


def use_move_task(kind: DlqKind, groups: Sequence[Group], plan: Sequence[PlannedAction], move_task_available: bool) -> bool:
    """SQS moves the messages itself (paced, no receive/send/delete here) only when the whole main
    DLQ goes back to its source: every group planned, every one a redrive."""
    return (
        move_task_available
        and kind is DlqKind.MAIN
        and len(plan) == len(groups) > 0
        and all(action.kind == RedriveAction.REDRIVE.value for action in plan)
    )
