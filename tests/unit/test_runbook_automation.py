"""The runbook automation's pure parts: dead letters read, grouped and planned without AWS."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.jobs import JobMessage
from pipeline.stack import Function
from pipeline.status import JobStatus
from runbooks.automation.dead_letters import (
    MALFORMED,
    UNKNOWN_RUN,
    UNSUPPORTED_VERSION,
    DlqKind,
    read_ingest_event,
    read_job_message,
    read_tracker_event,
    runs_named,
)
from runbooks.automation.pacing import Pacer
from runbooks.automation.redrive_plan import MAX_SAMPLES, group_letters, plan_redrive, use_move_task
from runbooks.automation.result import ActionOutcome, ActionResult, PlannedAction, RunbookResult, Verdict
from stack.template import load_template

RUN = ("claims/", "2026-12-03T10:00:00.000000Z")


def message(body: str, message_id: str = "m-1", attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"MessageId": message_id, "ReceiptHandle": f"rh-{message_id}", "Body": body, "MessageAttributes": attributes or {}}


def job_body(job_id: str = RUN[0], started_at: str = RUN[1], **extra: Any) -> str:
    return JobMessage(job_id, started_at, "in", extra=extra).to_json()


def object_created(key: str) -> dict[str, Any]:
    return {"detail-type": "Object Created", "source": "aws.s3", "detail": {"bucket": {"name": "in"}, "object": {"key": key}}}


def status_change(job_id: str, started_at: str, name: str = "exec-1") -> dict[str, Any]:
    detail = {
        "executionArn": f"arn:aws:states:us-east-1:123456789012:execution:pipeline:{name}",
        "status": "SUCCEEDED",
        "input": json.dumps({"job_id": job_id, "started_at": started_at, "files": ["claims/secret-name.txt"]}),
    }
    return {"detail-type": "Step Functions Execution Status Change", "source": "aws.states", "detail": detail}


# -- reading dead letters ----------------------------------------------------------------------------


def test_a_job_message_is_grouped_by_its_runs_status_and_an_unreadable_one_by_why() -> None:
    run = f"{RUN[0]}@{RUN[1]}"
    complete = read_job_message(message(job_body()), {run: JobStatus.COMPLETE})
    assert (complete.reason, complete.run, complete.target) == ("run_complete", run, run)
    assert read_job_message(message(job_body()), {run: None}).reason == UNKNOWN_RUN
    assert read_job_message(message("not json"), {}).reason == MALFORMED
    assert read_job_message(message(json.dumps({"v": 9, "job_id": "a", "started_at": "b", "bucket": "c"})), {}).reason == UNSUPPORTED_VERSION


def test_runs_named_reads_each_run_once_and_skips_what_is_not_a_job_message() -> None:
    bodies = [job_body(), job_body(capacity_waits=2), "garbage", job_body("other/")]
    assert runs_named([message(b) for b in bodies]) == [RUN, ("other/", RUN[1])]


def test_an_eventbridge_dead_letter_carries_its_error_in_an_attribute() -> None:
    attributes = {"ERROR_CODE": {"DataType": "String", "StringValue": "THROTTLING"}}
    letter = read_ingest_event(message(json.dumps(object_created("claims/a%2Bb.txt")), attributes=attributes), folder_depth=1)
    assert (letter.reason, letter.run, letter.target) == ("THROTTLING", "claims/", "in/claims/a+b.txt")
    assert letter.replay == object_created("claims/a%2Bb.txt")


def test_a_lambda_failure_record_carries_the_event_and_the_error_type_never_the_message() -> None:
    record = {
        "requestContext": {"condition": "RetriesExhausted"},
        "requestPayload": status_change(*RUN),
        "responsePayload": {"errorType": "ClientError", "errorMessage": "ann@corp.example is private"},
    }
    letter = read_tracker_event(message(json.dumps(record)))
    assert (letter.reason, letter.run, letter.target) == ("ClientError", f"{RUN[0]}@{RUN[1]}", "exec-1")
    assert letter.replay == status_change(*RUN)
    groups = group_letters([letter], {})
    assert "ann@corp.example" not in json.dumps([g.to_dict() for g in groups])
    assert "secret-name" not in json.dumps([g.to_dict() for g in groups])  # the execution input's file keys


def test_an_event_that_names_nothing_is_unreadable_not_an_error() -> None:
    assert read_tracker_event(message("[]")).reason == "unreadable_event"
    assert read_tracker_event(message(json.dumps({"detail": {}}))).reason == "unreadable_event"
    assert read_ingest_event(message(json.dumps({"detail-type": "Other"})), 1).run == ""


# -- grouping and planning ---------------------------------------------------------------------------


def letters(reason_by_run: dict[str, int]) -> list[Any]:
    out = []
    for index, (job, count) in enumerate(reason_by_run.items()):
        for copy in range(count):
            body = job_body(job) if job != "garbage" else "garbage"
            out.append(read_job_message(message(body, f"m-{index}-{copy}"), {f"{job}@{RUN[1]}": JobStatus.QUEUED}))
    return out


def test_letters_group_by_reason_and_run_largest_first_with_few_samples() -> None:
    groups = group_letters(letters({"a/": 1, "b/": 5, "garbage": 2}), {})
    assert [(g.reason, g.run, g.count) for g in groups] == [
        ("run_queued", f"b/@{RUN[1]}", 5),
        (MALFORMED, "", 2),
        ("run_queued", f"a/@{RUN[1]}", 1),
    ]
    assert len(groups[0].samples) == MAX_SAMPLES and set(groups[0].samples[0]) == {"message_id", "target"}
    assert len({g.id for g in groups}) == 3


def test_the_plan_redrives_what_can_work_and_quarantines_what_cannot_or_came_back() -> None:
    came_back = f"a/@{RUN[1]}"
    groups = group_letters(letters({"a/": 1, "b/": 2, "garbage": 1}), {came_back: "2026-12-03T11:00:00Z"})
    plan = {action.target: action for action in plan_redrive(DlqKind.MAIN, groups)}
    assert plan[f"b/@{RUN[1]}"].kind == "redrive" and plan[f"b/@{RUN[1]}"].count == 2
    assert plan[came_back].kind == "quarantine" and "after a redrive at 2026-12-03T11:00:00Z" in plan[came_back].reason
    assert plan[MALFORMED].kind == "quarantine"


def test_a_selection_plans_only_its_groups_and_an_event_dlq_replays() -> None:
    groups = group_letters(letters({"a/": 1, "b/": 1}), {})
    assert [a.group for a in plan_redrive(DlqKind.MAIN, groups, {groups[1].id})] == [groups[1].id]
    assert plan_redrive(DlqKind.MAIN, groups, set()) == []
    assert {a.kind for a in plan_redrive(DlqKind.TRACKER, groups)} == {"replay"}


@pytest.mark.parametrize(
    ("kind", "selected", "available", "expected"),
    [
        (DlqKind.MAIN, None, True, True),
        (DlqKind.MAIN, None, False, False),  # moto: receive / send / delete instead
        (DlqKind.MAIN, "first", True, False),  # a selection is not the whole queue
        (DlqKind.TRACKER, None, True, False),  # events are replayed, not moved
    ],
)
def test_the_move_task_is_for_a_whole_main_dlq_only(kind: DlqKind, selected: str | None, available: bool, expected: bool) -> None:
    groups = group_letters(letters({"a/": 1, "b/": 1}), {})
    chosen = {groups[0].id} if selected else None
    assert use_move_task(kind, groups, plan_redrive(kind, groups, chosen), available) is expected


def test_no_move_task_when_a_group_must_be_quarantined() -> None:
    groups = group_letters(letters({"a/": 1, "garbage": 1}), {})
    assert use_move_task(DlqKind.MAIN, groups, plan_redrive(DlqKind.MAIN, groups), True) is False


# -- results and pacing -------------------------------------------------------------------------------


@pytest.mark.parametrize(("verdict", "code"), [(Verdict.ABSENT, 0), (Verdict.CLEARED, 0), (Verdict.REMAINS, 1), (Verdict.ERROR, 2)])
def test_exit_codes_follow_the_verdict(verdict: Verdict, code: int) -> None:
    action = PlannedAction("redrive", "a@b", "why", "g-1", 2)
    result = RunbookResult("dlq-messages", {"read": 2}, [action], [ActionOutcome(action, ActionResult.SKIPPED)], verdict)
    assert result.exit_code == code
    data = result.to_dict()
    assert {"id", "evidence", "plan", "actions", "verified"} <= set(data)
    assert data["actions"][0]["result"] == "skipped" and data["plan"][0]["count"] == 2


def test_the_pacer_spaces_writes_and_zero_never_waits() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    pacer = Pacer(4, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        pacer.wait()
    assert slept == [0.25, 0.25]
    Pacer(0, clock=lambda: now[0], sleep=sleep).wait()
    assert len(slept) == 2


def test_only_the_operator_side_can_send_to_the_quarantine_queue() -> None:
    """No pipeline function's role, rule or mapping names the quarantine queue: nothing in the
    pipeline writes to it, so a parked message never cycles back by itself. Only what watches it
    (its alarm, the composite that pages, the dashboards; no AutoRemediate rule starts a redrive)
    names it, and the runbook function (the
    operator side, behind the SSM Automation documents) that parks messages there."""
    resources = load_template()["Resources"]
    assert resources["QuarantineQueue"]["Type"] == "AWS::SQS::Queue"
    assert "RedrivePolicy" not in resources["QuarantineQueue"]["Properties"]
    naming = {
        resource["Type"]
        for name, resource in resources.items()
        if name != Function.RUNBOOK and "QuarantineQueue" in json.dumps(resource)
    }
    assert naming == {"AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm", "AWS::CloudWatch::Dashboard"}
    assert "QuarantineQueue" in json.dumps(resources[Function.RUNBOOK])


def test_a_runbook_without_automation_is_an_error_that_points_at_its_page() -> None:
    from runbooks.automation.engine import run_runbook

    class NoClients:
        def client(self, service: str) -> Any:
            raise AssertionError("no AWS call for a runbook that cannot act")

    result = run_runbook("function-duration", None, NoClients(), apply=True)  # type: ignore[arg-type]
    assert result.exit_code == 2 and "runbooks/function-duration.md" in result.error


def test_the_command_refuses_an_unknown_id_before_connecting() -> None:
    from typer.testing import CliRunner

    from pipeops.cli import app

    result = CliRunner().invoke(app, ["runbook", "run", "no-such-runbook", "--apply", "--yes"])
    assert result.exit_code == 2 and "valid ids" in result.output
