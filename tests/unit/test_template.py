"""template.yaml: lint, offline SAM transform, and the relations docs/ARCHITECTURE.md#failure-modes-designed-out promises.

Runs offline in a couple of seconds: cfn-lint's Python API and aws-sam-translator, no AWS call.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint, lint_file
from packaging.requirements import Requirement

from alarms.automation import AUTO_REMEDIATE_ROLE, AUTOMATION_ROLE
from pipeline.config import ALL_ENV_NAMES
from pipeline.stack import Function
from runbooks.automation.engine import ACTING_RUNBOOKS
from runbooks.automation.handler import STACK_ENV_NAMES
from sandbox.template import DEFAULT_CODE_URI, package, transform
from stack.template import PROJECT_ROOT, TEMPLATE_PATH, TemplateError, load_template

REGIONS = ["us-east-1", "eu-west-1"]
ASL_PATH = PROJECT_ROOT / "pipeline" / "statemachine" / "pipeline.asl.json"

HANDLERS = {function.value: function.handler_module for function in Function}
# Functions that know the state machine; the task functions must not (the state machine
# depends on them: a reference back is a circular dependency).
STATE_MACHINE_CLIENTS = {"RouterFunction", "BatchTriggerFunction", "WorkflowTrackerFunction", "ReconcilerFunction"}
SHARED_ENV = {
    "TRACKING_TABLE", "COORDINATION_TABLE", "INPUT_BUCKET", "OUTPUT_BUCKET", "MAIN_QUEUE_URL",
    "PROCESSING_MODE", "MAX_CONCURRENT_WORKFLOWS", "JOB_FOLDER_DEPTH", "REDACTION_MODE",
    "PII_DETECTOR", "KMS_KEY_ARN", "STAGE", "STALE_JOB_MINUTES",
    "POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL",
}
OUTPUTS = {
    "InputBucketName", "OutputBucketName", "WorkBucketName", "TrackingTableName", "CoordinationTableName",
    "MainQueueUrl", "DeadLetterQueueUrl", "TrackerDeadLetterQueueUrl", "IngestDeadLetterQueueUrl", "QuarantineQueueUrl",
    "ScheduledDeadLetterQueueUrl", "StateMachineArn",
    *(f"{function}Name" for function in HANDLERS),
}
# Actions that support no resource-level permissions, allowed on Resource "*" in one role each.
WILDCARD_RESOURCE_ALLOWED = {
    "DetectFunctionRole": {"comprehend:DetectPiiEntities"},
    "RunbookFunctionRole": {"cloudwatch:GetMetricData", "sts:GetCallerIdentity"},
    # Step Functions logging to CloudWatch Logs (vended logs delivery).
    "PipelineStateMachineRole": {
        "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery",
        "logs:DeleteLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy",
        "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
    },
}
BASIC_EXECUTION = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
SQS_POLLER = "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def cfn(template: dict[str, Any]) -> dict[str, Any]:
    return transform(template, REGIONS[0])


def resources_of_type(cfn: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in cfn["Resources"].items() if v["Type"] == resource_type}


def properties(cfn: dict[str, Any], logical_id: str) -> dict[str, Any]:
    return cfn["Resources"][logical_id]["Properties"]


def resolve(template: dict[str, Any], value: Any) -> Any:
    """A literal, or a `Ref` to a parameter resolved to its default."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return template["Parameters"][value["Ref"]]["Default"]
    return value


