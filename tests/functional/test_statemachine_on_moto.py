"""The real workflow definition, run by moto's ASL interpreter against a moto DynamoDB table.

moto cannot run our Lambda handlers here (that is the sandbox's job), so these tests run
*sub-machines* cut from the real definition by `sub_machine` below:

* it starts at a chosen state of the real definition and keeps only the states reachable from it;
* every Lambda Task that is reached (top level or inside a Map's item processor) is replaced by a
  Pass state carrying the result the test declares for it, with the Task's own ResultPath and
  Next/End. `ECHO` makes that Pass return its input (so a Map's item shows what ItemSelector built);
  `FAIL` keeps the Task but points it at a function that does not exist, so it really fails and
  its Catch really runs; a Lambda task the test declares nothing for becomes a Fail state with
  the error `Test.UndeclaredLambdaTask`, so a run that strays there fails loudly;
* everything else — Choice rules, Pass shapes, Map ItemsPath/ItemSelector/ResultPath, and every
  DynamoDB status write with its condition, Retry and Catch — is the checked-in definition as is.

Executions run on moto's background threads: each test waits for its execution and the fixture
drains any still running before the mock goes away (MOTO.md).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import boto3
import pytest
from moto import mock_aws

from pipeline.statemachine.build import (
    CONDITIONAL_CHECK_FAILED,
    NO_LONGER_ACTIVE_ERROR,
    PLACEHOLDERS,
    TOLERANCE_ERROR,
    TRACKING_TABLE_NAME,
    State,
    load_definition,
)
from pipeline.status import JobStatus

REGION = "us-east-1"
ACCOUNT = "123456789012"
TABLE = "tracking"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/pipeline-workflow"
MISSING_FUNCTION_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:does-not-exist"
JOB_ID = "inbox/batch-7/"
STARTED_AT = "2026-01-05T10:00:00.000000Z"

ECHO = object()  # the replacing Pass returns its input
FAIL = object()  # the Task stays, calling a function that does not exist
UNDECLARED_TASK = "Test.UndeclaredLambdaTask"  # a run reaching a Lambda task the test gave no result


def _substitutions() -> dict[str, str]:
    subs = {name: f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}" for name in PLACEHOLDERS}
    subs[TRACKING_TABLE_NAME] = TABLE
    return subs


def _is_lambda_task(state: Mapping[str, Any]) -> bool:
    return state.get("Type") == "Task" and ":lambda:" in state.get("Resource", "")


def _successors(state: Mapping[str, Any]) -> list[str]:
    targets = [state.get("Next"), state.get("Default")]
    targets += [rule["Next"] for rule in state.get("Choices", [])]
    targets += [catcher["Next"] for catcher in state.get("Catch", [])]
    return [t for t in targets if t]


def _replace_lambda_tasks(states: dict[str, Any], results: Mapping[str, Any]) -> None:
    for name, state in list(states.items()):
        if state.get("Type") == "Map":
            _replace_lambda_tasks(state["ItemProcessor"]["States"], results)
        if not _is_lambda_task(state):
            continue
        if name not in results:
            states[name] = {
                "Type": "Fail",
                "Error": UNDECLARED_TASK,
                "Cause": f"no result declared for {name}",
            }
            continue
        result = results[name]
        if result is FAIL:
            state["Resource"] = MISSING_FUNCTION_ARN
            continue
        stand_in: dict[str, Any] = {"Type": "Pass", "Comment": f"stand-in for Lambda task {name}"}
        if result is not ECHO:
            stand_in["Result"] = result
            stand_in["ResultPath"] = state.get("ResultPath", "$")
        for key in ("Next", "End"):
            if key in state:
                stand_in[key] = state[key]
        states[name] = stand_in


def sub_machine(start: State | str, lambda_results: Mapping[str, Any], stop_at: Iterable[str] = ()) -> str:
    """The real definition cut to start at `start`, Lambda tasks replaced (see the module doc).

    States named in `stop_at` become Succeed states, cutting the run short there.
    """
    asl = json.loads(load_definition(_substitutions()))
    states = asl["States"]
    for name in stop_at:
        states[str(name)] = {"Type": "Succeed", "Comment": "cut here by the test"}
    reachable, todo = set(), [str(start)]
    while todo:
        name = todo.pop()
        if name not in reachable:
            reachable.add(name)
            todo.extend(_successors(states[name]))
    kept = {name: copy.deepcopy(state) for name, state in states.items() if name in reachable}
    _replace_lambda_tasks(kept, {str(k): v for k, v in lambda_results.items()})
    asl["StartAt"] = str(start)
    asl["States"] = kept
    return json.dumps(asl)


# --- fixtures -----------------------------------------------------------------------------------
@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    parser_log = logging.getLogger("moto.stepfunctions.parser")
    previous_level = parser_log.level
    parser_log.setLevel(logging.CRITICAL)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        ddb = boto3.client("dynamodb", region_name=REGION)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        ddb.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "job_id", "AttributeType": "S"},
                {"AttributeName": "started_at", "AttributeType": "S"},
                {"AttributeName": "active_status", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "job_id", "KeyType": "HASH"},
                {"AttributeName": "started_at", "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "active-jobs",
                    "KeySchema": [{"AttributeName": "active_status", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
        )
        try:
            yield {"ddb": ddb, "sfn": sfn}
        finally:
            _drain(sfn)
            parser_log.setLevel(previous_level)


def _drain(sfn: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    for machine in sfn.list_state_machines()["stateMachines"]:
        arn = machine["stateMachineArn"]
        while sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]:
            if time.monotonic() > deadline:
                for execution in sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")[
                    "executions"
                ]:
                    sfn.stop_execution(executionArn=execution["executionArn"])
                break
            time.sleep(0.05)


# --- helpers ------------------------------------------------------------------------------------
def _put_record(ddb: Any, status: JobStatus) -> None:
    item = {
        "job_id": {"S": JOB_ID},
        "started_at": {"S": STARTED_AT},
        "status": {"S": status.value},
        "updated_at": {"S": STARTED_AT},
    }
    if status.is_active:
        item["active_status"] = {"S": status.value}
    ddb.put_item(TableName=TABLE, Item=item)


def _record(ddb: Any) -> dict[str, Any]:
    return ddb.get_item(TableName=TABLE, Key={"job_id": {"S": JOB_ID}, "started_at": {"S": STARTED_AT}})[
        "Item"
    ]


def _job_input(**overrides: Any) -> dict[str, Any]:
    value = {
        "job_id": JOB_ID,
        "started_at": STARTED_AT,
        "execution_name": "inbox-batch-7-20260105T100000-0123456789abcdef",
        "bucket": "input-bucket",
        "output_bucket": "output-bucket",
        "files": ["inbox/batch-7/a.txt", "inbox/batch-7/b.csv"],
        "unsupported": ["inbox/batch-7/c.pdf"],
        "redaction_mode": "blackout",
        "trace": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
    }
    return value | overrides


def _run(
    aws: Mapping[str, Any], definition: str, execution_input: Mapping[str, Any], name: str
) -> dict[str, Any]:
    """Create the machine, run one execution to its end; returns describe_execution + events."""
    sfn = aws["sfn"]
    machine = sfn.create_state_machine(name=name, definition=definition, roleArn=ROLE_ARN)["stateMachineArn"]
    arn = sfn.start_execution(stateMachineArn=machine, name=f"{name}-run", input=json.dumps(execution_input))[
        "executionArn"
    ]
    deadline = time.monotonic() + 10
    while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline, f"execution {name} still running"
        time.sleep(0.02)
    events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    return described | {"events": events}


def _entered(result: Mapping[str, Any]) -> list[str]:
    return [
        e["stateEnteredEventDetails"]["name"] for e in result["events"] if "stateEnteredEventDetails" in e
    ]


def _task_failures(result: Mapping[str, Any]) -> list[str]:
    return [e["taskFailedEventDetails"]["error"] for e in result["events"] if e["type"] == "TaskFailed"]


def _check(within: bool, share: float, mapping: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the finalize function returns (the contract the definition reads)."""
    failed = {
        "detect": ["inbox/batch-7/b.csv"] if not within else [],
        "redact": [],
        "unsupported": ["inbox/batch-7/c.pdf"],
        "empty": [],
    }
    return {
        "within_tolerance": within,
        "failed_share": share,
        "failed_files": failed,
        "failed_files_ddb": {"M": {k: {"L": [{"S": v} for v in keys]} for k, keys in failed.items()}},
        "redaction_results_ddb": {
            "M": {"inbox/batch-7/a.txt": {"M": {"outcome": {"S": "redacted"}, "replacements": {"N": "3"}}}}
        },
        "mapping_s3_key_ddb": mapping or {"NULL": True},
        "counts": {"files": 2, "failed": 0 if within else 1},
    }


