"""The reconciler's decisions: `plan(observation) -> Plan`, pure (docs/ARCHITECTURE.md#reconciler).

Level-triggered, like a Kubernetes controller: nothing here trusts an event, every finding comes
from what the observation holds now, and running it again on the repaired world finds nothing.
Each action carries the observed values its write is conditional on, so a reconciler racing the
router, the tracker or another reconciler loses the race instead of corrupting state.

The rules, in the order their actions are applied:
- count_mismatch: `active_count` differs from its own holders (one consistent read) -> set the
  count to the holders, conditional on the version read. Never subject to the implausible guard.
- leaked_slot: a holder whose execution ended more than the grace ago (the tracker acts first on
  a fresh end) -> release it (conditional on its acquire time); a failed execution's run that is
  still active is marked FAILED with its error and cause.
- slot_without_execution: a holder with no execution, older than the grace -> release it; its run,
  if still IN_PROGRESS with no execution, is announced again so that the router starts it (no file
  is lost). Younger than the grace: nothing (a router may be between admission and start).
- implausible_drift: more releases resting on absence ("no execution of its name") than a share of
  the max at once, or a RUNNING listing that missed executions DescribeExecution found running ->
  release none of those: a wrong state machine ARN or a missing permission also reads as "nothing
  runs". Suspect the observer. Releases backed by an execution that was described and has ended
  are positive evidence and are never held back (a tracker outage leaks every slot that way).
- orphan_execution: a running execution that holds no slot and started before the semaphore was
  read (started by hand, or redriven) -> reported, never stopped, never given a slot.
- stuck_run: an active run whose execution has ended, or an IN_PROGRESS run with no execution
  past the grace, and no holder -> marked FAILED from the execution's real outcome, or announced
  again when it never started. (Batch mode retries FAILED runs itself.)
- unannounced_run: a QUEUED run whose announce deadline (the latest message's delivery time plus
  a lease of capacity waits, renewed by the waits) passed more than the grace ago: no message for it can be on
  its way (ingest died before sending, or the message was lost) -> announced again, at most
  `max_announcements` times, then FAILED with the reason. A realtime run none of whose files'
  claims names it is a candidate that lost the claim race -> deleted.
At most `max_repairs` actions a run; the rest wait for the next run (repairs_capped).

CounterDrift (`Observation.drift`) counts what these rules repair (a count above its holders, the
leaked slots and slots without an execution), never a holder they leave alone this pass
(`Observation.in_transit`, the one rule `decide_holder` applies too).

`override_plan` is the operator's `--release NAME`: named holders released whatever the share,
never one whose execution runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from monitors.reconcile.model import (
    Action,
    ActionKind,
    ActiveRun,
    Finding,
    FindingKind,
    Holder,
    Observation,
    Plan,
    age_seconds,
    ended_within,
)
from pipeline.config import ReconcileSettings
from pipeline.repairs import MAX_CAUSE_CHARS, failure_fields
from pipeline.status import ExecutionStatus, JobStatus
from pipeline.stores.executions import ExecutionOutcome

STUCK_ERROR = "ReconcilerStuckRun"
NEVER_STARTED_ERROR = "ReconcilerNeverStarted"


def plan(observation: Observation) -> Plan:
    """Every finding family in the order its actions are applied, then the cap on repairs a run."""
    # Ages are counted up to the semaphore read, which precedes every DescribeExecution: "no execution"
    # rules out a router only if it was already dead (older than its timeout) when it was described.
    # Counted up to the end of a slow observation, a router alive at its describe could start after it.
    now = observation.semaphore_read_at
    parts = (
        count_mismatch(observation),
        holder_releases(observation),
        orphan_executions(observation),
        active_run_repairs(observation, now),
    )
    findings = tuple(finding for part in parts for finding in part.findings)
    actions = tuple(action for part in parts for action in part.actions)
    return capped(Plan(findings, actions), observation.settings.max_repairs)


def count_mismatch(observation: Observation) -> Plan:
    """`active_count` differs from its own holders (one consistent read): count the holders."""
    if observation.active_count == len(observation.holders):
        return Plan((), ())
    finding = Finding(
        FindingKind.COUNT_MISMATCH,
        "semaphore",
        f"active_count is {observation.active_count} but {len(observation.holders)} holder(s) hold slots",
    )
    action = Action(
        ActionKind.SET_COUNT,
        "semaphore",
        "count the holders",
        expected={"version": observation.version, "active_count": observation.active_count},
        values={"active_count": len(observation.holders)},
    )
    return Plan((finding,), (action,))


def holder_releases(observation: Observation) -> Plan:
    """Leaked slots and slots without an execution: released, unless the absence guard refuses the
    releases that rest on absence alone; each release is followed by its run's repair."""
    running = {execution.name for execution in observation.running}
    runs = {run.execution_name: run for run in observation.active_runs}
    evidenced: list[Decision] = []  # its execution was described and has ended
    absent: list[Decision] = []  # no execution of its name was found
    for holder in observation.holders:
        if holder.name in running:
            continue
        decision = decide_holder(holder, observation, runs.get(holder.name), grace=observation.settings.grace_seconds)
        if decision is not None:
            (evidenced if decision.evidenced else absent).append(decision)
    refusal = absence_refusal(observation, len(absent))
    released = evidenced if refusal is not None else evidenced + absent
    findings = [decision.finding for decision in evidenced + absent] + ([refusal] if refusal is not None else [])
    actions = [decision.release for decision in released]
    actions += [decision.follow_up for decision in released if decision.follow_up is not None]
    return Plan(tuple(findings), tuple(actions))