def branches(value: Any) -> Iterator[Any]:
    """Every value an `Fn::If` may take (nested ones too); `AWS::NoValue` yields nothing."""
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        for branch in value["Fn::If"][1:]:
            yield from branches(branch)
    elif value != {"Ref": "AWS::NoValue"}:
        yield value


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def allow_statements(role: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for policy in role["Properties"].get("Policies", []):
        for statements in branches(policy["PolicyDocument"]["Statement"]):
            for item in as_list(statements):
                for statement in branches(item):
                    if statement["Effect"] == "Allow":
                        yield statement


def format_matches(matches: list[Any]) -> str:
    return "\n".join(f"{m.rule.id} {m.message} ({m.filename}:{m.linenumber})" for m in matches)


# -------------------------------------------------------------- stack.template, sandbox.template API


def test_loader_reads_short_tags_in_their_long_form(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "Resources:\n"
        "  R:\n"
        "    Properties:\n"
        "      A: !Ref X\n"
        "      B: !GetAtt Q.Arn\n"
        "      C: !Sub '${Q.Arn}/*'\n"
        "      D: !If [Cond, !Ref AWS::NoValue, [1, 2]]\n"
        "      E: !Select [0, !GetAZs '']\n"
        "      Version: 2012-10-17\n",
        encoding="utf-8",
    )
    assert load_template(path)["Resources"]["R"]["Properties"] == {
        "A": {"Ref": "X"},
        "B": {"Fn::GetAtt": ["Q", "Arn"]},
        "C": {"Fn::Sub": "${Q.Arn}/*"},
        "D": {"Fn::If": ["Cond", {"Ref": "AWS::NoValue"}, [1, 2]]},
        "E": {"Fn::Select": [0, {"Fn::GetAZs": ""}]},
        "Version": "2012-10-17",
    }


def test_package_rewrites_local_artifacts_and_leaves_the_input_alone(tmp_path: Path) -> None:
    (tmp_path / "machine.json").write_text('{"StartAt": "A", "States": {"A": {"Type": "Pass", "End": true}}}')
    machine = {
        "Type": "AWS::Serverless::StateMachine",
        "Properties": {"DefinitionUri": "machine.json", "DefinitionSubstitutions": {"X": "y"}},
    }
    template = {
        "Globals": {"Function": {"CodeUri": "."}},
        "Resources": {
            "F": {"Type": "AWS::Serverless::Function", "Properties": {"CodeUri": "src/"}},
            "G": {"Type": "AWS::Serverless::Function", "Properties": {"CodeUri": "s3://b/k.zip"}},
            "M": machine,
        },
    }
    packaged = package(template, base_dir=tmp_path)
    assert packaged["Globals"]["Function"]["CodeUri"] == DEFAULT_CODE_URI
    assert packaged["Resources"]["F"]["Properties"]["CodeUri"] == DEFAULT_CODE_URI
    assert packaged["Resources"]["G"]["Properties"]["CodeUri"] == "s3://b/k.zip"
    assert packaged["Resources"]["M"]["Properties"] == {
        "Definition": {"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}},
        "DefinitionSubstitutions": {"X": "y"},
    }
    assert machine["Properties"]["DefinitionUri"] == "machine.json"
    with pytest.raises(TemplateError, match=r"machine\.json"):
        package(template, base_dir=tmp_path / "elsewhere")


def test_transform_reports_an_invalid_sam_template() -> None:
    template = {
        "Transform": "AWS::Serverless-2016-10-31",
        "Resources": {"F": {"Type": "AWS::Serverless::Function", "Properties": {"Handler": "x.y"}}},
    }
    with pytest.raises(TemplateError, match="SAM transform failed"):
        transform(template, REGIONS[0])


def test_transform_inlines_the_definition_as_one_json_string(cfn: dict[str, Any]) -> None:
    definition = properties(cfn, "PipelineStateMachine")["DefinitionString"]
    assert isinstance(definition, str)
    if ASL_PATH.exists():
        assert json.loads(definition) == json.loads(ASL_PATH.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------ lint


def test_cfn_lint_reports_no_errors_or_warnings_on_the_sam_template() -> None:
    matches = lint_file(TEMPLATE_PATH, config=ManualArgs(regions=REGIONS))
    assert [m for m in matches if m.rule.id[0] in "EW"] == [], format_matches(matches)


def test_cfn_lint_reports_no_errors_or_warnings_on_the_transformed_template(cfn: dict[str, Any]) -> None:
    # cfn-lint checks a SAM template against SAM schemas without transforming it, so it sees
    # neither broken references nor dependency cycles there: lint what CloudFormation will get.
    matches = lint(json.dumps(cfn), config=ManualArgs(regions=REGIONS))
    assert [m for m in matches if m.rule.id[0] in "EW"] == [], format_matches(matches)


# ------------------------------------------------------------------------------------- transform


def test_transform_produces_the_expected_resources(cfn: dict[str, Any]) -> None:
    counts: dict[str, int] = {}
    for resource in cfn["Resources"].values():
        counts[resource["Type"]] = counts.get(resource["Type"], 0) + 1
    assert not [t for t in counts if t.startswith("AWS::Serverless::")]
    assert counts["AWS::Lambda::Function"] == len(HANDLERS)
    # + the state machine's, the automation documents' and the auto-remediation rules'.
    assert counts["AWS::IAM::Role"] == len(HANDLERS) + 3
    assert counts["AWS::StepFunctions::StateMachine"] == 1
    assert counts["AWS::Lambda::EventSourceMapping"] == 1
    auto_rules = [name for name in cfn["Resources"] if name.startswith("RunbookAutoRemediate") and name != AUTO_REMEDIATE_ROLE]
    # S3 objects, execution status, batch and reconcile schedules; an alarm's runbook document.
    assert counts["AWS::Events::Rule"] == 4 + len(auto_rules) and auto_rules
    assert counts["AWS::SSM::Document"] == len(ACTING_RUNBOOKS)
    assert counts["AWS::SQS::Queue"] == 6  # main, its DLQ, ingest's, the tracker's, the schedules', quarantine
    assert counts["AWS::DynamoDB::Table"] == 2
    assert counts["AWS::S3::Bucket"] == 3  # inputs, redacted outputs, working files (mappings)
    assert counts["AWS::Logs::LogGroup"] == len(HANDLERS) + 1


def test_each_function_has_a_log_group_with_retention(cfn: dict[str, Any]) -> None:
    groups = {
        json.dumps(group["Properties"]["LogGroupName"]): group["Properties"]
        for group in resources_of_type(cfn, "AWS::Logs::LogGroup").values()
    }
    for function in HANDLERS:
        group = groups[json.dumps({"Fn::Sub": f"/aws/lambda/${{{function}}}"})]
        assert group["RetentionInDays"] > 0


def test_only_cloudformation_creates_the_log_groups(cfn: dict[str, Any]) -> None:
    """A group named after its function is created after it: were Lambda to create it first (an
    invocation in between), CloudFormation's create would fail with AlreadyExists. Each role
    denies logs:CreateLogGroup, which an Allow in AWSLambdaBasicExecutionRole cannot override."""
    for function in HANDLERS:
        role = cfn["Resources"][f"{function}Role"]
        denies = [
            statement
            for policy in role["Properties"].get("Policies", [])
            for statement in as_list(policy["PolicyDocument"]["Statement"])
            if isinstance(statement, dict) and statement.get("Effect") == "Deny"
        ]
        assert {"Effect": "Deny", "Action": "logs:CreateLogGroup", "Resource": "*"} in denies, function


def test_functions_run_python_3_12_with_the_fixed_handler_modules(cfn: dict[str, Any]) -> None:
    functions = resources_of_type(cfn, "AWS::Lambda::Function")
    assert set(functions) == set(HANDLERS)
    for logical_id, function in functions.items():
        handler = function["Properties"]["Handler"]
        assert handler == f"{HANDLERS[logical_id]}.handler"
        assert (PROJECT_ROOT / (HANDLERS[logical_id].replace(".", "/") + ".py")).is_file(), handler
        assert function["Properties"]["Runtime"] == "python3.12"


def test_router_consumes_the_main_queue_in_batches_with_partial_failures(cfn: dict[str, Any]) -> None:
    mapping = properties(cfn, "RouterFunctionMainQueue")
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["MainQueue", "Arn"]}
    assert mapping["FunctionName"] == {"Ref": "RouterFunction"}
    assert mapping["BatchSize"] == 10
    assert mapping["MaximumBatchingWindowInSeconds"] == 5
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert properties(cfn, "RouterFunction")["Timeout"] == 60
    assert properties(cfn, "BatchTriggerFunction")["Timeout"] == 300


def test_router_concurrency_is_capped_by_a_parameter_within_aws_bounds(template: dict[str, Any], cfn: dict[str, Any]) -> None:
    """A backlog must not scale the router past what the one semaphore item can serve."""
    mapping = properties(cfn, "RouterFunctionMainQueue")
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "RouterMaxConcurrency"}}
    parameter = template["Parameters"]["RouterMaxConcurrency"]
    assert (parameter["MinValue"], parameter["MaxValue"]) == (2, 1000)  # what Lambda accepts
    assert 2 <= parameter["Default"] <= 10


