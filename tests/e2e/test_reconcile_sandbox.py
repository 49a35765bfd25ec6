"""`pipeops reconcile` on the sandbox, each drift induced for real: dry run changes nothing and
reports it; --apply repairs it and writes an audit record; applying again finds nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.jobs import parse_timestamp
from pipeline.status import JobStatus
from pipeline.stores.audit import AUDIT_PREFIX
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import RunRecord
from pipeops.cli import app
from tests.conftest import alarm_states, envelope, put, runs, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def sandbox(make_sandbox: Any) -> Any:
    """The scheduled reconciler is held off (its schedule rule disabled) so that each test sees its drift."""
    return hold_off_the_reconciler(make_sandbox())


def hold_off_the_reconciler(sandbox: Any) -> Any:
    """Disable the reconciler's schedule rule (ReconcileSchedule allows 15 minutes at most)."""
    sandbox.client("events").disable_rule(Name=sandbox.deployment.resources["ReconcilerFunctionSchedule"])
    return sandbox


def reconcile(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(app, ["reconcile", "--json", *args])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, envelope(result.output, "reconcile")


def status(sandbox: Any) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["status", "--json"])
    data = envelope(result.output, "status")
    assert result.exit_code == (1 if data["pages"] else 0), result.output  # 1: it shows what pages
    return data


def semaphore(sandbox: Any) -> Semaphore:
    return Semaphore(sandbox.outputs["CoordinationTableName"], sandbox.client("dynamodb"))


def audits(sandbox: Any) -> list[dict[str, Any]]:
    items = sandbox.client("dynamodb").scan(TableName=sandbox.outputs["CoordinationTableName"])["Items"]
    return [item for item in items if item["doc_key"]["S"].startswith(AUDIT_PREFIX)]


def test_an_edited_count_is_reported_then_repaired_then_clean(sandbox: Any) -> None:
    sandbox.client("dynamodb").update_item(
        TableName=sandbox.outputs["CoordinationTableName"],
        Key={"doc_key": {"S": "workflow_counter"}},
        UpdateExpression="SET active_count = :n ADD version :one",
        ExpressionAttributeValues={":n": {"N": "10"}, ":one": {"N": "1"}},
    )
    code, dry = reconcile()
    assert code == 1 and [f["kind"] for f in dry["findings"]] == ["count_mismatch"]
    assert dry["applied"] is False and [a["result"] for a in dry["actions"]] == ["skipped"]
    assert semaphore(sandbox).read().active_count == 10 and audits(sandbox) == []
    before = status(sandbox)
    assert before["reconciler"]["last_run"] is None
    assert ("count_mismatch", "reconcile") in [(f["name"], f["source"]) for f in before["findings"]]

    code, applied = reconcile("--apply")
    assert code == 0 and [a["result"] for a in applied["actions"]] == ["applied"]
    assert semaphore(sandbox).read().active_count == 0
    assert applied["drift_before"] == 10 and applied["drift_after"] == 0
    assert [a["action"]["S"] for a in audits(sandbox)] == ["set_count"]

    after = status(sandbox)
    assert after["findings"] == []
    assert after["reconciler"]["last_run"]["repairs"] == 1 and after["reconciler"]["last_run"]["finding_count"] == 1

    code, again = reconcile("--apply")
    assert code == 0 and again["findings"] == [] and again["actions"] == []


