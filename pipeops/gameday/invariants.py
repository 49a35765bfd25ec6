"""The invariants a fault must leave intact (docs/ARCHITECTURE.md#invariants), judged from plain
snapshots: each check returns readable violations, empty when it holds."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RunView:
    """One run of the tracking table, as the checks need it."""

    job_id: str
    started_at: str
    status: str  # JobStatus value
    files: tuple[str, ...]
    execution_name: str | None


@dataclass(frozen=True)
class Sample:
    """One look at the semaphore and the running executions, taken while traffic flows."""

    active_count: int
    holders: int
    running: frozenset[str]  # names of the running executions


def lost_files(outcomes: Mapping[str, str]) -> list[str]:
    """Every uploaded file reached COMPLETE, or FAILED / unsupported / empty with a reason
    (`outcomes`: key -> outcome, '' when no terminal run holds it)."""
    return [f"file never reached a terminal outcome: {key}" for key, outcome in sorted(outcomes.items()) if not outcome]


def runs_started_twice(runs: Iterable[RunView]) -> list[str]:
    """One object version is processed by one run: a key held by two runs that did not fail means
    a job ran twice (the game day uploads every key once; a re-run follows a FAILED run)."""
    holders: dict[str, list[str]] = {}
    for run in runs:
        if run.status != "FAILED":
            for key in run.files:
                holders.setdefault(key, []).append(f"{run.job_id}@{run.started_at}")
    return [f"{key} processed by {len(ids)} runs: {', '.join(sorted(ids))}" for key, ids in sorted(holders.items()) if len(ids) > 1]


def counter_agrees(active_count: int, holders: Collection[str], router_running: Collection[str]) -> list[str]:
    """At rest, active_count = holders = running executions the router started (an execution
    started by hand holds no slot and is not counted)."""
    if active_count == len(holders) and set(holders) == set(router_running):
        return []
    return [
        f"active_count {active_count}, {len(holders)} holder(s), {len(router_running)} router-started running "
        f"execution(s) do not agree (holders without execution: {sorted(set(holders) - set(router_running))[:5]}, "
        f"running without slot: {sorted(set(router_running) - set(holders))[:5]})"
    ]


def never_above_max(samples: Sequence[Sample], max_concurrency: int, outside_router: Collection[str]) -> list[str]:
    """Executions holding a slot never exceeded the max: sampled throughout, executions started
    outside the router (a person, a fault) left out, since they hold no slot."""
    outside = set(outside_router)
    peak_running = max((len(s.running - outside) for s in samples), default=0)
    peak_count = max((max(s.active_count, s.holders) for s in samples), default=0)
    found = []
    if peak_running > max_concurrency:
        found.append(f"running executions peaked at {peak_running} > max {max_concurrency}")
    if peak_count > max_concurrency:
        found.append(f"active_count / holders peaked at {peak_count} > max {max_concurrency}")
    return found


def alarms_back_to_ok(states: Mapping[str, str]) -> list[str]:
    """Every alarm OK once the fault is cleared and repaired."""
    return [f"alarm {name} still {state}" for name, state in sorted(states.items()) if state == "ALARM"]


def repairs_audited(runbook: str | None, applied: int, audited: int) -> list[str]:
    """A runbook that applied something left at least one audit record (one per group acted on)."""
    if runbook and applied and not audited:
        return [f"runbook {runbook} applied {applied} action(s) but no audit record was written"]
    return []
