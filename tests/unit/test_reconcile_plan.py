"""The reconciler's plan: one frozen healthy observation, one thing changed per case."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from monitors.reconcile.model import (
    ActionKind,
    ActiveRun,
    FindingKind,
    Holder,
    Observation,
)
from monitors.reconcile.plan import override_plan, plan
from pipeline.config import ReconcileSettings
from pipeline.status import ExecutionStatus, JobStatus
from pipeline.stores.executions import ExecutionOutcome, RunningExecution

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(minutes=30)
JUST_NOW = NOW - timedelta(seconds=5)


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def run(name: str, status: JobStatus = JobStatus.DETECTING, updated: datetime = LONG_AGO) -> ActiveRun:
    return ActiveRun(
        job_id=f"{name}/", started_at=stamp(LONG_AGO), status=status, updated_at=stamp(updated), execution_name=name, bucket="in"
    )


def running(name: str, started: datetime = LONG_AGO) -> RunningExecution:
    return RunningExecution(name, f"arn:aws:states:us-east-1:1:execution:sm:{name}", started)


def ended(name: str, status: ExecutionStatus | None, error: str | None = None) -> ExecutionOutcome:
    return ExecutionOutcome(name, f"arn:aws:states:us-east-1:1:execution:sm:{name}", status, error=error, cause="why" if error else None)


# Two router-started executions, each holding its slot, their runs mid-workflow: nothing to do.
HEALTHY = Observation(
    taken_at=NOW,
    semaphore_read_at=NOW - timedelta(seconds=1),
    active_count=2,
    version=7,
    holders=(Holder("a", stamp(LONG_AGO)), Holder("b", stamp(LONG_AGO))),
    running=(running("a"), running("b")),
    described={},
    active_runs=(run("a"), run("b")),
    settings=ReconcileSettings(max_slots=10, grace_seconds=120),
)


def kinds(observation: Observation) -> list[str]:
    return [finding.kind.value for finding in plan(observation).findings]


def actions(observation: Observation) -> list[tuple[str, str]]:
    return [(action.kind.value, action.target) for action in plan(observation).actions]


def test_a_healthy_pipeline_needs_nothing() -> None:
    assert plan(HEALTHY).clean and plan(HEALTHY).actions == ()
    assert HEALTHY.drift == 0


def test_a_count_that_disagrees_with_its_holders_is_set_to_them_conditionally() -> None:
    stalled = replace(HEALTHY, active_count=10, holders=(), running=(), active_runs=())
    [action] = plan(stalled).actions
    assert kinds(stalled) == ["count_mismatch"]
    assert action.kind is ActionKind.SET_COUNT
    assert action.values == {"active_count": 0} and action.expected["version"] == 7


def test_a_holder_whose_execution_failed_is_released_and_its_run_marked_failed() -> None:
    leaked = replace(HEALTHY, running=(running("b"),), described={"a": ended("a", ExecutionStatus.FAILED, "States.TaskFailed")})
    assert kinds(leaked) == ["leaked_slot"]
    release, mark = plan(leaked).actions
    assert (release.kind, release.target, release.expected) == (ActionKind.RELEASE_HOLDER, "a", {"acquired_at": stamp(LONG_AGO)})
    assert mark.kind is ActionKind.MARK_RUN_FAILED and mark.values["error"] == "States.TaskFailed"
    assert mark.expected["status"] == "DETECTING"


def test_a_holder_whose_execution_succeeded_is_released_and_its_run_left_to_the_workflow() -> None:
    leaked = replace(HEALTHY, running=(running("b"),), described={"a": ended("a", ExecutionStatus.SUCCEEDED)})
    assert actions(leaked) == [("release_holder", "a")]


def test_an_execution_that_just_ended_is_left_to_the_tracker() -> None:
    just = replace(ended("a", ExecutionStatus.SUCCEEDED), stopped_at=JUST_NOW)
    assert plan(replace(HEALTHY, running=(running("b"),), described={"a": just})).clean
    ended_long_ago = replace(just, stopped_at=LONG_AGO)
    assert kinds(replace(HEALTHY, running=(running("b"),), described={"a": ended_long_ago})) == ["leaked_slot"]


def test_an_execution_that_started_after_the_listing_is_not_a_leak() -> None:
    late = replace(HEALTHY, running=(running("b"),), described={"a": ended("a", ExecutionStatus.RUNNING)})
    assert plan(late).clean


def test_a_fresh_holder_without_an_execution_is_left_to_its_router() -> None:
    fresh = replace(
        HEALTHY,
        holders=(Holder("a", stamp(LONG_AGO)), Holder("b", stamp(JUST_NOW))),
        running=(running("a"),),
        described={"b": ended("b", None)},
        active_runs=(run("a"), run("b", JobStatus.IN_PROGRESS, updated=JUST_NOW)),
    )
    assert plan(fresh).clean


def test_an_old_holder_without_an_execution_is_released_and_its_run_announced_again() -> None:
    dead_router = replace(
        HEALTHY,
        running=(running("a"),),
        described={"b": ended("b", None)},
        active_runs=(run("a"), run("b", JobStatus.IN_PROGRESS)),
    )
    assert kinds(dead_router) == ["slot_without_execution"]
    assert actions(dead_router) == [("release_holder", "b"), ("reannounce_run", f"b/@{stamp(LONG_AGO)}")]


def test_releasing_most_slots_at_once_suspects_the_observer_and_releases_nothing() -> None:
    names = [f"x{i}" for i in range(6)]
    blind = replace(
        HEALTHY,
        active_count=6,
        holders=tuple(Holder(n, stamp(LONG_AGO)) for n in names),
        running=(),
        described={n: ended(n, None) for n in names},
        active_runs=(),
    )
    found = kinds(blind)
    assert found.count("slot_without_execution") == 6 and "implausible_drift" in found
    assert plan(blind).actions == ()


def tracker_outage(max_slots: int) -> Observation:
    """Every slot's run ended while the tracker's status events went to its DLQ: all slots leaked."""
    names = [f"r{i}" for i in range(max_slots)]
    outcomes = [ExecutionStatus.FAILED if i % 2 else ExecutionStatus.SUCCEEDED for i in range(max_slots)]
    return replace(
        HEALTHY,
        active_count=max_slots,
        holders=tuple(Holder(n, stamp(LONG_AGO)) for n in names),
        running=(),
        described={
            n: replace(ended(n, status, "States.TaskFailed" if status.is_failure else None), stopped_at=LONG_AGO)
            for n, status in zip(names, outcomes, strict=True)
        },
        active_runs=tuple(run(n) for n in names),
        settings=ReconcileSettings(max_slots=max_slots, grace_seconds=120),
    )


def test_every_slot_leaked_by_ended_executions_is_released_whatever_the_share() -> None:
    """Positive evidence (each execution described, its end known) is not the observer's blind spot."""
    for max_slots in (2, 10):
        leaked = tracker_outage(max_slots)
        assert kinds(leaked) == ["leaked_slot"] * max_slots
        released = [target for kind, target in actions(leaked) if kind == "release_holder"]
        assert released == [f"r{i}" for i in range(max_slots)]
        marked = [a for a in plan(leaked).actions if a.kind is ActionKind.MARK_RUN_FAILED]
        assert len(marked) == max_slots // 2  # the failed ones; a succeeded run is the workflow's to finish


