"""The real workflow definition, run by moto's ASL interpreter against a moto DynamoDB table.

moto cannot run our Lambda handlers here (that is the sandbox's job), so these tests run
*sub-machines* cut from the real definition by `sub_machine` below:

* it starts at a chosen state of the real definition and keeps only the states reachable from it;
* every Lambda Task that is reached (top level or inside a Map's item processor) is replaced by a
  Pass state carrying the result the test declares for it, with the Task's own ResultPath and
  Next/End. `ECHO` makes that Pass hand over what the function would be sent (the Task's
  Parameters, or its whole input) and puts it at `$.sent_<state name>`, so a test sees it;
  `EchoThen(result)` does the same and then answers `result` like a declared result (a second
  Pass, `<state name>` + `ANSWER_SUFFIX`, which `_entered` leaves out of the path), for a task
  whose answer the run goes on to read; `FAIL` keeps the Task but points it at a function that
  does not exist, so it really fails and its Catch really runs; a Lambda task the test declares
  nothing for becomes a Fail state with the error `Test.UndeclaredLambdaTask`, so a run that
  strays there fails loudly;
* everything else — Choice rules, Pass shapes, Map ItemsPath/ItemSelector/ResultPath, and every
  DynamoDB status write with its condition, Retry and Catch — is the checked-in definition as is.

What a sub-machine can show is what the machine itself does: the DynamoDB status write, the
path of states taken, and what each Lambda task is sent. What the functions then write (the
statuses after the first, the run's verdict) is theirs, tested with the functions.

Executions run on moto's background threads: each test waits for its execution and the fixture
drains any still running before the mock goes away (their threads outlive it).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from pipeline.statemachine.build import (
    CONDITIONAL_CHECK_FAILED,
    DYNAMODB_STATUS_TASKS,
    DYNAMODB_UPDATE_ITEM_ARN,
    JOB_FIELDS,
    NO_LONGER_ACTIVE_ERROR,
    PLACEHOLDERS,
    STATUS_TASKS,
    TOLERANCE_ERROR,
    TRACKING_TABLE_NAME,
    State,
    load_definition,
)
from pipeline.status import JobStatus
from pipeline.tasks import SUMMARY_MAX_BYTES
from sandbox.seams.limits import payload_size

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
ANSWER_SUFFIX = " (answer)"  # the second Pass of an EchoThen stand-in


@dataclass(frozen=True)
class EchoThen:
    """The replacing Pass hands over what the function would be sent (like ECHO), then answers
    `result` at the Task's ResultPath (like a declared result)."""

    result: Any


