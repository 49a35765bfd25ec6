"""The workflow definition, checked as data: no AWS, no moto.

What a reviewer would check by eye in the ASL, checked on every state instead: the file is what
the code builds, every task retries and catches, status conditions come from the status enum,
the graph is connected, limits hold.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.config import Settings
from pipeline.statemachine import build
from pipeline.statemachine.build import (
    ALL_ERRORS,
    CONDITIONAL_CHECK_FAILED,
    DEFINITION_PATH,
    DYNAMODB_STATUS_TASKS,
    DYNAMODB_TRANSIENT_ERRORS,
    FAILURE_RECORDERS,
    JOB_LAMBDA_TASKS,
    LAMBDA_TRANSIENT_ERRORS,
    PER_FILE_TASKS,
    PLACEHOLDERS,
    STATUS_TASKS,
    VERDICT_TASK,
    WORKFLOW_TIMEOUT_SECONDS,
    State,
    build_definition,
    load_definition,
    render_definition,
)
from pipeline.status import JobStatus, allowed_predecessors

DEFINITION = build_definition()
DDB_UPDATE = "${DynamoDbUpdateItemArn}"  # arn:${AWS::Partition}:states:::dynamodb:updateItem

# The brief's names, spelled out here rather than read from build.py, so a rename fails a test.
TOP_LEVEL_STATES = {
    "MarkDetecting", "DetectPII", "CheckDetectTolerance", "DetectToleranceChoice", "DropFiles",
    "MarkDetectComplete", "CheckRedactionMode", "MarkGeneratingSynthetic", "GenerateSynthetic",
    "MarkSyntheticComplete", "SetEmptyMapping", "MarkRedacting", "RedactPII", "MarkRedactComplete",
    "PrepareComplete", "CompleteToleranceChoice", "WorkflowComplete", "MarkToleranceFailed",
    "ToleranceExceeded", "MarkJobFailed", "JobFailed", "JobNoLongerActive",
}  # fmt: skip
REQUIRED_LAMBDA_RETRY = {
    "Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException", "Sandbox.Timedout", "States.Timeout",
}  # fmt: skip
REQUIRED_DYNAMODB_RETRY = {
    "DynamoDB.ProvisionedThroughputExceededException", "DynamoDB.ThrottlingException",
    "DynamoDB.RequestLimitExceeded", "DynamoDB.InternalServerError",
}  # fmt: skip


def scopes(definition: dict[str, Any] = DEFINITION, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(scope name, {"StartAt", "States"}) for the machine and every Map's item processor."""
    yield where or "<top>", definition
    for name, state in definition["States"].items():
        if state["Type"] == "Map":
            yield from scopes(state["ItemProcessor"], where=f"{where}{name}/")


def all_states() -> Iterator[tuple[str, dict[str, Any]]]:
    for _, scope in scopes():
        yield from scope["States"].items()


def tasks() -> list[tuple[str, dict[str, Any]]]:
    return [(name, state) for name, state in all_states() if state["Type"] == "Task"]


def lambda_tasks() -> list[tuple[str, dict[str, Any]]]:
    return [(name, state) for name, state in tasks() if state["Resource"] != DDB_UPDATE]


def ddb_tasks() -> list[tuple[str, dict[str, Any]]]:
    return [(name, state) for name, state in tasks() if state["Resource"] == DDB_UPDATE]


def status_tasks() -> list[tuple[str, dict[str, Any]]]:
    """Every status write: the DynamoDB one and the finalize tasks with action "status"."""
    return [
        (name, state)
        for name, state in tasks()
        if state["Resource"] == DDB_UPDATE or state.get("Parameters", {}).get("action") == "status"
    ]


def lambda_status_tasks() -> list[tuple[str, dict[str, Any]]]:
    return [(name, state) for name, state in status_tasks() if state["Resource"] != DDB_UPDATE]


def successors(state: dict[str, Any]) -> list[str]:
    targets = [state.get("Next"), state.get("Default")]
    targets += [rule["Next"] for rule in state.get("Choices", [])]
    targets += [catcher["Next"] for catcher in state.get("Catch", [])]
    return [t for t in targets if t]


# --- the file is the code's output ------------------------------------------------------------
def test_checked_in_definition_is_what_build_produces() -> None:
    assert DEFINITION_PATH.read_text(encoding="utf-8") == render_definition(), (
        "pipeline.asl.json is stale: run python -m pipeline.statemachine.build"
    )
    assert build.main(["--check"]) == 0


