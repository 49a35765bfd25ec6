"""Shared fixtures: moto-backed AWS, the pipeline's resources, and handler plumbing."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from monitors.snapshot import QueueDepth, Snapshot
from pipeline import config
from pipeline.handlers import _wiring
from pipeline.jobs import JobMessage, RunRef, format_timestamp
from pipeline.stack import SERVICE_NAME
from pipeline.stores.claims import ClaimsStore
from pipeline.stores.tracking import HEAD_SORT_KEY, RunRecord, TrackingStore
from pipeline.telemetry import catalog
from sandbox.clock import TimeScale

REGION = "us-east-1"
ACCOUNT = "123456789012"

logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
# typer sets PYDANTIC_DISABLE_PLUGINS around every in-process CLI invocation and then *deletes*
# it; a sandbox handler copying os.environ on another thread at that moment fails with KeyError
# (seen: a job FAILED with "'PYDANTIC_DISABLE_PLUGINS'"). Set once, typer only restores it. A CLI
# in its own process (as users run it) shares no environment with the handlers.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")


def _share_botocore_data_loader() -> None:
    """One botocore data loader for every session in the test process.

    Each `boto3.session.Session()` builds its own loader and re-parses botocore's JSON models
    (endpoints.json alone is 1.2 MB, read into OrderedDicts): ~150 ms a session, and every test
    makes several (the default session moto resets, one per client in pipeline/aws.py, the
    sandbox's own). The files never change during a run and botocore never mutates what it loaded
    (one session already shares it between all its clients), so sharing changes no behaviour.
    """
    import threading

    import botocore.session

    class PathsOnce(list):  # boto3 appends its data path to the loader of every new session
        def append(self, path: Any) -> None:
            if path not in self:
                super().append(path)

    real_create_loader = botocore.session.create_loader
    loaders: dict[str | None, Any] = {}
    lock = threading.Lock()

    def shared_loader(search_path_string: str | None = None) -> Any:
        with lock:
            if search_path_string not in loaders:
                loader = real_create_loader(search_path_string)
                loader._search_paths = PathsOnce(loader.search_paths)
                loaders[search_path_string] = loader
            return loaders[search_path_string]

    botocore.session.create_loader = shared_loader


_share_botocore_data_loader()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and a region, so nothing can reach a real account."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def executing_aws(aws_env: None) -> Iterator[None]:
    """moto in-process with its Step Functions interpreter running executions (no pipeline)."""
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield


@pytest.fixture
def aws(aws_env: None) -> Iterator[None]:
    """moto in-process; handler collaborators rebuilt inside the mock."""
    with mock_aws():
        _wiring.reset()
        yield
        _wiring.reset()


@dataclass
class Resources:
    """The pipeline's resources in moto, and the environment the handlers see."""

    input_bucket: str = "pipeops-input"
    output_bucket: str = "pipeops-output"
    work_bucket: str = "pipeops-work"
    tracking_table: str = "pipeops-tracking"
    coordination_table: str = "pipeops-coordination"
    main_queue_url: str = ""
    dlq_url: str = ""
    state_machine_arn: str = ""
    env: dict[str, str] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION)


def _table_definitions() -> dict[str, dict[str, Any]]:
    """Table schemas as the template declares them (one source of truth for keys and indexes)."""
    from stack.template import load_template

    resources = load_template()["Resources"]
    wanted = ("KeySchema", "AttributeDefinitions", "GlobalSecondaryIndexes", "BillingMode")
    return {
        logical: {k: v for k, v in resources[logical]["Properties"].items() if k in wanted}
        for logical in ("TrackingTable", "CoordinationTable")
    }


PASS_MACHINE = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})