def _substitutions() -> dict[str, str]:
    subs = {name: f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}" for name in PLACEHOLDERS}
    subs[TRACKING_TABLE_NAME] = TABLE
    subs[DYNAMODB_UPDATE_ITEM_ARN] = "arn:aws:states:::dynamodb:updateItem"
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
        echo: dict[str, Any] = {
            "Type": "Pass",
            "Comment": f"stand-in for Lambda task {name}: what it is sent",
        }
        if "Parameters" in state:
            echo["Parameters"] = state["Parameters"]
        echo["ResultPath"] = f"$.sent_{name}"
        answer: dict[str, Any] = {"Type": "Pass", "Comment": f"stand-in for Lambda task {name}: its answer"}
        answer["Result"] = result.result if isinstance(result, EchoThen) else result
        answer["ResultPath"] = state.get("ResultPath", "$")
        if result is ECHO:
            states[name], last = echo, echo
        elif isinstance(result, EchoThen):
            echo["Next"] = name + ANSWER_SUFFIX
            states[name], states[name + ANSWER_SUFFIX], last = echo, answer, answer
        else:
            states[name], last = answer, answer
        for key in ("Next", "End"):
            if key in state:
                last[key] = state[key]


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
def _put_record(ddb: Any, status: JobStatus, job_id: str = JOB_ID) -> None:
    item = {
        "job_id": {"S": job_id},
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
    deadline = time.monotonic() + 120  # a hang guard, not a timing goal: the machine may be loaded
    while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline, f"execution {name} still running"
        time.sleep(0.02)
    page = sfn.get_execution_history(executionArn=arn, maxResults=1000)
    events = page["events"]
    while page.get("nextToken"):  # AWS pages at 1,000 events; a large run has more
        page = sfn.get_execution_history(executionArn=arn, maxResults=1000, nextToken=page["nextToken"])
        events += page["events"]
    return described | {"events": events}


def _entered(result: Mapping[str, Any]) -> list[str]:
    """The states the run entered, in order (an EchoThen's answer Pass left out)."""
    names = [
        e["stateEnteredEventDetails"]["name"] for e in result["events"] if "stateEnteredEventDetails" in e
    ]
    return [name for name in names if not name.endswith(ANSWER_SUFFIX)]


def _inputs(result: Mapping[str, Any], state: str) -> list[dict[str, Any]]:
    """The input of every entry into `state` (a Map's item task: one per item)."""
    return [
        json.loads(e["stateEnteredEventDetails"]["input"])
        for e in result["events"]
        if e.get("stateEnteredEventDetails", {}).get("name") == state
    ]


def _sent(result: Mapping[str, Any], state: str) -> dict[str, Any]:
    """What the ECHO/EchoThen stand-in of `state` says its Lambda task is sent (its one entry)."""
    [output] = [
        json.loads(e["stateExitedEventDetails"]["output"])
        for e in result["events"]
        if e.get("stateExitedEventDetails", {}).get("name") == state
    ]
    return output[f"sent_{state}"]


def _task_failures(result: Mapping[str, Any]) -> list[str]:
    return [e["taskFailedEventDetails"]["error"] for e in result["events"] if e["type"] == "TaskFailed"]


def _check(within: bool, share: float) -> dict[str, Any]:
    """What the finalize function's account hands back (the contract the definition reads)."""
    return {
        "within_tolerance": within,
        "failed_share": share,
        "counts": {"files": 2, "failed": 0, "entities": 3},
    }


STATUS_WRITTEN = {"status": "written"}  # a status write's answer (dropped: ResultPath null)
LAMBDA_STATUS_TASKS = [s for s in STATUS_TASKS if s not in DYNAMODB_STATUS_TASKS]


def _all_status_writes() -> dict[State, Any]:
    return dict.fromkeys(LAMBDA_STATUS_TASKS, STATUS_WRITTEN)


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


def test_whole_blackout_run_goes_through_every_step_and_keeps_the_state_small(aws: dict[str, Any]) -> None:
    """From the first state to WorkflowComplete: the first status write's condition admits
    IN_PROGRESS (and leaves updated_at as the router wrote it), the one Map hands its items exactly
    the job fields, the file key and the mode (the detect function redacts in the same pass),
    keeps each item's answer in file order, and the run goes straight to PrepareComplete: no
    status write, mapping or redaction Map in between (none is declared: reaching one fails)."""
    _put_record(aws["ddb"], JobStatus.IN_PROGRESS)
    definition = sub_machine(
        State.MARK_DETECTING,
        {State.DETECT_FILE: ECHO, State.PREPARE_COMPLETE: EchoThen(_check(True, 0.0))},
    )
    result = _run(aws, definition, _job_input(), "whole-blackout")

    assert result["status"] == "SUCCEEDED", result.get("cause")
    assert _entered(result) == [
        "MarkDetecting",
        "DetectPII",
        "DetectFile",
        "DetectFile",
        "CheckRedactionMode",
        "SetEmptyMapping",
        "PrepareComplete",
        "CompleteToleranceChoice",
        "WorkflowComplete",
    ]
    items = _inputs(result, "DetectFile")
    assert sorted(item["file_key"] for item in items) == sorted(_job_input()["files"])
    for item in items:
        assert set(item) == {*JOB_FIELDS, "file_key", "trace", "redaction_mode"}
        assert {field: item[field] for field in JOB_FIELDS} == {
            field: _job_input()[field] for field in JOB_FIELDS
        }
        assert item["trace"] == _job_input()["trace"] and item["redaction_mode"] == "blackout"
    output = json.loads(result["output"])
    assert set(output) == {
        *_job_input(),
        "detections",
        "redactions",
        "mapping",
        "check",
        "sent_PrepareComplete",
    }
    assert [d["file_key"] for d in output["detections"]] == _job_input()["files"], (
        "one answer per file, in order"
    )
    assert output["redactions"] is None and output["mapping"] == {"mapping_s3_key": None}
    sent = output["sent_PrepareComplete"]
    assert (sent["action"], sent["phase"]) == ("check", "complete")
    assert sent["detections"] == output["detections"]
    assert sent["redactions"] is None and sent["mapping_s3_key"] is None
    assert sent["redaction_mode"] == "blackout"
    assert sent["files"] == _job_input()["files"] and sent["unsupported"] == _job_input()["unsupported"]
    record = _record(aws["ddb"])
    assert record["status"] == {"S": "DETECTING"}  # the verdict is PrepareComplete's own write
    assert record["updated_at"] == {"S": STARTED_AT}


DETECTIONS = [
    {"outcome": "ok", "entities": {"EMAIL": 2}},
    {"outcome": "failed", "stored": True},
]


def test_synthetic_mode_checks_detection_then_hands_each_file_its_own_detection(aws: dict[str, Any]) -> None:
    """Synthetic mode after the detect Map: the detect-phase account gets the detections, the
    mapping is generated from them, its key goes to redaction, the redact Map hands each file its
    own detection (by index, in file order) and keeps the answers for PrepareComplete."""
    mapping = {"mapping_s3_key": "mappings/inbox/batch-7/run.json"}
    definition = sub_machine(
        State.CHECK_REDACTION_MODE,
        {
            **_all_status_writes(),
            State.CHECK_DETECT_TOLERANCE: EchoThen(_check(True, 0.0)),
            State.GENERATE_SYNTHETIC: EchoThen(mapping),
            State.REDACT_FILE: ECHO,
            State.PREPARE_COMPLETE: ECHO,
        },
        stop_at=[State.COMPLETE_TOLERANCE_CHOICE],
    )
    state = _job_input(redaction_mode="synthetic") | {"detections": DETECTIONS}
    result = _run(aws, definition, state, "synthetic")

    assert result["status"] == "SUCCEEDED", result.get("cause")
    assert _entered(result) == [
        "CheckRedactionMode",
        "CheckDetectTolerance",
        "DetectToleranceChoice",
        "DropFiles",
        "MarkDetectComplete",
        "MarkGeneratingSynthetic",
        "GenerateSynthetic",
        "MarkSyntheticComplete",
        "MarkRedacting",
        "RedactPII",
        "RedactFile",
        "RedactFile",
        "MarkRedactComplete",
        "PrepareComplete",
        "CompleteToleranceChoice",
    ]
    checked = _sent(result, "CheckDetectTolerance")
    assert (checked["action"], checked["phase"]) == ("check", "detect")
    assert checked["detections"] == DETECTIONS and checked["files"] == _job_input()["files"]
    generated = _sent(result, "GenerateSynthetic")
    assert generated["files"] == _job_input()["files"] and generated["detections"] == DETECTIONS
    items = {item["file_key"]: item for item in _inputs(result, "RedactFile")}
    assert set(items) == set(_job_input()["files"])
    for file_key, detection in zip(_job_input()["files"], DETECTIONS, strict=True):
        assert items[file_key]["detection"] == detection
        assert items[file_key]["mapping_s3_key"] == mapping["mapping_s3_key"]
        assert items[file_key]["redaction_mode"] == "synthetic"
    output = json.loads(result["output"])
    assert "check" not in output, "DropFiles keeps only what later states read"
    sent = output["sent_PrepareComplete"]
    assert (sent["action"], sent["phase"]) == ("check", "complete")
    assert sent["detections"] == DETECTIONS
    assert [r["file_key"] for r in sent["redactions"]] == _job_input()["files"], (
        "one answer per file, in order"
    )
    assert sent["redaction_mode"] == "synthetic" and sent["mapping_s3_key"] == mapping["mapping_s3_key"]
    assert sent["files"] == _job_input()["files"] and sent["unsupported"] == _job_input()["unsupported"]


def test_failed_file_is_handed_to_the_recorder_with_its_key_and_error(aws: dict[str, Any]) -> None:
    """A per-file task that really fails: the Catch keeps the item, the recorder gets key and
    error, and what the recorder answers is what the Map keeps for that file."""
    result = _run(
        aws,
        sub_machine(
            State.DETECT_PII,
            {State.DETECT_FILE: FAIL, State.DETECT_FILE_FAILED: ECHO},
            stop_at=[State.CHECK_REDACTION_MODE],
        ),
        _job_input(files=["inbox/batch-7/a.txt"]),
        "detect-failure",
    )

    assert result["status"] == "SUCCEEDED", result.get("cause")
    [failure] = [
        e["lambdaFunctionFailedEventDetails"] for e in result["events"] if e["type"] == "LambdaFunctionFailed"
    ]
    [kept] = json.loads(result["output"])["detections"]
    sent = kept["sent_DetectFileFailed"]
    assert sent["action"] == "record_failure" and sent["phase"] == "detect"
    assert sent["file_key"] == "inbox/batch-7/a.txt"
    assert sent["execution_name"] == _job_input()["execution_name"]
    assert sent["error"] == {"Error": failure["error"], "Cause": failure["cause"]}


def test_first_status_write_against_a_reclaimed_record_stops_as_no_longer_active(aws: dict[str, Any]) -> None:
    _put_record(aws["ddb"], JobStatus.FAILED)
    result = _run(aws, sub_machine(State.MARK_DETECTING, {}), _job_input(), "reclaimed")

    assert result["status"] == "FAILED"
    assert result["error"] == NO_LONGER_ACTIVE_ERROR
    assert _task_failures(result) == [CONDITIONAL_CHECK_FAILED]
    assert _entered(result) == ["MarkDetecting", "JobNoLongerActive"]
    assert _record(aws["ddb"])["status"] == {"S": "FAILED"}


def test_detect_over_tolerance_marks_the_job_failed_with_the_share(aws: dict[str, Any]) -> None:
    """Synthetic mode's detect-phase account over the tolerance: the job is marked FAILED, with
    the share in the cause, before anything is generated."""
    state = _job_input(redaction_mode="synthetic") | {"check": _check(False, 0.5)}
    definition = sub_machine(State.DETECT_TOLERANCE_CHOICE, {State.MARK_TOLERANCE_FAILED: ECHO})
    result = _run(aws, definition, state, "over-tolerance")

    assert result["status"] == "FAILED"
    assert result["error"] == TOLERANCE_ERROR
    assert _entered(result) == ["DetectToleranceChoice", "MarkToleranceFailed", "ToleranceExceeded"]
    sent = _sent(result, "MarkToleranceFailed")
    assert (sent["action"], sent["target"], sent["error"]) == ("status", "FAILED", TOLERANCE_ERROR)
    assert sent["cause"] == "Failed share of files 0.5 is over the tolerance"


@pytest.mark.parametrize(
    ("within", "status", "path"),
    [
        (True, "SUCCEEDED", ["CompleteToleranceChoice", "WorkflowComplete"]),
        (False, "FAILED", ["CompleteToleranceChoice", "ToleranceExceeded"]),
    ],
)
def test_the_verdict_of_prepare_complete_ends_the_run_without_another_write(
    aws: dict[str, Any], within: bool, status: str, path: list[str]
) -> None:
    """PrepareComplete has written COMPLETE or FAILED itself: the choice after it only ends the
    execution (no Lambda task is declared, so reaching a status write would fail the run with
    Test.UndeclaredLambdaTask), failed with the tolerance error when over."""
    state = _job_input() | {"check": _check(within, 0.0 if within else 0.5)}
    result = _run(aws, sub_machine(State.COMPLETE_TOLERANCE_CHOICE, {}), state, f"verdict-{within}")

    assert result["status"] == status, result.get("cause")
    assert _entered(result) == path
    if not within:
        assert result["error"] == TOLERANCE_ERROR


def test_a_check_without_an_explicit_true_does_not_complete(aws: dict[str, Any]) -> None:
    """Fail closed: only the boolean `true` completes the run."""
    state = _job_input() | {"check": {"within_tolerance": "true", "failed_share": 0.0}}
    result = _run(aws, sub_machine(State.COMPLETE_TOLERANCE_CHOICE, {}), state, "fail-closed")

    assert result["status"] == "FAILED"
    assert _entered(result) == ["CompleteToleranceChoice", "ToleranceExceeded"]


def test_job_level_failure_is_recorded_then_fails_with_the_same_error(aws: dict[str, Any]) -> None:
    state = _job_input() | {"error": {"Error": "ValueError", "Cause": "finalize could not read results"}}
    result = _run(aws, sub_machine(State.MARK_JOB_FAILED, {State.MARK_JOB_FAILED: ECHO}), state, "job-failed")

    assert result["status"] == "FAILED"
    assert result["error"] == "ValueError"
    assert result["cause"] == "finalize could not read results"


def test_retry_mechanics_on_moto(aws: dict[str, Any]) -> None:
    """A mechanics check, not a policy check: moto never throttles, so this variant of the real
    DynamoDB status task retries the one error moto can produce on demand (a failed condition),
    once, after 1 s (less with FULL jitter), and the history shows both attempts before the Catch."""
    _put_record(aws["ddb"], JobStatus.COMPLETE)
    asl = json.loads(sub_machine(State.MARK_DETECTING, {}, stop_at=[State.DETECT_PII]))
    task = asl["States"][State.MARK_DETECTING.value]
    task["Retry"] = [
        dict(task["Retry"][0], ErrorEquals=[CONDITIONAL_CHECK_FAILED], IntervalSeconds=1, MaxAttempts=1)
    ]
    result = _run(aws, json.dumps(asl), _job_input(), "retry-mechanics")

    assert result["status"] == "FAILED"
    assert result["error"] == NO_LONGER_ACTIVE_ERROR
    assert [e["type"] for e in result["events"]].count("TaskScheduled") == 2
    assert _task_failures(result) == [CONDITIONAL_CHECK_FAILED] * 2


# --- size: the largest run fits AWS's limits (enforced by sandbox.seams.limits) -------------------------


def longest_keys(count: int, prefix: str = "inbox/batch-7/") -> list[str]:
    """`count` distinct S3 keys of the maximum length, 1,024 bytes of UTF-8 (2-byte characters
    and a JSON-escaped quote in each, so escaping counts too)."""
    keys = []
    for index in range(count):
        head = f'{prefix}"é-{index:05d}-'
        key = head + "k" * (1024 - len(head.encode()) - 4) + ".txt"
        assert len(key.encode()) == 1024
        keys.append(key)
    return keys


@pytest.fixture
def limited(aws: dict[str, Any]) -> Iterator[dict[str, Any]]:
    from sandbox.seams import limits

    limits.install()
    try:
        yield aws
    finally:
        limits.uninstall()


def _largest_job_input(files: int, unsupported: int) -> dict[str, Any]:
    keys = longest_keys(files + unsupported)
    job_id = "j" * 1024  # a root-level file is its own job: a job id can be a whole key
    return _job_input(
        job_id=job_id,
        execution_name="x" * 80,
        bucket="b" * 63,
        output_bucket="o" * 63,
        files=keys[:files],
        unsupported=keys[files:],
        redaction_mode="synthetic",
        trace={"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "tracestate": "t" * 512},
    )


def _summary(outcome: str, size: int = SUMMARY_MAX_BYTES) -> dict[str, Any]:
    """A per-file task's summary of exactly `size` bytes of compact JSON (the largest one a task
    hands back into the state: `pipeline.tasks.hand_back` stores anything larger in S3)."""
    summary = {"outcome": outcome, "entities": {"": 10**6}}
    summary["entities"] = {"E" * (size - payload_size(summary)): 10**6}
    assert payload_size(summary) == size
    return summary


def _largest_answers() -> dict[State, Any]:
    """The largest answer each Lambda task gives: every file's summary as large as a summary
    gets, in both Maps (the state keeps them all); a recorder's answer is smaller."""
    check = {
        "within_tolerance": True,
        "failed_share": 0.5,
        "counts": {"files": 10**6, "failed": 10**6, "entities": 10**9},
    }
    return {
        **_all_status_writes(),
        State.DETECT_FILE: _summary("ok"),
        State.DETECT_FILE_FAILED: {"outcome": "failed", "stored": True},
        State.CHECK_DETECT_TOLERANCE: check,
        State.GENERATE_SYNTHETIC: {"mapping_s3_key": "_pipeops/runs/" + "x" * 80 + "/mapping.json"},
        State.REDACT_FILE: _summary("redacted"),
        State.REDACT_FILE_FAILED: {"outcome": "failed", "stored": True},
        State.PREPARE_COMPLETE: check,
    }


def test_the_largest_run_of_the_default_max_fits_every_limit(limited: dict[str, Any]) -> None:
    """MaxFilesPerRun (default and MaxValue) keys of 1,024 bytes, synthetic mode (both Maps' summaries
    kept), every summary of the largest size: the input and every state stay under half of AWS's
    limit (so JSON escaping cannot push a run over), run through the real definition."""
    from pipeline.config import DEFAULT_MAX_FILES_PER_RUN
    from sandbox.seams.limits import MAX_PAYLOAD_BYTES

    # every file supported: an unsupported key is as long, but gets no summary
    execution_input = _largest_job_input(DEFAULT_MAX_FILES_PER_RUN, 0)
    _put_record(limited["ddb"], JobStatus.IN_PROGRESS, job_id=execution_input["job_id"])
    assert payload_size(execution_input) < MAX_PAYLOAD_BYTES / 2
    result = _run(limited, sub_machine(State.MARK_DETECTING, _largest_answers()), execution_input, "largest")

    assert result["status"] == "SUCCEEDED", (result.get("error"), result.get("cause"))
    assert "RedactPII" in _entered(result) and "WorkflowComplete" in _entered(result)
    output = json.loads(result["output"])
    assert output["detections"] == [_summary("ok")] * DEFAULT_MAX_FILES_PER_RUN
    assert output["redactions"] == [_summary("redacted")] * DEFAULT_MAX_FILES_PER_RUN
    sizes = [
        payload_size(details.get("input", details.get("output", "")))
        for event in result["events"]
        for details in [event.get("stateEnteredEventDetails") or event.get("stateExitedEventDetails") or {}]
    ]
    print(f"largest state of the largest run: {max(sizes)} bytes of {MAX_PAYLOAD_BYTES}")
    assert max(sizes) < MAX_PAYLOAD_BYTES / 2, max(sizes)


def test_a_run_far_over_the_max_is_refused_at_start(limited: dict[str, Any]) -> None:
    """The control: the limit is real, and 300 keys of 1,024 bytes already pass it."""
    sfn = limited["sfn"]
    machine = sfn.create_state_machine(
        name="too-many", definition=sub_machine(State.MARK_DETECTING, {}), roleArn=ROLE_ARN
    )["stateMachineArn"]
    with pytest.raises(sfn.exceptions.ValidationException):
        sfn.start_execution(stateMachineArn=machine, name="run", input=json.dumps(_largest_job_input(300, 0)))
