"""sandbox.deploy: template.yaml deployed into moto (in-process and through a moto server).

The in-process tests share one `mock_aws` and one deployment per class (deploying is the slow
part); every further stack gets its own name in that same mock, which is itself a check that
several stacks live side by side.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.config import default_user_config
from moto.server import ThreadedMotoServer

from pipeline.stack import Function
from sandbox.clock import TimeScale
from sandbox.deploy import DeployError, Deployment, deploy, scale_definition, stack_outputs
from sandbox.template import transform
from stack.template import load_template

REGION = "us-east-1"
EXECUTING = {"stepfunctions": {"execute_state_machine": True}}
FUNCTIONS = tuple(Function)
FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


def _fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAKE_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)


def _client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)


def _declared() -> dict[str, Any]:
    """The transformed template: what the functions must look like."""
    return transform(load_template(), REGION)["Resources"]


def _function_config(name: str) -> dict[str, Any]:
    return _client("lambda").get_function_configuration(FunctionName=name)


def _retriers(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield from node.get("Retry", [])
        for value in node.values():
            yield from _retriers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _retriers(value)


def _wait_for(sfn: Any, execution_arn: str, timeout: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:  # drain: never leave the mock with an execution running
        desc = sfn.describe_execution(executionArn=execution_arn)
        if desc["status"] != "RUNNING" or time.monotonic() > deadline:
            return desc
        time.sleep(0.05)


@pytest.fixture(scope="class")
def moto_in_process() -> Iterator[None]:
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _fake_credentials(monkeypatch)
        with mock_aws(config=EXECUTING):
            yield


@pytest.fixture(scope="class")
def deployment(moto_in_process: None) -> Deployment:
    return deploy()


@pytest.mark.usefixtures("moto_in_process")
class TestInProcess:
    def test_every_output_points_at_a_real_resource(self, deployment: Deployment) -> None:
        outputs = deployment.outputs
        declared_outputs = load_template()["Outputs"]
        assert set(outputs) == set(declared_outputs)
        assert stack_outputs("pipeops", region=REGION) == dict(outputs)

        s3 = _client("s3")
        for bucket in (outputs["InputBucketName"], outputs["OutputBucketName"]):
            s3.head_bucket(Bucket=bucket)

        sqs = _client("sqs")
        dlq_arn = sqs.get_queue_attributes(
            QueueUrl=outputs["DeadLetterQueueUrl"], AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        main = sqs.get_queue_attributes(QueueUrl=outputs["MainQueueUrl"], AttributeNames=["All"])[
            "Attributes"
        ]
        assert main["VisibilityTimeout"] == "365"
        assert main["MessageRetentionPeriod"] == "1209600"
        assert json.loads(main["RedrivePolicy"]) == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5}
        sqs.get_queue_attributes(QueueUrl=outputs["TrackerDeadLetterQueueUrl"], AttributeNames=["QueueArn"])

        ddb = _client("dynamodb")
        tracking = ddb.describe_table(TableName=outputs["TrackingTableName"])["Table"]
        assert [index["IndexName"] for index in tracking["GlobalSecondaryIndexes"]] == ["active-jobs", "by-status"]
        assert tracking["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        for table in (outputs["TrackingTableName"], outputs["CoordinationTableName"]):
            ttl = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
            assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiration_time"}
            backups = ddb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]
            assert backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"

        machine = _client("stepfunctions").describe_state_machine(stateMachineArn=outputs["StateMachineArn"])
        assert machine["definition"] == deployment.definition
        assert "${" not in machine["definition"]
        assert outputs["TrackingTableName"] in machine["definition"]
        assert machine["loggingConfiguration"]["level"] == "ERROR"
        assert deployment.resources["PipelineStateMachine"] == outputs["StateMachineArn"]

        for logical in FUNCTIONS:
            assert _function_config(outputs[f"{logical}Name"])["FunctionName"] == outputs[f"{logical}Name"]

    def test_functions_are_configured_as_declared(self, deployment: Deployment) -> None:
        declared = _declared()
        outputs = deployment.outputs
        task_arns = set()
        for logical in FUNCTIONS:
            config = _function_config(outputs[f"{logical}Name"])
            props = declared[logical]["Properties"]
            assert config["Handler"] == props["Handler"]
            assert config["Timeout"] == props["Timeout"]
            assert config["MemorySize"] == props["MemorySize"]
            env = config["Environment"]["Variables"]
            assert set(env) == set(props["Environment"]["Variables"])
            assert all(isinstance(value, str) for value in env.values()), env  # moto keeps ints
            assert env["TRACKING_TABLE"] == outputs["TrackingTableName"]
            assert env["COORDINATION_TABLE"] == outputs["CoordinationTableName"]
            assert env["INPUT_BUCKET"] == outputs["InputBucketName"]
            assert env["OUTPUT_BUCKET"] == outputs["OutputBucketName"]
            assert env["MAIN_QUEUE_URL"] == outputs["MainQueueUrl"]
            assert env["MAX_CONCURRENT_WORKFLOWS"] == "10"
            assert env["REDACTION_MODE"] == "blackout"
            if "STATE_MACHINE_ARN" in props["Environment"]["Variables"]:
                assert env["STATE_MACHINE_ARN"] == outputs["StateMachineArn"]
            task_arns.add(config["FunctionArn"])
        # The task states name the stack's own functions.
        assert json.loads(deployment.definition)["States"]["GenerateSynthetic"]["Resource"] in task_arns
        # What moto cannot model is reported, not hidden.
        assert "RouterFunction.Architectures" in deployment.skipped

    def test_event_wiring_is_created_as_declared(self, deployment: Deployment) -> None:
        outputs = deployment.outputs
        awslambda = _client("lambda")
        mappings = awslambda.list_event_source_mappings(FunctionName=outputs["RouterFunctionName"])
        (mapping,) = mappings["EventSourceMappings"]
        main_arn = _client("sqs").get_queue_attributes(
            QueueUrl=outputs["MainQueueUrl"], AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        assert mapping["EventSourceArn"] == main_arn
        assert mapping["BatchSize"] == 10
        assert mapping["MaximumBatchingWindowInSeconds"] == 5
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["State"] == "Enabled"

        events = _client("events")
        prefix = f"{deployment.stack_name}-"
        rules = {
            rule["Name"][len(prefix) :].rsplit("-", 1)[0]: rule
            for rule in events.list_rules(NamePrefix=prefix)["Rules"]
        }
        ingest = rules["IngestFunctionObjectCreated"]
        assert ingest["State"] == "ENABLED"  # realtime mode
        assert json.loads(ingest["EventPattern"])["detail"] == {
            "bucket": {"name": [outputs["InputBucketName"]]}
        }
        (target,) = events.list_targets_by_rule(Rule=ingest["Name"])["Targets"]
        assert target["Arn"].endswith(f":function:{outputs['IngestFunctionName']}")
        assert target["RetryPolicy"] == {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86400}
        assert target["DeadLetterConfig"]["Arn"].split(":")[-1].startswith("pipeops-IngestDeadLetterQueue-")
        tracker = rules["WorkflowTrackerFunctionExecutionStatusChange"]
        pattern = json.loads(tracker["EventPattern"])
        assert pattern["detail"]["stateMachineArn"] == [outputs["StateMachineArn"]]
        schedule = rules["BatchTriggerFunctionSchedule"]
        assert (schedule["ScheduleExpression"], schedule["State"]) == ("rate(5 minutes)", "DISABLED")

        pages = _client("logs").get_paginator("describe_log_groups").paginate()
        groups = {
            group["logGroupName"]: group.get("retentionInDays")
            for page in pages
            for group in page["logGroups"]
        }
        for logical in FUNCTIONS:
            assert groups[f"/aws/lambda/{outputs[f'{logical}Name']}"] == 30
        assert groups["/aws/vendedlogs/states/pipeops-pipeline"] == 30

    def test_what_moto_skips_is_applied(self, deployment: Deployment) -> None:
        outputs = deployment.outputs
        s3 = _client("s3")
        bucket = outputs["InputBucketName"]
        (rule,) = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
        assert rule["BucketKeyEnabled"] is True
        assert all(s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"].values())
        controls = s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]
        assert controls == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
        # moto stores EventBridgeConfiguration (get_bucket_notification_configuration omits it).
        from moto.s3.models import s3_backends

        stored = s3_backends["123456789012"]["aws"].buckets[bucket].notification_configuration
        assert stored is not None and stored.event_bridge is not None

        sqs = _client("sqs")
        dlq_url = deployment.resources["IngestDeadLetterQueue"]
        queue_policy = json.loads(
            sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["Policy"])["Attributes"]["Policy"]
        )
        condition = queue_policy["Statement"][0]["Condition"]["ArnEquals"]["aws:SourceArn"]
        assert condition.endswith(f":rule/{deployment.resources['IngestFunctionObjectCreated']}")
        assert "IngestDeadLetterQueuePolicy" in deployment.resources

    def test_bucket_policies_are_left_out_because_moto_misjudges_them(self, deployment: Deployment) -> None:
        assert {"InputBucketPolicy", "OutputBucketPolicy"} <= set(deployment.skipped)
        s3 = _client("s3")
        s3.put_object(Bucket=deployment.outputs["InputBucketName"], Key="in/a.txt", Body=b"x")  # works
        # Why (re-check on a moto upgrade): with the template's DenyInsecureTransport statement,
        # whose condition does not hold for these requests, moto denies every object write.
        resources = _declared()
        statement = resources["InputBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]
        s3.create_bucket(Bucket="pipeops-policy-probe")
        statement = statement | {"Resource": ["arn:aws:s3:::pipeops-policy-probe/*"]}
        s3.put_bucket_policy(
            Bucket="pipeops-policy-probe",
            Policy=json.dumps({"Version": "2012-10-17", "Statement": [statement]}),
        )
        with pytest.raises(ClientError, match=r"403|Forbidden"):
            s3.put_object(Bucket="pipeops-policy-probe", Key="a.txt", Body=b"x")

    def test_the_deployed_state_machine_executes(self, deployment: Deployment) -> None:
        # No tracking record: the first status write fails its condition -> JobNoLongerActive.
        # Proves the executing backend has the machine, with the stack's table substituted.
        sfn = _client("stepfunctions")
        job = {
            "job_id": "job-1",
            "started_at": "2026-01-01T00:00:00Z",
            "execution_name": "job-1",
            "bucket": deployment.outputs["InputBucketName"],
            "output_bucket": deployment.outputs["OutputBucketName"],
            "files": ["a.txt"],
            "unsupported": [],
            "redaction_mode": "blackout",
            "trace": {},
        }
        execution = sfn.start_execution(
            stateMachineArn=deployment.outputs["StateMachineArn"], name="job-1", input=json.dumps(job)
        )
        desc = _wait_for(sfn, execution["executionArn"])
        assert (desc["status"], desc.get("error")) == ("FAILED", "JobNoLongerActive")

    def test_parameter_overrides_reach_the_functions(self, deployment: Deployment) -> None:
        other = deploy(
            "pipeops-synthetic", parameters={"RedactionMode": "synthetic", "MaxConcurrentWorkflows": "2"}
        )
        assert other.parameters["RedactionMode"] == "synthetic"
        assert other.parameters["MaxConcurrentWorkflows"] == "2"
        assert other.parameters["ProcessingMode"] == "realtime"  # default kept
        for logical in ("RouterFunction", "DetectFunction"):
            env = _function_config(other.outputs[f"{logical}Name"])["Environment"]["Variables"]
            assert (env["REDACTION_MODE"], env["MAX_CONCURRENT_WORKFLOWS"]) == ("synthetic", "2")
        # A second stack in the same moto: its own resources, the first one untouched.
        assert other.outputs["StateMachineArn"] != deployment.outputs["StateMachineArn"]
        assert set(other.outputs.values()).isdisjoint(deployment.outputs.values())
        sfn = _client("stepfunctions")
        for arn in (other.outputs["StateMachineArn"], deployment.outputs["StateMachineArn"]):
            sfn.describe_state_machine(stateMachineArn=arn)
        env = _function_config(deployment.outputs["RouterFunctionName"])["Environment"]["Variables"]
        assert env["REDACTION_MODE"] == "blackout"

    def test_invalid_parameters_are_rejected_like_cloudformation(self) -> None:
        for parameters, message in (
            ({"Bogus": "x"}, "do not exist"),
            ({"RedactionMode": "scramble"}, "must be one of"),
            ({"MaxConcurrentWorkflows": "0"}, "at least 1"),
            ({"MaxConcurrentWorkflows": "many"}, "must be a number"),
            ({"Stage": "Prod"}, "lower-case"),
        ):
            with pytest.raises(DeployError, match=message):
                deploy("pipeops-invalid", parameters=parameters)
        with pytest.raises(DeployError, match="AlreadyExists"):
            deploy()  # the class's stack

    def test_time_scale_shortens_the_waits_of_the_deployed_definition(self, deployment: Deployment) -> None:
        scaled = deploy("pipeops-fast", time_scale=TimeScale(0.05))
        definition = json.loads(scaled.definition)
        retriers = list(_retriers(definition))
        assert retriers and all(r["IntervalSeconds"] == 1 for r in retriers)  # 2 s and 5 s -> moto's minimum
        real_attempts = sorted(r["MaxAttempts"] for r in _retriers(json.loads(deployment.definition)))
        assert sorted(r["MaxAttempts"] for r in retriers) == real_attempts  # behaviour kept: every attempt
        assert all(r.get("BackoffRate", 1.0) == 1.0 for r in retriers)  # time compressed past the 1 s floor
        # The 1 s floor makes the 2 s retries half of real time: the timeout is scaled by 0.5 too.
        assert definition["TimeoutSeconds"] == 750
        machine = _client("stepfunctions").describe_state_machine(
            stateMachineArn=scaled.outputs["StateMachineArn"]
        )
        assert machine["definition"] == scaled.definition
        real = json.loads(deployment.definition)
        assert real["TimeoutSeconds"] == 1500
        assert {r["IntervalSeconds"] for r in _retriers(real)} == {2, 5}

    def test_resources_moto_skips_are_created_or_reported(self, tmp_path: Path) -> None:
        template = tmp_path / "template.yaml"
        template.write_text(MINI_TEMPLATE, encoding="utf-8")
        mini = deploy("mini", template_path=template, parameters={"Threshold": "5"})
        (alarm,) = _client("cloudwatch").describe_alarms(AlarmNames=[mini.resources["TooManyErrors"]])[
            "MetricAlarms"
        ]
        assert (alarm["Threshold"], alarm["Period"]) == (5.0, 60)
        (metric_filter,) = _client("logs").describe_metric_filters(logGroupName="/sbx/mini")["metricFilters"]
        assert metric_filter["metricTransformations"][0]["dimensions"] == {"service": "$.service"}
        assert (
            "Policy"
            in _client("sqs").get_queue_attributes(
                QueueUrl=mini.outputs["QueueUrl"], AttributeNames=["Policy"]
            )["Attributes"]
        )
        assert "NeverCreated" not in mini.resources and "NeverCreated" not in mini.skipped  # condition false
        assert mini.skipped == {}
        (composite,) = _client("cloudwatch").describe_alarms(
            AlarmNames=[mini.resources["Composite"]], AlarmTypes=["CompositeAlarm"]
        )["CompositeAlarms"]
        assert composite["AlarmRule"] == f'ALARM("{mini.resources["TooManyErrors"]}")'
        assert mini.definition == ""


MINI_TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Threshold:
    Type: Number
    Default: 3
Conditions:
  Never: !Equals [a, b]
Resources:
  Group:
    Type: AWS::Logs::LogGroup
    Properties:
      LogGroupName: !Sub "/sbx/${AWS::StackName}"
  Errors:
    Type: AWS::Logs::MetricFilter
    Properties:
      LogGroupName: !Ref Group
      FilterPattern: '{ $.level = "ERROR" }'
      MetricTransformations:
        - MetricName: Errors
          MetricNamespace: Sbx
          MetricValue: "1"
          Dimensions:
            - Key: service
              Value: $.service
  Queue:
    Type: AWS::SQS::Queue
  QueuePolicy:
    Type: AWS::SQS::QueuePolicy
    Properties:
      Queues: [!Ref Queue]
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: {Service: events.amazonaws.com}
            Action: sqs:SendMessage
            Resource: !GetAtt Queue.Arn
  TooManyErrors:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Namespace: Sbx
      MetricName: Errors
      Statistic: Sum
      Period: 60
      EvaluationPeriods: 1
      Threshold: !Ref Threshold
      ComparisonOperator: GreaterThanOrEqualToThreshold
      AlarmActions: [!GetAtt Queue.Arn]
  NeverCreated:
    Type: AWS::SQS::Queue
    Condition: Never
  Composite:
    Type: AWS::CloudWatch::CompositeAlarm
    Properties:
      AlarmRule: !Sub 'ALARM("${TooManyErrors}")'
Outputs:
  QueueUrl:
    Value: !Ref Queue
"""