@pytest.fixture
def resources(aws: None, monkeypatch: pytest.MonkeyPatch) -> Resources:
    """Buckets, queues (with redrive), tables and a state machine whose executions stay RUNNING."""
    res = Resources()
    s3 = res.client("s3")
    s3.create_bucket(Bucket=res.input_bucket)
    s3.create_bucket(Bucket=res.output_bucket)
    s3.create_bucket(Bucket=res.work_bucket)
    sqs = res.client("sqs")
    res.dlq_url = sqs.create_queue(QueueName="pipeops-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=res.dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    res.main_queue_url = sqs.create_queue(
        QueueName="pipeops-main",
        Attributes={
            "VisibilityTimeout": "360",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"}),
        },
    )["QueueUrl"]
    ddb = res.client("dynamodb")
    definitions = _table_definitions()
    ddb.create_table(TableName=res.tracking_table, **definitions["TrackingTable"])
    ddb.create_table(TableName=res.coordination_table, **definitions["CoordinationTable"])
    sfn = res.client("stepfunctions")
    res.state_machine_arn = sfn.create_state_machine(
        name="pipeops-pipeline", definition=PASS_MACHINE, roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn"
    )["stateMachineArn"]
    settings = {
        "tracking_table": res.tracking_table,
        "coordination_table": res.coordination_table,
        "input_bucket": res.input_bucket,
        "output_bucket": res.output_bucket,
        "work_bucket": res.work_bucket,
        "main_queue_url": res.main_queue_url,
        "state_machine_arn": res.state_machine_arn,
        "max_concurrent_workflows": "2",
        "folder_settle_seconds": "0",
        "capacity_retry_seconds": "0",
    }
    res.env = {config.env_name(config.Settings, name): value for name, value in settings.items()}
    for name, value in res.env.items():
        monkeypatch.setenv(name, value)
    _wiring.reset()
    return res


@dataclass
class FakeLambdaContext:
    """The attributes of the Lambda context object that handlers and powertools read."""

    function_name: str = "pipeops-test-function"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@pytest.fixture
def store(resources: Resources) -> TrackingStore:
    """The tracking store on the moto tables of `resources`."""
    return TrackingStore(resources.tracking_table, resources.client("dynamodb"))


@pytest.fixture
def claims(resources: Resources) -> ClaimsStore:
    """The object-claims store on the moto tables of `resources`."""
    return ClaimsStore(resources.tracking_table, resources.coordination_table, resources.client("dynamodb"))


@pytest.fixture
def lambda_context() -> FakeLambdaContext:
    return FakeLambdaContext()


def sqs_event(*bodies_and_ids: tuple[str, str], attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Lambda SQS event carrying the given (message id, body) pairs."""
    return {
        "Records": [
            {
                "messageId": message_id,
                "receiptHandle": f"rh-{message_id}",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": attributes or {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:pipeops-main",
                "awsRegion": REGION,
            }
            for message_id, body in bodies_and_ids
        ]
    }


def drain_queue(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Receive and delete everything visible on a queue."""
    messages: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
        ).get("Messages", [])
        if not batch:
            return messages
        for message in batch:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        messages.extend(batch)


def eventbridge_object_created(bucket: str, key: str, size: int = 10) -> dict[str, Any]:
    """An S3 "Object Created" event as EventBridge delivers it (key URL-encoded, as S3 does)."""
    from urllib.parse import quote_plus

    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": ACCOUNT,
        "region": REGION,
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {"key": quote_plus(key, safe=""), "size": size},
            "reason": "PutObject",
        },
    }