def test_absence_is_held_back_while_ended_executions_are_released() -> None:
    names = [f"x{i}" for i in range(6)]
    mixed = replace(
        HEALTHY,
        active_count=7,
        holders=(*(Holder(n, stamp(LONG_AGO)) for n in names), Holder("done", stamp(LONG_AGO))),
        running=(),
        described={**{n: ended(n, None) for n in names}, "done": replace(ended("done", ExecutionStatus.SUCCEEDED), stopped_at=LONG_AGO)},
        active_runs=(),
    )
    [refusal] = [f for f in plan(mixed).findings if f.kind is FindingKind.IMPLAUSIBLE_DRIFT]
    assert "6 holder(s) with no execution found" in refusal.reason and "--release" in refusal.reason
    assert actions(mixed) == [("release_holder", "done")]


def test_a_listing_that_misses_long_running_executions_holds_back_every_release_on_absence() -> None:
    """One holder without an execution is under the share, but the listing is visibly blind."""
    blind = replace(
        HEALTHY,
        running=(),
        described={
            "a": replace(ended("a", ExecutionStatus.RUNNING), started_at=LONG_AGO),
            "b": ended("b", None),
        },
        active_runs=(),
    )
    [refusal] = [f for f in plan(blind).findings if f.kind is FindingKind.IMPLAUSIBLE_DRIFT]
    assert "missed 1 execution(s)" in refusal.reason and "(a)" in refusal.reason
    assert plan(blind).actions == ()
    # Listed late only because it just started: ListExecutions is eventually consistent, nothing is held.
    fresh = replace(blind, described={**blind.described, "a": replace(ended("a", ExecutionStatus.RUNNING), started_at=JUST_NOW)})
    assert actions(fresh) == [("release_holder", "b")]


