"""sandbox.iam: identity policies evaluated as IAM does, and API calls mapped to what IAM is asked."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.iam import (
    ApiCall,
    Decision,
    IamSandboxError,
    Policy,
    Principal,
    Request,
    access_denied,
    action_matches,
    evaluate,
    function_arn,
    parse_policy,
    queue_arn,
    requests_for,
    resource_matches,
)

ACCOUNT = "123456789012"
REGION = "us-east-1"
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/tracking"
COORDINATION = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/coordination"
PRINCIPAL = Principal(
    f"arn:aws:iam::{ACCOUNT}:role/pipeops-IngestFunctionRole-ABC", "pipeops-IngestFunction-XYZ"
)


def policy(*statements: dict[str, Any]) -> Policy:
    return parse_policy({"Version": "2012-10-17", "Statement": list(statements)}, "test")


def allow(action: Any, resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def request(action: str, resource: str, **context: tuple[str, ...] | None) -> Request:
    return Request(action, resource, {k.replace("__", ":"): v for k, v in context.items()})


def decide(statements: list[dict[str, Any]], req: Request) -> Decision:
    return evaluate([policy(*statements)], req).decision


# --------------------------------------------------------------------------- matching


@pytest.mark.parametrize(
    ("pattern", "action", "expected"),
    [
        ("s3:GetObject", "s3:GetObject", True),
        ("s3:getobject", "S3:GetObject", True),  # actions are case-insensitive
        ("s3:Get*", "s3:GetObjectVersion", True),
        ("s3:Get*", "s3:PutObject", False),
        ("s3:?etObject", "s3:GetObject", True),
        ("*", "dynamodb:DeleteItem", True),
        ("dynamodb:*Item", "dynamodb:DeleteItem", True),
        ("dynamodb:GetItem", "dynamodb:GetItems", False),
    ],
)
def test_action_patterns(pattern: str, action: str, expected: bool) -> None:
    assert action_matches(pattern, action) is expected


@pytest.mark.parametrize(
    ("pattern", "arn", "expected"),
    [
        ("*", TABLE, True),
        (TABLE, TABLE, True),
        (TABLE, TABLE.upper(), False),  # resources are case-sensitive
        (f"{TABLE}/index/*", f"{TABLE}/index/active-jobs", True),
        (f"{TABLE}/index/*", TABLE, False),
        ("arn:aws:s3:::bucket/*", "arn:aws:s3:::bucket/a/b.txt", True),
        ("arn:aws:s3:::bucket/*", "arn:aws:s3:::bucket", False),
        ("arn:aws:s3:::bucket", "arn:aws:s3:::bucket/a", False),
        (
            "arn:aws:lambda:us-east-1:123456789012:function:f*",
            "arn:aws:lambda:us-east-1:123456789012:function:f",
            True,
        ),
        (
            "arn:aws:lambda:us-east-1:123456789012:function:f*",
            "arn:aws:lambda:us-east-1:123456789012:function:f:live",
            True,
        ),
        (
            "arn:aws:states:*:123456789012:execution:M:*",
            "arn:aws:states:eu-west-1:123456789012:execution:M:run-1",
            True,
        ),
        # a wildcard stays within its ARN segment
        ("arn:aws:states:us-*", "arn:aws:states:us-east-1:123456789012:execution:M:x", False),
        ("arn:aws:sqs:us-east-1:123456789012:q?", "arn:aws:sqs:us-east-1:123456789012:q1", True),
        ("arn:aws:sqs:us-east-1:123456789012:q1", "*", False),
    ],
)
def test_resource_patterns(pattern: str, arn: str, expected: bool) -> None:
    assert resource_matches(pattern, arn) is expected


# --------------------------------------------------------------------------- decisions


def test_allowed_by_a_matching_statement() -> None:
    evaluation = evaluate([policy(allow("dynamodb:GetItem", TABLE))], request("dynamodb:GetItem", TABLE))
    assert evaluation.decision is Decision.ALLOWED and evaluation.allowed
    assert evaluation.policy == "test"


def test_default_deny() -> None:
    assert (
        decide([allow("dynamodb:GetItem", TABLE)], request("dynamodb:DeleteItem", TABLE))
        is Decision.IMPLICIT_DENY
    )
    assert (
        decide([allow("dynamodb:GetItem", TABLE)], request("dynamodb:GetItem", COORDINATION))
        is Decision.IMPLICIT_DENY
    )
    assert evaluate([], request("s3:GetObject", "arn:aws:s3:::b/k")).decision is Decision.IMPLICIT_DENY


def test_an_explicit_deny_wins_over_any_allow_in_any_policy() -> None:
    allowing = policy(allow("dynamodb:*", "*"))
    denying = parse_policy(
        {"Statement": {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": TABLE}}, "deny"
    )
    for order in ([allowing, denying], [denying, allowing]):
        evaluation = evaluate(order, request("dynamodb:DeleteItem", TABLE))
        assert evaluation.decision is Decision.EXPLICIT_DENY
        assert evaluation.policy == "deny"
    assert evaluate([allowing, denying], request("dynamodb:GetItem", TABLE)).allowed


def test_not_action_and_not_resource() -> None:
    statements = [{"Effect": "Allow", "NotAction": "dynamodb:Delete*", "Resource": TABLE}]
    assert decide(statements, request("dynamodb:PutItem", TABLE)) is Decision.ALLOWED
    assert decide(statements, request("dynamodb:DeleteItem", TABLE)) is Decision.IMPLICIT_DENY
    statements = [{"Effect": "Allow", "Action": "dynamodb:GetItem", "NotResource": COORDINATION}]
    assert decide(statements, request("dynamodb:GetItem", TABLE)) is Decision.ALLOWED
    assert decide(statements, request("dynamodb:GetItem", COORDINATION)) is Decision.IMPLICIT_DENY


def test_a_deny_with_not_action_denies_everything_else() -> None:
    statements = [allow("*"), {"Effect": "Deny", "NotAction": ["s3:GetObject"], "Resource": "*"}]
    assert decide(statements, request("s3:GetObject", "arn:aws:s3:::b/k")) is Decision.ALLOWED
    assert decide(statements, request("s3:PutObject", "arn:aws:s3:::b/k")) is Decision.EXPLICIT_DENY


# --------------------------------------------------------------------------- conditions


def leading(*values: str) -> Request:
    return request("dynamodb:GetItem", COORDINATION, dynamodb__LeadingKeys=values)


OBJECT_CLAIMS = allow(
    "dynamodb:GetItem",
    COORDINATION,
    Condition={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["object#*"]}},
)


def test_for_all_values_string_like_on_leading_keys() -> None:
    assert decide([OBJECT_CLAIMS], leading("object#b/k#v1")) is Decision.ALLOWED
    assert decide([OBJECT_CLAIMS], leading("object#a", "object#b")) is Decision.ALLOWED
    assert decide([OBJECT_CLAIMS], leading("workflow_counter")) is Decision.IMPLICIT_DENY
    assert decide([OBJECT_CLAIMS], leading("object#a", "workflow_counter")) is Decision.IMPLICIT_DENY


def test_for_all_values_holds_for_an_absent_key_as_in_iam() -> None:
    """IAM's known trap: ForAllValues over no values is true (a Scan names no partition)."""
    scan = request("dynamodb:GetItem", COORDINATION, dynamodb__LeadingKeys=None)
    assert decide([OBJECT_CLAIMS], scan) is Decision.ALLOWED


