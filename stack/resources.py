"""Find the pipeline's resources from the stack's Outputs: the same way in AWS and the sandbox.

Also where the CLI connects: profile, region and endpoint resolved as the `aws` CLI does, and
every input that cannot work turned into one line that says what to fix. boto3 is imported only
when a command connects (`pipeops version` stays fast).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pipeline.stack import DEFAULT_STACK_NAME, Function

if TYPE_CHECKING:
    import boto3


class StackNotFoundError(LookupError):
    """The stack does not exist at this endpoint / in this region."""


class NoCredentialsError(LookupError):
    """No AWS credentials were found for a call to AWS itself."""


class BadConnectionError(ValueError):
    """A profile, region or endpoint that cannot work; the message names it, where it came from,
    and what to use instead."""


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
    QuarantineQueueUrl: str = ""
    ScheduledDeadLetterQueueUrl: str = ""
    IngestFunctionName: str = ""
    BatchTriggerFunctionName: str = ""
    WorkflowTrackerFunctionName: str = ""
    DetectFunctionName: str = ""
    GenerateSyntheticFunctionName: str = ""
    RedactFunctionName: str = ""
    FinalizeFunctionName: str = ""
    ReconcilerFunctionName: str = ""
    RunbookFunctionName: str = ""

    @classmethod
    def from_outputs(cls, stack_name: str, outputs: dict[str, str]) -> StackResources:
        names = {f.name for f in fields(cls)} - {"stack_name"}
        required = [f.name for f in fields(cls) if f.name != "stack_name" and f.default is MISSING]
        missing = [name for name in required if name not in outputs]
        if missing and SIDECAR_MARKER in outputs:
            raise SidecarStackError(SidecarStack.from_outputs(stack_name, outputs))
        if missing:
            raise StackNotFoundError(f"stack {stack_name!r} lacks the outputs {', '.join(missing)}: is it a pipeops stack?")
        return cls(stack_name=stack_name, **{k: v for k, v in outputs.items() if k in names})

    @property
    def function_names(self) -> list[str]:
        return [name for name in (getattr(self, f"{function}Name") for function in Function) if name]


SIDECAR_MARKER = "SidecarOf"  # the Output of a `pipeops sidecar build` stack: the watched pipeline's name
# The commands that work against a sidecar stack (the rest need the reference pipeline's tables).
SIDECAR_COMMANDS = ("status", "reconcile", "alarms", "failures", "dashboard render", "runbook run", "runbook history")


@dataclass(frozen=True)
class SidecarStack:
    """A `pipeops sidecar build` stack: what it is called, whom it watches, and its own parts.

    What it watches beyond the DLQs (the counter, the state machines, the queue, the max) is the
    reconciler's environment, read where it is needed (`pipeops.sidecar.live`)."""

    stack_name: str
    pipeline: str
    ReconcilerFunctionName: str
    SidecarTableName: str
    dead_letter_queues: tuple[str, ...]
    watched_functions: tuple[str, ...] = ()  # "name" or "name:timeout", as the description named them

    @classmethod
    def from_outputs(cls, stack_name: str, outputs: dict[str, str]) -> SidecarStack:
        def listed(output: str) -> tuple[str, ...]:
            return tuple(item for item in outputs.get(output, "-").split(",") if item and item != "-")

        return cls(
            stack_name=stack_name,
            pipeline=outputs[SIDECAR_MARKER],
            ReconcilerFunctionName=outputs.get("ReconcilerFunctionName", ""),
            SidecarTableName=outputs.get("SidecarTableName", ""),
            dead_letter_queues=listed("WatchedDeadLetterQueues"),
            watched_functions=listed("WatchedFunctions"),
        )


class SidecarStackError(StackNotFoundError):
    """The stack is a sidecar: a command that needs the reference pipeline's own tables cannot run."""

    def __init__(self, sidecar: SidecarStack) -> None:
        self.sidecar = sidecar
        super().__init__(
            f"stack {sidecar.stack_name!r} is the pipeops sidecar of {sidecar.pipeline!r}: this command needs the "
            f"reference pipeline's own tables; against a sidecar use {', '.join(f'`pipeops {c}`' for c in SIDECAR_COMMANDS)}"
        )


