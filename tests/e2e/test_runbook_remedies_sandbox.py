"""The acting runbooks besides the redrives, on the sandbox (runbooks.automation.engine.run_runbook),
each condition induced for real: a dry run changes nothing and exits 1 with the evidence; an
applied run clears the condition, writes an audit record and exits 0; a run after that has
nothing to do and exits 0."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from pipeline.status import JobStatus
from pipeline.stores.audit import AuditStream, audit_prefix
from pipeline.stores.claims import ClaimsStore
from pipeline.stores.semaphore import Semaphore
from runbooks.automation.engine import run_runbook
from runbooks.automation.result import RunbookResult, Verdict
from stack.resources import StackResources
from tests.conftest import an_overdue_run_whose_message_was_lost, edit_count, held_off, put, runs

pytestmark = pytest.mark.slow
LONG_AGO = "2026-01-01T00:00:00.000000Z"


def runbook(sandbox: Any, runbook_id: str, *, apply: bool, **options: Any) -> RunbookResult:
    resources = StackResources.from_outputs(sandbox.stack_name, dict(sandbox.outputs))
    result = run_runbook(runbook_id, resources, sandbox, apply=apply, options=options)
    json.dumps(result.to_dict())  # the CLI's --json prints it as it is
    return result


def semaphore(sandbox: Any) -> Semaphore:
    return Semaphore(sandbox.outputs["CoordinationTableName"], sandbox.client("dynamodb"))


def audits(sandbox: Any) -> list[str]:
    items = sandbox.client("dynamodb").scan(TableName=sandbox.outputs["CoordinationTableName"])["Items"]
    streams = tuple(audit_prefix(stream) for stream in AuditStream)  # the reconciler's repairs and the re-runs
    return sorted(item["action"]["S"] for item in items if item["doc_key"]["S"].startswith(streams))


def dry_then_applied_then_nothing(sandbox: Any, runbook_id: str, unchanged: Callable[[], Any], **options: Any) -> RunbookResult:
    before = unchanged()
    dry = runbook(sandbox, runbook_id, apply=False, **options)
    assert dry.exit_code == 1 and dry.evidence["condition"], dry.to_dict()
    assert {o.result.value for o in dry.actions} == {"skipped"} and dry.verified is None
    assert unchanged() == before and audits(sandbox) == []

    applied = runbook(sandbox, runbook_id, apply=True, **options)
    assert applied.exit_code == 0 and applied.verdict is Verdict.CLEARED, applied.to_dict()
    assert applied.verified is not None and applied.verified["condition"] == []
    assert audits(sandbox) == sorted(o.action.kind for o in applied.actions if o.result.value == "applied")

    again = runbook(sandbox, runbook_id, apply=True, **options)
    assert again.exit_code == 0 and again.verdict is Verdict.ABSENT and again.plan == [], again.to_dict()
    return applied


def test_counter_drift_sets_an_edited_count_to_its_holders(make_sandbox: Any) -> None:
    sandbox = held_off(make_sandbox())
    edit_count(sandbox, 10)
    applied = dry_then_applied_then_nothing(sandbox, "counter-drift", lambda: semaphore(sandbox).read().active_count)
    assert [a.kind for a in applied.plan] == ["set_count"] and audits(sandbox) == ["set_count"]
    assert semaphore(sandbox).read().active_count == 0


def test_slots_full_idle_releases_a_slot_held_for_an_execution_that_never_started(make_sandbox: Any) -> None:
    sandbox = held_off(make_sandbox(MaxConcurrentWorkflows="1"))
    assert semaphore(sandbox).acquire("ghost", LONG_AGO, 1).value == "acquired"  # a router that died long ago
    dry = runbook(sandbox, "slots-full-idle", apply=False)
    assert dry.evidence["signals"]["slots_full_idle"] is True
    [row] = dry.evidence["holders"]
    assert row["holder"] == "ghost" and row["execution"].startswith("none") and row["decision"].startswith("release")
    dry_then_applied_then_nothing(sandbox, "slots-full-idle", lambda: semaphore(sandbox).read().holders)
    assert audits(sandbox) == ["release_holder"] and semaphore(sandbox).read().active_count == 0


def test_implausible_drift_releases_only_named_holders(make_sandbox: Any) -> None:
    sandbox = held_off(make_sandbox(MaxConcurrentWorkflows="2"))
    for name in ("ghost-a", "ghost-b"):  # both slots, no execution: more than half the max at once
        assert semaphore(sandbox).acquire(name, LONG_AGO, 2).value == "acquired"

    refused = runbook(sandbox, "implausible-drift", apply=True)
    assert refused.exit_code == 1 and "holders" in refused.evidence["refused"] and not refused.applied
    assert set(semaphore(sandbox).read().holders) == {"ghost-a", "ghost-b"} and audits(sandbox) == []

    dry_then_applied_then_nothing(
        sandbox, "implausible-drift", lambda: semaphore(sandbox).read().holders, holders=["ghost-a", "ghost-b"]
    )
    assert audits(sandbox) == ["release_holder", "release_holder"] and semaphore(sandbox).read().holders == {}


def test_backlog_stalled_announces_again_a_run_whose_message_was_lost(make_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = held_off(make_sandbox(CapacityRetrySeconds="1"))  # a 4 s announcement lease
    grace = 3
    an_overdue_run_whose_message_was_lost(sandbox, monkeypatch, grace)

    applied = dry_then_applied_then_nothing(sandbox, "backlog-stalled", lambda: runs(sandbox), grace_seconds=grace)
    assert [a.kind for a in applied.plan] == ["reannounce_run"]
    assert sandbox.wait_until_idle(120)
    [done] = runs(sandbox)
    assert done.status is JobStatus.COMPLETE


def test_executions_failed_reruns_a_selected_run_once_as_a_new_run_of_its_files(
    make_sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.handlers.detect as detect

    sandbox = held_off(make_sandbox())
    real_detect = detect.detect_file

    def unreadable(event: Any, *args: Any, **kwargs: Any) -> Any:  # a dependency down: every file fails
        return {"file_key": event["file_key"], "phase": "detect", "entity_counts": {}, "outcome": "failed", "error": "NotUtf8"}

    monkeypatch.setattr(detect, "detect_file", unreadable)
    put(sandbox, "reports/a.txt")
    assert sandbox.wait_until_idle(180)
    [failed] = runs(sandbox)
    assert failed.status is JobStatus.FAILED
    monkeypatch.setattr(detect, "detect_file", real_detect)  # the dependency is back
    run_id = f"{failed.job_id}@{failed.started_at}"

    unselected = runbook(sandbox, "executions-failed", apply=True)
    assert unselected.exit_code == 1 and unselected.actions == [] and "select" in unselected.evidence["next"]
    assert [c["run"] for c in unselected.evidence["candidates"]] == [run_id]
    assert runs(sandbox) == [failed] and audits(sandbox) == []

    dry = runbook(sandbox, "executions-failed", apply=False, runs=[run_id])
    assert dry.exit_code == 1 and [(a.kind, a.target) for a in dry.plan] == [("rerun_run", run_id)]
    assert runs(sandbox) == [failed] and audits(sandbox) == []

    applied = runbook(sandbox, "executions-failed", apply=True, runs=[run_id])
    assert applied.exit_code == 0 and applied.verdict is Verdict.CLEARED, applied.to_dict()
    assert audits(sandbox) == ["rerun_run"]
    assert sandbox.wait_until_idle(180)
    history, rerun = runs(sandbox)
    assert history.run == failed.run and history.status is JobStatus.FAILED  # kept as history
    assert rerun.status is JobStatus.COMPLETE and rerun.files == failed.files
    assert rerun.execution_name != failed.execution_name and applied.actions[0].detail["rerun"] == f"{rerun.job_id}@{rerun.started_at}"
    claims = ClaimsStore(sandbox.outputs["TrackingTableName"], sandbox.outputs["CoordinationTableName"], sandbox.client("dynamodb"))
    assert claims.claimed_runs(sandbox.outputs["InputBucketName"], failed.files) == {"reports/a.txt": rerun.run}

    again = runbook(sandbox, "executions-failed", apply=True, runs=[run_id])
    assert again.exit_code == 0 and again.plan == [] and again.evidence["refused"][run_id].startswith("re-run already")
    assert len(runs(sandbox)) == 2 and audits(sandbox) == ["rerun_run"]


def test_file_failure_rate_reruns_only_the_failed_files_of_a_complete_run(make_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline.handlers.detect as detect

    sandbox = held_off(make_sandbox(JobFolderDepth="1", FolderSettleSeconds="0"))
    real_detect = detect.detect_file

    def one_unreadable(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event["file_key"] == "batch/bad.txt":
            return {"file_key": event["file_key"], "phase": "detect", "entity_counts": {}, "outcome": "failed", "error": "NotUtf8"}
        return real_detect(event, *args, **kwargs)

    monkeypatch.setattr(detect, "detect_file", one_unreadable)
    for key in ("batch/good.txt", "batch/bad.txt"):
        put(sandbox, key)
    assert sandbox.wait_until_idle(180)
    monkeypatch.setattr(detect, "detect_file", real_detect)
    [complete] = [r for r in runs(sandbox) if r.status is JobStatus.COMPLETE and r.failed_files["detect"]]
    run_id = f"{complete.job_id}@{complete.started_at}"
    assert runbook(sandbox, "executions-failed", apply=False).verdict is Verdict.ABSENT  # no run FAILED

    dry = runbook(sandbox, "file-failure-rate", apply=False, runs=[run_id])
    assert dry.exit_code == 1 and [(a.target, a.count) for a in dry.plan] == [(run_id, 1)] and audits(sandbox) == []
    applied = runbook(sandbox, "file-failure-rate", apply=True, runs=[run_id])
    assert applied.exit_code == 0 and audits(sandbox) == ["rerun_run"], applied.to_dict()
    assert sandbox.wait_until_idle(180)
    rerun = runs(sandbox)[-1]
    assert rerun.files == ("batch/bad.txt",) and rerun.status is JobStatus.COMPLETE and not rerun.failed_files["detect"]
    again = runbook(sandbox, "file-failure-rate", apply=True, runs=[run_id])
    assert again.exit_code == 0 and again.plan == [] and audits(sandbox) == ["rerun_run"]


def test_the_throttle_runbooks_read_what_caps_each_and_change_nothing(make_sandbox: Any) -> None:
    sandbox = held_off(make_sandbox(MaxConcurrentWorkflows="3"))
    detect_function = sandbox.outputs["DetectFunctionName"]
    sandbox.client("lambda").put_function_concurrency(FunctionName=detect_function, ReservedConcurrentExecutions=0)

    functions = runbook(sandbox, "function-throttles", apply=True)
    assert functions.verdict is Verdict.ABSENT and functions.plan == [], functions.to_dict()  # no throttle in the last hour
    assert functions.evidence["reserved_concurrency"][detect_function] == 0
    assert any(f"{detect_function} has a reserved concurrency of 0" in line for line in functions.evidence["advice"])
    assert functions.evidence["stack_parameters"]["MaxConcurrentWorkflows"] == "3"

    tables = runbook(sandbox, "dynamodb-throttles", apply=True)
    assert tables.verdict is Verdict.ABSENT, tables.to_dict()
    assert {t["billing_mode"] for t in tables.evidence["tables"].values()} == {"PAY_PER_REQUEST"}

    executions = runbook(sandbox, "execution-throttled", apply=True)
    assert executions.verdict is Verdict.ABSENT and "MaxConcurrentWorkflows (now 3)" in executions.evidence["advice"][0]
    assert audits(sandbox) == []
