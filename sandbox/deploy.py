"""Deploy the very same `template.yaml` into moto (docs/ARCHITECTURE.md#sandbox).

    template.yaml --(sandbox.template.transform: sam package + SAM transform, offline)--> JSON
        --(CloudFormation create_stack, parameters passed through)--> moto creates what it can
        --(_correct_moto: the ONE place that fixes what moto creates wrong or skips)--> Deployment

The same code deploys in-process (`endpoint_url=None`: the caller runs it inside `mock_aws`) and
into a moto server (`endpoint_url="http://127.0.0.1:PORT"`): it only talks boto3.

What the caller must set up (it cannot be done from boto3):

- Step Functions must *execute* state machines. In-process:
  `mock_aws(config={"stepfunctions": {"execute_state_machine": True}})`. In a server process: the
  same key in `moto.core.config.default_user_config`, or
  `POST {endpoint}/moto-api/config {"stepfunctions": {"execute_state_machine": true}}`, *before*
  `deploy`; also set `MOTO_PORT` to the server's real port in the server process (the ASL
  interpreter calls Lambda back over HTTP, on port 5000 by default). `deploy` raises DeployError
  when it finds execution disabled (the state machine would exist but never run).
- Real handler code: `sandbox.runtime.LambdaRuntime` (moto only stores the functions).

Parameters are validated as CloudFormation would (moto accepts unknown keys and values outside
AllowedValues). moto accepts a duplicate stack name only after the first is deleted; several
stacks with different names live side by side in one moto (every physical name is suffixed).

Deleting the stack does not delete the executable state machine (see _correct_moto, step 1).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import logging
import math
import re
import threading
import tomllib
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sandbox import lambda_logging
from sandbox.clients import ClientCache
from sandbox.clock import TimeScale
from sandbox.template import transform
from stack.template import PROJECT_ROOT, TEMPLATE_PATH, load_template

LOG = logging.getLogger("sandbox.deploy")

CAPABILITIES = ("CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND")
STATE_MACHINE_TYPE = "AWS::StepFunctions::StateMachine"
# At or below this time-scale factor, Retry backoff is flattened (see scale_definition).
FLATTEN_BACKOFF_AT = 0.1
# moto's ASL parser accepts only integers >= 1 for Retry IntervalSeconds (no 0, no floats).
MIN_RETRY_INTERVAL_SECONDS = 1
REAL_TIME = TimeScale(1.0)


class DeployError(Exception):
    """The template cannot be deployed into moto as declared."""


@dataclass(frozen=True)
class Deployment:
    """A stack deployed into moto, as the rest of the sandbox and the CLI read it."""

    stack_name: str
    region: str
    outputs: Mapping[str, str]  # template Outputs (InputBucketName, MainQueueUrl, StateMachineArn, ...)
    parameters: Mapping[str, str]  # every template parameter, defaults included
    resources: Mapping[str, str]  # logical id -> physical id
    definition: str  # the ASL deployed to moto (after substitutions and time scaling)
    endpoint_url: str | None = None
    time_scale: TimeScale = field(default_factory=TimeScale)
    # Declared but not in moto (no API to set it): "LogicalId" or "LogicalId.Property" -> why.
    skipped: Mapping[str, str] = field(default_factory=dict)
    # What _correct_moto changed after create_stack, one line each (for logs and the CLI).
    corrections: tuple[str, ...] = ()


def samconfig_stack_name() -> str:
    """The stack name `sam deploy` uses for this project (samconfig.toml, beside the template):
    the sandbox's default, so local and deployed resources carry the same names."""
    config = tomllib.loads((PROJECT_ROOT / "samconfig.toml").read_text(encoding="utf-8"))
    return str(config["default"]["global"]["parameters"]["stack_name"])


def deploy(
    stack_name: str | None = None,
    *,
    parameters: Mapping[str, str] | None = None,
    region: str = "us-east-1",
    endpoint_url: str | None = None,
    time_scale: TimeScale = REAL_TIME,
    template_path: Path | str = TEMPLATE_PATH,
    min_timeout_seconds: float = 0,
) -> Deployment:
    """Create stack `stack_name` from `template_path` in moto and correct what moto gets wrong.

    `stack_name` defaults to the one `sam deploy` uses. `parameters` override template defaults.
    `time_scale` shortens the waits written in the state machine definition (see
    `scale_definition`). Raises DeployError.
    """
    stack_name = stack_name or samconfig_stack_name()
    # The SAM translator warns about "unpublished metrics" it never needs to publish here.
    logging.getLogger("samtranslator.metrics.metrics").setLevel(logging.ERROR)
    overrides = {key: _parameter_string(value) for key, value in (parameters or {}).items()}
    source = load_template(template_path)
    _validate_parameters(source.get("Parameters", {}), overrides)
    template = transform(source, region, parameters=overrides, base_dir=Path(template_path).resolve().parent)
    aws = ClientCache(region, endpoint_url)
    _ensure_code_artifacts(aws, template)
    stack = _create_stack(aws, stack_name, _for_moto(template), overrides)
    try:
        return _correct_moto(aws, stack, template, time_scale, min_timeout_seconds)
    except (ClientError, BotoCoreError) as exc:
        raise DeployError(f"stack {stack_name}: correcting moto's resources: {_client_error(exc)}") from exc


def stack_outputs(stack_name: str, *, region: str, endpoint_url: str | None = None) -> dict[str, str]:
    """A stack's Outputs, read exactly as from AWS (the CLI uses it against both)."""
    stack = _describe_stack(ClientCache(region, endpoint_url), stack_name)
    return {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}


# --------------------------------------------------------------------------- time scaling


