"""Find the pipeline's resources from the stack's Outputs: the same way in AWS and the sandbox."""

from __future__ import annotations

import functools
import os
from dataclasses import MISSING, dataclass, fields
from typing import Any

import boto3
import botocore.exceptions

DEFAULT_STACK_NAME = "pipeops"


class StackNotFoundError(LookupError):
    """The stack does not exist at this endpoint / in this region."""


class NoCredentialsError(LookupError):
    """No AWS credentials were found for a call to AWS itself."""


NO_CREDENTIALS_HELP = (
    "no AWS credentials found: set AWS_PROFILE (after `aws configure` or `aws sso login`), or "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; or point --endpoint-url at a sandbox "
    "(`pipeops sandbox up`), which needs none"
)
# A sandbox (moto) accepts any credentials, but boto3 signs every request and needs some.
SANDBOX_CREDENTIALS = {"aws_access_key_id": "sandbox", "aws_secret_access_key": "sandbox"}


@dataclass(frozen=True)
class StackResources:
    """Physical names the CLI needs, each read from the template Output of the same name."""

    stack_name: str
    InputBucketName: str
    OutputBucketName: str
    TrackingTableName: str
    CoordinationTableName: str
    MainQueueUrl: str
    DeadLetterQueueUrl: str
    StateMachineArn: str
    RouterFunctionName: str
    TrackerDeadLetterQueueUrl: str = ""
    WorkBucketName: str = ""
    IngestDeadLetterQueueUrl: str = ""
    IngestFunctionName: str = ""
    BatchTriggerFunctionName: str = ""
    WorkflowTrackerFunctionName: str = ""
    DetectFunctionName: str = ""
    GenerateSyntheticFunctionName: str = ""
    RedactFunctionName: str = ""
    FinalizeFunctionName: str = ""
    ReconcilerFunctionName: str = ""

    @classmethod
    def from_outputs(cls, stack_name: str, outputs: dict[str, str]) -> StackResources:
        names = {f.name for f in fields(cls)} - {"stack_name"}
        required = [f.name for f in fields(cls) if f.name != "stack_name" and f.default is MISSING]
        missing = [name for name in required if name not in outputs]
        if missing:
            raise StackNotFoundError(f"stack {stack_name!r} lacks the outputs {', '.join(missing)}: is it a pipeops stack?")
        return cls(stack_name=stack_name, **{k: v for k, v in outputs.items() if k in names})

    @property
    def function_names(self) -> list[str]:
        return [
            name
            for name in (
                self.IngestFunctionName,
                self.RouterFunctionName,
                self.BatchTriggerFunctionName,
                self.WorkflowTrackerFunctionName,
                self.DetectFunctionName,
                self.GenerateSyntheticFunctionName,
                self.RedactFunctionName,
                self.FinalizeFunctionName,
                self.ReconcilerFunctionName,
            )
            if name
        ]


@dataclass(frozen=True)
class Connection:
    """Where the CLI talks to: an endpoint (the sandbox) or AWS itself, and which stack."""

    stack_name: str = DEFAULT_STACK_NAME
    endpoint_url: str | None = None
    region: str | None = None

    @classmethod
    def resolve(cls, stack_name: str | None, endpoint_url: str | None, region: str | None) -> Connection:
        """Explicit option > environment variable > default."""
        return cls(
            stack_name=stack_name or os.environ.get("PIPEOPS_STACK_NAME") or DEFAULT_STACK_NAME,
            endpoint_url=endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None,
            region=region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        )

    @functools.cached_property
    def _session(self) -> tuple[boto3.session.Session, dict[str, str]]:
        """One session per connection (credential lookup can be slow when none are configured)."""
        session = boto3.session.Session()
        if session.get_credentials() is not None:
            return session, {}
        if not self.endpoint_url:
            raise NoCredentialsError(NO_CREDENTIALS_HELP)
        return session, SANDBOX_CREDENTIALS

    def client(self, service: str) -> Any:
        """A client for this connection. Against an endpoint (a sandbox) it works with no
        credentials configured; against AWS, missing credentials are NoCredentialsError."""
        session, credentials = self._session
        return session.client(service, region_name=self.region, endpoint_url=self.endpoint_url, **credentials)

    def resources(self) -> StackResources:
        cfn = self.client("cloudformation")
        where = self.endpoint_url or f"AWS region {self.region}"
        try:
            stack = cfn.describe_stacks(StackName=self.stack_name)["Stacks"][0]
        except botocore.exceptions.NoCredentialsError as exc:
            raise NoCredentialsError(NO_CREDENTIALS_HELP) from exc
        except botocore.exceptions.EndpointConnectionError as exc:
            raise StackNotFoundError(
                f"nothing answers at {where}: is the sandbox running (`pipeops sandbox up`)?"
            ) from exc
        except botocore.exceptions.ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code != "ValidationError":  # AWS's answer for a stack that does not exist
                message = exc.response.get("Error", {}).get("Message", "")
                raise StackNotFoundError(f"describe_stacks {self.stack_name!r} at {where} failed: {code}: {message}") from exc
            raise StackNotFoundError(
                f"no stack {self.stack_name!r} at {where}: start one with `pipeops sandbox up`, "
                "or pass --endpoint-url / --stack-name"
            ) from exc
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        return StackResources.from_outputs(self.stack_name, outputs)