def test_a_lost_status_event_leaks_a_slot_that_reconcile_releases(sandbox: Any) -> None:
    rule = sandbox.deployment.resources["WorkflowTrackerFunctionExecutionStatusChange"]
    sandbox.bus.pause_rule(rule)  # the tracker never hears the execution end
    put(sandbox, "leak.txt")
    assert sandbox.wait_until_idle(120)
    [run] = runs(sandbox)
    assert run.status is JobStatus.COMPLETE
    assert set(semaphore(sandbox).read().holders) == {run.run.execution_name}

    code, fresh = reconcile()  # it just ended: the tracker is given the grace period to act first
    assert code == 0 and fresh["findings"] == []
    code, dry = reconcile("--grace-seconds", "0")
    assert code == 1 and [(f["kind"], f["target"]) for f in dry["findings"]] == [("leaked_slot", run.run.execution_name)]
    assert set(semaphore(sandbox).read().holders) == {run.run.execution_name}

    code, applied = reconcile("--apply", "--grace-seconds", "0")
    assert code == 0 and [a["kind"] for a in applied["actions"]] == ["release_holder"]
    state = semaphore(sandbox).read()
    assert state.holders == {} and state.active_count == 0
    assert [a["action"]["S"] for a in audits(sandbox)] == ["release_holder"]

    code, again = reconcile("--apply")
    assert code == 0 and again["findings"] == []
    # The held status event arrives at last: the tracker finds no holder and changes nothing.
    sandbox.bus.resume_rule(rule)
    assert sandbox.wait_until_idle(60)
    assert semaphore(sandbox).read().active_count == 0