def test_scheduled_functions_keep_failed_invocations(cfn: dict[str, Any]) -> None:
    """The batch trigger and the reconciler run on schedules (asynchronous invokes): a failed tick
    is not retried (the next tick is the retry) and is kept in a queue the role may send to."""
    for function in ("BatchTriggerFunction", "ReconcilerFunction"):
        configs = [
            r["Properties"] for r in resources_of_type(cfn, "AWS::Lambda::EventInvokeConfig").values()
            if r["Properties"]["FunctionName"] == {"Ref": function}
        ]
        (config,) = configs
        assert config["MaximumRetryAttempts"] == 0
        destination = config["DestinationConfig"]["OnFailure"]["Destination"]
        assert destination == {"Fn::GetAtt": ["ScheduledDeadLetterQueue", "Arn"]}
        role = cfn["Resources"][f"{function}Role"]
        assert any(
            "sqs:SendMessage" in as_list(statement["Action"])
            and {"Fn::GetAtt": ["ScheduledDeadLetterQueue", "Arn"]} in as_list(statement["Resource"])
            for statement in allow_statements(role)
        ), function


def test_triggers_are_enabled_only_in_their_processing_mode(cfn: dict[str, Any]) -> None:
    ingest = properties(cfn, "IngestFunctionObjectCreated")
    assert ingest["State"] == {"Fn::If": ["IsRealtime", "ENABLED", "DISABLED"]}
    assert ingest["EventPattern"]["source"] == ["aws.s3"]
    assert ingest["EventPattern"]["detail-type"] == ["Object Created"]
    assert ingest["EventPattern"]["detail"]["bucket"]["name"] == [{"Ref": "InputBucket"}]
    schedule = properties(cfn, "BatchTriggerFunctionSchedule")
    assert schedule["State"] == {"Fn::If": ["IsBatch", "ENABLED", "DISABLED"]}
    assert schedule["ScheduleExpression"] == "rate(5 minutes)"
    conditions = cfn["Conditions"]
    assert conditions["IsRealtime"] == {"Fn::Equals": [{"Ref": "ProcessingMode"}, "realtime"]}
    assert conditions["IsBatch"] == {"Fn::Equals": [{"Ref": "ProcessingMode"}, "batch"]}
    bucket = properties(cfn, "InputBucket")
    assert bucket["NotificationConfiguration"] == {"EventBridgeConfiguration": {"EventBridgeEnabled": True}}