def scale_definition(
    definition: Mapping[str, Any], time_scale: TimeScale, min_timeout_seconds: float = 0
) -> dict[str, Any]:
    """A copy of an ASL definition with its waits shortened by `time_scale`.

    - Retry `IntervalSeconds` (default 1) and `MaxDelaySeconds`: ceil(s x factor), at least 1 --
      moto's parser rejects 0 and any non-integer (1.0 included). MaxAttempts and JitterStrategy
      are kept: they are behaviour. At factors <= FLATTEN_BACKOFF_AT, BackoffRate becomes 1.0:
      the floor of 1 s would otherwise leave the chain's later waits uncompressed.
    - Wait `Seconds`: ceil(s x factor) (0 is accepted). `SecondsPath`/`Timestamp` are left alone.
    - `TimeoutSeconds` / `HeartbeatSeconds` (machine and states): ceil(s x effective), where
      effective = max(factor, the largest ratio new/old of the waits above). The floor of 1 s makes
      waits relatively longer than the factor; scaling timeouts by the same worst ratio keeps what
      fits within a timeout in AWS fitting in the sandbox (a retry chain never outlives the
      workflow timeout because of the scaling).

    The factor 1.0 returns an unchanged copy.

    For this pipeline (IntervalSeconds 10, MaxAttempts 5, BackoffRate 2.5, JitterStrategy FULL) a
    task's worst-case retry waits are 10 x (1 + 2.5 + 6.25 + 15.625 + 39.0625) = 644 s in AWS; at
    any factor <= 0.1 they are 5 s (interval 1 s, backoff flattened; FULL jitter draws each wait
    in [0, w], so about half on average), and TimeoutSeconds 1500 becomes 150.
    """
    scaled = copy.deepcopy(dict(definition))
    if time_scale.is_real:
        return scaled
    factor = time_scale.factor
    ratios = [factor]

    def shorten(value: Any, minimum: int) -> Any:
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            return value
        new = max(minimum, math.ceil(value * factor - 1e-9))
        ratios.append(new / value)
        return new

    machines = list(_machines(scaled))
    for machine in machines:
        for state in machine.get("States", {}).values():
            for retrier in state.get("Retry", []):
                retrier["IntervalSeconds"] = shorten(
                    retrier.get("IntervalSeconds", MIN_RETRY_INTERVAL_SECONDS), MIN_RETRY_INTERVAL_SECONDS
                )
                if "MaxDelaySeconds" in retrier:
                    retrier["MaxDelaySeconds"] = shorten(retrier["MaxDelaySeconds"], 1)
                if retrier.get("BackoffRate", 1) > 1 and factor <= FLATTEN_BACKOFF_AT:
                    # With intervals floored at 1 s, backoff alone would keep a failing task's
                    # retries at 64 s: flatten it so the chain is compressed too. Attempts stay.
                    retrier["BackoffRate"] = 1.0
            if state.get("Type") == "Wait" and "Seconds" in state:
                state["Seconds"] = shorten(state["Seconds"], 0)
    effective = max(ratios)
    for machine in machines:
        for holder in (machine, *machine.get("States", {}).values()):
            for key in ("TimeoutSeconds", "HeartbeatSeconds"):
                value = holder.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    # A timeout bounds work, and work is not faster in the sandbox: never below
                    # min(the original, min_timeout_seconds), like a handler's own timeout.
                    floor = min(value, math.ceil(min_timeout_seconds))
                    holder[key] = max(1, floor, math.ceil(value * effective - 1e-9))
    return scaled