def test_rendering_is_stable_pretty_json_with_trailing_newline() -> None:
    text = render_definition()
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text == render_definition(json.loads(text))
    assert json.loads(text) == DEFINITION


def test_state_names_are_the_contract() -> None:
    assert set(DEFINITION["States"]) == TOP_LEVEL_STATES
    assert DEFINITION["StartAt"] == "MarkDetecting"
    assert set(DEFINITION["States"]["DetectPII"]["ItemProcessor"]["States"]) == {
        "DetectFile",
        "DetectFileFailed",
    }
    assert set(DEFINITION["States"]["RedactPII"]["ItemProcessor"]["States"]) == {
        "RedactFile",
        "RedactFileFailed",
    }
    assert {name for name, _ in all_states()} == {s.value for s in State}


# --- placeholders ------------------------------------------------------------------------------
def test_placeholders_are_exactly_the_template_substitutions() -> None:
    found = set(re.findall(r"\$\{([A-Za-z0-9_]+)\}", render_definition()))
    template_names = {
        "DynamoDbUpdateItemArn",
        "TrackingTableName",
        "DetectFunctionArn",
        "GenerateSyntheticFunctionArn",
        "RedactFunctionArn",
        "FinalizeFunctionArn",
    }
    assert found == set(PLACEHOLDERS) == template_names


def test_load_definition_substitutes_every_placeholder() -> None:
    subs = {name: f"value-of-{name}" for name in PLACEHOLDERS}
    subs["TrackingTableName"] = 'table "quoted"'
    subs["DynamoDbUpdateItemArn"] = "arn:aws-cn:states:::dynamodb:updateItem"
    loaded = json.loads(load_definition(subs))
    assert "${" not in json.dumps(loaded)
    assert loaded["States"]["MarkDetecting"]["Resource"] == "arn:aws-cn:states:::dynamodb:updateItem"
    assert loaded["States"]["MarkDetecting"]["Parameters"]["TableName"] == 'table "quoted"'
    assert loaded["States"]["CheckDetectTolerance"]["Resource"] == "value-of-FinalizeFunctionArn"


def test_load_definition_refuses_a_missing_substitution() -> None:
    subs = {name: "x" for name in PLACEHOLDERS if name != "RedactFunctionArn"}
    with pytest.raises(KeyError, match="RedactFunctionArn"):
        load_definition(subs)


# --- retries and catches -------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "state"), tasks(), ids=[name for name, _ in tasks()])
def test_every_task_retries_transient_errors(name: str, state: dict[str, Any]) -> None:
    *timeouts, retrier = state["Retry"]
    assert retrier["IntervalSeconds"] == 2 and retrier["MaxAttempts"] == 2
    assert retrier["BackoffRate"] == 2.0 and retrier["MaxDelaySeconds"] == 30
    assert retrier.get("JitterStrategy", "FULL") == "FULL"
    errors = set(retrier["ErrorEquals"])
    for timeout in timeouts:  # first, so that it wins: a task that timed out is retried once
        assert set(timeout["ErrorEquals"]) == {"Sandbox.Timedout", "States.Timeout"} and timeout["MaxAttempts"] == 1
        errors |= set(timeout["ErrorEquals"])
    if state["Resource"] == DDB_UPDATE:
        assert errors == set(DYNAMODB_TRANSIENT_ERRORS) >= REQUIRED_DYNAMODB_RETRY
    else:
        assert errors == set(LAMBDA_TRANSIENT_ERRORS) >= REQUIRED_LAMBDA_RETRY
    # A failed condition is a decision, not a fault: retrying it would only delay the stop.
    assert CONDITIONAL_CHECK_FAILED not in errors
    assert ALL_ERRORS not in errors


def test_lambda_tasks_invoke_by_function_arn() -> None:
    """Direct ARN: the output is the function's return value (no Payload wrapper) on AWS and moto."""
    resources = {name: state["Resource"] for name, state in lambda_tasks()}
    finalize = "${FinalizeFunctionArn}"
    assert resources == {
        "DetectFile": "${DetectFunctionArn}",
        "DetectFileFailed": finalize,
        "RedactFile": "${RedactFunctionArn}",
        "RedactFileFailed": finalize,
        "CheckDetectTolerance": finalize,
        "GenerateSynthetic": "${GenerateSyntheticFunctionArn}",
        "PrepareComplete": finalize,
        **{name: finalize for name, _ in lambda_status_tasks()},
    }
    assert all("TimeoutSeconds" not in state for _, state in lambda_tasks()), "the function's timeout governs"