def test_the_operators_override_releases_named_holders_past_the_guard() -> None:
    names = [f"x{i}" for i in range(6)]
    blind = replace(
        HEALTHY,
        active_count=8,
        holders=(*(Holder(n, stamp(LONG_AGO)) for n in names), *HEALTHY.holders),
        described={n: ended(n, None) for n in names},
        active_runs=(run("x0", JobStatus.IN_PROGRESS), *HEALTHY.active_runs),
    )
    assert plan(blind).actions == ()
    overridden = override_plan(blind, ["x0", "x1", "x1"])
    assert [(a.kind.value, a.target) for a in overridden.actions] == [
        ("release_holder", "x0"), ("release_holder", "x1"), ("reannounce_run", f"x0/@{stamp(LONG_AGO)}"),
    ]
    assert all(a.reason.startswith("operator override") for a in overridden.actions if a.kind is ActionKind.RELEASE_HOLDER)
    assert overridden.actions[0].expected == {"acquired_at": stamp(LONG_AGO)}


def test_the_override_never_releases_a_running_execution_nor_a_name_that_holds_nothing() -> None:
    refused = override_plan(HEALTHY, ["a", "nobody"])
    assert refused.actions == ()
    assert [(f.kind, f.target) for f in refused.findings] == [
        (FindingKind.OVERRIDE_REFUSED, "a"), (FindingKind.OVERRIDE_REFUSED, "nobody"),
    ]


def test_the_stall_signature_is_repaired_even_when_implausible() -> None:
    """A count of the max with no holder comes from one consistent read: no guard applies."""
    stall = replace(HEALTHY, active_count=10, holders=(), running=(), active_runs=())
    assert actions(stall) == [("set_count", "semaphore")]


def test_a_running_execution_without_a_slot_is_reported_never_acted_on() -> None:
    by_hand = replace(HEALTHY, running=(*HEALTHY.running, running("manual")))
    assert kinds(by_hand) == ["orphan_execution"] and plan(by_hand).actions == ()


def test_an_execution_started_after_the_semaphore_read_is_not_an_orphan() -> None:
    racing = replace(HEALTHY, running=(*HEALTHY.running, running("c", started=NOW)))
    assert plan(racing).clean


def test_an_active_run_whose_execution_ended_without_a_slot_is_marked_from_its_outcome() -> None:
    stuck = replace(
        HEALTHY,
        active_count=1,
        holders=(Holder("a", stamp(LONG_AGO)),),
        running=(running("a"),),
        described={"b": ended("b", ExecutionStatus.TIMED_OUT, "States.Timeout")},
    )
    assert kinds(stuck) == ["stuck_run"]
    [mark] = plan(stuck).actions
    assert mark.kind is ActionKind.MARK_RUN_FAILED and mark.values["error"] == "States.Timeout"


def test_an_in_progress_run_that_never_started_is_announced_again_after_the_grace() -> None:
    never = replace(
        HEALTHY,
        active_count=1,
        holders=(Holder("a", stamp(LONG_AGO)),),
        running=(running("a"),),
        described={"b": ended("b", None)},
        active_runs=(run("a"), run("b", JobStatus.IN_PROGRESS)),
    )
    assert actions(never) == [("reannounce_run", f"b/@{stamp(LONG_AGO)}")]
    young = replace(never, active_runs=(run("a"), run("b", JobStatus.IN_PROGRESS, updated=JUST_NOW)))
    assert plan(young).clean


def queued(name: str, *, deadline: datetime, announcements: int = 0, updated: datetime = LONG_AGO) -> ActiveRun:
    return replace(
        run(name, JobStatus.QUEUED, updated), announce_deadline=stamp(deadline), announcements=announcements, files=("f.txt",)
    )


