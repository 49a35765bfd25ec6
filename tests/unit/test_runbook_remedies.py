"""The runbooks besides the redrives, decided without AWS: the reconciler's four (its observation
in, the evidence, the condition and the refusal out), the re-run planner, the throttle advice,
and the engine's routing to them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from monitors.failures import Failure
from monitors.reconcile.loop import ActionResult as ReconcileResult
from monitors.reconcile.loop import Applied
from monitors.reconcile.model import Action, Holder, Observation
from monitors.reconcile.plan import plan
from pipeline.config import ReconcileSettings
from pipeline.jobs import format_timestamp
from pipeline.status import JobStatus, empty_failed_files
from pipeline.stores.executions import ExecutionOutcome, RunningExecution
from pipeline.stores.tracking import RunRecord
from runbooks.automation import reconciler_runbooks as rr
from runbooks.automation.engine import run_runbook
from runbooks.automation.remedy_request import RemedyRequest
from runbooks.automation.rerun_plan import (
    RERUN,
    candidates,
    group_failures,
    new_start,
    plan_reruns,
    rerun_files,
)
from runbooks.automation.result import Verdict
from runbooks.automation.throttles import advice, stack_demand, table_summary
from runbooks.catalog import Runbook
from stack.resources import StackResources

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
LONG_AGO = format_timestamp(NOW - timedelta(minutes=30))


def observation(holders: tuple[str, ...] = (), running: tuple[str, ...] = (), count: int | None = None, max_slots: int = 10) -> Observation:
    return Observation(
        taken_at=NOW,
        semaphore_read_at=NOW,
        active_count=len(holders) if count is None else count,
        version=3,
        holders=tuple(Holder(name, LONG_AGO) for name in holders),
        running=tuple(RunningExecution(name, f"arn:{name}", NOW - timedelta(minutes=20)) for name in running),
        described={name: ExecutionOutcome(name, f"arn:{name}", None) for name in holders if name not in running},
        active_runs=(),
        settings=ReconcileSettings(max_slots=max_slots, grace_seconds=60),
    )


# -- the reconciler's four --------------------------------------------------------------------------


def test_an_edited_count_is_counter_drift_and_slots_full_idle_but_no_stalled_backlog_signal() -> None:
    edited = observation(count=10)
    decided = plan(edited)
    assert [f.kind.value for f in rr.condition(Runbook.COUNTER_DRIFT, edited, decided).findings] == ["count_mismatch"]
    full = rr.condition(Runbook.SLOTS_FULL_IDLE, edited, decided)
    assert full.signal and full.present
    assert not rr.condition(Runbook.IMPLAUSIBLE_DRIFT, edited, decided).present
    assert not rr.condition(Runbook.COUNTER_DRIFT, observation(("a",), ("a",)), plan(observation(("a",), ("a",)))).present


def test_each_holder_is_shown_next_to_its_execution_with_the_reason_it_would_be_released() -> None:
    seen = observation(("ghost", "live"), running=("live",))
    rows = {row["holder"]: row for row in rr.holder_rows(seen, plan(seen))}
    assert rows["ghost"]["execution"].startswith("none") and rows["ghost"]["decision"] == "release: no execution of its name exists"
    assert rows["live"]["execution"] == "RUNNING" and rows["live"]["decision"].startswith("kept")


def test_holders_the_implausible_guard_keeps_say_so() -> None:
    seen = observation(("g1", "g2"), max_slots=2)  # 2 absent > 1 (half of 2): suspect the observer
    decided = plan(seen)
    assert rr.condition(Runbook.IMPLAUSIBLE_DRIFT, seen, decided).present
    assert {row["decision"] for row in rr.holder_rows(seen, decided)} == {"kept: held back by the implausible-drift guard"}


@dataclass
class StubReconciler:
    """Observes one world; records what it was asked to apply (the loop's duck type)."""

    world: Observation
    applied: list[Action] = field(default_factory=list)

    def observe(self) -> Observation:
        return self.world

    def act(self, actions: Any, *, apply: bool) -> list[Applied]:
        if apply:
            self.applied += list(actions)
            self.world = observation(max_slots=self.world.settings.max_slots)  # repaired
        return [Applied(a, ReconcileResult.APPLIED if apply else ReconcileResult.SKIPPED) for a in actions]

    def record_last_run(self, report: Any) -> None:
        pass


def test_implausible_drift_refuses_to_apply_without_named_holders() -> None:
    stub = StubReconciler(observation(("g1", "g2"), max_slots=2))
    refused = rr.run_with(Runbook.IMPLAUSIBLE_DRIFT, stub, apply=True)  # type: ignore[arg-type]
    assert refused.exit_code == 1 and "holders" in refused.evidence["refused"] and stub.applied == []
    named = rr.run_with(Runbook.IMPLAUSIBLE_DRIFT, stub, apply=True, holders=["g1", "g2"])  # type: ignore[arg-type]
    assert named.exit_code == 0 and named.verdict is Verdict.CLEARED
    assert [(a.kind.value, a.target) for a in stub.applied] == [("release_holder", "g1"), ("release_holder", "g2")]


def test_a_dry_run_applies_nothing_and_an_absent_condition_is_exit_0() -> None:
    stub = StubReconciler(observation(count=4))
    dry = rr.run_with(Runbook.COUNTER_DRIFT, stub, apply=False)  # type: ignore[arg-type]
    assert dry.exit_code == 1 and stub.applied == [] and [a.kind for a in dry.plan] == ["set_count"]
    assert {o.result.value for o in dry.actions} == {"skipped"} and dry.evidence["counter_drift"] == 4
    clean = rr.run_with(Runbook.BACKLOG_STALLED, StubReconciler(observation()), apply=True)  # type: ignore[arg-type]
    assert clean.verdict is Verdict.ABSENT and clean.plan == []


# -- re-runs --------------------------------------------------------------------------------------


def record(job: str, status: JobStatus, files: tuple[str, ...] = ("a.txt", "b.txt"), failed: tuple[str, ...] = ()) -> RunRecord:
    failed_files = empty_failed_files() | {"detect": [{"key": key, "error": "NotUtf8", "message": "x"} for key in failed]}
    return RunRecord(job, LONG_AGO, status, LONG_AGO, files=files, bucket="in", failed_files=failed_files, error="boom")


def test_a_failed_run_reruns_all_its_files_a_complete_one_only_its_failed_files() -> None:
    assert rerun_files(record("j/", JobStatus.FAILED)) == ("a.txt", "b.txt")
    assert rerun_files(record("j/", JobStatus.COMPLETE, failed=("b.txt",))) == ("b.txt",)
    found = candidates([record("j/", JobStatus.COMPLETE), record("k/", JobStatus.COMPLETE, failed=("a.txt",))], {}, {})
    assert [c.id for c in found] == [f"k/@{LONG_AGO}"]  # a COMPLETE run without failed files is no candidate


def test_only_selected_runs_that_are_their_jobs_latest_and_never_rerun_are_planned() -> None:
    fresh, rerun, superseded = record("a/", JobStatus.FAILED), record("b/", JobStatus.FAILED), record("c/", JobStatus.FAILED)
    later = format_timestamp(NOW)
    found = candidates([fresh, rerun, superseded], {"a/": LONG_AGO, "b/": LONG_AGO, "c/": later}, {f"b/@{LONG_AGO}": later})
    ids = [c.id for c in found]
    assert plan_reruns(found, []) == ([], {})
    actions, refused = plan_reruns(found, [*ids, "nope@2026-01-01T00:00:00.000000Z"])
    assert [(a.kind, a.target, a.count) for a in actions] == [(RERUN, ids[0], 2)]
    assert refused[ids[1]].startswith("re-run already") and refused[ids[2]].startswith("superseded")
    assert "nope@2026-01-01T00:00:00.000000Z" in refused


def test_a_rerun_starts_after_the_jobs_latest_run_even_with_a_clock_behind() -> None:
    assert new_start(NOW, LONG_AGO) == format_timestamp(NOW)
    ahead = format_timestamp(NOW + timedelta(seconds=5))
    assert new_start(NOW, ahead) == format_timestamp(NOW + timedelta(seconds=5, microseconds=1))


def test_failures_are_grouped_by_error_and_state_without_their_causes() -> None:
    def failure(execution: str, key: str, error: str = "Sandbox.Timedout") -> Failure:
        return Failure(execution, "FAILED", "DetectFile", key, error, "ann@corp.example broke it", 1, False, "")

    rows = group_failures([failure("e1", "x.txt"), failure("e2", "y.txt"), failure("e3", "z.txt", "NotUtf8")])
    assert [(r["error"], r["count"]) for r in rows] == [("Sandbox.Timedout", 2), ("NotUtf8", 1)]
    assert rows[0]["files"] == ["x.txt", "y.txt"] and "ann@corp.example" not in repr(rows)


# -- throttles ------------------------------------------------------------------------------------


def test_throttle_advice_names_the_setting_and_the_parameter_to_change() -> None:
    parameters = {"MaxConcurrentWorkflows": "10", "RouterMaxConcurrency": "5"}
    assert stack_demand(parameters) == 25 and stack_demand({}) is None
    [execution] = advice(Runbook.EXECUTION_THROTTLED, {"stack_parameters": parameters})
    assert "MaxConcurrentWorkflows (now 10)" in execution
    functions = advice(
        Runbook.FUNCTION_THROTTLES,
        {"stack_parameters": parameters, "reserved_concurrency": {"detect": 0, "redact": None}, "account": {"ConcurrentExecutions": 10}},
    )
    assert "detect has a reserved concurrency of 0" in functions[0] and "allows 10 concurrent" in functions[1]
    tables = {"t": table_summary({"BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"}}), "p": table_summary({"ProvisionedThroughput": {"ReadCapacityUnits": 5}})}
    on_demand, provisioned = advice(Runbook.DYNAMODB_THROTTLES, {"stack_parameters": parameters, "tables": tables})
    assert "RouterMaxConcurrency (now 5)" in on_demand and "PROVISIONED" in provisioned