def test_event_rules_retry_for_a_day_and_keep_what_they_cannot_deliver(cfn: dict[str, Any]) -> None:
    dead_letter_queues = {
        "IngestFunctionObjectCreated": "IngestDeadLetterQueue",
        "WorkflowTrackerFunctionExecutionStatusChange": "TrackerDeadLetterQueue",
    }
    for rule_id, queue_id in dead_letter_queues.items():
        (target,) = properties(cfn, rule_id)["Targets"]
        assert target["RetryPolicy"] == {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86400}
        assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [queue_id, "Arn"]}}
        policies = [
            p for p in resources_of_type(cfn, "AWS::SQS::QueuePolicy").values()
            if p["Properties"]["Queues"] == [{"Ref": queue_id}]
        ]
        (statement,) = policies[0]["Properties"]["PolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "events.amazonaws.com"}
        assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}}


def test_tracker_hears_every_terminal_status_of_this_state_machine(cfn: dict[str, Any]) -> None:
    pattern = properties(cfn, "WorkflowTrackerFunctionExecutionStatusChange")["EventPattern"]
    assert pattern["source"] == ["aws.states"]
    assert pattern["detail-type"] == ["Step Functions Execution Status Change"]
    assert pattern["detail"]["stateMachineArn"] == [{"Ref": "PipelineStateMachine"}]
    assert sorted(pattern["detail"]["status"]) == ["ABORTED", "FAILED", "SUCCEEDED", "TIMED_OUT"]


# ---------------------------------------------------------------------------------------- queues