def emf_totals(stdout: str) -> dict[str, float]:
    """Sum of every metric value in the EMF documents printed to stdout."""
    totals: dict[str, float] = {}
    for line in stdout.splitlines():
        try:
            document = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(document, dict) or "_aws" not in document:
            continue
        for directive in document["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                values = document[metric["Name"]]
                totals[metric["Name"]] = totals.get(metric["Name"], 0) + sum(values if isinstance(values, list) else [values])
    return totals


def envelope(output: str, kind: str) -> dict[str, Any]:
    """The CLI's --json envelope. In-process, handlers running at the same moment may print their
    own log lines into the runner's captured stdout (in a shell the CLI is its own process)."""
    start = output.index('{\n  "version"')
    document, _ = json.JSONDecoder().raw_decode(output[start:])
    assert document["kind"] == kind
    return document["data"]


# -- the embedded sandbox -------------------------------------------------------------------


@pytest.fixture
def make_sandbox(aws_env: None):
    """Start an in-process sandbox (template.yaml deployed on moto, real handlers running).

    Call it with stack parameters, e.g. `make_sandbox(MaxConcurrentWorkflows="2")`; it is stopped
    (executions drained, patches removed) when the test ends. `time_scale=TimeScale(0.02)` runs
    virtual time faster than the default 0.05, for tests that wait out alarm periods and schedules
    (handlers and workflows keep their real-time floors: nothing is cut off sooner).
    """
    from pipeops.pipeline_sandbox import pipeline_sandbox
    from sandbox.sandbox import DEFAULT_TIME_SCALE, Sandbox

    started: list[Sandbox] = []

    def start(*, time_scale: TimeScale = DEFAULT_TIME_SCALE, **parameters: str) -> Sandbox:
        sandbox = pipeline_sandbox(parameters=parameters, time_scale=time_scale).start()
        started.append(sandbox)
        _wiring.reset()
        return sandbox

    yield start
    for sandbox in reversed(started):
        sandbox.stop()
    _wiring.reset()


@pytest.fixture
def sandbox(make_sandbox):
    """A sandbox with the template's default parameters."""
    return make_sandbox()


def create_pk_table(ddb: Any, name: str) -> None:
    """A pay-per-request table keyed by a string `pk` alone: the sandbox tests' scratch table."""
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


# -- reading and feeding a sandbox's stack (the e2e tests')


def depth(sandbox: Any, output: str) -> int:
    attributes = sandbox.client("sqs").get_queue_attributes(
        QueueUrl=sandbox.outputs[output],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return sum(int(value) for value in attributes.values())

def runs(sandbox: Any) -> list[RunRecord]:
    """Every run of the sandbox's tracking table, oldest first (a consistent scan: tests only)."""
    items = sandbox.client("dynamodb").scan(TableName=sandbox.outputs["TrackingTableName"], ConsistentRead=True)["Items"]
    return sorted((RunRecord.from_item(i) for i in items if i["started_at"]["S"] != HEAD_SORT_KEY), key=lambda r: r.started_at)

def put(sandbox: Any, key: str, body: bytes = b"mail ann@corp.example\n") -> None:
    """Upload `key` to the sandbox's input bucket (one email by default: a file with PII)."""
    sandbox.client("s3").put_object(Bucket=sandbox.outputs["InputBucketName"], Key=key, Body=body)

def send(sandbox: Any, output: str, body: str) -> None:
    sandbox.client("sqs").send_message(QueueUrl=sandbox.outputs[output], MessageBody=body)

def job_message(sandbox: Any, run: RunRef) -> str:
    return JobMessage(run.job_id, run.started_at, sandbox.outputs["InputBucketName"]).to_json()


def eventually(check: Callable[[], Any], what: str, timeout: float = 120.0) -> Any:
    """`check()`'s first truthy value, polled until `timeout` real seconds pass (then the test
    fails saying `what` never happened). A wait, never a timing assertion."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"never happened within {timeout:.0f} s: {what}")
        time.sleep(0.1)


def semaphore_item(sandbox: Any) -> dict[str, Any]:
    """The semaphore as stored: `active_count` and the `holders` map (names -> acquire time)."""
    item = sandbox.client("dynamodb").get_item(
        TableName=sandbox.outputs["CoordinationTableName"], Key={"doc_key": {"S": config.SEMAPHORE_KEY}}, ConsistentRead=True
    ).get("Item", {})
    return {
        "active_count": int(item.get("active_count", {}).get("N", "0")),
        "holders": {name: value.get("S") for name, value in item.get("holders", {}).get("M", {}).items()},
    }


def run_of(sandbox: Any, key: str) -> RunRecord | None:
    """The newest run whose files include `key`."""
    found = [run for run in runs(sandbox) if key in run.files]
    return max(found, key=lambda run: run.started_at) if found else None


def wait_for(predicate: Callable[[], bool], timeout: float = 120.0, what: str = "", every: float = 0.1) -> None:
    """Poll `predicate` every `every` seconds (never a timing assertion: the timeout only ends a
    test that hangs). A slower poll for predicates that read many alarms or metrics."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}" if what else "timed out waiting"
        time.sleep(every)


def indicator_datum(sandbox: Any, name: str, function: str, value: float, when: datetime | None = None) -> dict[str, Any]:
    """One MetricData entry of `name` as the stack's `function` publishes it (the catalog's dimensions)."""
    datum: dict[str, Any] = {
        "MetricName": name,
        "Dimensions": [
            {"Name": "service", "Value": SERVICE_NAME},
            {"Name": "stage", "Value": "dev"},  # the template's default Stage
            {"Name": "function", "Value": sandbox.outputs[f"{function}Name"]},
        ],
        "Value": value,
        "Unit": "Count",
    }
    if when is not None:
        datum["Timestamp"] = when
    return datum


def held_off(sandbox: Any) -> Any:
    """The scheduled reconciler held off, so that a test sees the condition it induced."""
    sandbox.client("events").disable_rule(Name=sandbox.deployment.resources["ReconcilerFunctionSchedule"])
    return sandbox


def an_overdue_run_whose_message_was_lost(sandbox: Any, monkeypatch: pytest.MonkeyPatch, grace: float) -> None:
    """One file uploaded whose run is written and its message lost (ingest's send dropped), then
    waited on until the run is `grace` seconds past its announce deadline: what backlog-stalled
    repairs. A grace, not 0: announced again, the run's deadline restarts, and the pass that
    verifies must not find it overdue at once."""
    from pipeline.jobs import parse_timestamp
    from pipeline.queue import JobQueue

    lost: list[Any] = []
    real_send = JobQueue.send
    monkeypatch.setattr(JobQueue, "send", lambda self, message, delay=0: lost.append(message) or "lost")
    put(sandbox, "unheard.txt")
    wait_for(lambda: len(runs(sandbox)) == 1 and len(lost) == 1)
    assert sandbox.wait_until_idle(60)
    monkeypatch.setattr(JobQueue, "send", real_send)
    [run] = runs(sandbox)
    overdue = parse_timestamp(run.announce_deadline) + timedelta(seconds=grace)
    wait_for(lambda: datetime.now(UTC) > overdue, timeout=60)


def edit_count(sandbox: Any, count: int) -> None:
    """A hand edit of the semaphore's active_count (what counter-drift repairs)."""
    sandbox.client("dynamodb").update_item(
        TableName=sandbox.outputs["CoordinationTableName"],
        Key={"doc_key": {"S": "workflow_counter"}},
        UpdateExpression="SET active_count = :n ADD version :one",
        ExpressionAttributeValues={":n": {"N": str(count)}, ":one": {"N": "1"}},
    )


def alarm_states(sandbox: Any) -> dict[str, str]:
    """Every alarm of the sandbox's stack, metric and composite, by name without the stack prefix."""
    pages = sandbox.client("cloudwatch").get_paginator("describe_alarms").paginate(
        AlarmNamePrefix="pipeops-", AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    return {
        alarm["AlarmName"].removeprefix("pipeops-"): alarm["StateValue"]
        for page in pages
        for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", [])
    }


def datapoints(sandbox: Any, metric: catalog.Metric, statistic: str) -> list[float]:
    """Every datapoint of `metric` (any function), one per minute, in the last hour."""
    cloudwatch = sandbox.client("cloudwatch")
    listed = cloudwatch.list_metrics(Namespace=catalog.NAMESPACE, MetricName=metric.value)["Metrics"]
    return [
        point[statistic]
        for found in listed
        for point in cloudwatch.get_metric_statistics(
            Namespace=catalog.NAMESPACE,
            MetricName=metric.value,
            Dimensions=found["Dimensions"],
            StartTime=datetime.now(UTC) - timedelta(hours=1),
            EndTime=datetime.now(UTC) + timedelta(minutes=5),
            Period=60,
            Statistics=[statistic],
        )["Datapoints"]
    ]


def subscribe_a_queue(sandbox: Any, topic: str = "AlarmTopic") -> str:
    """An SQS queue subscribed to one of the stack's alarm topics, as a pager would be (moto
    confirms an SQS subscription at once); its URL."""
    from pipeops.gameday.inbox import subscribe_a_queue as subscribe

    return subscribe(sandbox.client, sandbox.deployment.resources[topic], f"{topic}-inbox")


# -- toy functions for the sandbox's own tests (tests/sandbox/toy_handlers) ------------------

TOY_HANDLERS = Path(__file__).parent / "sandbox" / "toy_handlers"
LAMBDA_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
            "Action": "sts:AssumeRole",
        }
    ],
}