# --- tests --------------------------------------------------------------------------------------
def test_the_whole_definition_is_accepted_by_the_interpreter(aws: dict[str, Any]) -> None:
    sfn = aws["sfn"]
    arn = sfn.create_state_machine(
        name="pipeline", definition=load_definition(_substitutions()), roleArn=ROLE_ARN
    )["stateMachineArn"]
    assert (
        json.loads(sfn.describe_state_machine(stateMachineArn=arn)["definition"])["StartAt"]
        == "MarkDetecting"
    )


def test_whole_blackout_run_writes_every_status_and_completes(aws: dict[str, Any]) -> None:
    """From the first state to Done: every status write's condition admits its predecessor,
    both Maps build their items from ItemSelector (ECHO shows them), the record ends COMPLETE."""
    _put_record(aws["ddb"], JobStatus.IN_PROGRESS)
    definition = sub_machine(
        State.MARK_DETECTING,
        {
            State.DETECT_FILE: ECHO,
            State.CHECK_DETECT_TOLERANCE: {"within_tolerance": True, "failed_share": 0.0},
            State.REDACT_FILE: ECHO,
            State.PREPARE_COMPLETE: _check(True, 0.0),
        },
    )
    result = _run(aws, definition, _job_input(), "whole-blackout")

    assert result["status"] == "SUCCEEDED", result.get("cause")
    assert _entered(result)[:3] == ["MarkDetecting", "DetectPII", "DetectFile"]
    assert "SetEmptyMapping" in _entered(result) and "GenerateSynthetic" not in _entered(result)
    assert _entered(result)[-3:] == ["CompleteToleranceChoice", "WorkflowComplete", "Done"]
    output = json.loads(result["output"])
    assert [d["file_key"] for d in output["detect_results"]] == _job_input()["files"]
    first_detect = output["detect_results"][0]
    assert first_detect["trace"] == _job_input()["trace"]
    assert first_detect["output_bucket"] == "output-bucket"
    assert "files" not in output, "DropFiles removes the file list"
    first_redact = output["redact_results"][0]
    assert first_redact["detection"] == first_detect
    assert first_redact["mapping_s3_key"] is None
    assert first_redact["redaction_mode"] == "blackout"

    record = _record(aws["ddb"])
    assert record["status"] == {"S": "COMPLETE"}
    assert "active_status" not in record
    assert record["failed_files"]["M"]["unsupported"] == {"L": [{"S": "inbox/batch-7/c.pdf"}]}
    assert record["redaction_results"]["M"]["inbox/batch-7/a.txt"]["M"]["outcome"] == {"S": "redacted"}
    assert record["mapping_s3_key"] == {"NULL": True}
    assert record["updated_at"]["S"] > STARTED_AT[:10]