def test_no_catch_anywhere_overwrites_the_state_input() -> None:
    """Every catcher adds the error under a field, so job fields (and a Map item's file key)
    survive into the error path."""
    for name, state in all_states():
        for catcher in state.get("Catch", []):
            assert re.fullmatch(r"\$\.[a-z_]+", catcher.get("ResultPath", "$")), (name, catcher)
            assert catcher["ResultPath"] not in {"$.job_id", "$.started_at", "$.file_key", "$.files"}


@pytest.mark.parametrize(("map_state", "task", "failed"), [("DetectPII", "DetectFile", "DetectFileFailed"), ("RedactPII", "RedactFile", "RedactFileFailed")])
def test_per_file_failure_is_stored_with_its_key_and_error(map_state: str, task: str, failed: str) -> None:
    assert task in {s.value for s in PER_FILE_TASKS} and FAILURE_RECORDERS[State(task)] == State(failed)
    processor = DEFINITION["States"][map_state]["ItemProcessor"]
    [catcher] = processor["States"][task]["Catch"]
    assert catcher == {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": failed}
    assert DEFINITION["States"][map_state]["ItemSelector"]["file_key.$"] == "$$.Map.Item.Value"
    recorder = processor["States"][failed]
    assert recorder["Type"] == "Task" and recorder.get("End") is True and "Catch" not in recorder
    params = recorder["Parameters"]
    assert params["action"] == "record_failure"
    assert params["phase"] == map_state.removesuffix("PII").lower()
    assert params["file_key.$"] == "$.file_key"
    assert params["error.$"] == "$.error"
    assert params["execution_name.$"] == "$.execution_name"


@pytest.mark.parametrize(("map_state", "kept_at"), [("DetectPII", "$.detections"), ("RedactPII", "$.redactions")])
def test_map_items_hand_back_their_summary_and_the_map_keeps_them_in_file_order(map_state: str, kept_at: str) -> None:
    """Each item's output is its task's return (a summary bounded by SUMMARY_MAX_BYTES, see
    pipeline.tasks.hand_back); the Map keeps the list where the account reads it."""
    state = DEFINITION["States"][map_state]
    assert state["ItemsPath"] == "$.files" and state["ResultPath"] == kept_at
    for name, inner in state["ItemProcessor"]["States"].items():
        assert not {"ResultSelector", "ResultPath", "OutputPath"} & set(inner), name


def test_the_redaction_map_hands_each_file_its_own_detection() -> None:
    selector = DEFINITION["States"]["RedactPII"]["ItemSelector"]
    assert selector["detection.$"] == "States.ArrayGetItem($.detections, $$.Map.Item.Index)"
    assert selector["file_key.$"] == "$$.Map.Item.Value"


def test_the_account_reads_the_summaries_the_maps_kept() -> None:
    detect = DEFINITION["States"]["CheckDetectTolerance"]["Parameters"]
    complete = DEFINITION["States"]["PrepareComplete"]["Parameters"]
    assert detect["detections.$"] == complete["detections.$"] == "$.detections"
    assert complete["redactions.$"] == "$.redactions"
    assert complete["redaction_mode.$"] == "$.redaction_mode"
    assert DEFINITION["States"]["GenerateSynthetic"]["Parameters"]["detections.$"] == "$.detections"


@pytest.mark.parametrize("name", [s.value for s in JOB_LAMBDA_TASKS])
def test_job_level_lambda_failure_fails_the_job_with_its_reason(name: str) -> None:
    state = DEFINITION["States"][name]
    assert state["Catch"][-1:] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "MarkJobFailed"}
    ]
    # the account also writes the record: a record that moved on stops the run
    assert state["Catch"][:-1] in ([], [{"ErrorEquals": ["JobNoLongerActive"], "ResultPath": "$.error", "Next": "JobNoLongerActive"}])
    params = DEFINITION["States"]["MarkJobFailed"]["Parameters"]
    assert params["error.$"] == "$.error.Error"
    assert params["cause.$"] == "$.error.Cause"
    assert DEFINITION["States"]["JobFailed"] == {
        "Type": "Fail",
        "ErrorPath": "$.error.Error",
        "CausePath": "$.error.Cause",
    }