def test_scale_definition_rounds_up_and_keeps_behaviour() -> None:
    definition = {
        "StartAt": "Map",
        "TimeoutSeconds": 100,
        "States": {
            "Map": {
                "Type": "Map",
                "ItemProcessor": {
                    "StartAt": "Task",
                    "States": {
                        "Task": {
                            "Type": "Task",
                            "Resource": "arn:aws:lambda:us-east-1:123456789012:function:f",
                            "TimeoutSeconds": 40,
                            "Parameters": {"TimeoutSeconds": 40},  # payload: never touched
                            "Retry": [
                                {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 10, "BackoffRate": 2.0}
                            ],
                            "End": True,
                        }
                    },
                },
                "Retry": [{"ErrorEquals": ["States.ALL"]}],  # IntervalSeconds defaults to 1: stays 1
                "Next": "Pause",
            },
            "Pause": {"Type": "Wait", "Seconds": 8, "End": True},
        },
    }
    assert scale_definition(definition, TimeScale(1.0)) == definition
    half = scale_definition(definition, TimeScale(0.25))
    task = half["States"]["Map"]["ItemProcessor"]["States"]["Task"]
    assert task["Retry"][0] == {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 3, "BackoffRate": 2.0}
    assert half["States"]["Pause"]["Seconds"] == 2
    assert task["Parameters"] == {"TimeoutSeconds": 40}
    # The Map's default 1 s interval cannot shrink: ratio 1, so timeouts stay as written.
    assert (half["TimeoutSeconds"], task["TimeoutSeconds"]) == (100, 40)
    del definition["States"]["Map"]["Retry"]
    quarter = scale_definition(definition, TimeScale(0.25))
    inner = quarter["States"]["Map"]["ItemProcessor"]["States"]["Task"]
    assert (quarter["TimeoutSeconds"], inner["TimeoutSeconds"]) == (30, 12)  # x 0.3 (= 3/10)
    assert definition["States"]["Pause"]["Seconds"] == 8  # input untouched
    # Timeouts bound work, which the sandbox does not speed up: never below min(original, floor).
    floored = scale_definition(definition, TimeScale(0.25), min_timeout_seconds=50)
    floored_task = floored["States"]["Map"]["ItemProcessor"]["States"]["Task"]
    assert (floored["TimeoutSeconds"], floored_task["TimeoutSeconds"]) == (50, 40)
    assert floored["States"]["Pause"]["Seconds"] == 2  # waits are still shortened