def _machines(machine: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The definition and every nested state machine (Map processors, Parallel branches)."""
    yield machine
    for state in machine.get("States", {}).values():
        for key in ("ItemProcessor", "Iterator"):
            if isinstance(state.get(key), dict):
                yield from _machines(state[key])
        for branch in state.get("Branches", []):
            yield from _machines(branch)


# --------------------------------------------------------------------------- boto3 plumbing


def _parameter_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _validate_parameters(declared: Mapping[str, Any], overrides: Mapping[str, str]) -> None:
    """What CloudFormation checks and moto does not: known names, AllowedValues, AllowedPattern,
    Number, MinValue/MaxValue, MinLength/MaxLength."""
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        raise DeployError(f"Parameters {unknown} do not exist in the template")
    for name, value in overrides.items():
        spec = declared[name]
        problem = None
        if "AllowedValues" in spec and value not in [str(v) for v in spec["AllowedValues"]]:
            problem = f"must be one of {spec['AllowedValues']}"
        elif "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], value):
            problem = spec.get("ConstraintDescription") or f"must match {spec['AllowedPattern']}"
        elif spec.get("Type") == "Number":
            try:
                number = float(value)
            except ValueError:
                problem = "must be a number"
            else:
                if "MinValue" in spec and number < float(spec["MinValue"]):
                    problem = f"must be at least {spec['MinValue']}"
                elif "MaxValue" in spec and number > float(spec["MaxValue"]):
                    problem = f"must be at most {spec['MaxValue']}"
        elif "MinLength" in spec and len(value) < int(spec["MinLength"]):
            problem = f"must be at least {spec['MinLength']} characters"
        elif "MaxLength" in spec and len(value) > int(spec["MaxLength"]):
            problem = f"must be at most {spec['MaxLength']} characters"
        if problem:  # CloudFormation says the ConstraintDescription, when given, for any constraint
            raise DeployError(f"Parameter {name}={value!r}: {spec.get('ConstraintDescription') or problem}")


def _ensure_code_artifacts(aws: ClientCache, template: Mapping[str, Any]) -> None:
    """moto's CloudFormation fetches each function's `Code.S3Bucket/S3Key` and fails the stack when
    it is missing. The sandbox runtime imports handlers from the source tree, so a placeholder zip
    is all the packaged CodeUri needs (created once per moto, shared by stacks)."""
    wanted = {
        (code["S3Bucket"], code["S3Key"])
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
        for code in [resource["Properties"].get("Code", {})]
        if isinstance(code.get("S3Bucket"), str) and isinstance(code.get("S3Key"), str)
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "pipeops sandbox: handlers are imported from the source tree.\n")
    for bucket, key in sorted(wanted):
        try:
            aws.client("s3").head_bucket(Bucket=bucket)
        except ClientError:
            location = (
                {}
                if aws.region == "us-east-1"
                else {"CreateBucketConfiguration": {"LocationConstraint": aws.region}}
            )
            aws.client("s3").create_bucket(Bucket=bucket, **location)
        try:
            aws.client("s3").head_object(Bucket=bucket, Key=key)
        except ClientError:
            aws.client("s3").put_object(Bucket=bucket, Key=key, Body=buffer.getvalue())


_MOTO_SKIP_MESSAGES = ("No Moto CloudFormation support for", "Tried to parse")
_QUIET_LOCK = threading.Lock()


class _DropMotoSkipNotices(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_MOTO_SKIP_MESSAGES)


@contextlib.contextmanager
def _quiet_moto() -> Iterator[None]:
    """moto logs and warns once per resource type it skips, twice per stack read: `_correct_moto`
    reports those resources itself (Deployment.skipped / corrections)."""
    notice_filter = _DropMotoSkipNotices()
    moto_logger = logging.getLogger("moto")
    with _QUIET_LOCK, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Tried to parse .* not supported by moto")
        moto_logger.addFilter(notice_filter)
        try:
            yield
        finally:
            moto_logger.removeFilter(notice_filter)


def _client_error(exc: ClientError | BotoCoreError) -> str:
    if not isinstance(exc, ClientError):
        return str(exc)
    error = exc.response.get("Error", {})
    return f"{error.get('Code', '?')}: {error.get('Message', exc)}"


# Types moto's CloudFormation creates wrongly, left out of what it is given and created through
# their APIs (_SKIPPED_TYPE_CREATORS): moto keeps an AWS::SSM::Document's Content as an object,
# and describe_document then fails on it.
_CREATED_BY_API = frozenset({"AWS::SSM::Document"})


def _for_moto(template: Mapping[str, Any]) -> dict[str, Any]:
    resources = {k: v for k, v in template["Resources"].items() if v.get("Type") not in _CREATED_BY_API}
    return {**template, "Resources": resources}


def _create_stack(
    aws: ClientCache, stack_name: str, template: Mapping[str, Any], overrides: Mapping[str, str]
) -> dict[str, Any]:
    body = json.dumps(template, separators=(",", ":"))
    with _quiet_moto():
        try:
            aws.client("cloudformation").create_stack(
                StackName=stack_name,
                TemplateBody=body,
                Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in overrides.items()],
                Capabilities=list(CAPABILITIES),
            )
        except ClientError as exc:
            raise DeployError(f"create_stack {stack_name}: {_client_error(exc)}") from exc
        stack = _describe_stack(aws, stack_name)
    if stack["StackStatus"] != "CREATE_COMPLETE":
        raise DeployError(
            f"stack {stack_name} is {stack['StackStatus']}: {stack.get('StackStatusReason', '')}"
        )
    return stack


def _describe_stack(aws: ClientCache, stack_name: str) -> dict[str, Any]:
    try:
        return aws.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    except ClientError as exc:
        raise DeployError(f"describe_stacks {stack_name}: {_client_error(exc)}") from exc


# --------------------------------------------------------------------------- intrinsics

_NO_VALUE = object()
_SUB_VARIABLE = re.compile(r"\$\{([^}]+)\}")


class _Resolver:
    """Evaluates CloudFormation intrinsics of the transformed template against the created stack:
    Ref, Fn::GetAtt, Fn::Sub, Fn::Join, Fn::Select, Fn::If, Fn::FindInMap and the condition
    functions. Anything else raises DeployError (better than deploying a wrong value)."""

    def __init__(
        self,
        template: Mapping[str, Any],
        parameters: Mapping[str, str],
        pseudo: Mapping[str, str],
        physical: dict[str, str],
        get_att: Callable[[str, str], Any],
    ) -> None:
        self.template = template
        self.parameters = parameters
        self.pseudo = pseudo
        self.physical = physical
        self.get_att = get_att
        self._conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self(self.template.get("Conditions", {})[name]))
        return self._conditions[name]

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        if name in self.physical:
            return self.physical[name]
        raise DeployError(f"cannot resolve Ref {name}")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [item for item in (self(v) for v in value) if item is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Condition" and isinstance(arg, str):
                return self.condition(arg)
            if key.startswith("Fn::"):
                return self._function(key, arg)
        resolved = {k: self(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not _NO_VALUE}

    def _function(self, name: str, arg: Any) -> Any:
        if name == "Fn::GetAtt":
            logical, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return self.get_att(logical, self(attribute))
        if name == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self(arg[1]))
            return _SUB_VARIABLE.sub(lambda m: self._sub_variable(m.group(1), variables), text)
        if name == "Fn::Join":
            separator, items = arg
            return separator.join(str(item) for item in self(items))
        if name == "Fn::Select":
            index, items = self(arg)
            return items[int(index)]
        if name == "Fn::If":
            condition, when_true, when_false = arg
            return self(when_true if self.condition(condition) else when_false)
        if name == "Fn::FindInMap":
            mapping, first, second = self(arg)
            return self.template["Mappings"][mapping][first][second]
        if name == "Fn::Equals":
            left, right = self(arg)
            return str(left) == str(right)
        if name == "Fn::Not":
            return not self(arg)[0]
        if name == "Fn::And":
            return all(self(arg))
        if name == "Fn::Or":
            return any(self(arg))
        raise DeployError(f"the sandbox cannot evaluate {name}")

    def _sub_variable(self, name: str, variables: Mapping[str, Any]) -> str:
        if name.startswith("!"):
            return "${" + name[1:] + "}"
        if name in variables:
            return str(variables[name])
        if "." in name and not name.startswith("AWS::"):
            logical, attribute = name.split(".", 1)
            return str(self.get_att(logical, attribute))
        return str(self.ref(name))


# --------------------------------------------------------------------------- the corrections


class _Stack:
    """The created stack: its resources, their attributes (read from moto, cached), a resolver."""

    def __init__(self, aws: ClientCache, stack: Mapping[str, Any], template: Mapping[str, Any]) -> None:
        self.aws = aws
        self.name: str = stack["StackName"]
        self.template = template
        self.resources: dict[str, dict[str, Any]] = template["Resources"]
        self.parameters = {p["ParameterKey"]: p["ParameterValue"] for p in stack.get("Parameters", [])}
        self.outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        self.physical: dict[str, str] = {}
        paginator = aws.client("cloudformation").get_paginator("list_stack_resources")
        with _quiet_moto():
            for page in paginator.paginate(StackName=self.name):
                for summary in page["StackResourceSummaries"]:
                    # moto lists a resource it skipped with an empty logical id.
                    if summary.get("LogicalResourceId"):
                        self.physical[summary["LogicalResourceId"]] = summary.get("PhysicalResourceId", "")
        arn_parts = stack["StackId"].split(":")
        self.partition, self.account = arn_parts[1], arn_parts[4]
        self.resolve = _Resolver(
            template,
            self.parameters,
            {
                "AWS::AccountId": self.account,
                "AWS::Region": aws.region,
                "AWS::Partition": self.partition,
                "AWS::StackName": self.name,
                "AWS::StackId": stack["StackId"],
                "AWS::URLSuffix": "amazonaws.com",
            },
            self.physical,
            self.get_att,
        )
        self._attributes: dict[tuple[str, str], Any] = {}
        self._function_configs: dict[str, dict[str, Any]] = {}
        self.definitions: dict[str, str] = {}  # state machine logical id -> deployed ASL
        self.skipped: dict[str, str] = {}
        self.corrections: list[str] = []

    def exists(self, logical: str) -> bool:
        """Declared and its Condition (if any) holds."""
        condition = self.resources[logical].get("Condition")
        return condition is None or self.resolve.condition(condition)

    def of_type(self, resource_type: str) -> list[str]:
        return [
            lid for lid, res in self.resources.items() if res["Type"] == resource_type and self.exists(lid)
        ]

    def properties(self, logical: str) -> dict[str, Any]:
        return self.resolve(self.resources[logical].get("Properties", {}))

    def get_att(self, logical: str, attribute: str) -> Any:
        key = (logical, attribute)
        if key not in self._attributes:
            self._attributes[key] = self._read_attribute(logical, attribute)
        return self._attributes[key]

    def _read_attribute(self, logical: str, attribute: str) -> Any:
        resource_type = self.resources.get(logical, {}).get("Type")
        physical = self.physical.get(logical)
        if not physical:
            raise DeployError(f"cannot resolve Fn::GetAtt {logical}.{attribute}: {logical} was not created")
        aws, region, account, partition = self.aws, self.aws.region, self.account, self.partition
        readers: dict[tuple[str | None, str], Callable[[], Any]] = {
            ("AWS::S3::Bucket", "Arn"): lambda: f"arn:{partition}:s3:::{physical}",
            ("AWS::SQS::Queue", "Arn"): lambda: aws.client("sqs").get_queue_attributes(
                QueueUrl=physical, AttributeNames=["QueueArn"]
            )["Attributes"]["QueueArn"],
            ("AWS::SQS::Queue", "QueueName"): lambda: physical.rstrip("/").rsplit("/", 1)[-1],
            ("AWS::SQS::Queue", "QueueUrl"): lambda: physical,
            ("AWS::DynamoDB::Table", "Arn"): lambda: aws.client("dynamodb").describe_table(
                TableName=physical
            )["Table"]["TableArn"],
            ("AWS::DynamoDB::Table", "StreamArn"): lambda: aws.client("dynamodb").describe_table(
                TableName=physical
            )["Table"]["LatestStreamArn"],
            ("AWS::Lambda::Function", "Arn"): lambda: self.function_config(physical)["FunctionArn"],
            ("AWS::IAM::Role", "Arn"): lambda: aws.client("iam").get_role(RoleName=physical)["Role"]["Arn"],
            ("AWS::IAM::Role", "RoleId"): lambda: aws.client("iam").get_role(RoleName=physical)["Role"][
                "RoleId"
            ],
            ("AWS::Events::Rule", "Arn"): lambda: aws.client("events").describe_rule(Name=physical)["Arn"],
            ("AWS::Logs::LogGroup", "Arn"): lambda: (
                f"arn:{partition}:logs:{region}:{account}:log-group:{physical}:*"
            ),
            ("AWS::SNS::Topic", "TopicArn"): lambda: physical,
            ("AWS::SNS::Topic", "TopicName"): lambda: physical.rsplit(":", 1)[-1],
            ("AWS::SNS::Subscription", "Arn"): lambda: physical,
            ("AWS::CloudWatch::Alarm", "Arn"): lambda: f"arn:{partition}:cloudwatch:{region}:{account}:alarm:{physical}",
            (COMPOSITE_ALARM_TYPE, "Arn"): lambda: f"arn:{partition}:cloudwatch:{region}:{account}:alarm:{physical}",
            (STATE_MACHINE_TYPE, "Arn"): lambda: physical,
            (STATE_MACHINE_TYPE, "Name"): lambda: physical.rsplit(":", 1)[-1],
        }
        reader = readers.get((resource_type, attribute))
        if reader is None:
            raise DeployError(
                f"the sandbox cannot resolve Fn::GetAtt {logical}.{attribute} ({resource_type})"
            )
        return reader()

    def function_config(self, name: str, *, refresh: bool = False) -> dict[str, Any]:
        if refresh or name not in self._function_configs:
            self._function_configs[name] = self.aws.client("lambda").get_function_configuration(
                FunctionName=name
            )
        return self._function_configs[name]


def _correct_moto(
    aws: ClientCache, created: Mapping[str, Any], template: Mapping[str, Any], time_scale: TimeScale, min_timeout_seconds: float = 0
) -> Deployment:
    """THE one place where the sandbox corrects what moto's CloudFormation creates wrong or skips.

    Measured on moto 5.2.5 (tests/sandbox/test_deploy.py pins each point); in order:

    1. AWS::StepFunctions::StateMachine -- moto creates it in the non-executing Step Functions
       backend, which the API does not see once `execute_state_machine` is on, and ignores
       `DefinitionSubstitutions`. Corrected: the definition gets its substitutions (resolved from
       the stack) and the time scale (`scale_definition`), and is created through the Step
       Functions API under the *name moto chose* -- so its ARN is the stack's physical id, the
       `StateMachineArn` output and the functions' `STATE_MACHINE_ARN`, all unchanged and true.
       RoleArn, type, LoggingConfiguration and tags as declared. The API seeing moto's own copy
       means execution is off: DeployError.
    2. AWS::Lambda::Function -- Environment values keep their JSON type (Number parameters arrive
       as integers; AWS turns every value into a string). Corrected: Handler, Runtime, Timeout,
       MemorySize, Description and Environment (resolved) are compared with the template and
       updated where they differ. `Architectures` (moto reports x86_64) cannot be set
       through moto's API: listed in `skipped`. `LoggingConfig` (dropped by moto) goes to
       `sandbox.lambda_logging`, which the runtime applies (variables, log-level filter).
    3. AWS::S3::Bucket -- moto applies only BucketEncryption (losing BucketKeyEnabled) and Tags.
       Corrected: BucketEncryption again, PublicAccessBlockConfiguration, OwnershipControls,
       VersioningConfiguration and NotificationConfiguration.EventBridgeConfiguration (the input
       bucket's "send events to EventBridge"). Other bucket properties: `skipped`.
    4. AWS::DynamoDB::Table -- TimeToLiveSpecification and PointInTimeRecoverySpecification are
       ignored (both DISABLED). Corrected with update_time_to_live / update_continuous_backups.
       SSESpecification cannot be set after creation in moto: `skipped`.
    5. Resources moto skips with a warning -- AWS::SQS::QueuePolicy (the queues' Policy
       attribute; moto does not enforce it), AWS::CloudWatch::Alarm (put_metric_alarm; moto never
       evaluates it: sandbox.alarm_engine does), AWS::CloudWatch::CompositeAlarm
       (put_composite_alarm, an action moto lacks and sandbox.alarm_engine adds; created after
       the alarms it names; ActionsSuppressor* in `skipped`), AWS::SNS::Subscription (subscribe,
       with RawMessageDelivery, FilterPolicy(Scope), RedrivePolicy, DeliveryPolicy,
       SubscriptionRoleArn; anything else in `skipped`), AWS::Logs::MetricFilter
       (put_metric_filter; moto produces nothing from it), AWS::SSM::Document (create_document)
       are created through their APIs.
       AWS::SNS::Topic (inline Subscription included) and AWS::CloudWatch::Dashboard are created
       by moto itself; a dashboard body that is not a JSON object fails the deployment, as
       PutDashboard would (moto's CloudFormation does not check it). AWS::S3::BucketPolicy is deliberately left out: moto
       evaluates bucket policies on object requests and answers DENIED for any statement whose
       Condition does not hold, so the template's DenyInsecureTransport would turn every
       put_object into a 403. It and any other resource moto skipped are listed in `skipped`.

    6. Checked, not corrected: one resource, one name. For every bucket, table, queue, function and
       state machine of the stack exactly one resource named after it exists in moto, and every
       Output and function environment value that names one of them names that one. moto builds
       a stack's resources lazily, so a stack read racing its creation can create a second copy;
       a deployment where the Outputs and the functions disagree raises DeployError.

    Created as declared, no correction (pinned by the tests): queues (attributes, RedrivePolicy),
    tables (keys, GSIs, billing), event source mappings (BatchSize,
    MaximumBatchingWindowInSeconds, FunctionResponseTypes), rules (pattern, schedule, State,
    targets with RetryPolicy and DeadLetterConfig), permissions, roles, log groups (retention).
    """
    stack = _Stack(aws, created, template)
    _deploy_state_machines(stack, time_scale, min_timeout_seconds)  # 1 (first: the functions' env refers to it)
    _correct_functions(stack)  # 2
    _correct_buckets(stack)  # 3
    _correct_tables(stack)  # 4
    _create_skipped_resources(stack)  # 5
    _check_dashboards(stack)  # 5
    _verify_one_name_per_resource(stack)  # 6
    for line in stack.corrections:
        LOG.debug("%s: %s", stack.name, line)
    return Deployment(
        stack_name=stack.name,
        region=aws.region,
        outputs=MappingProxyType(dict(stack.outputs)),
        parameters=MappingProxyType(dict(stack.parameters)),
        resources=MappingProxyType(dict(stack.physical)),
        definition=next(iter(stack.definitions.values()), ""),
        endpoint_url=aws.endpoint_url,
        time_scale=time_scale,
        skipped=MappingProxyType(dict(stack.skipped)),
        corrections=tuple(stack.corrections),
    )


def _substitute(node: Any, substitutions: Mapping[str, str], missing: set[str]) -> Any:
    """CloudFormation's DefinitionSubstitutions on a parsed definition: `${Name}` inside strings."""
    if isinstance(node, dict):
        return {key: _substitute(value, substitutions, missing) for key, value in node.items()}
    if isinstance(node, list):
        return [_substitute(value, substitutions, missing) for value in node]
    if isinstance(node, str):

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in substitutions:
                missing.add(name)
                return match.group(0)
            return str(substitutions[name])

        return _SUB_VARIABLE.sub(replace, node)
    return node


def _deploy_state_machines(stack: _Stack, time_scale: TimeScale, min_timeout_seconds: float = 0) -> None:
    sfn = stack.aws.client("stepfunctions")
    for logical in stack.of_type(STATE_MACHINE_TYPE):
        props = stack.properties(logical)
        moto_arn = stack.physical[logical]
        name = moto_arn.rsplit(":", 1)[-1]
        if "DefinitionString" in props:
            definition = json.loads(props["DefinitionString"])
        elif "Definition" in props:
            definition = props["Definition"]
        else:
            raise DeployError(f"{logical}: no inline definition (DefinitionS3Location is not supported)")
        missing: set[str] = set()
        definition = _substitute(definition, props.get("DefinitionSubstitutions", {}), missing)
        if missing:
            raise DeployError(f"{logical}: no DefinitionSubstitutions for {sorted(missing)}")
        text = json.dumps(scale_definition(definition, time_scale, min_timeout_seconds), indent=2, ensure_ascii=False)
        try:
            sfn.describe_state_machine(stateMachineArn=moto_arn)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "StateMachineDoesNotExist":
                raise
        else:
            raise DeployError(
                "Step Functions does not execute state machines in this moto: enable "
                '{"stepfunctions": {"execute_state_machine": true}} before deploying '
                "(mock_aws(config=...) in-process; POST /moto-api/config for a server)"
            )
        kwargs: dict[str, Any] = {
            "name": name,
            "definition": text,
            "roleArn": props["RoleArn"],
            "type": props.get("StateMachineType", "STANDARD"),
        }
        logging_config = props.get("LoggingConfiguration")
        if logging_config:
            kwargs["loggingConfiguration"] = {
                "level": logging_config.get("Level", "OFF"),
                "includeExecutionData": bool(logging_config.get("IncludeExecutionData", False)),
                "destinations": [
                    {"cloudWatchLogsLogGroup": {"logGroupArn": d["CloudWatchLogsLogGroup"]["LogGroupArn"]}}
                    for d in logging_config.get("Destinations", [])
                ],
            }
        if props.get("TracingConfiguration"):
            kwargs["tracingConfiguration"] = {"enabled": bool(props["TracingConfiguration"].get("Enabled"))}
        if props.get("Tags"):
            kwargs["tags"] = [{"key": t["Key"], "value": t["Value"]} for t in props["Tags"]]
        try:
            arn = sfn.create_state_machine(**kwargs)["stateMachineArn"]
        except ClientError as exc:
            raise DeployError(f"{logical}: create_state_machine: {_client_error(exc)}") from exc
        if arn != moto_arn:  # moto changed its naming: make every reader agree with the real one
            stack.physical[logical] = arn
            stack.outputs = {k: v.replace(moto_arn, arn) for k, v in stack.outputs.items()}
        stack.definitions[logical] = text
        stack.corrections.append(
            f"{logical}: created {name} through Step Functions with substitutions"
            + ("" if time_scale.is_real else f" and time scale {time_scale.factor:g}")
        )


_FUNCTION_FIELDS = (
    ("Handler", None),
    ("Runtime", None),
    ("Timeout", 3),
    ("MemorySize", 128),
    ("Description", ""),
)


def _correct_functions(stack: _Stack) -> None:
    awslambda = stack.aws.client("lambda")
    for logical in stack.of_type("AWS::Lambda::Function"):
        props = stack.properties(logical)
        name = stack.physical[logical]
        actual = stack.function_config(name)
        update: dict[str, Any] = {}
        for key, default in _FUNCTION_FIELDS:
            wanted = props.get(key, default)
            if wanted is not None and actual.get(key) != wanted:
                update[key] = wanted
        variables = {
            k: _parameter_string(v) for k, v in props.get("Environment", {}).get("Variables", {}).items()
        }
        if variables != (actual.get("Environment") or {}).get("Variables", {}):
            update["Environment"] = {"Variables": variables}
        if update:
            awslambda.update_function_configuration(FunctionName=name, **update)
            stack.function_config(name, refresh=True)
            stack.corrections.append(f"{logical}: set {', '.join(sorted(update))}")
        if props.get("Architectures") and actual.get("Architectures") != props["Architectures"]:
            stack.skipped[f"{logical}.Architectures"] = (
                f"moto reports {actual.get('Architectures')} and cannot change it; handlers run in-process"
            )
        # Log format and application log level: moto drops them; the sandbox's runtime applies them.
        lambda_logging.configure(str(actual.get("FunctionArn", "")), props.get("LoggingConfig"))


_BUCKET_PROPERTIES_APPLIED = {
    "BucketName",
    "Tags",
    "BucketEncryption",
    "PublicAccessBlockConfiguration",
    "OwnershipControls",
    "VersioningConfiguration",
    "NotificationConfiguration",
    "LifecycleConfiguration",
}


def _correct_buckets(stack: _Stack) -> None:
    s3 = stack.aws.client("s3")
    for logical in stack.of_type("AWS::S3::Bucket"):
        props = stack.properties(logical)
        bucket = stack.physical[logical]
        applied = []
        encryption = props.get("BucketEncryption")
        if encryption:
            rules = [
                {
                    "ApplyServerSideEncryptionByDefault": {
                        k: v for k, v in rule.get("ServerSideEncryptionByDefault", {}).items()
                    },
                    "BucketKeyEnabled": bool(rule.get("BucketKeyEnabled", False)),
                }
                for rule in encryption.get("ServerSideEncryptionConfiguration", [])
            ]
            s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": rules})
            applied.append("BucketEncryption")
        if props.get("PublicAccessBlockConfiguration"):
            block = {k: bool(v) for k, v in props["PublicAccessBlockConfiguration"].items()}
            s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration=block)
            applied.append("PublicAccessBlockConfiguration")
        if props.get("OwnershipControls"):
            s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls=props["OwnershipControls"])
            applied.append("OwnershipControls")
        if props.get("VersioningConfiguration"):
            status = props["VersioningConfiguration"].get("Status", "Suspended")
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})
            applied.append("VersioningConfiguration")
        if props.get("LifecycleConfiguration"):
            s3.put_bucket_lifecycle_configuration(
                Bucket=bucket, LifecycleConfiguration={"Rules": [_lifecycle_rule(r) for r in props["LifecycleConfiguration"]["Rules"]]}
            )
            applied.append("LifecycleConfiguration")
        notification = props.get("NotificationConfiguration") or {}
        eventbridge = notification.get("EventBridgeConfiguration", {})
        if str(eventbridge.get("EventBridgeEnabled", "false")).lower() == "true":
            s3.put_bucket_notification_configuration(
                Bucket=bucket, NotificationConfiguration={"EventBridgeConfiguration": {}}
            )
            applied.append("NotificationConfiguration.EventBridgeConfiguration")
        for kind in sorted(set(notification) - {"EventBridgeConfiguration"}):
            stack.skipped[f"{logical}.NotificationConfiguration.{kind}"] = "not applied by the sandbox"
        for key in sorted(set(props) - _BUCKET_PROPERTIES_APPLIED):
            stack.skipped[f"{logical}.{key}"] = "ignored by moto's CloudFormation, not applied by the sandbox"
        if applied:
            stack.corrections.append(f"{logical}: set {', '.join(applied)}")