@pytest.mark.parametrize(("name", "state"), status_tasks(), ids=[name for name, _ in status_tasks()])
def test_status_write_stops_when_the_record_moved_on(name: str, state: dict[str, Any]) -> None:
    first = state["Catch"][0]
    moved_on = CONDITIONAL_CHECK_FAILED if state["Resource"] == DDB_UPDATE else "JobNoLongerActive"
    assert first["ErrorEquals"] == [moved_on]
    assert first["Next"] == "JobNoLongerActive"
    rest = state["Catch"][1:]
    if name in {"MarkJobFailed", "MarkToleranceFailed"}:
        assert rest == []
    else:
        assert rest == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "MarkJobFailed"}]


# --- status writes come from the one enum ------------------------------------------------------
@pytest.mark.parametrize(("name", "state"), ddb_tasks(), ids=[name for name, _ in ddb_tasks()])
def test_status_condition_is_allowed_predecessors(name: str, state: dict[str, Any]) -> None:
    params = state["Parameters"]
    values = params["ExpressionAttributeValues"]
    target = JobStatus(values[":status"]["S"])
    assert STATUS_TASKS[State(name)] is target
    assert params["ExpressionAttributeNames"]["#status"] == "status"
    listed = re.fullmatch(r"#status IN \(([^)]*)\)", params["ConditionExpression"])
    assert listed, params["ConditionExpression"]
    allowed = [JobStatus(values[token.strip()]["S"]) for token in listed.group(1).split(",")]
    assert allowed == list(allowed_predecessors(target))
    assert params["Key"] == {"job_id": {"S.$": "$.job_id"}, "started_at": {"S.$": "$.started_at"}}
    assert params["TableName"] == "${TrackingTableName}"
    assert state["ResultPath"] is None


@pytest.mark.parametrize(("name", "state"), ddb_tasks(), ids=[name for name, _ in ddb_tasks()])
def test_active_status_is_set_while_active_and_removed_on_terminal(name: str, state: dict[str, Any]) -> None:
    params = state["Parameters"]
    expression = params["UpdateExpression"]
    target = JobStatus(params["ExpressionAttributeValues"][":status"]["S"])
    assert "updated_at" not in json.dumps(params), "updated_at stays as the router wrote it"
    if target.is_terminal:
        assert expression.endswith(" REMOVE #active_status")
        assert "#active_status = " not in expression
    else:
        assert "#active_status = :status" in expression
        assert "REMOVE" not in expression


@pytest.mark.parametrize(("name", "state"), ddb_tasks(), ids=[name for name, _ in ddb_tasks()])
def test_expression_names_and_values_are_all_used(name: str, state: dict[str, Any]) -> None:
    """DynamoDB rejects a request with unused expression names or values (ValidationException)."""
    params = state["Parameters"]
    text = params["UpdateExpression"] + " " + params["ConditionExpression"]
    used_names = set(re.findall(r"#\w+", text))
    used_values = set(re.findall(r":\w+", text))
    assert set(params["ExpressionAttributeNames"]) == used_names
    assert {key.removesuffix(".$") for key in params["ExpressionAttributeValues"]} == used_values


def _target(state: dict[str, Any]) -> JobStatus:
    params = state["Parameters"]
    if state["Resource"] == DDB_UPDATE:
        return JobStatus(params["ExpressionAttributeValues"][":status"]["S"])
    return JobStatus(params["target"])


def test_every_status_is_written_by_exactly_the_expected_tasks() -> None:
    written = {name: _target(s) for name, s in status_tasks()}
    assert written == {name.value: status for name, status in STATUS_TASKS.items()}
    # COMPLETE is the verdict's (PrepareComplete, with FAILED over the tolerance): not a status task
    assert set(written.values()) == set(JobStatus) - {JobStatus.QUEUED, JobStatus.IN_PROGRESS, JobStatus.COMPLETE}
    assert VERDICT_TASK is State.PREPARE_COMPLETE
    assert DEFINITION["States"]["PrepareComplete"]["Parameters"]["action"] == "check"
    assert [name for name, _ in ddb_tasks()] == [s.value for s in DYNAMODB_STATUS_TASKS] == ["MarkDetecting"]


@pytest.mark.parametrize(("name", "state"), lambda_status_tasks(), ids=[n for n, _ in lambda_status_tasks()])
def test_lambda_status_writes_name_the_run_and_the_table(name: str, state: dict[str, Any]) -> None:
    params = state["Parameters"]
    assert params["action"] == "status"
    assert params["job_id.$"] == "$.job_id" and params["started_at.$"] == "$.started_at"
    assert params["table"] == "${TrackingTableName}"
    assert state["ResultPath"] is None