def test_for_all_values_string_equals_and_for_any_value() -> None:
    semaphore = allow(
        "dynamodb:GetItem",
        COORDINATION,
        Condition={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": "workflow_counter"}},
    )
    assert decide([semaphore], leading("workflow_counter")) is Decision.ALLOWED
    assert decide([semaphore], leading("workflow_counter2")) is Decision.IMPLICIT_DENY
    any_claim = allow(
        "dynamodb:GetItem",
        COORDINATION,
        Condition={"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": "object#*"}},
    )
    assert decide([any_claim], leading("x", "object#1")) is Decision.ALLOWED
    assert decide([any_claim], leading("x")) is Decision.IMPLICIT_DENY
    absent = request("dynamodb:GetItem", COORDINATION, dynamodb__LeadingKeys=None)
    assert decide([any_claim], absent) is Decision.IMPLICIT_DENY


def test_a_plain_operator_on_a_multivalued_key_fails_loudly() -> None:
    statement = allow(
        "dynamodb:GetItem", COORDINATION, Condition={"StringEquals": {"dynamodb:LeadingKeys": "x"}}
    )
    with pytest.raises(IamSandboxError, match="ForAllValues"):
        decide([statement], leading("x"))


def test_string_bool_arn_numeric_and_null_operators() -> None:
    s3 = "arn:aws:s3:::b/k"
    cases: list[tuple[dict[str, Any], dict[str, tuple[str, ...] | None], bool]] = [
        (
            {"StringEquals": {"aws:RequestedRegion": "us-east-1"}},
            {"aws:RequestedRegion": ("us-east-1",)},
            True,
        ),
        (
            {"StringEquals": {"aws:RequestedRegion": ["eu-west-1", "us-east-1"]}},
            {"aws:RequestedRegion": ("us-east-1",)},
            True,
        ),
        (
            {"StringEquals": {"aws:RequestedRegion": "US-EAST-1"}},
            {"aws:RequestedRegion": ("us-east-1",)},
            False,
        ),
        (
            {"StringEqualsIgnoreCase": {"aws:RequestedRegion": "US-EAST-1"}},
            {"aws:RequestedRegion": ("us-east-1",)},
            True,
        ),
        (
            {"StringNotEquals": {"aws:RequestedRegion": ["eu-west-1", "us-east-1"]}},
            {"aws:RequestedRegion": ("us-east-1",)},
            False,
        ),
        (
            {"StringNotEquals": {"aws:RequestedRegion": "eu-west-1"}},
            {"aws:RequestedRegion": ("us-east-1",)},
            True,
        ),
        ({"StringLike": {"s3:prefix": "in/*"}}, {"s3:prefix": ("in/a",)}, True),
        ({"StringNotLike": {"s3:prefix": "in/*"}}, {"s3:prefix": ("in/a",)}, False),
        ({"Bool": {"aws:SecureTransport": "true"}}, {"aws:SecureTransport": ("true",)}, True),
        ({"Bool": {"aws:SecureTransport": False}}, {"aws:SecureTransport": ("true",)}, False),
        (
            {"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/pipeops-*"}},
            {"aws:PrincipalArn": (PRINCIPAL.role_arn,)},
            True,
        ),
        (
            {"ArnEquals": {"aws:PrincipalArn": "arn:aws:iam::*:role/other"}},
            {"aws:PrincipalArn": (PRINCIPAL.role_arn,)},
            False,
        ),
        (
            {"ArnNotLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/other"}},
            {"aws:PrincipalArn": (PRINCIPAL.role_arn,)},
            True,
        ),
        ({"NumericLessThanEquals": {"s3:max-keys": "10"}}, {"s3:max-keys": ("10",)}, True),
        ({"NumericGreaterThan": {"s3:max-keys": 10}}, {"s3:max-keys": ("10",)}, False),
        ({"Null": {"s3:prefix": "true"}}, {"s3:prefix": None}, True),
        ({"Null": {"s3:prefix": "false"}}, {"s3:prefix": None}, False),
        ({"Null": {"s3:prefix": "false"}}, {"s3:prefix": ("x",)}, True),
        # absent keys: a positive operator fails, a negated one holds, IfExists holds
        ({"StringEquals": {"s3:prefix": "x"}}, {"s3:prefix": None}, False),
        ({"StringNotEquals": {"s3:prefix": "x"}}, {"s3:prefix": None}, True),
        ({"StringEqualsIfExists": {"s3:prefix": "x"}}, {"s3:prefix": None}, True),
        ({"StringEqualsIfExists": {"s3:prefix": "x"}}, {"s3:prefix": ("y",)}, False),
        ({"ForAnyValue:StringEqualsIfExists": {"s3:prefix": "x"}}, {"s3:prefix": None}, True),
        ({"ForAnyValue:StringEquals": {"s3:prefix": "x"}}, {"s3:prefix": None}, False),
        # every operator and key must hold
        (
            {"StringEquals": {"aws:RequestedRegion": "us-east-1"}, "Bool": {"aws:SecureTransport": "false"}},
            {"aws:RequestedRegion": ("us-east-1",), "aws:SecureTransport": ("true",)},
            False,
        ),
    ]
    for condition, context, expected in cases:
        decision = decide(
            [allow("s3:GetObject", s3, Condition=condition)], Request("s3:GetObject", s3, context)
        )
        assert (decision is Decision.ALLOWED) is expected, (condition, context)