def _lifecycle_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    """A CloudFormation lifecycle rule in the S3 API's shape (the subset the template uses)."""
    api: dict[str, Any] = {"ID": rule.get("Id", "rule"), "Status": rule.get("Status", "Enabled"), "Filter": {"Prefix": rule.get("Prefix", "")}}
    if "ExpirationInDays" in rule:
        api["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
    if "AbortIncompleteMultipartUpload" in rule:
        days = int(rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])
        api["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": days}
    return api


def _correct_tables(stack: _Stack) -> None:
    ddb = stack.aws.client("dynamodb")
    for logical in stack.of_type("AWS::DynamoDB::Table"):
        props = stack.properties(logical)
        table = stack.physical[logical]
        applied = []
        ttl = props.get("TimeToLiveSpecification")
        if ttl and str(ttl.get("Enabled")).lower() == "true":
            ddb.update_time_to_live(
                TableName=table,
                TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
            )
            applied.append("TimeToLiveSpecification")
        pitr = props.get("PointInTimeRecoverySpecification")
        if pitr and str(pitr.get("PointInTimeRecoveryEnabled")).lower() == "true":
            ddb.update_continuous_backups(
                TableName=table, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
            )
            applied.append("PointInTimeRecoverySpecification")
        sse = props.get("SSESpecification")
        if (
            sse
            and str(sse.get("SSEEnabled")).lower() == "true"
            and not ddb.describe_table(TableName=table)["Table"].get("SSEDescription")
        ):
            stack.skipped[f"{logical}.SSESpecification"] = "moto sets SSE only in create_table"
        if applied:
            stack.corrections.append(f"{logical}: set {', '.join(applied)}")