# -- the engine -----------------------------------------------------------------------------------


class Denied:
    """A client whose every call is refused, as without the permission."""

    def __getattr__(self, operation: str) -> Any:
        def refuse(**kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, operation)

        return refuse


class NoAws:
    def client(self, service: str) -> Any:
        return Denied()


RESOURCES = StackResources.from_outputs(
    "s",
    {
        "InputBucketName": "in",
        "OutputBucketName": "out",
        "TrackingTableName": "t",
        "CoordinationTableName": "c",
        "MainQueueUrl": "q",
        "DeadLetterQueueUrl": "d",
        "StateMachineArn": "arn:aws:states:us-east-1:1:stateMachine:sm",
        "RouterFunctionName": "router",
    },
)


def test_the_engine_runs_a_diagnosing_runbook_and_names_what_it_could_not_read() -> None:
    result = run_runbook("dynamodb-throttles", RESOURCES, NoAws(), apply=True, actor="me")
    assert result.verdict is Verdict.REMAINS and result.plan == [] and result.actions == []
    assert "table t: AccessDeniedException" in result.evidence["unreadable"]
    assert result.evidence["throttles"] is None  # unread is not "no throttles": the verdict stays remains


def test_the_selection_is_the_named_option_or_the_engines_groups() -> None:
    request = RemedyRequest(Runbook.EXECUTIONS_FAILED, RESOURCES, NoAws(), True, "me", lambda: NOW, ["a@1", "a@1"])
    assert request.chosen("runs") == ("a@1",)
    assert replace(request, options={"runs": "x@1, y@2"}).chosen("runs") == ("x@1", "y@2")
    assert replace(request, selection=None).chosen("runs") == ()
