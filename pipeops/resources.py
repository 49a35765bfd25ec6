"""Find the pipeline's resources from the stack's Outputs: the same way in AWS and the sandbox."""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, fields
from typing import Any

import boto3

DEFAULT_STACK_NAME = "pipeops"


class StackNotFoundError(LookupError):
    """The stack does not exist at this endpoint / in this region."""


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
    IngestDeadLetterQueueUrl: str = ""
    IngestFunctionName: str = ""
    BatchTriggerFunctionName: str = ""
    WorkflowTrackerFunctionName: str = ""
    DetectFunctionName: str = ""
    GenerateSyntheticFunctionName: str = ""
    RedactFunctionName: str = ""
    FinalizeFunctionName: str = ""

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

    def client(self, service: str) -> Any:
        return boto3.session.Session().client(service, region_name=self.region, endpoint_url=self.endpoint_url)

    def resources(self) -> StackResources:
        cfn = self.client("cloudformation")
        try:
            stack = cfn.describe_stacks(StackName=self.stack_name)["Stacks"][0]
        except Exception as exc:
            where = self.endpoint_url or f"AWS region {self.region}"
            raise StackNotFoundError(
                f"no stack {self.stack_name!r} at {where}: start one with `pipeops sandbox up`, "
                "or pass --endpoint-url / --stack-name"
            ) from exc
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        return StackResources.from_outputs(self.stack_name, outputs)