def quiet_snapshot(taken_at: datetime) -> Snapshot:
    """A status snapshot with nothing queued, nothing dead-lettered: one thing is changed per case."""
    return Snapshot(
        taken_at=format_timestamp(taken_at),
        main_queue=QueueDepth(0, 0, 0),
        dead_letter_depth=0,
        tracker_dead_letter_depth=0,
        ingest_dead_letter_depth=0,
        quarantine_depth=0,
        oldest_message_age_seconds=None,
    )


def placeholder_zip() -> bytes:
    """A function's code: a placeholder, the sandbox's runtime imports the handler from sys.path."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("placeholder.py", "# the sandbox imports the handler from sys.path\n")
    return buf.getvalue()


def toy_role(name: str = "sbx-role") -> str:
    """The ARN of a role Lambda and Step Functions may assume, made on first use."""
    iam = boto3.client("iam", region_name=REGION)
    try:
        return str(iam.get_role(RoleName=name)["Role"]["Arn"])
    except iam.exceptions.NoSuchEntityException:
        return str(iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(LAMBDA_TRUST))["Role"]["Arn"])


def toy_function(name: str, handler: str, *, role: str = "sbx-role", timeout: int = 3, **settings: Any) -> str:
    """A Python function whose handler is a toy module; its ARN. `settings`: more create_function
    arguments (MemorySize, Environment)."""
    return str(
        boto3.client("lambda", region_name=REGION).create_function(
            FunctionName=name,
            Runtime="python3.11",
            Role=toy_role(role),
            Handler=handler,
            Code={"ZipFile": placeholder_zip()},
            Timeout=timeout,
            **settings,
        )["FunctionArn"]
    )


# -- `pipeops sandbox up` in its own process -------------------------------------------------


@contextmanager
def sandbox_up_process(*options: str, stdout: int = subprocess.PIPE) -> Iterator[subprocess.Popen[str]]:
    """`pipeops sandbox up --json OPTIONS` in its own process, which sees none of this process's
    AWS_ variables; stopped with SIGTERM when the block ends, which it must obey within 30 s (its
    exit status is then `returncode`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "pipeops.cli", "sandbox", "up", *options, "--json"],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield server
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            pytest.fail("the served sandbox did not stop on SIGTERM")


# The sidecar beside a pipeline we did not build: the example counter pipeline and its sidecar in the
# sandbox (tests/e2e/test_sidecar_sandbox.py, test_sidecar_cli_sandbox.py), as `pipeops demo --sidecar`
# deploys and reads them (pipeops/sidecar/demo.py).


def invoke_function(sandbox: Any, function: str, payload: dict[str, Any]) -> dict[str, Any]:
    answer = sandbox.client("lambda").invoke(FunctionName=function, Payload=json.dumps(payload).encode())
    body = json.loads(answer["Payload"].read() or b"null")
    assert "FunctionError" not in answer, body
    return dict(body or {})


@pytest.fixture
def counter_example(make_sandbox: Any) -> Any:
    """The example pipeline's stack deployed in a running sandbox, its handlers importable there
    (virtual time at 0.02: the sidecar's alarms wait out reconciler periods)."""
    from pipeops.sidecar.demo import TIME_SCALE, deploy_example, forget_example

    sandbox = make_sandbox(time_scale=TimeScale(TIME_SCALE))
    deploy_example(sandbox)
    yield sandbox
    forget_example()