def _generated_name(stack: _Stack, logical: str) -> str:
    """A CloudFormation-style physical name: <stack>-<logical id>-<suffix>, stable per stack."""
    suffix = hashlib.sha256(f"{stack.name}/{logical}".encode()).hexdigest()[:12].upper()
    return f"{stack.name}-{logical}-{suffix}"


def _camel(key: str) -> str:
    return key[:1].lower() + key[1:]


COMPOSITE_ALARM_TYPE = "AWS::CloudWatch::CompositeAlarm"
_SKIPPED_TYPES_LEFT_OUT = {
    # moto evaluates a bucket policy on object requests, and a statement whose Condition does not
    # hold answers DENIED whatever its Effect: the template's "Deny unless aws:SecureTransport"
    # would make every put_object/get_object fail with 403.
    "AWS::S3::BucketPolicy": "not applied: moto denies every object request under a conditional statement",
}
_ALARM_TYPES: dict[str, type] = {
    "Threshold": float,
    "Period": int,
    "EvaluationPeriods": int,
    "DatapointsToAlarm": int,
    "ActionsEnabled": bool,
}


# Composite alarm properties the sandbox's alarm engine does not model (actions are never suppressed).
_COMPOSITE_NOT_MODELLED = ("ActionsSuppressor", "ActionsSuppressorWaitPeriod", "ActionsSuppressorExtensionPeriod")
# AWS::SNS::Subscription properties that are subscription attributes (JSON ones as documents).
_SUBSCRIPTION_ATTRIBUTES = ("RawMessageDelivery", "FilterPolicyScope", "SubscriptionRoleArn")
_SUBSCRIPTION_JSON_ATTRIBUTES = ("FilterPolicy", "RedrivePolicy", "DeliveryPolicy")