def test_no_state_writes_a_step_functions_timestamp() -> None:
    """Every stored timestamp is ours (format_timestamp): `$$.State.EnteredTime` (…+00:00 on moto,
    …msZ on AWS) and `$$.Execution.StartTime` never reach a write."""
    text = render_definition()
    assert "EnteredTime" not in text and "StartTime" not in text


def test_failed_writes_carry_the_reason() -> None:
    tolerance = DEFINITION["States"]["MarkToleranceFailed"]["Parameters"]
    assert tolerance["error"] == "FailureToleranceExceeded"
    assert "$.check.failed_share" in tolerance["cause.$"]
    assert DEFINITION["States"]["ToleranceExceeded"]["Error"] == "FailureToleranceExceeded"


@pytest.mark.parametrize(("name", "phase"), [("CheckDetectTolerance", "detect"), ("PrepareComplete", "complete")])
def test_the_account_reads_stored_results_and_hands_back_a_small_check(name: str, phase: str) -> None:
    state = DEFINITION["States"][name]
    params = state["Parameters"]
    assert params["action"] == "check" and params["phase"] == phase
    assert params["files.$"] == "$.files" and params["unsupported.$"] == "$.unsupported"
    assert params["execution_name.$"] == "$.execution_name"
    assert state["ResultPath"] == "$.check"
    assert [c["ErrorEquals"] for c in state["Catch"]] == [["JobNoLongerActive"], ["States.ALL"]]


# --- graph -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("scope", "machine"), list(scopes()), ids=[scope for scope, _ in scopes()])
def test_every_transition_target_exists_in_its_scope(scope: str, machine: dict[str, Any]) -> None:
    states = machine["States"]
    assert machine["StartAt"] in states
    for name, state in states.items():
        for target in successors(state):
            assert target in states, f"{scope}{name} -> {target} does not exist"
        ends = state["Type"] in {"Succeed", "Fail"} or state.get("End") is True
        assert ends or state["Type"] == "Choice" or "Next" in state, f"{scope}{name} goes nowhere"
        assert not ("Next" in state and state.get("End")), f"{scope}{name} has both Next and End"


@pytest.mark.parametrize(("scope", "machine"), list(scopes()), ids=[scope for scope, _ in scopes()])
def test_no_state_is_unreachable(scope: str, machine: dict[str, Any]) -> None:
    states = machine["States"]
    seen, todo = set(), [machine["StartAt"]]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(successors(states[name]))
    assert seen == set(states), f"unreachable in {scope}: {sorted(set(states) - seen)}"


def test_tolerance_choices_go_on_only_on_an_explicit_true() -> None:
    """After detection (synthetic) the FAILED write is MarkToleranceFailed's; at the end the
    verdict wrote it already, so the choice ends the run."""
    for name, go_on, otherwise in (
        ("DetectToleranceChoice", "DropFiles", "MarkToleranceFailed"),
        ("CompleteToleranceChoice", "WorkflowComplete", "ToleranceExceeded"),
    ):
        choice = DEFINITION["States"][name]
        assert choice["Choices"] == [
            {"Variable": "$.check.within_tolerance", "BooleanEquals": True, "Next": go_on}
        ]
        assert choice["Default"] == otherwise
    assert DEFINITION["States"]["WorkflowComplete"]["Type"] == "Succeed"
    assert DEFINITION["States"]["ToleranceExceeded"]["Type"] == "Fail"


def test_redaction_mode_choice_right_after_detection() -> None:
    """Blackout redacted every file inside DetectPII: straight to the account. Synthetic goes
    through its detection account, the mapping and the redaction Map."""
    assert DEFINITION["States"]["DetectPII"]["Next"] == "CheckRedactionMode"
    assert DEFINITION["States"]["DetectPII"]["ItemSelector"]["redaction_mode.$"] == "$.redaction_mode"
    choice = DEFINITION["States"]["CheckRedactionMode"]
    assert choice["Choices"] == [
        {"Variable": "$.redaction_mode", "StringEquals": "synthetic", "Next": "CheckDetectTolerance"}
    ]
    assert choice["Default"] == "SetEmptyMapping"
    empty = DEFINITION["States"]["SetEmptyMapping"]
    assert empty["Parameters"]["mapping"] == {"mapping_s3_key": None} and empty["Parameters"]["redactions"] is None
    assert empty["Next"] == "PrepareComplete"