def test_synthetic_mode_generates_mapping_and_hands_its_key_to_redaction(aws: dict[str, Any]) -> None:
    _put_record(aws["ddb"], JobStatus.DETECT_COMPLETE)
    mapping = {"mapping_s3_key": "mappings/inbox/batch-7/run.json", "replacements": 4}
    detect_results = [
        {
            "file_key": "inbox/batch-7/a.txt",
            "outcome": "ok",
            "entity_counts": {"EMAIL": 2},
            "findings_key": "f/a.json",
        }
    ]
    definition = sub_machine(
        State.CHECK_REDACTION_MODE,
        {
            State.GENERATE_SYNTHETIC: mapping,
            State.REDACT_FILE: ECHO,
            State.PREPARE_COMPLETE: _check(True, 0.0, {"S": mapping["mapping_s3_key"]}),
        },
    )
    state = {k: v for k, v in _job_input(redaction_mode="synthetic").items() if k != "files"}
    result = _run(aws, definition, state | {"detect_results": detect_results}, "synthetic")

    assert result["status"] == "SUCCEEDED", result.get("cause")
    assert _entered(result)[:5] == [
        "CheckRedactionMode",
        "MarkGeneratingSynthetic",
        "GenerateSynthetic",
        "MarkSyntheticComplete",
        "MarkRedacting",
    ]
    output = json.loads(result["output"])
    assert output["redact_results"][0]["mapping_s3_key"] == mapping["mapping_s3_key"]
    assert output["redact_results"][0]["redaction_mode"] == "synthetic"
    record = _record(aws["ddb"])
    assert record["status"] == {"S": "COMPLETE"}
    assert record["mapping_s3_key"] == {"S": mapping["mapping_s3_key"]}


def test_failed_file_is_recorded_with_its_key_and_error(aws: dict[str, Any]) -> None:
    """A per-file task that really fails: the Catch keeps the item, the failure becomes a result."""
    _put_record(aws["ddb"], JobStatus.DETECTING)
    definition = sub_machine(
        State.DETECT_PII, {State.DETECT_FILE: FAIL}, stop_at=[State.CHECK_DETECT_TOLERANCE]
    )
    result = _run(aws, definition, _job_input(files=["inbox/batch-7/a.txt"]), "detect-failure")

    assert result["status"] == "SUCCEEDED", result.get("cause")
    [failed] = json.loads(result["output"])["detect_results"]
    assert failed["file_key"] == "inbox/batch-7/a.txt"
    assert failed["outcome"] == "failed"
    assert failed["phase"] == "detect"
    assert failed["error"] and isinstance(failed["cause"], str)
    assert failed["findings_key"] is None


