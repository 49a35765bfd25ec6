"""Every SSM Automation document of the stack, run from its deployed content against the sandbox.

moto stores Automation documents and never executes them, so `start_document` does what SSM
Automation does with the few actions these documents use: it checks the parameters against the
document's (types, defaults, allowed patterns), replaces each `{{ Name }}`, follows the steps from
the first (`aws:branch` on its BooleanEquals choices, `aws:approve` granted), invokes
RunbookFunction with the step's InputPayload, and reads each step output with its Selector from
the invocation's response, failing when a selector selects nothing or the wrong type. Nothing of
a document is retyped here: the steps, payloads and selectors are the deployed ones.

For each document: DryRun true changes nothing and returns the evidence (verdict remains, exit
code 1); DryRun false, approved, clears the condition (verdict cleared, exit code 0).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from alarms.automation import document_id
from pipeline.status import JobStatus
from pipeline.stores.semaphore import Semaphore
from runbooks.automation.engine import ACTING_RUNBOOKS
from runbooks.catalog import Runbook
from tests.conftest import (
    an_overdue_run_whose_message_was_lost,
    depth,
    edit_count,
    held_off,
    job_message,
    put,
    runs,
    send,
    wait_for,
)

pytestmark = pytest.mark.slow
LONG_AGO = "2026-01-01T00:00:00.000000Z"
VARIABLE = re.compile(r"\{\{ ?(\w+) ?\}\}")
SELECTOR = re.compile(r"\$(\.\w+)+")
OUTPUT_TYPES: dict[str, type | tuple[type, ...]] = {"String": str, "Integer": int, "Boolean": bool, "StringMap": dict, "StringList": list}
PARAMETER_TYPES: dict[str, type] = {"String": str, "StringList": list, "Boolean": bool, "Integer": int}


@dataclass(frozen=True)
class AutomationRun:
    steps: list[str]  # the steps run, in order
    outputs: dict[str, Any]  # the document's outputs that its steps produced, by `step.name`


def start_document(sandbox: Any, runbook: Runbook, **parameters: Any) -> AutomationRun:
    """The document of `runbook` as deployed, run as SSM Automation would (see the module's doc)."""
    name = sandbox.deployment.resources[document_id(runbook)]
    content = json.loads(sandbox.client("ssm").get_document(Name=name, DocumentFormat="JSON")["Content"])
    values = _parameters(content["parameters"], parameters | {"Approvers": ["arn:aws:iam::123456789012:user/on-call"]})
    steps = {step["name"]: step for step in content["mainSteps"]}
    step: Mapping[str, Any] | None = content["mainSteps"][0]
    ran: list[str] = []
    outputs: dict[str, Any] = {}
    while step is not None:
        ran.append(step["name"])
        following = step.get("nextStep")
        if step["action"] == "aws:invokeLambdaFunction":
            outputs |= _invoke(sandbox, step, values)
        elif step["action"] == "aws:branch":
            following = None
            for choice in step["inputs"]["Choices"]:
                assert set(choice) == {"NextStep", "Variable", "BooleanEquals"}, choice  # the only kind used
                if _resolve(choice["Variable"], values) is choice["BooleanEquals"]:
                    following = choice["NextStep"]
                    break
        else:
            assert step["action"] == "aws:approve" and step["inputs"]["MinRequiredApprovals"] >= 1, step
        assert following is not None or step.get("isEnd") is True, f"{step['name']} leads nowhere"
        step = steps[following] if following is not None else None
    assert set(outputs) <= set(content["outputs"]), "a step output the document does not publish"
    return AutomationRun(ran, outputs)


def _parameters(declared: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    assert set(given) <= set(declared), f"not parameters of the document: {set(given) - set(declared)}"
    values = {name: spec["default"] for name, spec in declared.items() if "default" in spec} | dict(given)
    for name, spec in declared.items():
        assert name in values, f"required parameter {name} not given"
        assert isinstance(values[name], PARAMETER_TYPES[spec["type"]]), (name, values[name])
        if "allowedPattern" in spec:
            assert re.fullmatch(spec["allowedPattern"], values[name]), (name, values[name])
    return values


def _resolve(value: Any, values: Mapping[str, Any]) -> Any:
    """`{{ Name }}` alone keeps the parameter's type; inside a longer text it is replaced as text."""
    if isinstance(value, dict):
        return {key: _resolve(item, values) for key, item in value.items()}
    if not isinstance(value, str):
        return value
    if whole := VARIABLE.fullmatch(value):
        return values[whole.group(1)]
    return VARIABLE.sub(lambda match: str(values[match.group(1)]), value)


def _invoke(sandbox: Any, step: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    inputs = step["inputs"]
    answer = sandbox.client("lambda").invoke(FunctionName=inputs["FunctionName"], Payload=json.dumps(_resolve(inputs["InputPayload"], values)))
    assert "FunctionError" not in answer, answer["Payload"].read()
    response = {"Payload": json.loads(answer["Payload"].read()), "StatusCode": answer["StatusCode"]}
    return {f"{step['name']}.{output['Name']}": _select(response, output) for output in step["outputs"]}


def _select(response: Mapping[str, Any], output: Mapping[str, Any]) -> Any:
    """The output's Selector (a `$.a.b` path) applied to the invocation's response."""
    assert SELECTOR.fullmatch(output["Selector"]), output
    value: Any = response
    for key in output["Selector"].split(".")[1:]:
        assert isinstance(value, dict) and key in value, f"{output['Selector']} selects nothing in {sorted(response['Payload'])}"
        value = value[key]
    assert isinstance(value, OUTPUT_TYPES[output["Type"]]) and not (output["Type"] == "Integer" and isinstance(value, bool)), (output, value)
    return value


def dry_then_applied(sandbox: Any, runbook: Runbook, unchanged: Callable[[], Any], **parameters: Any) -> AutomationRun:
    """DryRun true: evidence, exit code 1, nothing changed, no apply step. DryRun false: cleared."""
    before = unchanged()
    dry = start_document(sandbox, runbook, DryRun=True, **parameters)
    assert dry.steps == ["diagnose", "applyOrEnd"], dry
    assert dry.outputs["diagnose.verdict"] == "remains" and dry.outputs["diagnose.exit_code"] == 1, dry
    assert dry.outputs["diagnose.error"] == ""
    assert dry.outputs["diagnose.evidence"], dry
    assert unchanged() == before

    applied = start_document(sandbox, runbook, DryRun=False, **parameters)
    assert applied.steps == ["diagnose", "applyOrEnd", "approve", "apply"], applied
    assert applied.outputs["apply.verdict"] == "cleared" and applied.outputs["apply.exit_code"] == 0, applied
    return applied


def execution_ended(event: Mapping[str, Any], execution_name: str) -> bool:
    detail = event.get("detail", {})
    return (
        event.get("detail-type") == "Step Functions Execution Status Change"
        and detail.get("status") == "SUCCEEDED"
        and detail.get("name") == execution_name
    )


def semaphore(sandbox: Any) -> Semaphore:
    return Semaphore(sandbox.outputs["CoordinationTableName"], sandbox.client("dynamodb"))


# -- the DLQ redrives -------------------------------------------------------------------------------


def test_the_redrive_documents_act_on_the_groups_named_and_replay_events(make_sandbox: Any) -> None:
    sandbox = held_off(make_sandbox())
    put(sandbox, "done.txt")
    assert sandbox.wait_until_idle(180)
    [ended] = runs(sandbox)
    send(sandbox, "DeadLetterQueueUrl", job_message(sandbox, ended.run))  # a redelivery after its run ended
    send(sandbox, "DeadLetterQueueUrl", "not a job message")

    dry = start_document(sandbox, Runbook.DLQ_MESSAGES)  # DryRun's default
    assert dry.steps == ["diagnose", "applyOrEnd"] and dry.outputs["diagnose.exit_code"] == 1
    groups = {g["reason"]: g["group"] for g in dry.outputs["diagnose.evidence"]["groups"]}
    assert set(groups) == {"run_complete", "malformed_message"} and depth(sandbox, "DeadLetterQueueUrl") == 2

    one = start_document(sandbox, Runbook.DLQ_MESSAGES, DryRun=False, Groups=[groups["malformed_message"]])
    assert one.outputs["apply.verdict"] == "remains", one  # the other group was not named: it stays
    assert depth(sandbox, "DeadLetterQueueUrl") == 1 and depth(sandbox, "QuarantineQueueUrl") == 1
    dry_then_applied(sandbox, Runbook.DLQ_MESSAGES, lambda: depth(sandbox, "DeadLetterQueueUrl"))
    assert depth(sandbox, "DeadLetterQueueUrl") == 0

    resources = sandbox.deployment.resources
    ingest_rule, tracker_rule = resources["IngestFunctionObjectCreated"], resources["WorkflowTrackerFunctionExecutionStatusChange"]
    sandbox.bus.pause_rule(ingest_rule)
    sandbox.bus.pause_rule(tracker_rule)
    put(sandbox, "late.txt")
    assert sandbox.bus.wait_until_idle(30)
    assert sandbox.bus.expire_held(ingest_rule) == 1  # ingest never heard of the upload
    dry_then_applied(sandbox, Runbook.INGEST_DLQ, lambda: (depth(sandbox, "IngestDeadLetterQueueUrl"), len(runs(sandbox))))
    wait_for(lambda: sorted(r.status for r in runs(sandbox)) == [JobStatus.COMPLETE] * 2, 180)

    [late] = [r for r in runs(sandbox) if r.files == ("late.txt",)]
    wait_for(lambda: any(execution_ended(event, late.execution_name) for event in sandbox.bus.emitted_events()), 120)
    assert sandbox.bus.wait_until_idle(30)  # its end event is held at the paused rule (expire_held resumes it)
    assert sandbox.bus.expire_held(tracker_rule) == 1 and depth(sandbox, "TrackerDeadLetterQueueUrl") == 1
    assert semaphore(sandbox).read().active_count == 1  # the tracker never heard the execution end: its slot leaked
    dry_then_applied(sandbox, Runbook.TRACKER_DLQ, lambda: (depth(sandbox, "TrackerDeadLetterQueueUrl"), semaphore(sandbox).read()))
    state = semaphore(sandbox).read()
    assert state.active_count == 0 and state.holders == {}


# -- the reconciler runbooks ------------------------------------------------------------------------


def test_the_reconciler_documents_repair_and_implausible_drift_needs_named_holders(
    make_sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = held_off(make_sandbox(MaxConcurrentWorkflows="2", CapacityRetrySeconds="1"))
    edit_count(sandbox, 2)
    dry_then_applied(sandbox, Runbook.COUNTER_DRIFT, lambda: semaphore(sandbox).read().active_count)
    assert semaphore(sandbox).read().active_count == 0

    assert semaphore(sandbox).acquire("ghost", LONG_AGO, 2).value == "acquired"  # a router that died long ago
    dry_then_applied(sandbox, Runbook.SLOTS_FULL_IDLE, lambda: semaphore(sandbox).read().holders)
    assert semaphore(sandbox).read().holders == {}

    for name in ("ghost-a", "ghost-b"):  # every slot, no execution: the guard suspects the observer
        assert semaphore(sandbox).acquire(name, LONG_AGO, 2).value == "acquired"
    unnamed = start_document(sandbox, Runbook.IMPLAUSIBLE_DRIFT, DryRun=False)  # Holders' default: none
    assert unnamed.steps[-1] == "apply" and unnamed.outputs["apply.verdict"] == "remains", unnamed
    assert "holders" in unnamed.outputs["apply.evidence"]["refused"]
    assert set(semaphore(sandbox).read().holders) == {"ghost-a", "ghost-b"}  # nothing released
    dry_then_applied(sandbox, Runbook.IMPLAUSIBLE_DRIFT, lambda: semaphore(sandbox).read().holders, Holders=["ghost-a", "ghost-b"])
    assert semaphore(sandbox).read().holders == {}

    grace = 3
    an_overdue_run_whose_message_was_lost(sandbox, monkeypatch, grace)
    dry_then_applied(sandbox, Runbook.BACKLOG_STALLED, lambda: runs(sandbox), GraceSeconds=str(grace))
    assert sandbox.wait_until_idle(120)
    assert [r.status for r in runs(sandbox)] == [JobStatus.COMPLETE]


# -- the re-runs ------------------------------------------------------------------------------------


def test_the_rerun_documents_rerun_only_the_runs_named(make_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline.handlers.detect as detect

    sandbox = held_off(make_sandbox(JobFolderDepth="1", FolderSettleSeconds="0"))
    real_detect = detect.detect_file
    broken = {"reports/a.txt", "batch/bad.txt"}

    def some_unreadable(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event["file_key"] in broken:
            return {"file_key": event["file_key"], "phase": "detect", "entity_counts": {}, "outcome": "failed", "error": "NotUtf8"}
        return real_detect(event, *args, **kwargs)

    monkeypatch.setattr(detect, "detect_file", some_unreadable)
    for key in ("reports/a.txt", "batch/good.txt", "batch/bad.txt"):
        put(sandbox, key)
    assert sandbox.wait_until_idle(180)
    monkeypatch.setattr(detect, "detect_file", real_detect)  # the cause is fixed
    [failed] = [r for r in runs(sandbox) if r.status is JobStatus.FAILED]
    [partial] = [r for r in runs(sandbox) if r.status is JobStatus.COMPLETE and r.failed_files["detect"]]

    unnamed = start_document(sandbox, Runbook.EXECUTIONS_FAILED, DryRun=False)  # Runs' default: none
    assert unnamed.outputs["apply.verdict"] == "remains" and "select" in unnamed.outputs["apply.evidence"]["next"], unnamed
    assert len(runs(sandbox)) == 2

    dry_then_applied(sandbox, Runbook.EXECUTIONS_FAILED, lambda: runs(sandbox), Runs=[f"{failed.job_id}@{failed.started_at}"])
    assert sandbox.wait_until_idle(180)  # the re-run done, so that the next dry run sees the runs still
    dry_then_applied(sandbox, Runbook.FILE_FAILURE_RATE, lambda: runs(sandbox), Runs=[f"{partial.job_id}@{partial.started_at}"])
    assert sandbox.wait_until_idle(180)
    reruns = [r for r in runs(sandbox) if r.run not in (failed.run, partial.run)]
    assert sorted(key for r in reruns for key in r.files) == sorted(broken)
    assert all(r.status is JobStatus.COMPLETE for r in reruns), reruns


EXERCISED = {
    Runbook.DLQ_MESSAGES: test_the_redrive_documents_act_on_the_groups_named_and_replay_events,
    Runbook.INGEST_DLQ: test_the_redrive_documents_act_on_the_groups_named_and_replay_events,
    Runbook.TRACKER_DLQ: test_the_redrive_documents_act_on_the_groups_named_and_replay_events,
    Runbook.COUNTER_DRIFT: test_the_reconciler_documents_repair_and_implausible_drift_needs_named_holders,
    Runbook.SLOTS_FULL_IDLE: test_the_reconciler_documents_repair_and_implausible_drift_needs_named_holders,
    Runbook.IMPLAUSIBLE_DRIFT: test_the_reconciler_documents_repair_and_implausible_drift_needs_named_holders,
    Runbook.BACKLOG_STALLED: test_the_reconciler_documents_repair_and_implausible_drift_needs_named_holders,
    Runbook.EXECUTIONS_FAILED: test_the_rerun_documents_rerun_only_the_runs_named,
    Runbook.FILE_FAILURE_RATE: test_the_rerun_documents_rerun_only_the_runs_named,
}


def test_every_document_is_exercised_above() -> None:
    assert set(EXERCISED) == set(ACTING_RUNBOOKS)