@pytest.mark.parametrize(
    "operator",
    [
        "DateLessThan",
        "IpAddress",
        "ForAllValues:DateEquals",
        "StringMatches",
        "ForEveryValue:StringLike",
        "BinaryEquals",
    ],
)
def test_an_unknown_condition_operator_fails_closed_and_loudly(operator: str) -> None:
    with pytest.raises(IamSandboxError, match="not modelled"):
        policy(allow("s3:GetObject", Condition={operator: {"aws:RequestedRegion": "x"}}))


def test_a_condition_on_a_key_the_sandbox_does_not_compute_fails_loudly() -> None:
    statement = allow("s3:GetObject", Condition={"StringEquals": {"aws:SourceVpce": "vpce-1"}})
    with pytest.raises(IamSandboxError, match="aws:SourceVpce is not modelled"):
        decide([statement], Request("s3:GetObject", "arn:aws:s3:::b/k", {"aws:RequestedRegion": ("x",)}))
    # ... even in a Deny statement, and even when another statement already allows
    deny = {
        "Effect": "Deny",
        "Action": "s3:*",
        "Resource": "*",
        "Condition": {"Bool": {"aws:MultiFactorAuthPresent": "false"}},
    }
    with pytest.raises(IamSandboxError):
        decide([allow("s3:GetObject"), deny], Request("s3:GetObject", "arn:aws:s3:::b/k", {}))