def _references(node: Any) -> set[str]:
    """Logical ids a property value refers to (Ref, Fn::GetAtt, ${Name} in Fn::Sub)."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= _references(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                found.add(value)
            elif key == "Fn::GetAtt":
                target = value[0] if isinstance(value, list) else str(value).split(".", 1)[0]
                found.add(str(target))
            elif key == "Fn::Sub":
                text = value if isinstance(value, str) else value[0]
                found |= {match.split(".", 1)[0] for match in _SUB_VARIABLE.findall(text)}
                if not isinstance(value, str):
                    found |= _references(value[1])
            else:
                found |= _references(value)
    return found


def _creation_order(stack: _Stack) -> list[str]:
    """Template order, except that a composite alarm comes after the composites it names (their
    names are only known once created): AlarmRule refers to other alarms by Ref or Fn::Sub."""
    composites = [lid for lid in stack.resources if stack.resources[lid]["Type"] == COMPOSITE_ALARM_TYPE]
    ordered = [lid for lid in stack.resources if lid not in composites]
    pending = list(composites)
    while pending:
        ready = [
            lid
            for lid in pending
            if not (_references(stack.resources[lid].get("Properties", {})) & (set(pending) - {lid}))
        ]
        if not ready:
            raise DeployError(f"composite alarms refer to each other in a cycle: {sorted(pending)}")
        ordered += ready
        pending = [lid for lid in pending if lid not in ready]
    return ordered


def _create_skipped_resources(stack: _Stack) -> None:
    for logical in _creation_order(stack):
        if logical in stack.physical or not stack.exists(logical):
            continue
        resource_type = stack.resources[logical]["Type"]
        if resource_type in _SKIPPED_TYPES_LEFT_OUT:
            stack.skipped[logical] = _SKIPPED_TYPES_LEFT_OUT[resource_type]
            continue
        create = _SKIPPED_TYPE_CREATORS.get(resource_type)
        if create is None:
            stack.skipped[logical] = f"moto's CloudFormation does not create {resource_type}"
            continue
        stack.physical[logical] = create(stack, logical, stack.properties(logical))
        stack.corrections.append(f"{logical}: created {resource_type} (moto skips it)")


def _create_queue_policy(stack: _Stack, logical: str, props: dict[str, Any]) -> str:
    for queue_url in props["Queues"]:
        stack.aws.client("sqs").set_queue_attributes(
            QueueUrl=queue_url, Attributes={"Policy": json.dumps(props["PolicyDocument"])}
        )
    return _generated_name(stack, logical)


def _create_alarm(stack: _Stack, logical: str, props: dict[str, Any]) -> str:
    props.setdefault("AlarmName", _generated_name(stack, logical))
    # CloudFormation converts strings (e.g. a Ref to a Number parameter) by the schema.
    for key, kind in _ALARM_TYPES.items():
        if isinstance(props.get(key), str):
            props[key] = props[key].lower() == "true" if kind is bool else kind(props[key])
    stack.aws.client("cloudwatch").put_metric_alarm(**props)
    return str(props["AlarmName"])


def _create_composite_alarm(stack: _Stack, logical: str, props: dict[str, Any]) -> str:
    # moto has no PutCompositeAlarm; the seam routes it to its alarm store, where the
    # sandbox's alarm engine (sandbox.alarm_engine) evaluates the rule like any alarm.
    from sandbox.seams import composite_alarms

    composite_alarms.install()
    props.setdefault("AlarmName", _generated_name(stack, logical))
    if isinstance(props.get("ActionsEnabled"), str):
        props["ActionsEnabled"] = props["ActionsEnabled"].lower() == "true"
    for key in _COMPOSITE_NOT_MODELLED:
        if props.pop(key, None) is not None:
            stack.skipped[f"{logical}.{key}"] = "not modelled by the sandbox's alarm engine"
    stack.aws.client("cloudwatch").put_composite_alarm(**props)
    return str(props["AlarmName"])


def _create_subscription(stack: _Stack, logical: str, props: dict[str, Any]) -> str:
    attributes = {key: _parameter_string(props[key]) for key in _SUBSCRIPTION_ATTRIBUTES if key in props}
    for key in _SUBSCRIPTION_JSON_ATTRIBUTES:
        if key in props:
            value = props[key]
            attributes[key] = value if isinstance(value, str) else json.dumps(value)
    for key in sorted(set(props) - {"TopicArn", "Protocol", "Endpoint", *attributes}):
        stack.skipped[f"{logical}.{key}"] = "not applied by the sandbox"
    return str(
        stack.aws.client("sns").subscribe(
            TopicArn=props["TopicArn"],
            Protocol=props["Protocol"],
            Endpoint=props["Endpoint"],
            Attributes=attributes,
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]
    )


def _create_event_invoke_config(stack: _Stack, logical: str, props: dict[str, Any]) -> str:
    # Without it an async invocation's failure (a tracker or ingest error) never reaches
    # its OnFailure destination: the sandbox's event bus reads it from the function.
    config: dict[str, Any] = {"FunctionName": props["FunctionName"]}
    for key in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds"):
        if key in props:
            config[key] = int(props[key])
    if props.get("DestinationConfig"):
        config["DestinationConfig"] = props["DestinationConfig"]
    stack.aws.client("lambda").put_function_event_invoke_config(**config)
    return _generated_name(stack, logical)


def _create_metric_filter(stack: _Stack, logical: str, props: dict[str, Any]) -> str:
    physical = str(props.get("FilterName") or _generated_name(stack, logical))
    transformations = []
    for item in props["MetricTransformations"]:
        converted = {_camel(k): v for k, v in item.items() if k != "Dimensions"}
        if item.get("Dimensions"):
            converted["dimensions"] = {d["Key"]: d["Value"] for d in item["Dimensions"]}
        transformations.append(converted)
    stack.aws.client("logs").put_metric_filter(
        logGroupName=props["LogGroupName"],
        filterName=physical,
        filterPattern=props.get("FilterPattern", ""),
        metricTransformations=transformations,
    )
    return physical


def _create_ssm_document(stack: _Stack, logical: str, props: dict[str, Any]) -> str:
    """An Automation document through moto's SSM API; the name is CloudFormation's (Ref)."""
    physical = str(props.get("Name") or _generated_name(stack, logical))
    content = props["Content"]
    stack.aws.client("ssm").create_document(
        Name=physical,
        Content=content if isinstance(content, str) else json.dumps(content),
        DocumentType=props.get("DocumentType", "Command"),
        DocumentFormat=props.get("DocumentFormat", "JSON"),
    )
    return physical


# The types moto's CloudFormation skips that the sandbox creates itself: how, by type. Each creator
# returns the physical id and may note in `stack.skipped` the properties it does not apply.
_SKIPPED_TYPE_CREATORS: dict[str, Callable[[_Stack, str, dict[str, Any]], str]] = {
    "AWS::SQS::QueuePolicy": _create_queue_policy,
    "AWS::CloudWatch::Alarm": _create_alarm,
    COMPOSITE_ALARM_TYPE: _create_composite_alarm,
    "AWS::SNS::Subscription": _create_subscription,
    "AWS::Lambda::EventInvokeConfig": _create_event_invoke_config,
    "AWS::Logs::MetricFilter": _create_metric_filter,
    "AWS::SSM::Document": _create_ssm_document,
}


def _check_dashboards(stack: _Stack) -> None:
    cloudwatch = stack.aws.client("cloudwatch")
    for logical in stack.of_type("AWS::CloudWatch::Dashboard"):
        body = cloudwatch.get_dashboard(DashboardName=stack.physical[logical])["DashboardBody"]
        try:
            parsed = json.loads(body)
        except ValueError as exc:
            raise DeployError(f"{logical}: DashboardBody is not valid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise DeployError(f"{logical}: DashboardBody must be a JSON object")


# Kinds whose physical names CloudFormation generates as <stack>-<logical id>-<suffix> (buckets in
# lower case), and how to list what exists of each kind in moto.
_NAMED_KINDS: dict[str, Callable[[ClientCache], list[str]]] = {
    "AWS::S3::Bucket": lambda aws: [b["Name"] for b in aws.client("s3").list_buckets()["Buckets"]],
    "AWS::DynamoDB::Table": lambda aws: [
        name
        for page in aws.client("dynamodb").get_paginator("list_tables").paginate()
        for name in page["TableNames"]
    ],
    "AWS::SQS::Queue": lambda aws: [
        url for page in aws.client("sqs").get_paginator("list_queues").paginate() for url in page.get("QueueUrls", [])
    ],
    "AWS::Lambda::Function": lambda aws: [
        f["FunctionName"]
        for page in aws.client("lambda").get_paginator("list_functions").paginate()
        for f in page["Functions"]
    ],
    STATE_MACHINE_TYPE: lambda aws: [
        m["stateMachineArn"]
        for page in aws.client("stepfunctions").get_paginator("list_state_machines").paginate()
        for m in page["stateMachines"]
    ],
}


def resource_name(value: str) -> str:
    """The name inside a physical id: a queue URL's last segment, an ARN's resource name."""
    if value.startswith(("https://", "http://")):
        return value.rstrip("/").rsplit("/", 1)[-1]
    if value.startswith("arn:"):
        return value.rsplit(":", 1)[-1]
    return value


def name_family(name: str) -> tuple[str, int]:
    """A generated name without its random suffix (and the suffix's length): copies of one
    resource differ only in the suffix (`pipeops-TrackingTable-NHCIM2KOMK7H`)."""
    base, _, suffix = resource_name(name).lower().rpartition("-")
    return (base, len(suffix)) if base else (resource_name(name).lower(), 0)


def naming_conflicts(
    physical: Mapping[str, str], existing: Sequence[str], references: Mapping[str, str]
) -> list[str]:
    """What breaks "one resource, one name" (pure: the deploy check and its tests share it).

    `physical`: logical id -> physical id of the stack's named resources; `existing`: the physical
    ids of those kinds in moto; `references`: where a name is used ("Output TrackingTableName",
    "RouterFunction env TRACKING_TABLE") -> the value used there.
    """
    problems = []
    families = {name_family(value): logical for logical, value in physical.items()}
    copies: dict[str, list[str]] = {logical: [] for logical in physical}
    for value in existing:
        if (owner := families.get(name_family(value))) is not None:
            copies[owner].append(value)
    for logical, found in sorted(copies.items()):
        if [resource_name(v) for v in found] != [resource_name(physical[logical])]:
            problems.append(f"{logical}: {len(found)} resources carry its name in moto: {sorted(found)}")
    for where, value in sorted(references.items()):
        owner = families.get(name_family(value))
        if owner is not None and resource_name(value) != resource_name(physical[owner]):
            problems.append(f"{where} = {value!r}, but the stack's {owner} is {physical[owner]!r}")
    return problems


def _verify_one_name_per_resource(stack: _Stack) -> None:
    physical = {
        logical: stack.physical[logical]
        for kind in _NAMED_KINDS
        for logical in stack.of_type(kind)
        if stack.physical.get(logical)
    }
    existing = [name for list_existing in _NAMED_KINDS.values() for name in list_existing(stack.aws)]
    references = {f"Output {key}": value for key, value in stack.outputs.items()}
    for logical in stack.of_type("AWS::Lambda::Function"):
        variables = (stack.function_config(stack.physical[logical]).get("Environment") or {}).get("Variables", {})
        references.update({f"{logical} env {key}": str(value) for key, value in variables.items()})
    problems = naming_conflicts(physical, existing, references)
    if problems:
        raise DeployError(f"stack {stack.name}: one resource, one name does not hold: " + "; ".join(problems))
    stack.corrections.append(f"checked: {len(physical)} named resources, one each, named alike everywhere")