def test_deploy_refuses_a_moto_that_does_not_execute_state_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_credentials(monkeypatch)
    with mock_aws(), pytest.raises(DeployError, match="execute_state_machine"):
        deploy()


def test_deploy_into_a_moto_server_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_credentials(monkeypatch)
    saved_config = dict(default_user_config["stepfunctions"])
    werkzeug = logging.getLogger("werkzeug")  # the server's access log, one line per request
    saved_level = werkzeug.level
    werkzeug.setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        # What the server's owner does (the server runs in this process here): the ASL interpreter
        # calls Lambda back on MOTO_PORT, and execution must be on before the machine is created.
        monkeypatch.setenv("MOTO_PORT", str(port))
        request = urllib.request.Request(
            f"{endpoint}/moto-api/config", data=json.dumps(EXECUTING).encode(), method="POST"
        )
        urllib.request.urlopen(request, timeout=10).close()

        served = deploy(endpoint_url=endpoint, parameters={"RedactionMode": "synthetic"})

        assert stack_outputs("pipeops", region=REGION, endpoint_url=endpoint) == dict(served.outputs)
        sfn = boto3.client("stepfunctions", region_name=REGION, endpoint_url=endpoint)
        machine = sfn.describe_state_machine(stateMachineArn=served.outputs["StateMachineArn"])
        assert machine["definition"] == served.definition and "${" not in served.definition
        awslambda = boto3.client("lambda", region_name=REGION, endpoint_url=endpoint)
        env = awslambda.get_function_configuration(FunctionName=served.outputs["RouterFunctionName"])[
            "Environment"
        ]
        assert env["Variables"]["STATE_MACHINE_ARN"] == served.outputs["StateMachineArn"]
        assert env["Variables"]["REDACTION_MODE"] == "synthetic"
    finally:
        try:
            urllib.request.urlopen(
                urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10
            ).close()
        finally:
            server.stop()
            default_user_config["stepfunctions"] = saved_config
            werkzeug.setLevel(saved_level)