@pytest.mark.parametrize("name", ["DropFiles", "SetEmptyMapping"])
def test_pass_states_keep_only_what_later_states_read(name: str) -> None:
    kept = {key.removesuffix(".$") for key in DEFINITION["States"][name]["Parameters"]}
    assert kept - {"mapping", "redactions"} == {
        "job_id", "started_at", "execution_name", "bucket", "output_bucket",
        "files", "unsupported", "redaction_mode", "trace", "detections",
    }  # fmt: skip


# --- limits ------------------------------------------------------------------------------------
def test_maps_run_two_files_at_a_time_and_carry_the_trace() -> None:
    maps = {name: s for name, s in all_states() if s["Type"] == "Map"}
    assert set(maps) == {"DetectPII", "RedactPII"}
    for state in maps.values():
        assert state["MaxConcurrency"] == 2
        assert state["ItemSelector"]["trace.$"] == "$.trace"
        assert state["ItemProcessor"]["ProcessorConfig"] == {"Mode": "INLINE"}
    assert maps["DetectPII"]["ItemsPath"] == "$.files"
    assert maps["RedactPII"]["ItemsPath"] == "$.files"
    assert maps["RedactPII"]["ItemSelector"]["mapping_s3_key.$"] == "$.mapping.mapping_s3_key"


def test_workflow_times_out_before_the_stale_job_window() -> None:
    assert DEFINITION["TimeoutSeconds"] == WORKFLOW_TIMEOUT_SECONDS
    stale_window_seconds = Settings().stale_job_minutes * 60
    assert stale_window_seconds > WORKFLOW_TIMEOUT_SECONDS


def test_one_task_retry_chain_fits_in_the_workflow_timeout() -> None:
    """A task that uses all its retries (the longest waits, before jitter) still leaves time."""
    waits = sum(10 * 2.5**attempt for attempt in range(5))
    assert waits < WORKFLOW_TIMEOUT_SECONDS / 2


# --- AWS's own schema --------------------------------------------------------------------------
def test_definition_passes_cfn_lint_state_machine_schema() -> None:
    """cfn-lint (offline) validates the ASL structure the way CloudFormation's linter does."""
    from cfnlint.api import lint

    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Resources": {
            "Workflow": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "RoleArn": "arn:aws:iam::123456789012:role/workflow",
                    "Definition": DEFINITION,
                    "DefinitionSubstitutions": {name: "x" for name in PLACEHOLDERS},
                },
            }
        },
    }
    matches = lint(json.dumps(template), regions=["us-east-1"])
    assert [str(match) for match in matches] == []


def worst_case_seconds(retriers: list[dict[str, Any]], call_seconds: float) -> float:
    """The longest one task can take on one file when every attempt fails after running to the
    function's timeout: the first call, then each given retrier's attempts and waits."""
    total = call_seconds
    for retrier in retriers:
        interval, rate = retrier.get("IntervalSeconds", 1), retrier.get("BackoffRate", 2.0)
        cap = retrier.get("MaxDelaySeconds", float("inf"))
        for attempt in range(retrier.get("MaxAttempts", 3)):
            total += min(cap, interval * rate**attempt) + call_seconds
    return total


def test_a_files_retry_budget_fits_well_inside_the_workflow_timeout() -> None:
    """A file that fails on every attempt, each after the full function timeout (120 s), through
    detect and redact: by timeouts alone, or by transient errors alone, it uses under half of the
    workflow's 25 minutes; even alternating both (each retrier counts its own attempts), under 70%.
    (The seed budget -- 10 s x 2.5^n over 5 attempts for any error -- took 22.7 of the 25 minutes.)"""
    from stack.template import load_template

    resources = load_template()["Resources"]
    by_timeouts = by_transient = mixed = 0.0
    for state, function in (("DetectFile", "DetectFunction"), ("RedactFile", "RedactFunction")):
        timeouts, transient = next(s for name, s in all_states() if name == state)["Retry"]
        call = float(resources[function]["Properties"]["Timeout"])
        by_timeouts += worst_case_seconds([timeouts], call)
        by_transient += worst_case_seconds([transient], call)
        mixed += worst_case_seconds([timeouts, transient], call)
    assert max(by_timeouts, by_transient) < 0.5 * WORKFLOW_TIMEOUT_SECONDS, (by_timeouts, by_transient)
    assert mixed < 0.7 * WORKFLOW_TIMEOUT_SECONDS, mixed
