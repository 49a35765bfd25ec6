"""`counter-drift`, `slots-full-idle`, `backlog-stalled`, `implausible-drift`: the reconciler,
as a runbook.

Diagnose is a dry reconcile pass: the holders next to their executions and runs, with the reason
each would be released (or why it is kept). Apply is the reconciler's own apply (one pass: its
conditional writes, its audit records, its last-run item; nothing is audited twice here), run
only when this runbook's condition is there. It repairs every finding of the pass, not only this
condition's: the scheduled reconciler would do the same within minutes. Verify is a fresh dry
pass with no finding of the condition.

`implausible-drift` releases only named holders (`holders`, the reconciler's `--release`): the
guard that refused means "suspect the observer", so without names apply refuses.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from monitors.reconcile.build import ReconcileTarget, build_reconciler
from monitors.reconcile.loop import ActionResult as ReconcileResult
from monitors.reconcile.loop import Reconciler, ReconcileReport, reconcile
from monitors.reconcile.model import Action, ActionKind, Finding, FindingKind, Observation, Plan
from monitors.reconcile.plan import plan
from monitors.reconcile.signals import Signals, signals
from pipeline.config import load_reconcile_settings
from runbooks.automation.remedy_request import RemedyRequest
from runbooks.automation.result import ActionOutcome, ActionResult, PlannedAction, RunbookResult, Verdict
from runbooks.catalog import Runbook

# A slot younger than the router's timeout plus this may still be in a router's hands.
GRACE_MARGIN_SECONDS = 60
_SLOTS = frozenset({FindingKind.COUNT_MISMATCH, FindingKind.LEAKED_SLOT, FindingKind.SLOT_WITHOUT_EXECUTION})
# The findings each runbook's condition is made of.
CONDITION_FINDINGS: Mapping[Runbook, frozenset[FindingKind]] = {
    Runbook.COUNTER_DRIFT: _SLOTS,
    Runbook.SLOTS_FULL_IDLE: _SLOTS,
    Runbook.BACKLOG_STALLED: _SLOTS | {FindingKind.UNANNOUNCED_RUN, FindingKind.STUCK_RUN},
    Runbook.IMPLAUSIBLE_DRIFT: frozenset({FindingKind.IMPLAUSIBLE_DRIFT}),
}
NEEDS_HOLDERS = (
    "implausible-drift releases only named holders: the guard suspects the observer (a wrong state machine "
    "ARN, a missing permission). Check both, then name the holders to release (option `holders`, as "
    "`pipeops reconcile --apply --release NAME`)"
)


# -- pure: the condition, the evidence ------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    findings: tuple[Finding, ...]
    signal: bool  # the alarm's own signal (slots_full_idle, backlog_stalled), where it has one

    @property
    def present(self) -> bool:
        return bool(self.findings) or self.signal


def condition(runbook: Runbook, observation: Observation, decided: Plan) -> Condition:
    """This runbook's part of a pass: its findings, and its alarm's signal."""
    seen = signals(observation)
    signal = {Runbook.SLOTS_FULL_IDLE: seen.slots_full_idle, Runbook.BACKLOG_STALLED: seen.backlog_stalled}.get(runbook, False)
    kinds = CONDITION_FINDINGS[runbook]
    return Condition(tuple(f for f in decided.findings if f.kind in kinds), signal)


def holder_rows(observation: Observation, decided: Plan) -> list[dict[str, Any]]:
    """Each holder next to its execution and run, and what the pass would do with it and why."""
    running = {execution.name for execution in observation.running}
    runs = {run.execution_name: run for run in observation.active_runs}
    releases = {a.target: a.reason for a in decided.actions if a.kind is ActionKind.RELEASE_HOLDER}
    found = {f.target: f for f in decided.findings if f.kind in _SLOTS or f.kind is FindingKind.OVERRIDE_REFUSED}
    guarded = any(f.kind is FindingKind.IMPLAUSIBLE_DRIFT for f in decided.findings)
    rows = []
    for holder in observation.holders:
        outcome = observation.described.get(holder.name)
        execution = "RUNNING" if holder.name in running else _described(outcome)
        run = runs.get(holder.name)
        finding = found.get(holder.name)
        if holder.name in releases:
            verdict = f"release: {releases[holder.name]}"
        elif finding is not None and guarded and finding.kind is FindingKind.SLOT_WITHOUT_EXECUTION:
            verdict = "kept: held back by the implausible-drift guard"
        elif finding is not None:
            verdict = f"kept: {finding.reason}"
        else:
            verdict = "kept: its execution runs, or it is younger than the grace"
        rows.append(
            {
                "holder": holder.name,
                "acquired_at": holder.acquired_at,
                "execution": execution,
                "run": f"{run.target} {run.status.value}" if run is not None else None,
                "decision": verdict,
            }
        )
    return rows


def _described(outcome: Any) -> str:
    if outcome is None:
        return "not described"
    return outcome.status.value if outcome.status is not None else "none (no execution of its name)"


def evidence(runbook: Runbook, report: ReconcileReport, found: Condition, seen: Signals) -> dict[str, Any]:
    observed = report.observed
    return {
        "active_count": observed.active_count,
        "max": observed.settings.max_slots,
        "counter_drift": observed.drift,
        "running_executions": len(observed.running),
        "active_runs": len(observed.active_runs),
        "grace_seconds": observed.settings.grace_seconds,
        "signals": {
            "slots_full_idle": seen.slots_full_idle,
            "backlog_stalled": seen.backlog_stalled,
            "oldest_queued_age": round(seen.oldest_queued_age, 1),
        },
        "holders": holder_rows(observed, report.plan),
        "findings": [_finding(f) for f in report.plan.findings],
        "condition": [_finding(f) for f in found.findings],
        "condition_present": found.present,
    }


def _finding(finding: Finding) -> dict[str, str]:
    return {"kind": finding.kind.value, "target": finding.target, "reason": finding.reason}


def planned(actions: Sequence[Action]) -> list[PlannedAction]:
    return [PlannedAction(action.kind.value, action.target, action.reason) for action in actions]


def outcomes(report: ReconcileReport) -> list[ActionOutcome]:
    return [
        ActionOutcome(PlannedAction(a.action.kind.value, a.action.target, a.action.reason), ActionResult(a.result.value))
        for a in report.applied
    ]


def verdict_after(runbook: Runbook, observation: Observation) -> tuple[Verdict, dict[str, Any]]:
    """A fresh dry pass: cleared when it finds nothing of the condition."""
    found = condition(runbook, observation, plan(observation))
    verified = {"condition": [_finding(f) for f in found.findings], "signal": found.signal, "counter_drift": observation.drift}
    return (Verdict.REMAINS if found.present else Verdict.CLEARED), verified


# -- the shell ------------------------------------------------------------------------------------


def run(request: RemedyRequest) -> RunbookResult:
    grace = request.options.get("grace_seconds")
    reconciler = build(request, float(grace) if grace is not None else None)
    holders = request.chosen("holders") if request.runbook is Runbook.IMPLAUSIBLE_DRIFT else ()
    return run_with(request.runbook, reconciler, apply=request.apply, holders=holders)


def run_with(runbook: Runbook, reconciler: Reconciler, *, apply: bool, holders: Collection[str] = ()) -> RunbookResult:
    """Dry pass for the evidence; the reconciler's apply when the condition is there; a fresh pass."""
    release = tuple(holders)
    dry = reconcile(reconciler, apply=False, release=release)
    found = condition(runbook, dry.observed, plan(dry.observed) if release else dry.plan)
    facts = evidence(runbook, dry, found, signals(dry.observed))
    if not found.present:
        return RunbookResult(runbook.value, facts, [], [], Verdict.ABSENT)
    skipped = outcomes(dry)
    if runbook is Runbook.IMPLAUSIBLE_DRIFT and not release:
        facts["refused" if apply else "next"] = NEEDS_HOLDERS
        return RunbookResult(runbook.value, facts, planned(dry.plan.actions), skipped, Verdict.REMAINS)
    if not apply:
        return RunbookResult(runbook.value, facts, planned(dry.plan.actions), skipped, Verdict.REMAINS)
    if not dry.plan.actions:
        facts["next"] = "nothing the reconciler may repair yet (holders or runs younger than the grace): run again later"
        return RunbookResult(runbook.value, facts, [], [], Verdict.REMAINS)
    applied = reconcile(reconciler, apply=True, release=release)
    verdict, verified = verdict_after(runbook, reconciler.observe())
    if any(a.result is ReconcileResult.RACE_LOST for a in applied.applied):
        verified["races_lost"] = applied.count(ReconcileResult.RACE_LOST)
    return RunbookResult(runbook.value, facts, planned(applied.plan.actions), outcomes(applied), verdict, verified, applied=True)


def build(request: RemedyRequest, grace_seconds: float | None) -> Reconciler:
    """The scheduled reconciler's twin, seen from outside the stack (the one builder): its slots
    and mode from the router's configuration, its grace the router's timeout plus a margin
    (unless given)."""
    resources = request.resources
    router = request.client("lambda").get_function_configuration(FunctionName=resources.RouterFunctionName)
    variables = (router.get("Environment") or {}).get("Variables", {})
    grace = grace_seconds if grace_seconds is not None else float(int(router.get("Timeout", 60)) + GRACE_MARGIN_SECONDS)
    target = ReconcileTarget(
        coordination_table=resources.CoordinationTableName,
        tracking_table=resources.TrackingTableName,
        state_machine_arn=resources.StateMachineArn,
        main_queue_url=resources.MainQueueUrl,
    )
    settings = load_reconcile_settings(variables, grace_seconds=grace)
    return build_reconciler(request.client, target, settings, actor=request.who() if request.apply else "dry run", clock=request.clock)