def test_a_queued_run_whose_message_may_still_arrive_is_left_to_the_router() -> None:
    waiting = replace(HEALTHY, active_runs=(*HEALTHY.active_runs, queued("q", deadline=NOW + timedelta(seconds=30))))
    assert plan(waiting).clean
    # Its deadline passed, but less than the grace ago: a router may be holding the message now.
    delivered = replace(HEALTHY, active_runs=(*HEALTHY.active_runs, queued("q", deadline=NOW - timedelta(seconds=60))))
    assert plan(delivered).clean


def test_a_queued_run_with_no_message_on_its_way_is_announced_again_conditionally() -> None:
    lost = replace(HEALTHY, active_runs=(*HEALTHY.active_runs, queued("q", deadline=LONG_AGO)))
    assert kinds(lost) == ["unannounced_run"]
    [action] = plan(lost).actions
    assert action.kind is ActionKind.REANNOUNCE_RUN and action.target == f"q/@{stamp(LONG_AGO)}"
    assert action.expected["announce_deadline"] == stamp(LONG_AGO) and action.expected["status"] == "QUEUED"


def test_a_run_announced_too_often_without_starting_is_failed_with_the_reason() -> None:
    hopeless = replace(HEALTHY, active_runs=(*HEALTHY.active_runs, queued("q", deadline=LONG_AGO, announcements=3)))
    [action] = plan(hopeless).actions
    assert kinds(hopeless) == ["unannounced_run"] and action.kind is ActionKind.MARK_RUN_FAILED
    assert action.values["error"] == "ReconcilerNeverStarted" and "announced 3 times" in action.values["cause"]


def test_a_candidate_run_that_no_claim_names_is_deleted_not_announced() -> None:
    candidate = queued("q", deadline=LONG_AGO)
    orphan = replace(HEALTHY, active_runs=(*HEALTHY.active_runs, candidate), claimed_files={candidate.target: 0})
    [action] = plan(orphan).actions
    assert kinds(orphan) == ["unannounced_run"] and action.kind is ActionKind.DELETE_UNCLAIMED_RUN
    assert action.expected["updated_at"] == candidate.updated_at
    claimed = replace(orphan, claimed_files={candidate.target: 1})
    assert [a.kind for a in plan(claimed).actions] == [ActionKind.REANNOUNCE_RUN]


def test_a_queued_run_written_before_deadlines_existed_counts_from_its_last_change() -> None:
    legacy = replace(HEALTHY, active_runs=(*HEALTHY.active_runs, run("q", JobStatus.QUEUED, updated=JUST_NOW)))
    assert plan(legacy).clean
    old = replace(HEALTHY, active_runs=(*HEALTHY.active_runs, run("q", JobStatus.QUEUED)))
    assert kinds(old) == ["unannounced_run"]


def test_repairs_are_capped_per_run() -> None:
    names = [f"x{i}" for i in range(4)]
    many = replace(
        HEALTHY,
        active_count=4,
        holders=tuple(Holder(n, stamp(LONG_AGO)) for n in names),
        running=(),
        described={n: ended(n, ExecutionStatus.SUCCEEDED) for n in names},
        active_runs=(),
        settings=ReconcileSettings(max_slots=10, max_repairs=3),
    )
    assert len(plan(many).actions) == 3 and "repairs_capped" in kinds(many)


def test_drift_counts_slots_not_held_by_a_running_execution() -> None:
    assert replace(HEALTHY, running=(running("a"),)).drift == 1
    assert replace(HEALTHY, active_count=3).drift == 1


def test_each_finding_kind_is_covered_by_a_case_here() -> None:
    covered = {
        FindingKind.COUNT_MISMATCH, FindingKind.LEAKED_SLOT, FindingKind.SLOT_WITHOUT_EXECUTION,
        FindingKind.IMPLAUSIBLE_DRIFT, FindingKind.ORPHAN_EXECUTION, FindingKind.STUCK_RUN, FindingKind.REPAIRS_CAPPED,
        FindingKind.UNANNOUNCED_RUN, FindingKind.OVERRIDE_REFUSED,
    }
    assert covered == set(FindingKind)
