"""The example pipeline's processor: the plain counter of the seed design, as that design has it.

Per message: take a slot (`ADD active_count :inc` if `active_count < :max`), then StartExecution; a
refused start gives the slot back. No holders: a processor that dies between the increment and the
start leaks the slot, and nothing in this pipeline ever finds it (the sidecar does). A message that
finds no slot is reported as a batch item failure and comes back after the visibility timeout.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import boto3
from botocore.exceptions import ClientError

KEY = {"counter_id": {"S": "workflow_counter"}}


def take_slot(dynamodb: Any, table: str, maximum: int) -> bool:
    try:
        dynamodb.update_item(
            TableName=table,
            Key=KEY,
            UpdateExpression="ADD active_count :inc",
            ConditionExpression="attribute_not_exists(active_count) OR active_count < :max",
            ExpressionAttributeValues={":inc": {"N": "1"}, ":max": {"N": str(maximum)}},
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    return True


def give_back(dynamodb: Any, table: str) -> None:
    dynamodb.update_item(TableName=table, Key=KEY, UpdateExpression="ADD active_count :dec", ExpressionAttributeValues={":dec": {"N": "-1"}})


def execution_name(document: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", document)[:80]


def handler(event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    dynamodb, sfn = boto3.client("dynamodb"), boto3.client("stepfunctions")
    table, maximum = os.environ["TABLE_NAME"], int(os.environ["MAX_CONCURRENT"])
    failures = []
    for record in event.get("Records", []):
        document = str(json.loads(record["body"])["document"])
        if not take_slot(dynamodb, table, maximum):
            failures.append({"itemIdentifier": record["messageId"]})
            continue
        try:
            sfn.start_execution(
                stateMachineArn=os.environ["STATE_MACHINE_ARN"], name=execution_name(document), input=json.dumps({"document": document})
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ExecutionAlreadyExists":  # a redelivery: it runs already
                give_back(dynamodb, table)
                continue
            give_back(dynamodb, table)  # decrement on failure
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
