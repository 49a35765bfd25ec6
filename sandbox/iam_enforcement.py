"""The sandbox enforces IAM: a handler's AWS call outside its role fails with AccessDenied, as on AWS.

moto checks no IAM (docs/ARCHITECTURE.md#what-moto-does-not-do): ingest once lacked
dynamodb:DeleteItem and only AWS noticed. This seam closes that gap on the client side.

Where. Every boto3 call goes through `botocore.client.BaseClient._make_api_call`, in the thread
that makes it. While a sandbox runs, that method is wrapped (`sandbox.seams.iam_calls`; the
original is restored when the last enforcement detaches). The wrapper runs in the *caller's* thread, so it works the same
in-process (`mock_aws`) and served (`ThreadedMotoServer`: the handlers run in the server's process
and call it over HTTP); no request ever reaches moto that AWS would refuse.

Who. A call is checked when a principal can be named, and only then:
- a Lambda handler: the runtime sets `sandbox.runtime.running_function()` in the handler's worker
  thread (name, ARN, and the role moto holds for the function at invoke time);
- the state machine: moto's ASL interpreter makes its service integrations
  (`arn:aws:states:::dynamodb:updateItem`) and Lambda task invokes with boto3 clients of its own
  (`moto.stepfunctions.parser.asl.utils.boto_client.boto_client_for`), on its execution threads.
  Those clients are shared by nothing else, but carry nothing either, so the caller is found on
  the stack: the nearest frame of `moto.stepfunctions.parser` holding the evaluation `env`, whose
  `aws_execution_details.role_arn` is the state machine's role (what AWS uses for those calls).
The interpreter is looked for first: a synchronous execution (StartSyncExecution) runs it in the
calling handler's thread, and its calls are still the state machine's.
The sandbox's own clients (runtime logs and metrics, poller, event bus, deploy, the tests'
`Sandbox.client`) are marked with `sandbox.clients.INTERNAL_USER_AGENT` and never checked, nor is
any call with no principal (a test's or the CLI's own boto3).

Threads a handler starts. On AWS they share the function's credentials; in Python a new thread
starts with an empty context, so the handler's `running_function()` would be lost and the
thread's calls go unchecked (found: finalize reading results on a ThreadPoolExecutor). While the
seam is installed, `threading.Thread.start` and `ThreadPoolExecutor.submit` called in a handler
run the new thread / task in a copy of the caller's context -- except moto's own threads (an
execution started in-process from a handler is the state machine's, not the handler's).

What. The role's policies are read from moto's IAM at every call (so a test may narrow a role
with put_role_policy and see the next call refused), as the stack deployed them: inline policies
and the default version of attached managed ones. moto's CloudFormation stores an `!If` branch
that resolved to `AWS::NoValue` as None where CloudFormation drops the element: those are dropped
here. The call is mapped to its authorization requests and each is evaluated (`sandbox.iam`).

Refused. A denied request raises the service's own error before the call is sent -- a botocore
ClientError (the client's modeled class where it has one) with AWS's code (AccessDeniedException,
or AccessDenied for S3, SQS, CloudWatch), HTTP status and message ("User: arn:aws:sts::...:
assumed-role/<role>/<function> is not authorized to perform: dynamodb:DeleteItem on resource:
<arn> because no identity-based policy allows the dynamodb:DeleteItem action"). AWS's other IAM
answer is reproduced too: GetObject / HeadObject of a missing key is 403 AccessDenied, not 404,
for a caller without s3:ListBucket on the bucket. What the model cannot decide (an unknown
operation, condition operator or key) raises `sandbox.iam.IamSandboxError` instead, loudly:
the call never happens.

Every checked request is recorded (`IamEnforcement.calls`): principal, action, resource, decision.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any

from botocore.exceptions import ClientError

from sandbox import iam
from sandbox.clients import ClientCache
from sandbox.runtime import running_function

LOG = logging.getLogger("sandbox.iam")

# Records kept (a served sandbox may run for hours); denials are kept apart and never crowded out.
MAX_RECORDS = 100_000
MAX_DENIED_RECORDS = 10_000
# How far up the stack the state machine's evaluation frame may be from the SDK call.
_MAX_FRAMES = 40
_INTERPRETER_MODULE = "moto.stepfunctions.parser."


@dataclass(frozen=True)
class Caller:
    """A principal the sandbox checks: a function, or the state machine (kind "state_machine")."""

    kind: str  # "function" | "state_machine"
    name: str  # the function name, or the state machine name
    principal: iam.Principal


@dataclass(frozen=True)
class CheckedCall:
    """One authorization request the sandbox decided (several per call for transactions, batches)."""

    kind: str  # "function" | "state_machine"
    principal: str  # the function (or state machine) name
    role_arn: str
    operation: str  # botocore's "dynamodb.TransactWriteItems"
    action: str  # "dynamodb:UpdateItem"; "" when the call could not be mapped
    resource: str
    allowed: bool
    decision: str  # "allowed", "implicit deny", "explicit deny", or "error: <why>"
    at: float  # epoch seconds

    @property
    def function(self) -> str:
        return self.principal


class IamEnforcement:
    """Checks the calls of one sandbox's functions and state machine and records each decision.

    `region` / `endpoint_url`: where the facts a decision needs (a table's partition key, an
    object's KMS key) are read, with the sandbox's own (unchecked) clients.
    """

    def __init__(self, region: str, endpoint_url: str | None = None) -> None:
        self.region = region
        self.endpoint_url = endpoint_url
        self._records: collections.deque[CheckedCall] = collections.deque(maxlen=MAX_RECORDS)
        self._denied: collections.deque[CheckedCall] = collections.deque(maxlen=MAX_DENIED_RECORDS)
        self._records_lock = threading.Lock()
        self._facts = _SandboxFacts(region, endpoint_url)
        self._parsed: dict[tuple[str, str], tuple[object, iam.Policy]] = {}
        self._parsed_lock = threading.Lock()

    # ---------------------------------------------------------------- records

    @property
    def calls(self) -> list[CheckedCall]:
        """A snapshot of the checked requests so far, in order (the last MAX_RECORDS)."""
        with self._records_lock:
            return list(self._records)

    def denied(self) -> list[CheckedCall]:
        """Every refused request (and every call that could not be decided), in order."""
        with self._records_lock:
            return list(self._denied)

    def clear(self) -> None:
        with self._records_lock:
            self._records.clear()
            self._denied.clear()

    def _record(
        self, caller: Caller, operation: str, action: str, resource: str, decision: str, allowed: bool
    ) -> None:
        record = CheckedCall(
            caller.kind,
            caller.name,
            caller.principal.role_arn,
            operation,
            action,
            resource,
            allowed,
            decision,
            time.time(),
        )
        with self._records_lock:
            self._records.append(record)
            if not allowed:
                self._denied.append(record)

    # ---------------------------------------------------------------- who calls

    @staticmethod
    def caller(frame: FrameType | None) -> Caller | None:
        """The principal of a call made in this thread from `frame`, or None (the call is not checked)."""
        machine = _state_machine_caller(frame)
        if machine is not None:
            return machine
        running = running_function()
        if running is None:
            return None
        if not running.role_arn:
            raise iam.IamSandboxError(f"function {running.function_name} has no role in moto")
        return Caller(
            "function", running.function_name, iam.Principal(running.role_arn, running.function_name)
        )

    # ---------------------------------------------------------------- policies

    def policies(self, role_arn: str) -> tuple[iam.Policy, ...]:
        """The role's identity-based policies as moto holds them now (parsed once per document)."""
        from moto.iam.models import iam_backends

        parts = role_arn.split(":")
        if len(parts) != 6 or not parts[5].startswith("role/"):
            raise iam.IamSandboxError(f"not a role ARN: {role_arn!r}")
        try:
            role = iam_backends[parts[4]][parts[1]].get_role(parts[5].rsplit("/", 1)[-1])
        except Exception as exc:  # moto's IAMNotFoundException: AWS could not even assume it
            raise iam.IamSandboxError(f"role {role_arn} does not exist in moto: {exc}") from None
        if getattr(role, "permissions_boundary", None):
            raise iam.IamSandboxError(
                f"role {role_arn} has a permissions boundary: not modelled by the sandbox"
            )
        documents: list[tuple[str, object]] = list(role.policies.items())
        for arn, managed in role.managed_policies.items():
            default = next((v for v in managed.versions if v.is_default), None)
            if default is None:
                raise iam.IamSandboxError(f"managed policy {arn} has no default version")
            documents.append((arn, default.document))
        return tuple(self._parse(role_arn, name, document) for name, document in documents)

    def _parse(self, role_arn: str, name: str, document: object) -> iam.Policy:
        key = (role_arn, name)
        with self._parsed_lock:
            cached = self._parsed.get(key)
            if cached is not None and cached[0] is document:  # the very same object: unchanged
                return cached[1]
        policy = iam.parse_policy(_decoded(document, name), name)
        with self._parsed_lock:
            self._parsed[key] = (document, policy)  # holds the object: its identity stays unique
        return policy

    # ---------------------------------------------------------------- deciding

    def authorize(
        self, client: Any, caller: Caller, operation: str, params: Mapping[str, Any]
    ) -> iam.ApiCall:
        """Decide every request of the call; raise the service's AccessDenied for the first denied."""
        call = iam.ApiCall(
            service=client.meta.service_model.service_name,
            operation=operation,
            params=params,
            region=client.meta.region_name or self.region,
            account=caller.principal.account,
            partition=caller.principal.partition,
        )
        label = f"{call.service}.{operation}"
        try:
            requests = iam.requests_for(call, self._facts, caller.principal)
            policies = self.policies(caller.principal.role_arn)
            evaluations = [iam.evaluate(policies, request) for request in requests]
        except iam.IamSandboxError as exc:
            self._record(caller, label, "", "", f"error: {exc}", False)
            LOG.error("sandbox IAM refused %s by %s %s: %s", label, caller.kind, caller.name, exc)
            raise
        for evaluation in evaluations:
            request = evaluation.request
            self._record(
                caller, label, request.action, request.resource, evaluation.decision.value, evaluation.allowed
            )
        for evaluation in evaluations:
            if not evaluation.allowed:
                code, message, status = iam.access_denied(evaluation, caller.principal)
                LOG.warning("sandbox IAM: %s", message)
                raise _service_error(client, operation, code, message, status)
        return call

    def after_error(self, client: Any, caller: Caller, call: iam.ApiCall, exc: ClientError) -> None:
        """AWS answers a missing key with 403, not 404, to a caller that may not list the bucket."""
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if call.service != "s3" or call.operation not in ("GetObject", "HeadObject"):
            return
        if code not in ("NoSuchKey", "404", "NotFound"):
            return
        request = iam.Request(
            "s3:ListBucket",
            f"arn:{call.partition}:s3:::{call.params.get('Bucket')}",
            {**iam.global_context(caller.principal, call.region), **iam.s3_context()},
        )
        evaluation = iam.evaluate(self.policies(caller.principal.role_arn), request)
        self._record(
            caller,
            f"s3.{call.operation}",
            request.action,
            request.resource,
            evaluation.decision.value,
            evaluation.allowed,
        )
        if not evaluation.allowed:
            # S3's words for this case carry no detail (it would leak that the key does not exist);
            # a HEAD response has no body, so botocore names the error after the status.
            code, message = (
                ("403", "Forbidden") if call.operation == "HeadObject" else ("AccessDenied", "Access Denied")
            )
            raise _service_error(client, call.operation, code, message, 403) from exc


# --------------------------------------------------------------------------- facts


class _SandboxFacts:
    """`iam.ResourceFacts` read from the sandbox with its own clients (never checked themselves)."""

    def __init__(self, region: str, endpoint_url: str | None) -> None:
        self.region = region
        self.endpoint_url = endpoint_url
        self._clients = ClientCache(region, endpoint_url)
        self._keys: dict[tuple[str, str | None], str] = {}
        self._bucket_keys: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def _client(self, service: str, region: str) -> Any:
        return self._clients.client(service, region)

    def partition_key(self, table_arn: str, index_name: str | None) -> str:
        cached = self._keys.get((table_arn, index_name))
        if cached is not None:
            return cached
        region = table_arn.split(":")[3]
        try:
            table = self._client("dynamodb", region).describe_table(TableName=table_arn.split("/", 1)[1])[
                "Table"
            ]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return ""  # the call itself fails as AWS fails it, once IAM let it through
            raise
        schema = table["KeySchema"]
        if index_name:
            indexes = table.get("GlobalSecondaryIndexes", []) + table.get("LocalSecondaryIndexes", [])
            found = [i["KeySchema"] for i in indexes if i["IndexName"] == index_name]
            if not found:
                raise iam.IamSandboxError(f"{table_arn} has no index {index_name!r}")
            schema = found[0]
        key = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
        self._keys[(table_arn, index_name)] = key
        return key

    def object_kms_key(self, bucket: str, key: str) -> str | None:
        stored = _moto_object(bucket, key)
        if stored is not _NOT_HERE:  # what HeadObject would answer, read where moto keeps it
            if stored is None or getattr(stored, "encryption", None) != "aws:kms":
                return None
            return getattr(stored, "kms_key_id", None) or None
        try:
            head = self._client("s3", self.region).head_object(Bucket=bucket, Key=key)
        except ClientError:
            return None  # no such object: the call itself answers
        if head.get("ServerSideEncryption") != "aws:kms":
            return None
        return head.get("SSEKMSKeyId") or None

    def bucket_kms_key(self, bucket: str) -> str | None:
        if bucket in self._bucket_keys:
            return self._bucket_keys[bucket]
        kms_key: str | None = None
        try:
            rules = self._client("s3", self.region).get_bucket_encryption(Bucket=bucket)[
                "ServerSideEncryptionConfiguration"
            ]["Rules"]
        except ClientError:
            rules = []
        for rule in rules:
            default = rule.get("ApplyServerSideEncryptionByDefault", {})
            if default.get("SSEAlgorithm") == "aws:kms" and default.get("KMSMasterKeyID"):
                kms_key = default["KMSMasterKeyID"]
        self._bucket_keys[bucket] = kms_key
        return kms_key


_NOT_HERE = object()


def _moto_object(bucket: str, key: str) -> Any:
    """The object moto (in this process, default account) holds for `bucket`/`key`, None if the key
    is missing, `_NOT_HERE` if the bucket is not there (the caller then asks with HeadObject).

    Every GetObject a handler makes needs its object's KMS key; a HeadObject through botocore and
    moto's response rendering for it cost about 5% of the sandbox's CPU. The role policies are read
    from moto's IAM backend the same way.
    """
    try:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        return s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_object(bucket, key)
    except Exception:  # no such bucket here (another account?), or a moto without these names
        return _NOT_HERE


# --------------------------------------------------------------------------- helpers


def _decoded(document: object, name: str) -> Mapping[str, Any]:
    """A policy document as moto holds it (a dict from CloudFormation, JSON text from the API),
    with moto's stand-in for `AWS::NoValue` (None) removed, as CloudFormation removes the element."""
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError as exc:
            raise iam.IamSandboxError(f"policy {name!r} is not JSON: {exc}") from None
    if not isinstance(document, Mapping):
        raise iam.IamSandboxError(f"policy {name!r} is not an object: {document!r}")
    return _drop_none(document)


def _drop_none(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


def _state_machine_caller(frame: FrameType | None) -> Caller | None:
    """The state machine whose execution makes this call, if moto's interpreter is on the stack."""
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        if str(frame.f_globals.get("__name__", "")).startswith(_INTERPRETER_MODULE):
            env = frame.f_locals.get("env")
            details = getattr(env, "aws_execution_details", None)
            role_arn = getattr(details, "role_arn", None)
            if role_arn:
                name, session = _execution_names(env)
                return Caller("state_machine", name, iam.Principal(str(role_arn), session))
        frame = frame.f_back
    return None


def _execution_names(env: Any) -> tuple[str, str]:
    """(state machine name, execution name) from the evaluation's context object."""
    try:
        data = env.states.context_object.context_object_data
        return str(data["StateMachine"]["Name"]), str(data["Execution"]["Name"])
    except (AttributeError, KeyError, TypeError):
        return "state-machine", "execution"


def _service_error(client: Any, operation: str, code: str, message: str, status: int) -> ClientError:
    """The error botocore would raise for this answer: the client's modeled class where it has one."""
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": str(uuid.uuid4()), "HTTPHeaders": {}},
    }
    error_class = client.exceptions.from_code(code)
    return error_class(response, operation)