# botocore's own rule for a region name (botocore.utils.validate_region_name).
_REGION_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?$")


def check_endpoint(endpoint_url: str, source: str) -> None:
    """An endpoint is a URL with a scheme and a host: `127.0.0.1:4566` is not (boto3 raises)."""
    parts = urlsplit(endpoint_url)
    if parts.scheme in ("http", "https") and parts.hostname:
        return
    hint = f"http://{endpoint_url}" if "://" not in endpoint_url else "http://127.0.0.1:4566"
    raise BadConnectionError(f"endpoint {endpoint_url!r} (from {source}) is not a URL: use e.g. {hint}")


def check_region(region: str, source: str) -> None:
    """A region name as botocore accepts it; whether botocore knows it is checked on failure."""
    if not _REGION_NAME.match(region):
        raise BadConnectionError(f"region {region!r} (from {source}) is not a region name: use e.g. us-east-1 or eu-west-1")


def known_regions() -> set[str]:
    """Every region of every partition botocore knows (read only once a request failed)."""
    import botocore.session

    session = botocore.session.get_session()
    return {r for p in session.get_available_partitions() for r in session.get_available_regions("cloudformation", p)}


def _session(profile: str | None) -> boto3.session.Session:
    """A boto3 session for `profile` (None: AWS_PROFILE, else the default profile), its config read
    now so that a profile that does not exist is an error here, not deep inside a command."""
    import boto3
    import botocore.exceptions

    try:
        session = boto3.session.Session(profile_name=profile)
        _ = session.region_name  # reads the profile's config: ProfileNotFound for an unknown one
    except botocore.exceptions.ProfileNotFound as exc:
        name = profile or str(exc.kwargs.get("profile", ""))
        variable = "AWS_DEFAULT_PROFILE" if os.environ.get("AWS_DEFAULT_PROFILE") == name else "AWS_PROFILE"
        source = "--profile" if profile else f"the environment variable {variable}"
        raise BadConnectionError(
            f"no AWS profile {name!r} (from {source}): `aws configure list-profiles` lists the profiles, "
            "`aws configure --profile NAME` creates one"
        ) from exc
    except botocore.exceptions.BotoCoreError as exc:  # a config file that does not parse
        raise BadConnectionError(f"the AWS config cannot be read: {exc}") from exc
    return session