def orphan_executions(observation: Observation) -> Plan:
    """Running executions that hold no slot and started before the semaphore read: reported only."""
    held = {holder.name for holder in observation.holders}
    return Plan(
        tuple(
            Finding(FindingKind.ORPHAN_EXECUTION, execution.name, "running without a slot: started by hand or redriven")
            for execution in observation.running
            if execution.name not in held and execution.started_at < observation.semaphore_read_at
        ),
        (),
    )


def active_run_repairs(observation: Observation, now: datetime) -> Plan:
    """Active runs no slot or running execution accounts for: unannounced QUEUED runs and stuck runs."""
    running = {execution.name for execution in observation.running}
    held = {holder.name for holder in observation.holders}
    findings: list[Finding] = []
    actions: list[Action] = []
    for run in observation.active_runs:
        if run.execution_name in running or run.execution_name in held:
            continue
        kind, action = (
            (FindingKind.UNANNOUNCED_RUN, _unannounced_action(run, observation, now))
            if run.status is JobStatus.QUEUED
            else (FindingKind.STUCK_RUN, _stuck_run(run, observation, now))
        )
        if action is not None:
            findings.append(Finding(kind, run.target, action.reason))
            actions.append(action)
    return Plan(tuple(findings), tuple(actions))


def capped(decided: Plan, max_repairs: int) -> Plan:
    """At most `max_repairs` actions a run; the rest wait for the next run (level-triggered)."""
    if len(decided.actions) <= max_repairs:
        return decided
    finding = Finding(
        FindingKind.REPAIRS_CAPPED,
        "reconciler",
        f"{len(decided.actions)} repairs planned, {max_repairs} applied a run; the rest next run",
    )
    return Plan((*decided.findings, finding), decided.actions[:max_repairs])


@dataclass(frozen=True)
class Decision:
    """What to do with one holder that no listed execution backs."""

    finding: Finding
    release: Action
    follow_up: Action | None
    # True: DescribeExecution found its execution and it has ended (positive evidence). False: no
    # execution of its name was found, which a wrong ARN or a missing permission also produces.
    evidenced: bool


