"""Legacy mode: reconcile a plain counter that records no holders (the seed design, the IDP accelerator).

Without holders nothing says which slot leaked, and a router may be between its increment and its
StartExecution at any moment. So the counter is repaired to the number of running executions only
when two observations a grace window apart agree -- the same count, the same item, the same number
running -- and the write is conditional on the counter still holding what was seen. The first
observation is only remembered; the next run (the next schedule tick, or the next CLI call) decides.
No sleep: waiting is the time between two runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.stores.executions import ExecutionsStore


@dataclass(frozen=True)
class LegacyCounter:
    """Where the plain counter lives."""

    table: str
    key_name: str = "pk"
    key_value: str = "workflow_counter"
    count_attribute: str = "active_count"

    @property
    def key(self) -> dict[str, Any]:
        return {self.key_name: {"S": self.key_value}}


@dataclass(frozen=True)
class LegacySample:
    taken_at: str  # ISO-8601
    count: int
    item: str  # the whole counter item, canonical JSON: any write in between changes it
    running: int

    @property
    def at(self) -> datetime:
        return datetime.fromisoformat(self.taken_at)


@dataclass(frozen=True)
class LegacyDecision:
    verdict: str  # "in_sync" | "remember" | "changing" | "repair"
    reason: str
    set_to: int | None = None
    expected_count: int | None = None


def decide(previous: LegacySample | None, current: LegacySample, grace_seconds: float) -> LegacyDecision:
    """Pure: whether two samples justify setting the counter to the running executions."""
    if current.count == current.running:
        return LegacyDecision("in_sync", f"counter {current.count} = {current.running} running")
    drift = f"counter {current.count}, {current.running} running"
    if previous is None:
        return LegacyDecision("remember", f"{drift}: first observation; the next run confirms or clears it")
    waited = (current.at - previous.at).total_seconds()
    if waited < grace_seconds:
        return LegacyDecision(
            "remember", f"{drift}: {waited:.0f} s since the last observation, {grace_seconds:.0f} s needed"
        )
    if (previous.count, previous.item, previous.running) != (current.count, current.item, current.running):
        return LegacyDecision("changing", f"{drift}: the counter or the executions changed since the last observation")
    return LegacyDecision(
        "repair",
        f"{drift}, unchanged for {waited:.0f} s: set the counter to {current.running}",
        set_to=current.running,
        expected_count=current.count,
    )


def kept(previous: LegacySample | None, current: LegacySample) -> LegacySample:
    """Pure: the sample to keep for the next run. An observation unchanged since the previous one
    keeps the older sample, so that runs more frequent than the grace window still add up to it."""
    if previous is not None and (previous.count, previous.item, previous.running) == (current.count, current.item, current.running):
        return previous
    return current


def sample(dynamodb: Any, sfn: Any, counter: LegacyCounter, state_machine_arn: str, now: datetime) -> LegacySample:
    item = dynamodb.get_item(TableName=counter.table, Key=counter.key, ConsistentRead=True).get("Item") or {}
    count = int(item.get(counter.count_attribute, {}).get("N", "0"))
    running = sum(1 for _ in ExecutionsStore(sfn, state_machine_arn).running())
    return LegacySample(now.isoformat(), count, json.dumps(item, sort_keys=True), running)


def repair(dynamodb: Any, counter: LegacyCounter, decision: LegacyDecision) -> bool:
    """Set the counter, conditional on it still holding the count seen twice. False: it moved."""
    assert decision.set_to is not None and decision.expected_count is not None
    try:
        dynamodb.update_item(
            TableName=counter.table,
            Key=counter.key,
            UpdateExpression="SET #c = :to",
            ConditionExpression="#c = :seen",
            ExpressionAttributeNames={"#c": counter.count_attribute},
            ExpressionAttributeValues={":to": {"N": str(decision.set_to)}, ":seen": {"N": str(decision.expected_count)}},
        )
    except Exception as exc:
        if getattr(exc, "response", {}).get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        return False
    return True


def load_sample(path: Path) -> LegacySample | None:
    try:
        return LegacySample(**json.loads(path.read_text(encoding="utf-8")))
    except (FileNotFoundError, ValueError, TypeError):
        return None


def save_sample(path: Path, current: LegacySample) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(current)), encoding="utf-8")


def to_dict(previous: LegacySample | None, current: LegacySample, decision: LegacyDecision, applied: bool | None) -> Mapping[str, Any]:
    return {
        "mode": "legacy",
        "observed": {"active_count": current.count, "running_executions": current.running, "at": current.taken_at},
        "previous": asdict(previous) if previous else None,
        "verdict": decision.verdict,
        "reason": decision.reason,
        "set_to": decision.set_to,
        "applied": applied,
    }