@dataclass(frozen=True)
class Connection:
    """Where the CLI talks to: an endpoint (the sandbox) or AWS itself, and which stack."""

    stack_name: str = DEFAULT_STACK_NAME
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    region_source: str = "the default"

    @classmethod
    def resolve(
        cls, stack_name: str | None, endpoint_url: str | None, region: str | None, profile: str | None = None
    ) -> Connection:
        """Explicit option > environment variable > profile > default, as the `aws` CLI (v2) does.

        Profile: --profile, else AWS_PROFILE, else `default` (botocore reads AWS_PROFILE itself).
        Region: --region, else AWS_REGION, else AWS_DEFAULT_REGION, else the profile's `region`
        (the last two resolved by botocore's session), else us-east-1. Raises BadConnectionError
        for a profile that does not exist, an endpoint that is no URL, a region that is no name.
        """
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        if endpoint:
            check_endpoint(endpoint, "--endpoint-url" if endpoint_url else "the environment variable AWS_ENDPOINT_URL")
        session = _session(profile or None)
        chosen, source = region, "--region"
        if not chosen and os.environ.get("AWS_REGION"):
            chosen, source = os.environ["AWS_REGION"], "the environment variable AWS_REGION"
        if not chosen and session.region_name:
            from_env = os.environ.get("AWS_DEFAULT_REGION") == session.region_name
            chosen = session.region_name
            source = "the environment variable AWS_DEFAULT_REGION" if from_env else "the profile's region"
        if not chosen:
            chosen, source = "us-east-1", "the default"
        check_region(chosen, source)
        connection = cls(
            stack_name=stack_name or os.environ.get("PIPEOPS_STACK_NAME") or DEFAULT_STACK_NAME,
            endpoint_url=endpoint,
            region=chosen,
            profile=profile or None,
            region_source=source,
        )
        connection.__dict__["_boto_session"] = session  # read once; the cached property's slot
        return connection

    @functools.cached_property
    def _boto_session(self) -> boto3.session.Session:
        return _session(self.profile)

    @functools.cached_property
    def _session(self) -> tuple[boto3.session.Session, dict[str, str]]:
        """One session per connection (credential lookup can be slow when none are configured)."""
        session = self._boto_session
        if session.get_credentials() is not None:
            return session, {}
        if not self.endpoint_url:
            raise NoCredentialsError(NO_CREDENTIALS_HELP)
        return session, SANDBOX_CREDENTIALS

    def client(self, service: str) -> Any:
        """A client for this connection. Against an endpoint (a sandbox) it works with no
        credentials configured; against AWS, missing credentials are NoCredentialsError."""
        session, credentials = self._session
        return session.client(service, region_name=self.region, endpoint_url=self.endpoint_url, **credentials)  # type: ignore[call-overload]  # a service named at run time: the stubs type literal names only

    def _unknown_region(self) -> BadConnectionError | None:
        """Why a request failed when the region is one botocore (and so the sandbox) does not know."""
        if self.region in known_regions():
            return None
        return BadConnectionError(
            f"region {self.region!r} (from {self.region_source}) is not one botocore knows: use e.g. us-east-1 "
            "(a region newer than your boto3: upgrade it)"
        )

    def resources(self) -> StackResources:
        """The reference pipeline's stack (a sidecar stack: SidecarStackError, naming what works on it)."""
        return StackResources.from_outputs(self.stack_name, self.outputs())

    def any_resources(self) -> StackResources | SidecarStack:
        """The reference pipeline's stack, or a sidecar stack, for the commands that serve both."""
        outputs = self.outputs()
        if SIDECAR_MARKER in outputs:
            return SidecarStack.from_outputs(self.stack_name, outputs)
        return StackResources.from_outputs(self.stack_name, outputs)

    def outputs(self) -> dict[str, str]:
        import botocore.exceptions

        cfn = self.client("cloudformation")
        where = f"{self.endpoint_url} (region {self.region})" if self.endpoint_url else f"AWS region {self.region}"
        try:
            stack = cfn.describe_stacks(StackName=self.stack_name)["Stacks"][0]
        except botocore.exceptions.NoCredentialsError as exc:
            raise NoCredentialsError(NO_CREDENTIALS_HELP) from exc
        except Exception as exc:  # a region moto has no backend for fails in moto (500 when served)
            unknown = self._unknown_region()
            if unknown is not None:
                raise unknown from exc
            if not isinstance(exc, (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)):
                raise
            if isinstance(exc, botocore.exceptions.ProfileNotFound):
                raise BadConnectionError(f"no AWS profile: {exc}") from exc
            if isinstance(exc, botocore.exceptions.EndpointConnectionError):
                hint = "is the sandbox running (`pipeops sandbox up`)?" if self.endpoint_url else "is the network up?"
                raise StackNotFoundError(f"nothing answers at {where}: {hint}") from exc
            if not isinstance(exc, botocore.exceptions.ClientError):
                raise StackNotFoundError(f"describe_stacks {self.stack_name!r} at {where} failed: {exc}") from exc
            code = exc.response.get("Error", {}).get("Code", "")
            if code != "ValidationError":  # AWS's answer for a stack that does not exist
                message = exc.response.get("Error", {}).get("Message", "")
                raise StackNotFoundError(f"describe_stacks {self.stack_name!r} at {where} failed: {code}: {message}") from exc
            raise StackNotFoundError(
                f"no stack {self.stack_name!r} at {where}: start one with `pipeops sandbox up`, "
                "or pass --endpoint-url / --stack-name / --region"
            ) from exc
        return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