def test_a_router_that_died_after_admission_with_its_message_lost_is_started_again(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.routing as routing

    real_start = routing.Router._start

    def die_before_starting(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise SystemExit("router crashed after taking its slot (injected)")

    monkeypatch.setattr(routing.Router, "_start", die_before_starting)
    put(sandbox, "orphaned.txt")
    sqs = sandbox.client("sqs")
    queue = sandbox.outputs["MainQueueUrl"]
    deadline_runs: list[RunRecord] = []
    for _ in range(600):  # until the router has admitted the run (IN_PROGRESS, slot held)
        deadline_runs = runs(sandbox)
        if deadline_runs and deadline_runs[0].status is JobStatus.IN_PROGRESS:
            break
        sandbox.bus.wait_until_idle(0.1)
    [run] = deadline_runs
    assert run.status is JobStatus.IN_PROGRESS and run.execution_arn is None
    sandbox.poller.stop()  # the message is lost: nothing will redeliver it
    sqs.purge_queue(QueueUrl=queue)
    monkeypatch.setattr(routing.Router, "_start", real_start)
    assert set(semaphore(sandbox).read().holders) == {run.run.execution_name}

    code, fresh = reconcile()  # younger than the default grace: left to its router
    assert code == 0 and fresh["findings"] == []
    code, dry = reconcile("--grace-seconds", "0")
    assert code == 1 and [f["kind"] for f in dry["findings"]] == ["slot_without_execution"]

    code, applied = reconcile("--apply", "--grace-seconds", "0")
    assert [a["kind"] for a in applied["actions"]] == ["release_holder", "reannounce_run"]
    assert {a["result"] for a in applied["actions"]} == {"applied"}
    sandbox.poller.start()
    assert sandbox.wait_until_idle(120)
    [done] = runs(sandbox)
    assert done.status is JobStatus.COMPLETE and done.execution_arn
    assert semaphore(sandbox).read().holders == {}
    code, again = reconcile("--apply", "--grace-seconds", "0")
    assert code == 0 and again["findings"] == []


def test_the_scheduled_reconciler_repairs_the_stall_on_its_own(make_sandbox: Any) -> None:
    sandbox = make_sandbox(ReconcileSchedule="rate(1 minute)")  # 3 s at the sandbox's time scale
    sandbox.client("dynamodb").update_item(
        TableName=sandbox.outputs["CoordinationTableName"],
        Key={"doc_key": {"S": "workflow_counter"}},
        UpdateExpression="SET active_count = :n ADD version :one",
        ExpressionAttributeValues={":n": {"N": "10"}, ":one": {"N": "1"}},
    )
    import time

    deadline = time.monotonic() + 120
    # The repair, then its audit record (a second write, just after): wait for both.
    while (semaphore(sandbox).read().active_count or not audits(sandbox)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert semaphore(sandbox).read().active_count == 0
    [audit] = audits(sandbox)
    assert audit["action"]["S"] == "set_count" and audit["by"]["S"].endswith(sandbox.outputs["ReconcilerFunctionName"])


def test_a_run_left_active_after_its_execution_ended_is_marked_from_the_real_outcome(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflow's last status write (the verdict) is lost (injected), so its execution
    SUCCEEDED while the run stays DETECTING with no slot held: stuck_run, repaired from
    DescribeExecution."""
    import pipeline.tasks as tasks

    def lose_the_verdict(*args: Any, **kwargs: Any) -> None:
        return None  # never written (as when an earlier attempt wrote it)

    monkeypatch.setattr(tasks, "record_verdict", lose_the_verdict)
    put(sandbox, "stuck.txt")
    assert sandbox.wait_until_idle(120)
    [run] = runs(sandbox)
    assert run.status is JobStatus.DETECTING and run.execution_arn
    assert semaphore(sandbox).read().holders == {}  # the tracker released the slot

    code, fresh = reconcile()  # it just ended: given the grace period
    assert code == 0 and fresh["findings"] == []
    code, dry = reconcile("--grace-seconds", "0")
    assert code == 1 and [f["kind"] for f in dry["findings"]] == ["stuck_run"]
    assert runs(sandbox)[0].status is JobStatus.DETECTING
    code, applied = reconcile("--apply", "--grace-seconds", "0")
    assert code == 0 and [a["kind"] for a in applied["actions"]] == ["mark_run_failed"]
    [marked] = runs(sandbox)
    assert marked.status is JobStatus.FAILED and marked.error == "ReconcilerStuckRun"
    assert [a["action"]["S"] for a in audits(sandbox)] == ["mark_run_failed"]
    code, again = reconcile("--apply", "--grace-seconds", "0")
    assert code == 0 and again["findings"] == []


def test_reconciling_every_second_during_30_jobs_repairs_nothing_that_was_correct(make_sandbox: Any) -> None:
    """No false repair: with the default grace, a reconcile --apply every second while 30 jobs
    run through 3 slots applies no action at all, and every file still ends terminal. The jobs
    arrive 5 at a time between passes, so the passes meet work in flight however fast it runs."""
    import time

    sandbox = make_sandbox(MaxConcurrentWorkflows="3")  # the scheduled reconciler runs too
    # The heartbeat alarm waits for the reconciler's first run: its schedule fires once now rather
    # than 5 virtual minutes (15 s) after the start.
    sandbox.bus.fire_schedule(schedule_rule_of(sandbox, "ReconcilerFunctionName"))
    wait_for(lambda: any(t.alarm_name == "pipeops-ReconcilerSilent" and t.new_state == "OK" for t in sandbox.alarms.transitions), 300)
    healthy_since = len(sandbox.alarms.transitions)
    arriving = list(range(30))
    applied_actions: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    passes_meeting_work = 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        for index in arriving[:5]:
            put(sandbox, f"job-{index:02d}.txt", f"mail person{index}@corp.example\n".encode())
        del arriving[:5]
        _, report = reconcile("--apply")
        observed = report["observed"]
        passes_meeting_work += bool(observed["holders"] or observed["running_executions"] or observed["active_runs"])
        applied_actions += report["actions"]
        findings += report["findings"]
        done = runs(sandbox)
        if not arriving and len(done) == 30 and all(run.status.is_terminal for run in done) and not observed["holders"]:
            break
        time.sleep(1)
    assert applied_actions == [] and findings == [], (applied_actions, findings)
    assert passes_meeting_work >= 2, "the reconciler never ran while jobs were in flight"
    assert sorted(run.status.value for run in runs(sandbox)) == ["COMPLETE"] * 30
    assert sandbox.wait_until_idle(60)
    state = semaphore(sandbox).read()
    assert state.active_count == 0 and state.holders == {}
    # A healthy run pages nobody: no alarm moved to ALARM, and every alarm is OK at the end.
    sandbox.alarms.evaluate_now()
    paged = [t.alarm_name for t in list(sandbox.alarms.transitions)[healthy_since:] if t.new_state == "ALARM"]
    assert paged == []
    # The DynamoDB throttle alarms too: watched as FILL(m, 0), missing data not breaching.
    assert {name: state for name, state in alarm_states(sandbox).items() if state != "OK"} == {}


def schedule_rule_of(sandbox: Any, function_output: str) -> str:
    """The name of the schedule rule that targets a function (read from EventBridge)."""
    events = sandbox.client("events")
    function = sandbox.client("lambda").get_function(FunctionName=sandbox.outputs[function_output])
    names = events.list_rule_names_by_target(TargetArn=function["Configuration"]["FunctionArn"])["RuleNames"]
    [scheduled] = [name for name in names if events.describe_rule(Name=name).get("ScheduleExpression")]
    return scheduled


def test_a_lost_router_message_leaves_a_queued_run_that_reconcile_announces_again(
    make_sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.queue import JobQueue

    # The run's announcement lease is 4 capacity waits: 4 s to wait out, not 8 s at the scaled default.
    sandbox = hold_off_the_reconciler(make_sandbox(CapacityRetrySeconds="1"))

    lost: list[Any] = []
    real_send = JobQueue.send
    monkeypatch.setattr(JobQueue, "send", lambda self, message, delay=0: lost.append(message) or "lost")
    put(sandbox, "unheard.txt")  # ingest writes the run; its announcement never reaches the queue
    wait_for(lambda: len(runs(sandbox)) == 1 and len(lost) == 1)
    assert sandbox.wait_until_idle(60)
    monkeypatch.setattr(JobQueue, "send", real_send)
    [run] = runs(sandbox)
    assert run.status is JobStatus.QUEUED and run.announce_deadline

    code, fresh = reconcile()  # its message could still be in a router's hands
    assert code == 0 and fresh["findings"] == []
    # Ingest announces a run a lease of capacity waits ahead (so a router's first wait writes
    # nothing): only past that deadline is the lost message noticed.
    wait_for(lambda: datetime.now(UTC) > parse_timestamp(run.announce_deadline), timeout=60)
    code, dry = reconcile("--grace-seconds", "0")
    assert code == 1 and [(f["kind"], f["target"]) for f in dry["findings"]] == [
        ("unannounced_run", f"{run.job_id}@{run.started_at}")
    ]
    assert runs(sandbox)[0].announcements == 0

    code, applied = reconcile("--apply", "--grace-seconds", "0")
    assert [(a["kind"], a["result"]) for a in applied["actions"]] == [("reannounce_run", "applied")]
    assert [a["action"]["S"] for a in audits(sandbox)] == ["reannounce_run"]
    assert sandbox.wait_until_idle(120)
    [done] = runs(sandbox)
    assert done.status is JobStatus.COMPLETE
    code, again = reconcile("--apply", "--grace-seconds", "0")
    assert code == 0 and again["findings"] == []


def test_a_candidate_run_that_lost_the_claim_race_is_deleted(sandbox: Any) -> None:
    """A QUEUED run holding a file whose claim names another run (an ingest of an older version
    that died after writing it): announcing it would process the file twice; it is deleted."""
    from pipeline.jobs import RunRef, format_timestamp
    from pipeline.stores.tracking import TrackingStore

    put(sandbox, "claimed.txt")
    assert sandbox.wait_until_idle(120)
    [processed] = runs(sandbox)
    assert processed.status is JobStatus.COMPLETE
    store = TrackingStore(sandbox.outputs["TrackingTableName"], sandbox.client("dynamodb"))
    candidate = RunRef("claimed.txt", format_timestamp(datetime.now(UTC)))
    assert store.create_run(candidate, ["claimed.txt"], sandbox.outputs["InputBucketName"], datetime.now(UTC), lead=False)

    code, dry = reconcile("--grace-seconds", "0")
    target = f"{candidate.job_id}@{candidate.started_at}"
    assert code == 1 and [(f["kind"], f["target"]) for f in dry["findings"]] == [("unannounced_run", target)]
    # The scheduled Lambda sees the same under its own role (the claims are read with BatchGetItem).
    invoked = sandbox.client("lambda").invoke(
        FunctionName=sandbox.outputs["ReconcilerFunctionName"], Payload=b'{"dry_run": true}'
    )
    assert "FunctionError" not in invoked, invoked["Payload"].read()

    code, applied = reconcile("--apply", "--grace-seconds", "0")
    assert [(a["kind"], a["result"]) for a in applied["actions"]] == [("delete_unclaimed_run", "applied")]
    assert [run.run for run in runs(sandbox)] == [processed.run]
    assert [a["action"]["S"] for a in audits(sandbox)] == ["delete_unclaimed_run"]
    code, again = reconcile("--apply", "--grace-seconds", "0")
    assert code == 0 and again["findings"] == []


def test_an_execution_started_by_hand_is_reported_and_never_stopped(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from moto.dynamodb.responses import DynamoHandler

    release, hold_reached = threading.Event(), threading.Event()
    real_update_item = DynamoHandler.update_item

    # Held before moto takes the request (and the sandbox's DynamoDB lock), so the reconciler's
    # reads go on while the execution waits.
    def hold_the_first_step(self: Any) -> Any:
        if self.body.get("Key", {}).get("job_id") == {"S": "by-hand/"}:  # the first state marks the run DETECTING
            hold_reached.set()
            release.wait(60)  # the hand-started execution stays RUNNING while the reconciler looks
        return real_update_item(self)

    monkeypatch.setattr(DynamoHandler, "update_item", hold_the_first_step)
    sfn = sandbox.client("stepfunctions")
    # An input good enough to run (without a job_id the first state's path fails the execution at
    # once, States.Runtime, on AWS too); no run of that job exists, so no record names the execution.
    by_hand = {"job_id": "by-hand/", "started_at": "2026-01-01T00:00:00.000000Z", "execution_name": "started-by-hand"}
    started = sfn.start_execution(
        stateMachineArn=sandbox.outputs["StateMachineArn"], name="started-by-hand", input=json.dumps(by_hand)
    )
    try:
        wait_for(hold_reached.is_set, timeout=60)  # the execution's first state is under way, held
        wait_for(lambda: sfn.describe_execution(executionArn=started["executionArn"])["status"] == "RUNNING")
        code, dry = reconcile()
        assert code == 1 and [(f["kind"], f["target"]) for f in dry["findings"]] == [("orphan_execution", "started-by-hand")]
        code, applied = reconcile("--apply")
        assert code == 1 and applied["actions"] == []  # reported, never acted on
        assert [f["kind"] for f in applied["findings"]] == ["orphan_execution"]
        assert sfn.describe_execution(executionArn=started["executionArn"])["status"] == "RUNNING"
        state = semaphore(sandbox).read()
        assert state.active_count == 0 and state.holders == {}  # never given a slot
        assert audits(sandbox) == []
    finally:
        sfn.stop_execution(executionArn=started["executionArn"])
        release.set()
    assert sandbox.wait_until_idle(120)
    code, again = reconcile("--apply")
    assert code == 0 and again["findings"] == []


# -- a tracker outage that leaks every slot -------------------------------------------------------


def running_names(sandbox: Any) -> list[str]:
    pages = sandbox.client("stepfunctions").get_paginator("list_executions").paginate(
        stateMachineArn=sandbox.outputs["StateMachineArn"], statusFilter="RUNNING"
    )
    return [execution["name"] for page in pages for execution in page["executions"]]


def wrong_state_machine(sandbox: Any) -> str:
    """Another state machine of the account: what a reconciler given the wrong ARN lists and describes."""
    role = sandbox.client("iam").create_role(RoleName="elsewhere", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    definition = {"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}
    made = sandbox.client("stepfunctions").create_state_machine(name="elsewhere", definition=json.dumps(definition), roleArn=role)
    return str(made["stateMachineArn"])


@pytest.mark.parametrize("max_slots", [2, 10])
def test_a_tracker_outage_that_leaks_every_slot_heals_by_itself(make_sandbox: Any, max_slots: int) -> None:
    """The tracker's status events are lost to its DLQ while every slot's run ends: every slot
    leaks and three runs wait QUEUED. Each leaked holder's execution is described and has ended
    (positive evidence), so the scheduled reconciler releases them all, past the implausible-drift
    guard; the waiting runs then complete and nothing ever runs above the max. A reconciler given
    the wrong state machine sees "no execution" for every holder and still releases nothing."""
    from dataclasses import replace

    from monitors.reconcile.loop import reconcile as reconcile_pass
    from pipeline.stores.executions import ExecutionsStore
    from pipeops.reconcile import build
    from stack.resources import StackResources

    # The grace (a router's timeout + margin) shortened to what the sandbox's handlers can take.
    sandbox = make_sandbox(MaxConcurrentWorkflows=str(max_slots), ReconcileGraceSeconds="40")
    rule = sandbox.deployment.resources["WorkflowTrackerFunctionExecutionStatusChange"]
    sandbox.bus.pause_rule(rule)
    for index in range(max_slots):
        put(sandbox, f"first-{index:02d}.txt")
    wait_for(lambda: len(runs(sandbox)) == max_slots and all(r.status.is_terminal for r in runs(sandbox)), 300)
    leaked = semaphore(sandbox).read()
    assert len(leaked.holders) == leaked.active_count == max_slots and running_names(sandbox) == []
    for index in range(3):
        put(sandbox, f"waiting-{index}.txt")
    lost = sandbox.bus.expire_held(rule)  # the outage ends; what it held went to the tracker's DLQ
    assert lost >= max_slots
    dlq = sandbox.client("sqs").get_queue_attributes(
        QueueUrl=sandbox.outputs["TrackerDeadLetterQueueUrl"], AttributeNames=["ApproximateNumberOfMessages"]
    )
    assert int(dlq["Attributes"]["ApproximateNumberOfMessages"]) == lost

    # The wrong state machine ARN: every holder reads as "no execution" -> release nothing.
    resources = StackResources.from_outputs(sandbox.stack_name, dict(sandbox.outputs))
    blind = build(resources, sandbox.client, grace_seconds=0)
    blind = replace(blind, executions=ExecutionsStore(sandbox.client("stepfunctions"), wrong_state_machine(sandbox)))
    refused = reconcile_pass(blind, apply=True)
    assert {f.kind.value for f in refused.plan.findings} == {"slot_without_execution", "implausible_drift"}
    assert refused.applied == [] and len(semaphore(sandbox).read().holders) == max_slots

    most_running = 0

    def healed() -> bool:
        nonlocal most_running
        most_running = max(most_running, len(running_names(sandbox)))
        assert most_running <= max_slots, f"{most_running} executions ran at once with a max of {max_slots}"
        done = runs(sandbox)
        return len(done) == max_slots + 3 and all(r.status.is_terminal for r in done) and not semaphore(sandbox).read().holders

    wait_for(healed, 420)
    released = [a for a in audits(sandbox) if a["action"]["S"] == "release_holder"]
    assert len(released) == max_slots
    assert all(a["by"]["S"].endswith(sandbox.outputs["ReconcilerFunctionName"]) for a in released)
    assert all(r.status is JobStatus.COMPLETE for r in runs(sandbox))


def test_the_operator_releases_named_holders_past_the_guard(make_sandbox: Any) -> None:
    """`reconcile --release NAME`: the override for releases the guard holds back (dry run first)."""
    sandbox = make_sandbox(ReconcileApply="false")  # the scheduled reconciler only reports
    held = semaphore(sandbox)
    for name in ("ghost-a", "ghost-b"):  # two routers that died after admission, long ago
        assert held.acquire(name, "2026-01-01T00:00:00.000000Z", 10).value == "acquired"
    code, dry = reconcile("--release", "ghost-a", "--release", "running-nowhere")
    assert code == 1 and dry["applied"] is False
    assert [(f["kind"], f["target"]) for f in dry["findings"]] == [
        ("slot_without_execution", "ghost-a"), ("override_refused", "running-nowhere"),
    ]
    assert set(held.read().holders) == {"ghost-a", "ghost-b"}
    code, applied = reconcile("--apply", "--release", "ghost-a")
    assert [(a["kind"], a["target"], a["result"]) for a in applied["actions"]] == [("release_holder", "ghost-a", "applied")]
    assert set(held.read().holders) == {"ghost-b"}
    [audit] = audits(sandbox)
    assert audit["target"]["S"] == "ghost-a" and audit["reason"]["S"].startswith("operator override")