def decide_holder(holder: Holder, observation: Observation, run: ActiveRun | None, *, grace: float) -> Decision | None:
    """Release a holder whose execution ended (past the grace: the tracker acts first), or that has
    held its slot past the grace with no execution of its name; None while it may still be fine.
    Ages count up to the semaphore read (see `plan`)."""
    outcome = observation.described.get(holder.name)
    if outcome is None or observation.in_transit(holder, grace):
        # Not described; or in transit: it started after the listing, it just ended (its status
        # event is on the way, and the tracker releases first), or a router may be between
        # admission and StartExecution.
        return None
    if outcome.exists:
        status = outcome.status.value if outcome.status else "?"
        failed = run is not None and outcome.status is not None and outcome.status.is_failure
        return Decision(
            Finding(FindingKind.LEAKED_SLOT, holder.name, f"its execution ended {status}"),
            _release(holder, f"execution ended {status}"),
            _mark_from_outcome(run, outcome) if failed and run is not None else None,
            evidenced=True,
        )
    follow_up: Action | None = None
    if run is not None and run.status is JobStatus.IN_PROGRESS:
        follow_up = _reannounce(run, "its router died before starting it")
    elif run is not None:
        follow_up = _mark_failed(run, STUCK_ERROR, f"{run.status.value} with a slot but no execution")
    return Decision(
        Finding(
            FindingKind.SLOT_WITHOUT_EXECUTION,
            holder.name,
            f"held {int(age_seconds(observation.semaphore_read_at, holder.since))} s and no execution of its name exists",
        ),
        _release(holder, "no execution of its name exists"),
        follow_up,
        evidenced=False,
    )


def absence_refusal(observation: Observation, absent: int) -> Finding | None:
    """Suspect the observer, not the world, before releasing on absence.

    "No execution of that name" is also what a wrong state machine ARN or a missing
    states:DescribeExecution permission reads as. Releases backed by an execution that was described
    and has ended need no such guard. Absence is trusted only for up to a share of the max at once,
    and only while the listing agrees with the describes.
    """
    if not absent:
        return None
    settings = observation.settings
    missed = listing_missed(observation)
    if missed:
        return Finding(
            FindingKind.IMPLAUSIBLE_DRIFT,
            "semaphore",
            f"the RUNNING listing missed {len(missed)} execution(s) that DescribeExecution found running "
            f"({', '.join(missed[:3])}): {absent} holder(s) with no execution found are kept until the two agree",
        )
    limit = max(1, int(settings.implausible_share * settings.max_slots))
    if absent <= limit:
        return None
    return Finding(
        FindingKind.IMPLAUSIBLE_DRIFT,
        "semaphore",
        f"{absent} holder(s) with no execution found would be released at once (more than {limit} of "
        f"{settings.max_slots}): check the state machine ARN and the reconciler's permissions; "
        "`pipeops reconcile --apply --release NAME` releases named holders",
    )


def listing_missed(observation: Observation) -> list[str]:
    """Executions described RUNNING that started well before the listing and were not in it.

    ListExecutions is eventually consistent, so a just-started execution may be missing; one that
    started more than the grace before the semaphore read and is still missing means the listing
    cannot be trusted.
    """
    listed = {execution.name for execution in observation.running}
    now = observation.semaphore_read_at
    return sorted(
        name
        for name, outcome in observation.described.items()
        if outcome.status is ExecutionStatus.RUNNING
        and name not in listed
        and outcome.started_at is not None
        and age_seconds(now, outcome.started_at) > observation.settings.grace_seconds
    )


def override_plan(observation: Observation, names: Sequence[str]) -> Plan:
    """The operator's override (`--release NAME`): release named holders now, whatever the share.

    Still refused for a holder whose execution is running (the cap would break) and for a name that
    holds no slot; every release stays conditional on the acquire time observed, and is audited.
    The grace and the absence guard are the operator's call: their runs are followed up as usual.
    """
    held = {holder.name: holder for holder in observation.holders}
    running = {execution.name for execution in observation.running}
    runs = {run.execution_name: run for run in observation.active_runs}
    findings: list[Finding] = []
    releases: list[Action] = []
    follow_ups: list[Action] = []
    for name in dict.fromkeys(names):
        holder = held.get(name)
        outcome = observation.described.get(name)
        if holder is None:
            findings.append(Finding(FindingKind.OVERRIDE_REFUSED, name, "holds no slot"))
            continue
        if name in running or (outcome is not None and outcome.status is ExecutionStatus.RUNNING):
            findings.append(Finding(FindingKind.OVERRIDE_REFUSED, name, "its execution is running: releasing it would break the cap"))
            continue
        decision = decide_holder(holder, observation, runs.get(name), grace=-1.0)
        if decision is None:
            findings.append(Finding(FindingKind.OVERRIDE_REFUSED, name, "its execution was not described"))
            continue
        findings.append(decision.finding)
        releases.append(replace(decision.release, reason=f"operator override: {decision.release.reason}"))
        if decision.follow_up is not None:
            follow_ups.append(decision.follow_up)
    return Plan(tuple(findings), tuple(releases + follow_ups))