def test_condition_keys_are_case_insensitive() -> None:
    statement = allow("s3:GetObject", Condition={"StringEquals": {"AWS:requestedregion": "us-east-1"}})
    req = Request("s3:GetObject", "arn:aws:s3:::b/k", {"aws:RequestedRegion": ("us-east-1",)})
    assert decide([statement], req) is Decision.ALLOWED


@pytest.mark.parametrize(
    "statement",
    [
        {"Action": "s3:GetObject", "Resource": "*"},
        {"Effect": "Permit", "Action": "s3:GetObject", "Resource": "*"},
        {"Effect": "Allow", "Resource": "*"},
        {"Effect": "Allow", "Action": "s3:GetObject", "NotAction": "s3:PutObject", "Resource": "*"},
        {"Effect": "Allow", "Action": "s3:GetObject"},
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", "Principal": "*"},
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::${aws:username}/*"},
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "my-bucket"},
        {"Effect": "Allow", "Action": {"a": 1}, "Resource": "*"},
    ],
)
def test_malformed_or_unmodelled_statements_are_refused(statement: dict[str, Any]) -> None:
    with pytest.raises(IamSandboxError):
        parse_policy({"Statement": [statement]})


# --------------------------------------------------------------------------- messages


def test_the_denial_reads_as_aws_writes_it() -> None:
    evaluation = evaluate([], request("dynamodb:DeleteItem", TABLE))
    code, message, status = access_denied(evaluation, PRINCIPAL)
    assert (code, status) == ("AccessDeniedException", 400)
    assert message == (
        f"User: arn:aws:sts::{ACCOUNT}:assumed-role/pipeops-IngestFunctionRole-ABC/pipeops-IngestFunction-XYZ "
        f"is not authorized to perform: dynamodb:DeleteItem on resource: {TABLE} "
        "because no identity-based policy allows the dynamodb:DeleteItem action"
    )
    denying = policy({"Effect": "Deny", "Action": "s3:*", "Resource": "*"})
    code, message, status = access_denied(
        evaluate([denying], request("s3:GetObject", "arn:aws:s3:::b/k")), PRINCIPAL
    )
    assert (code, status) == ("AccessDenied", 403)
    assert message.endswith(
        'on resource: "arn:aws:s3:::b/k" with an explicit deny in an identity-based policy'
    )
    code, message, _ = access_denied(
        evaluate([], request("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q")), PRINCIPAL
    )
    assert code == "AccessDenied" and "perform: sqs:sendmessage on resource" in message


# --------------------------------------------------------------------------- requests


class Facts:
    """Tables keyed as the template declares them; one KMS-encrypted object."""

    partition_keys = {
        (TABLE, None): "job_id",
        (TABLE, "active-jobs"): "active_status",
        (COORDINATION, None): "doc_key",
    }

    def partition_key(self, table_arn: str, index_name: str | None) -> str:
        return self.partition_keys[(table_arn, index_name)]

    def object_kms_key(self, bucket: str, key: str) -> str | None:
        return "arn:aws:kms:us-east-1:123456789012:key/k1" if key == "secret.txt" else None

    def bucket_kms_key(self, bucket: str) -> str | None:
        return "arn:aws:kms:us-east-1:123456789012:key/default" if bucket == "kms-bucket" else None


def asked(service: str, operation: str, **params: Any) -> list[tuple[str, str, Any]]:
    """(action, resource, LeadingKeys or None) of each request for the call."""
    call = ApiCall(service, operation, params, REGION, ACCOUNT)
    return [
        (r.action, r.resource, r.context.get("dynamodb:LeadingKeys"))
        for r in requests_for(call, Facts(), PRINCIPAL)
    ]


def s(value: str) -> dict[str, str]:
    return {"S": value}


def test_dynamodb_item_operations_carry_their_partition_key() -> None:
    key = {"job_id": s("a/"), "started_at": s("t1")}
    for operation in ("GetItem", "UpdateItem", "DeleteItem"):
        assert asked("dynamodb", operation, TableName="tracking", Key=key) == [
            (f"dynamodb:{operation}", TABLE, ("a/",))
        ]
    assert asked("dynamodb", "PutItem", TableName=TABLE, Item={**key, "n": {"N": "1"}}) == [
        ("dynamodb:PutItem", TABLE, ("a/",))
    ]


def test_a_transaction_is_authorized_item_by_item_with_each_items_own_action() -> None:
    items = [
        {"Update": {"TableName": "coordination", "Key": {"doc_key": s("workflow_counter")}}},
        {"Put": {"TableName": "tracking", "Item": {"job_id": s("j"), "started_at": s("t")}}},
        {"ConditionCheck": {"TableName": "tracking", "Key": {"job_id": s("j"), "started_at": s("h")}}},
        {"Delete": {"TableName": "coordination", "Key": {"doc_key": s("object#k")}}},
    ]
    assert asked("dynamodb", "TransactWriteItems", TransactItems=items) == [
        ("dynamodb:UpdateItem", COORDINATION, ("workflow_counter",)),
        ("dynamodb:PutItem", TABLE, ("j",)),
        ("dynamodb:ConditionCheckItem", TABLE, ("j",)),
        ("dynamodb:DeleteItem", COORDINATION, ("object#k",)),
    ]
    assert asked(
        "dynamodb",
        "TransactGetItems",
        TransactItems=[{"Get": {"TableName": "tracking", "Key": {"job_id": s("j")}}}],
    ) == [("dynamodb:GetItem", TABLE, ("j",))]


def test_batches_are_authorized_per_table_with_every_partition() -> None:
    keys = [
        {"job_id": s("a"), "started_at": s("0")},
        {"job_id": s("b"), "started_at": s("0")},
        {"job_id": s("a"), "started_at": s("1")},
    ]
    assert asked("dynamodb", "BatchGetItem", RequestItems={"tracking": {"Keys": keys}}) == [
        ("dynamodb:BatchGetItem", TABLE, ("a", "b"))
    ]
    writes = {
        "coordination": [
            {"PutRequest": {"Item": {"doc_key": s("x")}}},
            {"DeleteRequest": {"Key": {"doc_key": s("y")}}},
        ]
    }
    assert asked("dynamodb", "BatchWriteItem", RequestItems=writes) == [
        ("dynamodb:BatchWriteItem", COORDINATION, ("x", "y"))
    ]


def test_queries_name_the_index_and_the_partition_they_read() -> None:
    assert asked(
        "dynamodb",
        "Query",
        TableName="tracking",
        KeyConditionExpression="job_id = :j AND started_at > :h",
        ExpressionAttributeValues={":j": s("a/"), ":h": s("#")},
    ) == [("dynamodb:Query", TABLE, ("a/",))]
    assert asked(
        "dynamodb",
        "Query",
        TableName="tracking",
        IndexName="active-jobs",
        KeyConditionExpression="(#s = :s) and updated_at BETWEEN :a AND :b",
        ExpressionAttributeNames={"#s": "active_status"},
        ExpressionAttributeValues={":s": s("RUNNING"), ":a": s("0"), ":b": s("1")},
    ) == [("dynamodb:Query", f"{TABLE}/index/active-jobs", ("RUNNING",))]
    assert asked(
        "dynamodb",
        "Query",
        TableName="tracking",
        KeyConditions={"job_id": {"ComparisonOperator": "EQ", "AttributeValueList": [s("z")]}},
    ) == [("dynamodb:Query", TABLE, ("z",))]
    assert asked("dynamodb", "Scan", TableName="tracking", IndexName="active-jobs") == [
        ("dynamodb:Scan", f"{TABLE}/index/active-jobs", None)
    ]
    with pytest.raises(IamSandboxError, match="partition key"):
        asked(
            "dynamodb",
            "Query",
            TableName="tracking",
            KeyConditionExpression="started_at > :h",
            ExpressionAttributeValues={":h": s("x")},
        )


def test_s3_objects_buckets_and_their_kms_keys() -> None:
    obj = "arn:aws:s3:::in/a/b.txt"
    assert asked("s3", "GetObject", Bucket="in", Key="a/b.txt") == [("s3:GetObject", obj, None)]
    assert asked("s3", "HeadObject", Bucket="in", Key="a/b.txt", VersionId="v") == [
        ("s3:GetObjectVersion", obj, None)
    ]
    assert asked("s3", "GetObject", Bucket="in", Key="secret.txt") == [
        ("s3:GetObject", "arn:aws:s3:::in/secret.txt", None),
        ("kms:Decrypt", "arn:aws:kms:us-east-1:123456789012:key/k1", None),
    ]
    assert asked("s3", "PutObject", Bucket="out", Key="k", ServerSideEncryption="AES256") == [
        ("s3:PutObject", "arn:aws:s3:::out/k", None)
    ]
    assert asked(
        "s3", "PutObject", Bucket="out", Key="k", ServerSideEncryption="aws:kms", SSEKMSKeyId="k2"
    ) == [
        ("s3:PutObject", "arn:aws:s3:::out/k", None),
        ("kms:GenerateDataKey", "arn:aws:kms:us-east-1:123456789012:key/k2", None),
    ]
    assert asked("s3", "PutObject", Bucket="kms-bucket", Key="k") == [
        ("s3:PutObject", "arn:aws:s3:::kms-bucket/k", None),
        ("kms:GenerateDataKey", "arn:aws:kms:us-east-1:123456789012:key/default", None),
    ]
    assert asked("s3", "ListObjectsV2", Bucket="in", Prefix="a/") == [
        ("s3:ListBucket", "arn:aws:s3:::in", None)
    ]
    call = ApiCall("s3", "ListObjectsV2", {"Bucket": "in", "Prefix": "a/"}, REGION, ACCOUNT)
    [listing] = requests_for(call, Facts(), PRINCIPAL)
    assert listing.context["s3:prefix"] == ("a/",) and listing.context["s3:delimiter"] is None


def test_queues_state_machines_functions_and_actions_without_resources() -> None:
    url = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/pipeops-MainQueue-1"
    arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:pipeops-MainQueue-1"
    assert asked("sqs", "SendMessage", QueueUrl=url, MessageBody="x") == [("sqs:SendMessage", arn, None)]
    assert asked("sqs", "DeleteMessageBatch", QueueUrl=url, Entries=[]) == [("sqs:DeleteMessage", arn, None)]
    assert (
        queue_arn(ApiCall("sqs", "x", {}, REGION, ACCOUNT), f"http://127.0.0.1:5000/{ACCOUNT}/q")
        == f"arn:aws:sqs:{REGION}:{ACCOUNT}:q"
    )
    machine = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:M"
    execution = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:M:run"
    assert asked("stepfunctions", "StartExecution", stateMachineArn=machine, name="run") == [
        ("states:StartExecution", machine, None)
    ]
    assert asked("stepfunctions", "ListExecutions", stateMachineArn=machine) == [
        ("states:ListExecutions", machine, None)
    ]
    for operation in ("DescribeExecution", "StopExecution", "GetExecutionHistory"):
        assert asked("stepfunctions", operation, executionArn=execution) == [
            (f"states:{operation}", execution, None)
        ]
    assert asked("cloudwatch", "PutMetricData", Namespace="PipeOps", MetricData=[]) == [
        ("cloudwatch:PutMetricData", "*", None)
    ]
    assert asked("comprehend", "DetectPiiEntities", Text="x", LanguageCode="en") == [
        ("comprehend:DetectPiiEntities", "*", None)
    ]
    assert asked("kms", "GenerateDataKey", KeyId="k") == [
        ("kms:GenerateDataKey", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k", None)
    ]
    fn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:detect"
    assert asked("lambda", "Invoke", FunctionName=fn) == [("lambda:InvokeFunction", fn, None)]
    assert asked("lambda", "Invoke", FunctionName="detect", Qualifier="live") == [
        ("lambda:InvokeFunction", f"{fn}:live", None)
    ]
    assert (
        function_arn(ApiCall("lambda", "Invoke", {}, REGION, ACCOUNT), f"{ACCOUNT}:function:detect:7")
        == f"{fn}:7"
    )
    assert asked("sts", "GetCallerIdentity") == []


def test_every_request_carries_the_global_keys() -> None:
    call = ApiCall(
        "sqs",
        "SendMessage",
        {"QueueUrl": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/q"},
        REGION,
        ACCOUNT,
    )
    [req] = requests_for(call, Facts(), PRINCIPAL)
    assert req.value("aws:PrincipalArn") == (PRINCIPAL.role_arn,)
    assert req.value("aws:RequestedRegion") == (REGION,)
    assert req.value("aws:SecureTransport") == ("true",)
    assert req.value("aws:SourceArn") is None


def test_an_operation_the_mapping_does_not_know_fails_closed_naming_it() -> None:
    with pytest.raises(IamSandboxError, match=r"dynamodb:ExecuteStatement .*sandbox/iam\.py"):
        asked("dynamodb", "ExecuteStatement", Statement="SELECT * FROM t")
    with pytest.raises(IamSandboxError, match="states:CreateStateMachine"):
        asked("stepfunctions", "CreateStateMachine", name="x")


def test_the_ingest_policy_of_the_template_against_its_real_calls() -> None:
    """The template's ingest statements, as deployed, decide ingest's calls (and no DeleteItem)."""
    ingest = policy(
        allow(["dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"], TABLE),
        allow(
            ["dynamodb:BatchGetItem", "dynamodb:PutItem"],
            COORDINATION,
            Condition={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["object#*"]}},
        ),
    )

    def decisions(operation: str, **params: Any) -> list[Decision]:
        call = ApiCall("dynamodb", operation, params, REGION, ACCOUNT)
        return [evaluate([ingest], r).decision for r in requests_for(call, Facts(), PRINCIPAL)]

    # One read of the object's claim and its job's head.
    assert decisions(
        "BatchGetItem",
        RequestItems={
            "coordination": {"Keys": [{"doc_key": s("object#in/a.txt#v1")}]},
            "tracking": {"Keys": [{"job_id": s("a/"), "started_at": s("head")}]},
        },
    ) == [Decision.ALLOWED, Decision.ALLOWED]
    assert decisions(
        "BatchGetItem", RequestItems={"coordination": {"Keys": [{"doc_key": s("workflow_counter")}]}}
    ) == [Decision.IMPLICIT_DENY]
    claim = {"Put": {"TableName": "coordination", "Item": {"doc_key": s("object#in/a.txt#v1")}}}
    run = {"Update": {"TableName": "tracking", "Key": {"job_id": s("a/"), "started_at": s("t")}}}
    assert decisions("TransactWriteItems", TransactItems=[run, claim]) == [Decision.ALLOWED, Decision.ALLOWED]
    semaphore = {"Update": {"TableName": "coordination", "Key": {"doc_key": s("workflow_counter")}}}
    assert decisions("TransactWriteItems", TransactItems=[run, semaphore]) == [
        Decision.ALLOWED,
        Decision.IMPLICIT_DENY,
    ]
    assert decisions("DeleteItem", TableName="tracking", Key={"job_id": s("a/"), "started_at": s("t")}) == [
        Decision.IMPLICIT_DENY
    ]
