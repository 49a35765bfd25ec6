"""`pipeops reconcile --history` and the repairs in `status`: the audit read back.

Pure parts (what changed, who) without AWS; the read on moto, with the sparse index (a Query) and
on a table without it (the Scan it falls back to); then the whole loop on a sandbox: a repair by
a person and one by the scheduled Lambda, listed newest first, and `status` exiting 1 while it
shows something that pages.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from monitors.reconcile.model import FindingKind
from pipeline.jobs import format_timestamp
from pipeline.stores.audit import (
    AUDIT_INDEX,
    AUDIT_PREFIX,
    AUDIT_STREAM,
    AUDIT_STREAM_ATTRIBUTE,
    AuditStore,
    actor_kind,
    changes,
)
from pipeops.cli import app
from tests.conftest import envelope

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_what_a_repair_changed_is_read_from_what_it_observed_and_wrote() -> None:
    assert changes({"version": 7, "active_count": 10}, {"active_count": 0}) == ["active_count: 10 -> 0", "version was 7"]
    assert changes({}, {"error": "lost"}) == ["error = lost"]


@pytest.mark.parametrize(
    ("by", "kind"),
    [
        ("arn:aws:lambda:us-east-1:123456789012:function:pipeops-Reconciler", "scheduled"),
        ("reconciler", "scheduled"),
        ("arn:aws:sts::123456789012:assumed-role/OnCall/ann", "person"),
        ("arn:aws:iam::123456789012:user/ann", "person"),
        ("unknown (sts:GetCallerIdentity failed)", "unknown"),
    ],
)
def test_who_repaired_is_the_scheduled_lambda_or_a_person(by: str, kind: str) -> None:
    assert actor_kind(by) == kind


def audit_item(at: datetime, target: str, *, indexed: bool = True) -> dict[str, Any]:
    item = {
        "doc_key": {"S": f"{AUDIT_PREFIX}{format_timestamp(at)}#{target}"},
        "action": {"S": "release_holder"},
        "target": {"S": target},
        "reason": {"S": "its execution ended FAILED"},
        "before": {"S": json.dumps({"acquired_at": "2026-03-01T10:00:00.000000Z"})},
        "after": {"S": "{}"},
        "at": {"S": format_timestamp(at)},
        "by": {"S": "arn:aws:iam::123456789012:user/ann"},
    }
    if indexed:
        item[AUDIT_STREAM_ATTRIBUTE] = {"S": AUDIT_STREAM}
    return item


def coordination_table(dynamodb: Any, *, with_index: bool) -> str:
    """The coordination table as the template declares it, or as a stack deployed before its index."""
    from tests.conftest import _table_definitions

    spec: dict[str, Any] = {"TableName": "coordination", **_table_definitions()["CoordinationTable"]}
    assert AUDIT_INDEX in [index["IndexName"] for index in spec["GlobalSecondaryIndexes"]]
    if not with_index:  # a stack deployed before any of its indexes
        spec.pop("GlobalSecondaryIndexes")
        spec["AttributeDefinitions"] = [{"AttributeName": "doc_key", "AttributeType": "S"}]
    dynamodb.create_table(**spec)
    for minutes, target in ((50, "old"), (20, "a"), (10, "b"), (5, "c")):
        dynamodb.put_item(TableName="coordination", Item=audit_item(NOW - timedelta(minutes=minutes), target))
    for index in range(CLAIMS):  # what else the table holds: the semaphore, object claims
        dynamodb.put_item(TableName="coordination", Item={"doc_key": {"S": f"object#bucket/file-{index}.txt"}})
    return "coordination"


CLAIMS = 30


@pytest.mark.parametrize(("with_index", "method"), [(True, "query"), (False, "scan")])
def test_the_newest_repairs_of_a_window_are_read_newest_first(aws: None, with_index: bool, method: str) -> None:
    dynamodb = boto3.client("dynamodb")
    table = coordination_table(dynamodb, with_index=with_index)
    window = AuditStore(table, dynamodb).history(NOW - timedelta(minutes=30))
    assert [r.target for r in window.records] == ["c", "b", "a"]
    assert (window.method, window.truncated) == (method, False)
    # The index reads the window's records only; a scan reads every item of the table.
    assert window.items_read == (3 if with_index else 4 + CLAIMS)
    capped = AuditStore(table, dynamodb).history(NOW - timedelta(minutes=30), limit=2)
    assert [r.target for r in capped.records] == ["c", "b"] and capped.truncated
    assert capped.items_read == (3 if with_index else 4 + CLAIMS)  # the index: one past the limit says "more"
    assert AuditStore(table, dynamodb).history(NOW).records == []
    [record] = AuditStore(table, dynamodb).history(NOW - timedelta(minutes=6)).to_dict()["records"]
    assert record["changes"] == ["acquired_at was 2026-03-01T10:00:00.000000Z"] and record["by_kind"] == "person"
    if not with_index:  # `status` never scans: nothing rather than the whole table
        assert AuditStore(table, dynamodb).history(NOW - timedelta(hours=1), scan_without_index=False).method == "unavailable"


def test_history_lists_repairs_by_a_person_and_by_the_scheduled_lambda(make_sandbox: Any) -> None:
    sandbox = make_sandbox(ReconcileApply="false")  # the scheduled runs only report: we invoke one that applies
    runner = CliRunner()

    def status() -> tuple[int, dict[str, Any]]:
        result = runner.invoke(app, ["status", "--json"])
        return result.exit_code, envelope(result.output, "status")

    def set_count(count: int) -> None:
        sandbox.client("dynamodb").update_item(
            TableName=sandbox.outputs["CoordinationTableName"],
            Key={"doc_key": {"S": "workflow_counter"}},
            UpdateExpression="SET active_count = :n ADD version :one",
            ExpressionAttributeValues={":n": {"N": str(count)}, ":one": {"N": "1"}},
        )

    code, healthy = status()
    assert code == (1 if healthy["pages"] else 0) and healthy["reconciler"]["recent_repairs"] == []

    set_count(10)
    code, drifted = status()
    assert code == 1 and "count_mismatch: semaphore" in drifted["pages"]
    assert runner.invoke(app, ["reconcile", "--apply"]).exit_code == 0  # a person repairs it
    set_count(7)
    invoked = sandbox.client("lambda").invoke(
        FunctionName=sandbox.outputs["ReconcilerFunctionName"], Payload=json.dumps({"dry_run": False}).encode()
    )
    assert "FunctionError" not in invoked, invoked["Payload"].read()

    listed = runner.invoke(app, ["reconcile", "--history", "--since", "1h", "--json"])
    assert listed.exit_code == 0, listed.output
    history = envelope(listed.output, "reconcile_history")
    assert history["method"] == "query" and not history["truncated"]
    scheduled, person = history["records"]  # newest first
    assert (scheduled["action"], scheduled["target"], scheduled["by_kind"]) == ("set_count", "semaphore", "scheduled")
    assert scheduled["by"].endswith(sandbox.outputs["ReconcilerFunctionName"])
    assert scheduled["changes"][0] == "active_count: 7 -> 0" and person["changes"][0] == "active_count: 10 -> 0"
    assert person["by_kind"] == "person" and person["at"] < scheduled["at"]
    assert person["before"]["active_count"] == 10 and person["after"] == {"active_count": 0}

    text = " ".join(runner.invoke(app, ["reconcile", "--history"]).output.split())
    assert "2 repair(s)" in text and "set_count" in text and "scheduled" in text  # cells wrap at 80 columns

    code, repaired = status()
    assert code == (1 if repaired["pages"] else 0) and not any(f["name"] in set(FindingKind) for f in repaired["findings"])
    assert [r["by_kind"] for r in repaired["reconciler"]["recent_repairs"]] == ["scheduled", "person"]
    assert "repair " in runner.invoke(app, ["status"]).output

    sandbox.client("sqs").send_message(QueueUrl=sandbox.outputs["DeadLetterQueueUrl"], MessageBody="{}")
    code, paged = status()
    # The queue itself, or its alarm once the sandbox's engine has seen it (on a loaded machine it may
    # have by now): one finding either way, never both.
    dlq = [page for page in paged["pages"] if page.startswith("DlqNotEmpty: ")]
    assert code == 1 and dlq in (["DlqNotEmpty: DeadLetterQueue"], ["DlqNotEmpty: pipeops-DlqNotEmpty"]), paged["pages"]

    refused = runner.invoke(app, ["reconcile", "--history", "--apply"])
    assert refused.exit_code == 2 and "--history only reads the audit" in refused.stderr