def test_queue_relations_hold(template: dict[str, Any], cfn: dict[str, Any]) -> None:
    resources = template["Resources"]
    main = resources["MainQueue"]["Properties"]
    dead_letter = resources["DeadLetterQueue"]["Properties"]
    router_timeout = properties(cfn, "RouterFunction")["Timeout"]
    batching_window = properties(cfn, "RouterFunctionMainQueue")["MaximumBatchingWindowInSeconds"]
    visibility = resolve(template, main["VisibilityTimeout"])
    retention = resolve(template, main["MessageRetentionPeriod"])
    max_receive = resolve(template, main["RedrivePolicy"]["maxReceiveCount"])

    assert main["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}
    assert max_receive == 5
    # AWS: at least six times the function timeout, plus the batching window.
    assert visibility >= 6 * router_timeout + batching_window
    # A message that keeps failing reaches the DLQ before it expires (docs/ARCHITECTURE.md#dlq-rot).
    assert max_receive * visibility < retention
    assert resolve(template, dead_letter["MessageRetentionPeriod"]) >= retention
    for queue in resources_of_type(cfn, "AWS::SQS::Queue").values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
        assert queue["Properties"]["MessageRetentionPeriod"] == 1209600


# ----------------------------------------------------------------------------------- environment


def test_environment_variable_names_are_the_configured_ones(cfn: dict[str, Any]) -> None:
    for logical_id, function in resources_of_type(cfn, "AWS::Lambda::Function").items():
        names = set(function["Properties"]["Environment"]["Variables"])
        unknown = {
            n for n in names if n not in ALL_ENV_NAMES and not n.startswith(("POWERTOOLS_", "OTEL_"))
        } - (STACK_ENV_NAMES if logical_id == Function.RUNBOOK else set())
        assert not unknown, f"{logical_id} sets unknown variables {sorted(unknown)}"
        assert names >= SHARED_ENV, f"{logical_id} misses {sorted(SHARED_ENV - names)}"
        assert ("STATE_MACHINE_ARN" in names) == (logical_id in STATE_MACHINE_CLIENTS), logical_id


def test_powertools_settings(cfn: dict[str, Any]) -> None:
    variables = properties(cfn, "DetectFunction")["Environment"]["Variables"]
    assert variables["POWERTOOLS_SERVICE_NAME"] == "pipeops-pipeline"
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "PipeOps"
    assert variables["POWERTOOLS_LOG_LEVEL"] == {"Ref": "LogLevel"}


LAMBDA_LEVELS = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"]


def test_metrics_survive_every_log_level(template: dict[str, Any], cfn: dict[str, Any]) -> None:
    """With JSON logs Lambda treats a line without a level (every EMF document) as INFO and drops
    it below ApplicationLogLevel: Lambda must never filter above INFO, whatever LogLevel says;
    powertools' Logger applies the level to our own log lines."""
    for logical_id in resources_of_type(cfn, "AWS::Lambda::Function"):
        logging_config = properties(cfn, logical_id)["LoggingConfig"]
        assert logging_config["LogFormat"] == "JSON"
        assert logging_config["ApplicationLogLevel"] == {"Fn::FindInMap": ["LogLevels", {"Ref": "LogLevel"}, "Lambda"]}
    mapping = template["Mappings"]["LogLevels"]
    assert set(mapping) == set(template["Parameters"]["LogLevel"]["AllowedValues"])
    for level, lambda_level in mapping.items():
        assert LAMBDA_LEVELS.index(lambda_level["Lambda"]) <= LAMBDA_LEVELS.index("INFO"), level


# ------------------------------------------------------------------------------------------- IAM


def test_no_allow_statement_grants_a_wildcard_action(cfn: dict[str, Any]) -> None:
    for logical_id, role in resources_of_type(cfn, "AWS::IAM::Role").items():
        for statement in allow_statements(role):
            for action in as_list(statement["Action"]):
                assert "*" not in action, f"{logical_id} allows {action}"


def test_only_actions_without_resource_level_permissions_use_resource_star(cfn: dict[str, Any]) -> None:
    for logical_id, role in resources_of_type(cfn, "AWS::IAM::Role").items():
        for statement in allow_statements(role):
            if "*" in as_list(statement["Resource"]):
                allowed = WILDCARD_RESOURCE_ALLOWED.get(logical_id, set())
                actions = set(as_list(statement["Action"]))
                assert actions <= allowed, f"{logical_id} allows {sorted(actions - allowed)} on *"


def test_comprehend_is_granted_only_when_it_is_the_detector(template: dict[str, Any]) -> None:
    detect_policy = template["Resources"]["DetectFunction"]["Properties"]["Policies"][0]
    comprehend = [
        s for s in detect_policy["Statement"]
        if "Fn::If" in s and "comprehend:DetectPiiEntities" in json.dumps(s)
    ]
    assert [s["Fn::If"][0] for s in comprehend] == ["UsesComprehend"]
    assert template["Conditions"]["UsesComprehend"] == {"Fn::Equals": [{"Ref": "PiiDetector"}, "comprehend"]}


def test_managed_policies_are_only_the_lambda_service_roles(cfn: dict[str, Any]) -> None:
    for logical_id, role in resources_of_type(cfn, "AWS::IAM::Role").items():
        managed = role["Properties"].get("ManagedPolicyArns", [])
        if logical_id in ("PipelineStateMachineRole", AUTOMATION_ROLE, AUTO_REMEDIATE_ROLE):
            assert managed == []
        elif logical_id == "RouterFunctionRole":  # added by SAM for the SQS event source
            assert managed == [BASIC_EXECUTION, SQS_POLLER]
        else:
            assert managed == [BASIC_EXECUTION], logical_id


def test_finalize_reaches_only_the_run_record_and_the_working_prefix(cfn: dict[str, Any]) -> None:
    """Finalize writes statuses and the account on run records and reads/writes per-file results
    under the work bucket's `_pipeops/` prefix: nothing else (no input files, no outputs)."""
    role = cfn["Resources"]["FinalizeFunctionRole"]["Properties"]
    assert role["ManagedPolicyArns"] == [BASIC_EXECUTION]
    granted = {
        (tuple(as_list(statement["Action"])), json.dumps(statement["Resource"], sort_keys=True))
        for statement in allow_statements(cfn["Resources"]["FinalizeFunctionRole"])
        if "kms:" not in json.dumps(statement["Action"])  # KMS only with a customer key (HasKmsKey)
    }
    assert granted == {
        # GetItem: a retried verdict looks whether its first write landed
        (("dynamodb:UpdateItem", "dynamodb:GetItem"), json.dumps({"Fn::GetAtt": ["TrackingTable", "Arn"]})),
        (("s3:GetObject", "s3:PutObject"), json.dumps({"Fn::Sub": "${WorkBucket.Arn}/_pipeops/*"})),
        # a missing result reads as NoSuchKey (not 403) only with ListBucket on the bucket
        (("s3:ListBucket",), json.dumps({"Fn::GetAtt": ["WorkBucket", "Arn"]})),
    }


def test_state_machine_may_invoke_exactly_its_task_functions(cfn: dict[str, Any]) -> None:
    invoked = set()
    for statement in allow_statements(cfn["Resources"]["PipelineStateMachineRole"]):
        if as_list(statement["Action"]) == ["lambda:InvokeFunction"]:
            for resource in as_list(statement["Resource"]):  # SAM's LambdaInvokePolicy template
                invoked.add(resource["Fn::Sub"][1]["functionName"]["Ref"])
    assert invoked == {"DetectFunction", "GenerateSyntheticFunction", "RedactFunction", "FinalizeFunction"}


# --------------------------------------------------------------------------------- state machine


def test_state_machine_is_standard_and_logs_errors_without_data(cfn: dict[str, Any]) -> None:
    machine = properties(cfn, "PipelineStateMachine")
    assert machine["StateMachineType"] == "STANDARD"
    logging = machine["LoggingConfiguration"]
    assert logging["Level"] == "ERROR"
    assert logging["IncludeExecutionData"] is False
    (destination,) = logging["Destinations"]
    group_id = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    assert properties(cfn, group_id)["RetentionInDays"] > 0


@pytest.mark.skipif(not ASL_PATH.exists(), reason=f"{ASL_PATH.name} is not written yet")
def test_definition_substitutions_match_the_definition_placeholders(template: dict[str, Any]) -> None:
    placeholders = set(re.findall(r"\$\{(\w+)\}", ASL_PATH.read_text(encoding="utf-8")))
    substitutions = template["Resources"]["PipelineStateMachine"]["Properties"]["DefinitionSubstitutions"]
    assert set(substitutions) == placeholders


def test_no_partition_is_hard_coded(template: dict[str, Any]) -> None:
    """The DynamoDB integration's ARN comes from the template, in the stack's partition (aws-cn,
    aws-us-gov): the generated definition names no partition itself."""
    assert "arn:aws" not in ASL_PATH.read_text(encoding="utf-8")
    substitutions = template["Resources"]["PipelineStateMachine"]["Properties"]["DefinitionSubstitutions"]
    assert substitutions["DynamoDbUpdateItemArn"] == {"Fn::Sub": "arn:${AWS::Partition}:states:::dynamodb:updateItem"}


def test_topic_display_names_fit_whatever_the_stack_name(template: dict[str, Any]) -> None:
    """SNS refuses a DisplayName over 100 characters; a stack name may have 128."""
    pattern = template["Parameters"]["Stage"]["AllowedPattern"]
    longest_stage = "a" * max(n for n in range(1, 64) if re.fullmatch(pattern, "a" * n))
    topics = {k: r for k, r in template["Resources"].items() if r["Type"] == "AWS::SNS::Topic"}
    assert topics
    for logical_id, topic in topics.items():
        display = topic["Properties"]["DisplayName"]["Fn::Sub"]
        resolved = display.replace("${Stage}", longest_stage)
        assert "${" not in resolved, f"{logical_id}: {display} depends on more than the stage"
        assert len(resolved) <= 100, logical_id


@pytest.mark.skipif(not ASL_PATH.exists(), reason=f"{ASL_PATH.name} is not written yet")
def test_stale_job_window_outlasts_the_state_machine_timeout(template: dict[str, Any]) -> None:
    # docs/ARCHITECTURE.md#hung-executions: a hung execution ends before its job counts as stale.
    definition = json.loads(ASL_PATH.read_text(encoding="utf-8"))
    assert "TimeoutSeconds" in definition, "the state machine needs a TimeoutSeconds"
    stale_minutes = int(template["Parameters"]["StaleJobMinutes"]["Default"])
    assert stale_minutes * 60 > definition["TimeoutSeconds"]
    # ...and the template refuses any value that is not: the smallest allowed leaves a margin.
    smallest = int(template["Parameters"]["StaleJobMinutes"]["MinValue"])
    assert smallest * 60 >= definition["TimeoutSeconds"] + 5 * 60


def test_a_stale_window_shorter_than_the_workflow_timeout_is_refused_at_deploy() -> None:
    from sandbox.deploy import DeployError, _validate_parameters

    declared = load_template()["Parameters"]
    with pytest.raises(DeployError, match="StaleJobMinutes='20': must be at least 30 minutes"):
        _validate_parameters(declared, {"StaleJobMinutes": "20"})
    _validate_parameters(declared, {"StaleJobMinutes": "30"})


# ------------------------------------------------------------------------------- data and access


def test_tables(cfn: dict[str, Any]) -> None:
    tracking = properties(cfn, "TrackingTable")
    assert tracking["KeySchema"] == [
        {"AttributeName": "job_id", "KeyType": "HASH"},
        {"AttributeName": "started_at", "KeyType": "RANGE"},
    ]
    indexes = {index["IndexName"]: index for index in tracking["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"active-jobs", "by-status"}
    assert indexes["active-jobs"]["KeySchema"] == [
        {"AttributeName": "active_status", "KeyType": "HASH"},
        {"AttributeName": "updated_at", "KeyType": "RANGE"},
    ]
    assert indexes["by-status"]["KeySchema"] == [
        {"AttributeName": "status", "KeyType": "HASH"},
        {"AttributeName": "updated_at", "KeyType": "RANGE"},
    ]
    assert all(index["Projection"] == {"ProjectionType": "ALL"} for index in indexes.values())
    coordination = properties(cfn, "CoordinationTable")
    assert coordination["KeySchema"] == [{"AttributeName": "doc_key", "KeyType": "HASH"}]
    for table in (tracking, coordination):
        assert table["BillingMode"] == "PAY_PER_REQUEST"
        assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert table["TimeToLiveSpecification"] == {"AttributeName": "expiration_time", "Enabled": True}
        assert table["SSESpecification"] == {"SSEEnabled": True}


def test_buckets_are_private_encrypted_and_tls_only(cfn: dict[str, Any]) -> None:
    policies = {
        p["Properties"]["Bucket"]["Ref"]: p["Properties"]["PolicyDocument"]
        for p in resources_of_type(cfn, "AWS::S3::BucketPolicy").values()
    }
    for bucket_id in ("InputBucket", "OutputBucket"):
        bucket = properties(cfn, bucket_id)
        assert set(bucket["PublicAccessBlockConfiguration"].values()) == {True}
        assert len(bucket["PublicAccessBlockConfiguration"]) == 4
        assert bucket["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
        (encryption,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        kms, s3 = encryption["ServerSideEncryptionByDefault"]["Fn::If"][1:]
        assert kms == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Ref": "KmsKeyArn"}}
        assert s3 == {"SSEAlgorithm": "AES256"}
        (deny,) = policies[bucket_id]["Statement"]
        assert deny["Effect"] == "Deny"
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_outputs_are_exactly_the_names_the_cli_looks_up(template: dict[str, Any]) -> None:
    assert set(template["Outputs"]) == OUTPUTS


def test_parameters_constrain_their_values(template: dict[str, Any]) -> None:
    parameters = template["Parameters"]
    assert parameters["ProcessingMode"]["AllowedValues"] == ["realtime", "batch"]
    assert parameters["ProcessingMode"]["Default"] == "realtime"
    assert parameters["RedactionMode"]["AllowedValues"] == ["blackout", "synthetic"]
    assert parameters["PiiDetector"]["AllowedValues"] == ["offline", "comprehend"]
    assert parameters["MaxConcurrentWorkflows"]["MinValue"] >= 1
    assert parameters["KmsKeyArn"]["Default"] == ""
    for name, parameter in parameters.items():
        if "AllowedValues" in parameter:
            assert parameter["Default"] in parameter["AllowedValues"], name


CONSTRAINTS = {"AllowedValues", "AllowedPattern", "MinValue", "MaxValue"}


def test_every_parameter_is_described_and_constrained(template: dict[str, Any]) -> None:
    """`sam deploy --guided` prompts with the Description; CloudFormation refuses what the
    constraint excludes before anything is created (docs/DEPLOY.md explains each parameter)."""
    from sandbox.deploy import DeployError, _validate_parameters

    declared = template["Parameters"]
    for name, parameter in declared.items():
        assert str(parameter.get("Description", "")).strip(), f"{name} has no Description"
        assert CONSTRAINTS & set(parameter), f"{name} has no constraint"
        _validate_parameters(declared, {name: str(parameter["Default"])})  # the default passes
        if parameter["Type"] == "Number" and "MaxValue" in parameter:
            with pytest.raises(DeployError, match=name):
                _validate_parameters(declared, {name: str(parameter["MaxValue"] + 1)})


def test_every_parameter_is_explained_in_the_deploy_guide(template: dict[str, Any]) -> None:
    guide = (PROJECT_ROOT / "docs" / "DEPLOY.md").read_text(encoding="utf-8")
    missing = [name for name in template["Parameters"] if f"`{name}`" not in guide]
    assert not missing, f"docs/DEPLOY.md does not explain {missing}"


# ---------------------------------------------------------------------------------- requirements


def test_lambda_requirements_match_the_project_dependency_ranges() -> None:
    with open(PROJECT_ROOT / "pyproject.toml", "rb") as stream:
        project = tomllib.load(stream)["project"]
    declared = {Requirement(line).name: Requirement(line).specifier for line in project["dependencies"]}
    lines = Path(PROJECT_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    required = [Requirement(line) for line in lines if line.strip() and not line.lstrip().startswith("#")]
    assert {r.name for r in required} == {
        "aws-lambda-powertools",
        "opentelemetry-sdk",
        "opentelemetry-exporter-otlp-proto-http",  # Tracing=otlp
        "phonenumberslite",
        "python-stdnum",
    }
    for requirement in required:
        assert requirement.specifier == declared[requirement.name], requirement.name


def test_the_synthetic_mapping_is_out_of_reach_of_output_readers(cfn: dict[str, Any]) -> None:
    """PII at rest: mappings (original -> fake), findings and results live in their own bucket,
    which only the task functions' roles reach; every bucket expires objects after RetentionDays."""
    readers = set()
    for logical_id, role in resources_of_type(cfn, "AWS::IAM::Role").items():
        for statement in allow_statements(role):
            if "WorkBucket" in json.dumps(statement["Resource"]) and "s3:GetObject" in as_list(statement["Action"]):
                readers.add(logical_id)
    assert readers == {"GenerateSyntheticFunctionRole", "RedactFunctionRole", "FinalizeFunctionRole"}
    for bucket in ("InputBucket", "OutputBucket", "WorkBucket"):
        [rule] = properties(cfn, bucket)["LifecycleConfiguration"]["Rules"]
        assert rule["Status"] == "Enabled" and rule["ExpirationInDays"] == {"Ref": "RetentionDays"}
        encryption = properties(cfn, bucket)["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
        assert encryption["ServerSideEncryptionByDefault"]["Fn::If"][0] == "HasKmsKey"  # the KMS key when given