def overdue(run: ActiveRun, now: datetime, grace: float) -> bool:
    """No message for the run can still be on its way to a router, nor a router be inside one."""
    return age_seconds(now, run.announced_until) > grace


def _unannounced_action(run: ActiveRun, observation: Observation, now: datetime) -> Action | None:
    settings = observation.settings
    if not overdue(run, now, settings.grace_seconds):
        return None
    if observation.claimed_files.get(run.target) == 0:
        return Action(
            ActionKind.DELETE_UNCLAIMED_RUN,
            run.target,
            "a candidate run that holds no file's claim: it lost the claim race",
            expected={"job_id": run.job_id, "started_at": run.started_at, "status": run.status.value, "updated_at": run.updated_at},
        )
    return _announce_or_give_up(run, settings, "QUEUED and no message for it is on its way")


def _announce_or_give_up(run: ActiveRun, settings: ReconcileSettings, why: str) -> Action:
    if run.announcements >= settings.max_announcements:
        return _mark_failed(run, NEVER_STARTED_ERROR, f"{why}; announced {run.announcements} times and never started")
    return _reannounce(run, why)


def _stuck_run(run: ActiveRun, observation: Observation, now: datetime) -> Action | None:
    """A non-QUEUED run whose execution ended past the grace, or never existed past the grace."""
    outcome = observation.described.get(run.execution_name)
    if outcome is None or outcome.status is ExecutionStatus.RUNNING:
        return None
    if outcome.exists and ended_within(outcome, now, observation.settings.grace_seconds):
        return None
    return _stuck_run_action(run, outcome, now, observation.settings)


def _stuck_run_action(run: ActiveRun, outcome: ExecutionOutcome, now: datetime, settings: ReconcileSettings) -> Action | None:
    if outcome.exists:
        if outcome.status is ExecutionStatus.SUCCEEDED:
            return _mark_failed(run, STUCK_ERROR, f"its execution SUCCEEDED but the run stayed {run.status.value}")
        return _mark_from_outcome(run, outcome)
    if not overdue(run, now, settings.grace_seconds):
        return None
    if run.status is JobStatus.IN_PROGRESS:
        return _announce_or_give_up(run, settings, "IN_PROGRESS with no execution and no slot: never started")
    return _mark_failed(run, STUCK_ERROR, f"{run.status.value} with no execution")


def _release(holder: Holder, reason: str) -> Action:
    return Action(ActionKind.RELEASE_HOLDER, holder.name, reason, expected={"acquired_at": holder.acquired_at})


def _mark_from_outcome(run: ActiveRun, outcome: ExecutionOutcome) -> Action:
    """FAILED with the execution's own error and cause, or the shared defaults (ExecutionTimedOut...)."""
    assert outcome.status is not None
    fields = failure_fields(outcome.status, outcome.error, outcome.cause)
    return _mark_failed(run, fields["error"], fields["cause"])


def _mark_failed(run: ActiveRun, error: str, cause: str) -> Action:
    return Action(
        ActionKind.MARK_RUN_FAILED,
        _run_target(run),
        cause[:MAX_CAUSE_CHARS],
        expected={"job_id": run.job_id, "started_at": run.started_at, "status": run.status.value, "updated_at": run.updated_at},
        values={"error": error, "cause": cause[:MAX_CAUSE_CHARS]},
    )


def _reannounce(run: ActiveRun, reason: str) -> Action:
    return Action(
        ActionKind.REANNOUNCE_RUN,
        _run_target(run),
        reason,
        expected={
            "job_id": run.job_id,
            "started_at": run.started_at,
            "status": run.status.value,
            "announce_deadline": run.announce_deadline,
        },
        values={"bucket": run.bucket},
    )


def _run_target(run: ActiveRun) -> str:
    return run.target
