"""IAM as AWS decides it, over plain data: identity policies, and what an API call asks of them.

moto checks no IAM (docs/ARCHITECTURE.md#what-moto-does-not-do): a handler whose role lacks an action works in the sandbox and
fails with AccessDenied on AWS. `sandbox.iam_enforcement` closes that gap; this module is the pure
part it relies on, kept free of boto3 and moto so that it can be tested on its own:

1. Policies. `parse_policy` turns an identity-based policy document into `Statement`s; `evaluate`
   decides one `Request` (action, resource ARN, condition context) as IAM's identity-policy logic
   does for a role in its own account: an explicit Deny wins, then any Allow, else the implicit
   deny. Action (and NotAction) patterns are case-insensitive globs (`s3:Get*`); Resource (and
   NotResource) patterns are case-sensitive globs matched per ARN segment, as IAM does; Condition
   blocks are ANDed over operators and keys, ORed over a key's values (NORed for a negated
   operator), with `ForAllValues:` / `ForAnyValue:` set operators and `...IfExists`.

2. Requests. `requests_for` maps one API call (service, operation, parameters) to the
   authorization requests AWS makes for it: one per item of a transaction with the item's own
   action, one per table of a batch, the index ARN for a Query on an index, the partition-key
   values as `dynamodb:LeadingKeys`, the queue ARN from a queue URL, the customer KMS key S3 uses
   for an object, and so on.

Failing closed, loudly. Whatever this module cannot decide the way IAM would -- an operation the
mapping does not know, a condition operator it does not implement, a condition key the sandbox
does not compute, a policy variable, a plain (single-valued) operator on a multivalued key --
raises `IamSandboxError` naming what to add. It never guesses "allowed": a gap in the model must
show up as a refused call in a test, not as a permission that only AWS refuses.

Not modelled (absent from the sandbox, so never part of a decision): resource-based policies
(bucket, queue, key policies), permissions boundaries and SCPs (a role with a boundary raises),
session policies, and aws:* keys other than those in `GLOBAL_CONDITION_KEYS`.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol
from urllib.parse import urlparse


class IamSandboxError(Exception):
    """The sandbox cannot decide this the way IAM would: the call is refused, never let through."""


# --------------------------------------------------------------------------- policies


@dataclass(frozen=True)
class Statement:
    """One statement of an identity-based policy, normalised (every list a tuple of strings)."""

    effect: str  # "Allow" | "Deny"
    actions: tuple[str, ...] = ()
    not_actions: tuple[str, ...] | None = None  # None: the statement uses Action
    resources: tuple[str, ...] = ()
    not_resources: tuple[str, ...] | None = None  # None: the statement uses Resource
    # operator -> condition key (as written; IAM compares keys case-insensitively) -> the values
    conditions: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    sid: str = ""


@dataclass(frozen=True)
class Policy:
    """A parsed policy document and the name it is known by (for messages and records)."""

    name: str
    statements: tuple[Statement, ...]


def parse_policy(document: Mapping[str, Any], name: str = "") -> Policy:
    """Parse an identity-based policy document (already decoded from JSON).

    Raises IamSandboxError for what IAM itself would reject (no Effect, Action and NotAction
    together, a Principal in an identity policy) and for what this evaluator does not model
    (policy variables): a policy the sandbox misreads must not quietly grant or refuse.
    """
    raw = document.get("Statement")
    if raw is None:
        raise IamSandboxError(f"policy {name!r} has no Statement")
    statements = raw if isinstance(raw, list) else [raw]
    return Policy(name, tuple(_parse_statement(s, name, i) for i, s in enumerate(statements)))


def _parse_statement(raw: Any, policy: str, index: int) -> Statement:
    where = f"policy {policy!r} statement {index}"
    if not isinstance(raw, Mapping):
        raise IamSandboxError(f"{where}: not an object: {raw!r}")
    effect = raw.get("Effect")
    if effect not in ("Allow", "Deny"):
        raise IamSandboxError(f"{where}: Effect must be Allow or Deny, not {effect!r}")
    if "Principal" in raw or "NotPrincipal" in raw:
        raise IamSandboxError(f"{where}: an identity-based policy has no Principal")
    if ("Action" in raw) == ("NotAction" in raw):
        raise IamSandboxError(f"{where}: exactly one of Action and NotAction is required")
    if ("Resource" in raw) == ("NotResource" in raw):
        raise IamSandboxError(f"{where}: exactly one of Resource and NotResource is required")
    resources = _strings(raw.get("Resource", ()), where)
    not_resources = _strings(raw["NotResource"], where) if "NotResource" in raw else None
    for pattern in (*resources, *(not_resources or ())):
        _check_resource_pattern(pattern, where)
    conditions: dict[str, dict[str, tuple[str, ...]]] = {}
    for operator, block in (raw.get("Condition") or {}).items():
        if not isinstance(block, Mapping):
            raise IamSandboxError(f"{where}: Condition {operator} is not an object")
        _operator(operator)  # an operator IAM has and this evaluator lacks fails here, at once
        keys = conditions.setdefault(str(operator), {})
        for key, values in block.items():
            normalised = _strings(values, where)
            for value in normalised:
                _no_policy_variables(value, where)
            keys[str(key)] = normalised  # compared case-insensitively, as IAM compares keys
    return Statement(
        effect=effect,
        actions=_strings(raw.get("Action", ()), where),
        not_actions=_strings(raw["NotAction"], where) if "NotAction" in raw else None,
        resources=resources,
        not_resources=not_resources,
        conditions=conditions,
        sid=str(raw.get("Sid", "")),
    )


def _strings(value: Any, where: str) -> tuple[str, ...]:
    values = value if isinstance(value, list | tuple) else [value]
    out = []
    for item in values:
        if isinstance(item, bool):  # before int: a bool is an int
            out.append("true" if item else "false")
        elif isinstance(item, str | int | float):
            out.append(str(item))
        else:
            raise IamSandboxError(f"{where}: not a string or a list of strings: {value!r}")
    return tuple(out)


def _no_policy_variables(value: str, where: str) -> None:
    if "${" in value:
        raise IamSandboxError(f"{where}: policy variables ({value!r}) are not modelled by the sandbox")


def _check_resource_pattern(pattern: str, where: str) -> None:
    _no_policy_variables(pattern, where)
    if pattern != "*" and len(pattern.split(":", 5)) < 6:
        raise IamSandboxError(f"{where}: Resource {pattern!r} is neither '*' nor an ARN")


# --------------------------------------------------------------------------- requests and decisions


# A condition key's values in a request; None: the key is modelled but absent from this request.
ContextValues = tuple[str, ...] | None


@dataclass(frozen=True)
class Request:
    """One authorization request: an action on one resource, with its condition context.

    `context` maps condition keys (any case) to their values. A key the sandbox computes but this
    request does not carry is present with None (IAM's "key not in the request context"); a key
    missing from `context` altogether is one the sandbox does not model, and a policy that tests
    it cannot be evaluated (IamSandboxError) rather than be guessed.
    """

    action: str  # "dynamodb:GetItem"
    resource: str  # an ARN, or "*" for actions without resource-level permissions
    context: Mapping[str, ContextValues] = field(default_factory=dict)

    def value(self, key: str) -> ContextValues:
        lowered = key.lower()
        for name, values in self.context.items():
            if name.lower() == lowered:
                return values
        raise IamSandboxError(
            f"condition key {key} is not modelled by the sandbox for {self.action} "
            "(add it to the request mapping in sandbox/iam.py)"
        )


class Decision(Enum):
    ALLOWED = "allowed"
    IMPLICIT_DENY = "implicit deny"  # no statement allows it
    EXPLICIT_DENY = "explicit deny"  # a Deny statement matches


@dataclass(frozen=True)
class Evaluation:
    """The decision on one request, with the statement that decided it (None: nothing matched)."""

    request: Request
    decision: Decision
    policy: str | None = None
    statement: Statement | None = None

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOWED


def evaluate(policies: Iterable[Policy], request: Request) -> Evaluation:
    """Decide `request` against a role's identity-based policies, as IAM does.

    Every statement whose action and resource match has its conditions evaluated, Allow and Deny
    alike, even once the outcome is known: a condition the sandbox cannot evaluate raises wherever
    it is, so a decision never depends on the order of statements or policies.
    """
    allow: tuple[str, Statement] | None = None
    deny: tuple[str, Statement] | None = None
    for policy in policies:
        for statement in policy.statements:
            if not _statement_applies(statement, request):
                continue
            if statement.effect == "Deny":
                deny = deny or (policy.name, statement)
            else:
                allow = allow or (policy.name, statement)
    if deny is not None:
        return Evaluation(request, Decision.EXPLICIT_DENY, deny[0], deny[1])
    if allow is not None:
        return Evaluation(request, Decision.ALLOWED, allow[0], allow[1])
    return Evaluation(request, Decision.IMPLICIT_DENY)


def _statement_applies(statement: Statement, request: Request) -> bool:
    if statement.not_actions is not None:
        if any(action_matches(p, request.action) for p in statement.not_actions):
            return False
    elif not any(action_matches(p, request.action) for p in statement.actions):
        return False
    if statement.not_resources is not None:
        if any(resource_matches(p, request.resource) for p in statement.not_resources):
            return False
    elif not any(resource_matches(p, request.resource) for p in statement.resources):
        return False
    return conditions_hold(statement.conditions, request)


# --------------------------------------------------------------------------- matching


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    """IAM's wildcards: `*` any run of characters (none included), `?` exactly one."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def glob_matches(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    return _glob(pattern, ignore_case).fullmatch(value) is not None


def action_matches(pattern: str, action: str) -> bool:
    """`s3:Get*` matches `s3:GetObject`; `*` matches every action. Case-insensitive, as IAM."""
    return glob_matches(pattern, action, ignore_case=True)


def resource_matches(pattern: str, arn: str) -> bool:
    """IAM resource matching: `*` alone matches anything; otherwise each of the six colon-separated
    ARN segments is matched on its own (a wildcard does not reach into the next segment; the last
    segment, the resource, keeps its colons: `execution:Machine:*`). Case-sensitive."""
    if pattern == "*":
        return True
    if arn == "*":  # a request on "*" is matched only by "*"
        return False
    wanted = pattern.split(":", 5)
    actual = arn.split(":", 5)
    if len(wanted) != 6 or len(actual) != 6:
        return False
    return all(glob_matches(p, a) for p, a in zip(wanted, actual, strict=True))


# --------------------------------------------------------------------------- conditions

# Condition keys that are multivalued by definition: IAM tests them with set operators only.
MULTIVALUED_KEYS = frozenset({"dynamodb:leadingkeys", "dynamodb:attributes", "aws:calledvia", "aws:tagkeys"})


def _string_equals(value: str, wanted: str) -> bool:
    return value == wanted


def _string_equals_ignore_case(value: str, wanted: str) -> bool:
    return value.lower() == wanted.lower()


def _string_like(value: str, wanted: str) -> bool:
    return glob_matches(wanted, value)


def _arn_like(value: str, wanted: str) -> bool:
    return resource_matches(wanted, value) if wanted != "*" else True


def _bool(value: str, wanted: str) -> bool:
    return value.lower() == wanted.lower()


def _numeric(compare: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    def check(value: str, wanted: str) -> bool:
        try:
            return compare(float(value), float(wanted))
        except ValueError:
            return False

    return check


# base operator -> (does one request value match one policy value, negated)
_OPERATORS: dict[str, tuple[Callable[[str, str], bool], bool]] = {
    "StringEquals": (_string_equals, False),
    "StringNotEquals": (_string_equals, True),
    "StringEqualsIgnoreCase": (_string_equals_ignore_case, False),
    "StringNotEqualsIgnoreCase": (_string_equals_ignore_case, True),
    "StringLike": (_string_like, False),
    "StringNotLike": (_string_like, True),
    "ArnEquals": (_arn_like, False),  # IAM: ArnEquals and ArnLike behave the same
    "ArnLike": (_arn_like, False),
    "ArnNotEquals": (_arn_like, True),
    "ArnNotLike": (_arn_like, True),
    "Bool": (_bool, False),
    "NumericEquals": (_numeric(lambda a, b: a == b), False),
    "NumericNotEquals": (_numeric(lambda a, b: a == b), True),
    "NumericLessThan": (_numeric(lambda a, b: a < b), False),
    "NumericLessThanEquals": (_numeric(lambda a, b: a <= b), False),
    "NumericGreaterThan": (_numeric(lambda a, b: a > b), False),
    "NumericGreaterThanEquals": (_numeric(lambda a, b: a >= b), False),
}


@dataclass(frozen=True)
class _Operator:
    name: str
    base: str
    set_operator: str | None  # "ForAllValues" | "ForAnyValue" | None
    if_exists: bool


def _operator(name: str) -> _Operator:
    """Parse `ForAllValues:StringLike`, `StringEqualsIfExists`, `Null`...; IamSandboxError if unknown."""
    set_operator, _, base = name.rpartition(":")
    if set_operator not in ("", "ForAllValues", "ForAnyValue"):
        raise IamSandboxError(f"condition operator {name!r} is not modelled by the sandbox")
    if_exists = base.endswith("IfExists") and base != "IfExists"
    if if_exists:
        base = base[: -len("IfExists")]
    if base == "Null":
        if set_operator or if_exists:
            raise IamSandboxError(f"condition operator {name!r} is not valid")
    elif base not in _OPERATORS:
        raise IamSandboxError(
            f"condition operator {name!r} is not modelled by the sandbox (known: Null, "
            f"{', '.join(sorted(_OPERATORS))}, with ForAllValues:/ForAnyValue: and IfExists)"
        )
    return _Operator(name, base, set_operator or None, if_exists)


def conditions_hold(conditions: Mapping[str, Mapping[str, Sequence[str]]], request: Request) -> bool:
    """Every operator's every key holds (AND); a key holds for any of its policy values (OR)."""
    results = [
        _key_holds(_operator(op), key, tuple(values), request)
        for op, keys in conditions.items()
        for key, values in keys.items()
    ]  # all evaluated: one that cannot be evaluated raises even after another failed
    return all(results)


def _key_holds(operator: _Operator, key: str, wanted: tuple[str, ...], request: Request) -> bool:
    present = request.value(key)
    if operator.base == "Null":
        # "true": the key must be absent; "false": present. An empty set counts as absent.
        is_absent = not present
        return any(is_absent == (w.lower() == "true") for w in wanted)
    match, negated = _OPERATORS[operator.base]

    def one(value: str) -> bool:
        hit = any(match(value, w) for w in wanted)
        return not hit if negated else hit

    if operator.set_operator is None and key.lower() in MULTIVALUED_KEYS:
        raise IamSandboxError(
            f"{operator.name} on the multivalued key {key}: IAM wants ForAllValues: or ForAnyValue: here"
        )
    if present is None and operator.if_exists:
        return True
    if operator.set_operator == "ForAllValues":
        return all(one(v) for v in present or ())  # an absent or empty key holds (IAM's rule)
    if operator.set_operator == "ForAnyValue":
        return any(one(v) for v in present or ())  # an absent key never holds
    if present is None:
        # IAM: an absent key fails a positive operator and satisfies a negated one.
        return negated
    if len(present) != 1:
        raise IamSandboxError(f"{operator.name} on {key} with several values {present!r}: use a set operator")
    return one(present[0])


# --------------------------------------------------------------------------- principals and errors


@dataclass(frozen=True)
class Principal:
    """Who calls: a role assumed by a Lambda function or a Step Functions execution."""

    role_arn: str
    session_name: str  # the function name (as Lambda names the session), or the execution name

    @property
    def account(self) -> str:
        return self.role_arn.split(":")[4]

    @property
    def partition(self) -> str:
        return self.role_arn.split(":")[1]

    @property
    def role_name(self) -> str:
        return self.role_arn.rsplit("/", 1)[-1]

    @property
    def assumed_role_arn(self) -> str:
        return f"arn:{self.partition}:sts::{self.account}:assumed-role/{self.role_name}/{self.session_name}"


# IAM prefix -> (error code, HTTP status) the service answers an unauthorized call with.
_DENIED_AS: dict[str, tuple[str, int]] = {
    "s3": ("AccessDenied", 403),
    "sqs": ("AccessDenied", 403),
    "cloudwatch": ("AccessDenied", 403),
    "iam": ("AccessDenied", 403),
    "sts": ("AccessDenied", 403),
    "lambda": ("AccessDeniedException", 403),
}


def access_denied(evaluation: Evaluation, principal: Principal) -> tuple[str, str, int]:
    """(error code, message, HTTP status) of the service's answer to a denied request, in AWS's words."""
    request = evaluation.request
    service = request.action.split(":", 1)[0].lower()
    code, status = _DENIED_AS.get(service, ("AccessDeniedException", 400))
    action = request.action.lower() if service == "sqs" else request.action  # SQS says "sqs:sendmessage"
    resource = f'"{request.resource}"' if service == "s3" else request.resource
    head = (
        f"User: {principal.assumed_role_arn} is not authorized to perform: {action} on resource: {resource}"
    )
    if evaluation.decision is Decision.EXPLICIT_DENY:
        return code, f"{head} with an explicit deny in an identity-based policy", status
    return code, f"{head} because no identity-based policy allows the {action} action", status


# --------------------------------------------------------------------------- API calls -> requests


class ResourceFacts(Protocol):
    """What deciding a call needs to know about the resources it touches (read from the sandbox)."""

    def partition_key(self, table_arn: str, index_name: str | None) -> str:
        """The partition-key attribute of a table, or of one of its indexes; "" when the table
        does not exist (dynamodb:LeadingKeys is then absent; the call fails as AWS fails it)."""
        ...

    def object_kms_key(self, bucket: str, key: str) -> str | None:
        """The customer managed KMS key an existing object is encrypted with (None: none, or no object)."""
        ...

    def bucket_kms_key(self, bucket: str) -> str | None:
        """The customer managed KMS key of the bucket's default encryption (None: none)."""
        ...


@dataclass(frozen=True)
class ApiCall:
    """One call as the SDK makes it: botocore's service name and operation, the caller's params."""

    service: str  # botocore service name: "dynamodb", "stepfunctions", "s3", ...
    operation: str  # botocore operation name: "GetItem"
    params: Mapping[str, Any]
    region: str
    account: str
    partition: str = "aws"

    def arn(
        self, service: str, resource: str, *, region: str | None = None, account: str | None = None
    ) -> str:
        return f"arn:{self.partition}:{service}:{self.region if region is None else region}:{self.account if account is None else account}:{resource}"


# Global keys the sandbox computes for every request; other aws:* keys raise when tested.
GLOBAL_CONDITION_KEYS = (
    "aws:PrincipalArn",
    "aws:PrincipalAccount",
    "aws:PrincipalType",
    "aws:RequestedRegion",
    "aws:SecureTransport",
    "aws:SourceArn",
    "aws:SourceAccount",
    "aws:CalledVia",
    "aws:ViaAWSService",
)


def global_context(principal: Principal, region: str) -> dict[str, ContextValues]:
    """The aws:* keys of a call a role makes itself over TLS (as every SDK call to AWS is)."""
    return {
        "aws:PrincipalArn": (principal.role_arn,),
        "aws:PrincipalAccount": (principal.account,),
        "aws:PrincipalType": ("AssumedRole",),
        "aws:RequestedRegion": (region,),
        "aws:SecureTransport": ("true",),
        "aws:SourceArn": None,  # set only when a service calls another on a resource's behalf
        "aws:SourceAccount": None,
        "aws:CalledVia": None,
        "aws:ViaAWSService": ("false",),
    }


# botocore service name -> IAM service prefix, where they differ
IAM_PREFIX = {"stepfunctions": "states", "monitoring": "cloudwatch"}

_Mapper = Callable[[ApiCall, ResourceFacts], list[Request]]
_MAPPERS: dict[tuple[str, str], _Mapper] = {}
# Operations that need no authorization at all.
_UNAUTHORIZED_OPERATIONS = frozenset({("sts", "GetCallerIdentity")})


def _maps(service: str, *operations: str) -> Callable[[_Mapper], _Mapper]:
    def register(mapper: _Mapper) -> _Mapper:
        for operation in operations:
            _MAPPERS[(service, operation)] = mapper
        return mapper

    return register


def known_operations() -> frozenset[tuple[str, str]]:
    """(botocore service, operation) pairs the mapping can authorize."""
    return frozenset(_MAPPERS) | _UNAUTHORIZED_OPERATIONS


def requests_for(call: ApiCall, facts: ResourceFacts, principal: Principal) -> tuple[Request, ...]:
    """The authorization requests AWS makes for `call` by `principal`, global keys included.

    Raises IamSandboxError for an operation the mapping does not know: the sandbox refuses what it
    cannot decide.
    """
    if (call.service, call.operation) in _UNAUTHORIZED_OPERATIONS:
        return ()
    mapper = _MAPPERS.get((call.service, call.operation))
    if mapper is None:
        prefix = IAM_PREFIX.get(call.service, call.service)
        raise IamSandboxError(
            f"the sandbox does not know how IAM authorizes {prefix}:{call.operation} "
            f"(botocore {call.service}.{call.operation}): add it to the request mapping in sandbox/iam.py"
        )
    base = global_context(principal, call.region)
    return tuple(Request(r.action, r.resource, {**base, **r.context}) for r in mapper(call, facts))


def _require(call: ApiCall, name: str) -> Any:
    value = call.params.get(name)
    if value in (None, ""):
        raise IamSandboxError(f"{call.service}.{call.operation}: no {name} to authorize against")
    return value


# -- DynamoDB


def table_arn(call: ApiCall, table: str) -> str:
    """DynamoDB accepts a table name or a table ARN wherever a TableName goes."""
    return table if table.startswith("arn:") else call.arn("dynamodb", f"table/{table}")


def _attribute_value(value: Mapping[str, Any]) -> str:
    """A key attribute's value as IAM compares it: the string, the number's text, base64 bytes."""
    for kind in ("S", "N"):
        if kind in value:
            return str(value[kind])
    if "B" in value:
        raw = value["B"]
        return base64.b64encode(raw).decode() if isinstance(raw, bytes | bytearray) else str(raw)
    raise IamSandboxError(f"a key attribute must be S, N or B, not {sorted(value)}")


def _leading(
    facts: ResourceFacts, arn: str, keys: Iterable[Mapping[str, Any]], index: str | None = None
) -> ContextValues:
    partition_key = facts.partition_key(arn, index)
    if not partition_key:
        return None
    values = [_attribute_value(k[partition_key]) for k in keys if partition_key in k]
    return tuple(dict.fromkeys(values))


def _dynamodb_context(
    call: ApiCall, leading: ContextValues, params: Mapping[str, Any] | None = None
) -> dict[str, ContextValues]:
    source = call.params if params is None else params
    context: dict[str, ContextValues] = {"dynamodb:LeadingKeys": leading}
    for key, param in (
        ("dynamodb:Select", "Select"),
        ("dynamodb:ReturnValues", "ReturnValues"),
        ("dynamodb:ReturnConsumedCapacity", "ReturnConsumedCapacity"),
    ):
        context[key] = (str(source[param]),) if source.get(param) else None
    return context


@_maps("dynamodb", "GetItem", "PutItem", "UpdateItem", "DeleteItem")
def _dynamodb_item(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    arn = table_arn(call, _require(call, "TableName"))
    key = call.params.get("Item") if call.operation == "PutItem" else call.params.get("Key")
    leading = _leading(facts, arn, [key or {}])
    return [Request(f"dynamodb:{call.operation}", arn, _dynamodb_context(call, leading))]


@_maps("dynamodb", "Query", "Scan")
def _dynamodb_read_many(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    arn = table_arn(call, _require(call, "TableName"))
    index = call.params.get("IndexName")
    resource = f"{arn}/index/{index}" if index else arn
    leading: ContextValues = None  # a Scan names no partition
    partition_key = facts.partition_key(arn, index)
    if call.operation == "Query" and partition_key:
        leading = (_query_partition_value(call, partition_key),)
    return [Request(f"dynamodb:{call.operation}", resource, _dynamodb_context(call, leading))]


_EQUALITY = re.compile(r"^\(*\s*([#\w.:-]+)\s*=\s*([#\w.:-]+)\s*\)*$")


def _query_partition_value(call: ApiCall, partition_key: str) -> str:
    """The partition-key value a Query names, from KeyConditionExpression (or legacy KeyConditions)."""
    names = call.params.get("ExpressionAttributeNames") or {}
    values = call.params.get("ExpressionAttributeValues") or {}
    expression = call.params.get("KeyConditionExpression")
    if expression:
        for clause in re.split(r"\s+and\s+", str(expression), flags=re.IGNORECASE):
            match = _EQUALITY.match(clause.strip())
            if not match:
                continue
            for name, placeholder in (match.groups(), match.groups()[::-1]):
                if names.get(name, name) == partition_key and placeholder in values:
                    return _attribute_value(values[placeholder])
    for name, condition in (call.params.get("KeyConditions") or {}).items():
        if name == partition_key and condition.get("ComparisonOperator") == "EQ":
            return _attribute_value(condition["AttributeValueList"][0])
    raise IamSandboxError(
        f"dynamodb.Query: cannot find the equality on the partition key {partition_key!r} in {expression!r}"
    )


@_maps("dynamodb", "BatchGetItem")
def _dynamodb_batch_get(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    requests = []
    for table, spec in (_require(call, "RequestItems")).items():
        arn = table_arn(call, table)
        leading = _leading(facts, arn, spec.get("Keys", []))
        requests.append(Request("dynamodb:BatchGetItem", arn, _dynamodb_context(call, leading)))
    return requests


@_maps("dynamodb", "BatchWriteItem")
def _dynamodb_batch_write(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    requests = []
    for table, writes in (_require(call, "RequestItems")).items():
        arn = table_arn(call, table)
        keys = [w["PutRequest"]["Item"] if "PutRequest" in w else w["DeleteRequest"]["Key"] for w in writes]
        requests.append(
            Request("dynamodb:BatchWriteItem", arn, _dynamodb_context(call, _leading(facts, arn, keys)))
        )
    return requests


# TransactWriteItems / TransactGetItems need no action of their own: each item is authorized
# with the action of the single-item operation it performs.
_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


@_maps("dynamodb", "TransactWriteItems", "TransactGetItems")
def _dynamodb_transaction(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    requests = []
    for item in _require(call, "TransactItems"):
        [(kind, spec)] = item.items()
        if kind not in _TRANSACT_ACTIONS:
            raise IamSandboxError(f"dynamodb.{call.operation}: unknown item kind {kind!r}")
        arn = table_arn(call, spec["TableName"])
        key = spec.get("Item") if kind == "Put" else spec.get("Key")
        leading = _leading(facts, arn, [key or {}])
        requests.append(
            Request(f"dynamodb:{_TRANSACT_ACTIONS[kind]}", arn, _dynamodb_context(call, leading, spec))
        )
    return requests


@_maps("dynamodb", "DescribeTable", "DescribeTimeToLive", "DescribeContinuousBackups")
def _dynamodb_table(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    arn = table_arn(call, _require(call, "TableName"))
    return [Request(f"dynamodb:{call.operation}", arn, _dynamodb_context(call, None))]


# -- S3

_S3_KEYS = (
    "s3:prefix",
    "s3:delimiter",
    "s3:max-keys",
    "s3:x-amz-server-side-encryption",
    "s3:x-amz-server-side-encryption-aws-kms-key-id",
)


def s3_context(**present: Any) -> dict[str, ContextValues]:
    context: dict[str, ContextValues] = dict.fromkeys(_S3_KEYS)
    for key, value in present.items():
        if value not in (None, ""):
            context[key] = (str(value),)
    return context


def _s3_object(call: ApiCall, bucket: str, key: str) -> str:
    return f"arn:{call.partition}:s3:::{bucket}/{key}"


def _kms_key_arn(call: ApiCall, key_id: str) -> str:
    if key_id.startswith("arn:"):
        return key_id
    return call.arn("kms", key_id if key_id.startswith("alias/") else f"key/{key_id}")


def _kms_via_s3(call: ApiCall, action: str, key_id: str) -> Request:
    """S3 calls KMS for an SSE-KMS object with the caller's credentials: the caller needs the key."""
    return Request(
        action,
        _kms_key_arn(call, key_id),
        {"kms:ViaService": (f"s3.{call.region}.amazonaws.com",), "kms:CallerAccount": (call.account,)},
    )


@_maps("s3", "GetObject", "HeadObject")
def _s3_get(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    bucket, key = _require(call, "Bucket"), _require(call, "Key")
    action = "s3:GetObjectVersion" if call.params.get("VersionId") else "s3:GetObject"
    requests = [Request(action, _s3_object(call, bucket, key), s3_context())]
    kms_key = facts.object_kms_key(bucket, key)
    if kms_key:
        requests.append(_kms_via_s3(call, "kms:Decrypt", kms_key))
    return requests


def _s3_put_requests(call: ApiCall, facts: ResourceFacts, bucket: str, key: str) -> list[Request]:
    sse = call.params.get("ServerSideEncryption")
    kms_key = call.params.get("SSEKMSKeyId")
    context = s3_context(
        **{"s3:x-amz-server-side-encryption": sse, "s3:x-amz-server-side-encryption-aws-kms-key-id": kms_key}
    )
    requests = [Request("s3:PutObject", _s3_object(call, bucket, key), context)]
    if sse is None:  # no header: the bucket's default encryption applies
        kms_key = facts.bucket_kms_key(bucket)
    elif sse != "aws:kms":
        kms_key = None
    if kms_key:  # aws:kms without a key id is the AWS managed key: its key policy grants the use
        requests.append(_kms_via_s3(call, "kms:GenerateDataKey", kms_key))
    return requests


@_maps("s3", "PutObject")
def _s3_put(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    return _s3_put_requests(call, facts, _require(call, "Bucket"), _require(call, "Key"))


@_maps("s3", "CopyObject")
def _s3_copy(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    source = _require(call, "CopySource")
    if isinstance(source, str):
        source_bucket, _, source_key = source.lstrip("/").partition("/")
        source_key = source_key.split("?versionId=", 1)[0]
    else:
        source_bucket, source_key = source["Bucket"], source["Key"]
    return [
        *_s3_get(
            ApiCall(
                call.service,
                "GetObject",
                {"Bucket": source_bucket, "Key": source_key},
                call.region,
                call.account,
                call.partition,
            ),
            facts,
        ),
        *_s3_put_requests(call, facts, _require(call, "Bucket"), _require(call, "Key")),
    ]


@_maps("s3", "DeleteObject")
def _s3_delete(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    action = "s3:DeleteObjectVersion" if call.params.get("VersionId") else "s3:DeleteObject"
    return [Request(action, _s3_object(call, _require(call, "Bucket"), _require(call, "Key")), s3_context())]


@_maps("s3", "DeleteObjects")
def _s3_delete_many(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    bucket = _require(call, "Bucket")
    return [
        Request(
            "s3:DeleteObjectVersion" if o.get("VersionId") else "s3:DeleteObject",
            _s3_object(call, bucket, o["Key"]),
            s3_context(),
        )
        for o in _require(call, "Delete").get("Objects", [])
    ]


@_maps("s3", "ListObjectsV2", "ListObjects", "HeadBucket", "ListObjectVersions")
def _s3_list(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    action = "s3:ListBucketVersions" if call.operation == "ListObjectVersions" else "s3:ListBucket"
    context = s3_context(
        **{
            "s3:prefix": call.params.get("Prefix"),
            "s3:delimiter": call.params.get("Delimiter"),
            "s3:max-keys": call.params.get("MaxKeys"),
        }
    )
    return [Request(action, f"arn:{call.partition}:s3:::{_require(call, 'Bucket')}", context)]


@_maps("s3", "GetObjectTagging", "PutObjectTagging")
def _s3_tagging(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    return [
        Request(
            f"s3:{call.operation}",
            _s3_object(call, _require(call, "Bucket"), _require(call, "Key")),
            s3_context(),
        )
    ]


# -- SQS


def queue_arn(call: ApiCall, queue_url: str) -> str:
    """The queue ARN behind a queue URL (`https://sqs.<region>.amazonaws.com/<account>/<name>`, or
    any endpoint's `/<account>/<name>` path, moto's included)."""
    parsed = urlparse(queue_url)
    parts = [p for p in parsed.path.split("/") if p]
    if len(parts) != 2:
        raise IamSandboxError(f"not a queue URL: {queue_url!r}")
    account, name = parts
    host = parsed.hostname or ""
    match = re.match(r"^sqs\.([a-z0-9-]+)\.", host)
    return call.arn("sqs", name, region=match.group(1) if match else call.region, account=account)


_SQS_ACTIONS = {
    "SendMessage": "SendMessage",
    "SendMessageBatch": "SendMessage",  # a batch is authorized as sqs:SendMessage
    "ReceiveMessage": "ReceiveMessage",
    "DeleteMessage": "DeleteMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibility": "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
    "GetQueueAttributes": "GetQueueAttributes",
    "SetQueueAttributes": "SetQueueAttributes",
    "PurgeQueue": "PurgeQueue",
}


@_maps("sqs", *_SQS_ACTIONS)
def _sqs_queue(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    return [Request(f"sqs:{_SQS_ACTIONS[call.operation]}", queue_arn(call, _require(call, "QueueUrl")))]


@_maps("sqs", "StartMessageMoveTask", "ListMessageMoveTasks")
def _sqs_move_task(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    """A DLQ redrive is authorized on its source queue (the DLQ), named by ARN."""
    return [Request(f"sqs:{call.operation}", _require(call, "SourceArn"))]


@_maps("sqs", "GetQueueUrl")
def _sqs_queue_url(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    account = call.params.get("QueueOwnerAWSAccountId") or call.account
    return [Request("sqs:GetQueueUrl", call.arn("sqs", _require(call, "QueueName"), account=account))]


# -- Step Functions


@_maps("stepfunctions", "StartExecution", "StartSyncExecution", "ListExecutions", "DescribeStateMachine")
def _states_machine(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    return [Request(f"states:{call.operation}", _require(call, "stateMachineArn"))]


@_maps(
    "stepfunctions",
    "DescribeExecution",
    "StopExecution",
    "GetExecutionHistory",
    "DescribeStateMachineForExecution",
)
def _states_execution(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    return [Request(f"states:{call.operation}", _require(call, "executionArn"))]


@_maps("stepfunctions", "SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat", "ListStateMachines")
def _states_any(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    return [Request(f"states:{call.operation}", "*")]


# -- Lambda


def function_arn(call: ApiCall, function: str, qualifier: str | None = None) -> str:
    """A function ARN from a name, a partial ARN (`123456789012:function:name`) or a full ARN."""
    if function.startswith("arn:"):
        arn = function
    elif ":function:" in function:
        account, _, rest = function.partition(":function:")
        arn = call.arn("lambda", f"function:{rest}", account=account)
    else:
        name, _, inline_qualifier = function.partition(":")
        arn = call.arn("lambda", f"function:{name}")
        qualifier = qualifier or inline_qualifier or None
    if qualifier and arn.count(":") == 6:
        arn = f"{arn}:{qualifier}"
    return arn


@_maps("lambda", "Invoke", "InvokeAsync", "InvokeWithResponseStream")
def _lambda_invoke(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    arn = function_arn(call, _require(call, "FunctionName"), call.params.get("Qualifier"))
    return [Request("lambda:InvokeFunction", arn)]


@_maps("lambda", "GetFunction", "GetFunctionConfiguration")
def _lambda_read(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    arn = function_arn(call, _require(call, "FunctionName"), call.params.get("Qualifier"))
    return [Request(f"lambda:{call.operation}", arn)]


# -- CloudWatch, Comprehend, KMS, EventBridge, Logs


@_maps("cloudwatch", "PutMetricData")
def _cloudwatch_put(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    # No resource-level permissions; the namespace is the only thing a policy can narrow.
    return [
        Request(
            "cloudwatch:PutMetricData", "*", {"cloudwatch:namespace": (str(_require(call, "Namespace")),)}
        )
    ]


@_maps("cloudwatch", "GetMetricData", "GetMetricStatistics", "ListMetrics")
def _cloudwatch_read(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    return [Request(f"cloudwatch:{call.operation}", "*")]


@_maps("comprehend", "DetectPiiEntities", "ContainsPiiEntities", "DetectEntities", "DetectDominantLanguage")
def _comprehend_detect(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    return [Request(f"comprehend:{call.operation}", "*")]  # no resource-level permissions


@_maps("kms", "Encrypt", "Decrypt", "GenerateDataKey", "GenerateDataKeyWithoutPlaintext", "DescribeKey")
def _kms_key(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    key_id = call.params.get("KeyId")
    if not key_id:  # Decrypt may leave the key to the ciphertext, which the sandbox cannot read
        raise IamSandboxError(f"kms.{call.operation} without KeyId: pass KeyId so the key can be authorized")
    context: dict[str, ContextValues] = {"kms:ViaService": None, "kms:CallerAccount": (call.account,)}
    return [Request(f"kms:{call.operation}", _kms_key_arn(call, str(key_id)), context)]


@_maps("events", "PutEvents")
def _events_put(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    buses = {str(e.get("EventBusName") or "default") for e in _require(call, "Entries")}
    return [
        Request("events:PutEvents", bus if bus.startswith("arn:") else call.arn("events", f"event-bus/{bus}"))
        for bus in sorted(buses)
    ]


@_maps("logs", "CreateLogGroup", "CreateLogStream", "PutLogEvents")
def _logs_write(call: ApiCall, facts: ResourceFacts) -> list[Request]:
    group = _require(call, "logGroupName")
    stream = call.params.get("logStreamName")
    resource = f"log-group:{group}" + (f":log-stream:{stream}" if stream else "")
    return [Request(f"logs:{call.operation}", call.arn("logs", resource))]