def test_complete_against_a_record_in_redact_complete(aws: dict[str, Any]) -> None:
    _put_record(aws["ddb"], JobStatus.REDACT_COMPLETE)
    state = _job_input() | {"check": _check(True, 0.0)}
    result = _run(aws, sub_machine(State.WORKFLOW_COMPLETE, {}), state, "complete")

    assert result["status"] == "SUCCEEDED", result.get("cause")
    record = _record(aws["ddb"])
    assert record["status"] == {"S": "COMPLETE"}
    assert "active_status" not in record
    assert record["failed_files"]["M"]["unsupported"]["L"] == [{"S": "inbox/batch-7/c.pdf"}]


def test_complete_against_a_reclaimed_record_stops_as_no_longer_active(aws: dict[str, Any]) -> None:
    _put_record(aws["ddb"], JobStatus.FAILED)
    state = _job_input() | {"check": _check(True, 0.0)}
    result = _run(aws, sub_machine(State.WORKFLOW_COMPLETE, {}), state, "reclaimed")

    assert result["status"] == "FAILED"
    assert result["error"] == NO_LONGER_ACTIVE_ERROR
    assert _task_failures(result) == [CONDITIONAL_CHECK_FAILED]
    assert _entered(result) == ["WorkflowComplete", "JobNoLongerActive"]
    assert _record(aws["ddb"])["status"] == {"S": "FAILED"}


def test_detect_over_tolerance_marks_the_job_failed(aws: dict[str, Any]) -> None:
    _put_record(aws["ddb"], JobStatus.DETECTING)
    state = _job_input() | {"detect_results": [], "check": _check(False, 0.5)}
    result = _run(aws, sub_machine(State.DETECT_TOLERANCE_CHOICE, {}), state, "over-tolerance")

    assert result["status"] == "FAILED"
    assert result["error"] == TOLERANCE_ERROR
    assert _entered(result) == ["DetectToleranceChoice", "MarkToleranceFailed", "ToleranceExceeded"]
    record = _record(aws["ddb"])
    assert record["status"] == {"S": "FAILED"}
    assert record["error"] == {"S": TOLERANCE_ERROR}
    assert "0.5" in record["cause"]["S"]
    assert record["failed_files"]["M"]["detect"]["L"] == [{"S": "inbox/batch-7/b.csv"}]
    assert "active_status" not in record


def test_job_level_failure_is_recorded_then_fails_with_the_same_error(aws: dict[str, Any]) -> None:
    _put_record(aws["ddb"], JobStatus.REDACT_COMPLETE)
    state = _job_input() | {"error": {"Error": "ValueError", "Cause": "finalize could not read results"}}
    result = _run(aws, sub_machine(State.MARK_JOB_FAILED, {}), state, "job-failed")

    assert result["status"] == "FAILED"
    assert result["error"] == "ValueError"
    assert result["cause"] == "finalize could not read results"
    record = _record(aws["ddb"])
    assert record["status"] == {"S": "FAILED"}
    assert record["cause"] == {"S": "finalize could not read results"}
    assert "active_status" not in record


def test_retry_mechanics_on_moto(aws: dict[str, Any]) -> None:
    """A mechanics check, not a policy check: moto never throttles, so this variant of a real
    status task retries the one error moto can produce on demand (a failed condition), once,
    after 1 s (less with FULL jitter), and the history shows both attempts before the Catch."""
    _put_record(aws["ddb"], JobStatus.COMPLETE)
    asl = json.loads(sub_machine(State.MARK_REDACTING, {}, stop_at=[State.REDACT_PII]))
    task = asl["States"][State.MARK_REDACTING.value]
    task["Retry"] = [
        dict(task["Retry"][0], ErrorEquals=[CONDITIONAL_CHECK_FAILED], IntervalSeconds=1, MaxAttempts=1)
    ]
    result = _run(aws, json.dumps(asl), _job_input(), "retry-mechanics")

    assert result["status"] == "FAILED"
    assert result["error"] == NO_LONGER_ACTIVE_ERROR
    assert [e["type"] for e in result["events"]].count("TaskScheduled") == 2
    assert _task_failures(result) == [CONDITIONAL_CHECK_FAILED] * 2
