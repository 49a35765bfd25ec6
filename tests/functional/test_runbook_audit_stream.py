"""Runbook actions keep their own audit stream in the coordination table (pipeline.stores.audit):
`pipeops reconcile --history` lists the reconciler's repairs only, `pipeops runbook history` the
runbook actions only; each record is written once, however often the same write is made."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pipeline.stores.audit import AuditStore, AuditStream, _scan, audit_prefix
from tests.conftest import Resources

AT = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def record(store: AuditStore, action: str, target: str, at: datetime = AT) -> None:
    store.record(action=action, target=target, reason="why", before={"n": 1}, after={"n": 0}, by="arn:aws:iam::1:user/op", at=at)


def audit_items(resources: Resources) -> list[dict[str, Any]]:
    items = resources.client("dynamodb").scan(TableName=resources.coordination_table)["Items"]
    return [item for item in items if item["doc_key"]["S"].startswith("audit#")]


def test_the_two_streams_do_not_mix(resources: Resources) -> None:
    ddb = resources.client("dynamodb")
    reconcile = AuditStore(resources.coordination_table, ddb)
    runbook = AuditStore(resources.coordination_table, ddb, AuditStream.RUNBOOK)
    record(reconcile, "release_holder", "ghost")
    record(runbook, "redrive", "job@1")
    record(runbook, "rerun_run", "job@2", AT + timedelta(seconds=1))

    since = AT - timedelta(hours=1)
    assert [r.action for r in reconcile.history(since).records] == ["release_holder"]
    assert [(r.action, r.target) for r in runbook.history(since).records] == [("rerun_run", "job@2"), ("redrive", "job@1")]
    assert runbook.history(since).method == "query"
    keys = sorted(item["doc_key"]["S"] for item in audit_items(resources))
    assert [key.startswith(audit_prefix(AuditStream.RUNBOOK)) for key in keys] == [False, True, True]
    # A table without the index: the scan fallback keeps the streams apart too (by key prefix).
    scanned = _scan(ddb, resources.coordination_table, since, 50, AuditStream.RUNBOOK)
    assert [r.action for r in scanned.records] == ["rerun_run", "redrive"] and scanned.method == "scan"


def test_the_same_record_written_twice_is_one_item_and_a_different_one_is_another(resources: Resources) -> None:
    runbook = AuditStore(resources.coordination_table, resources.client("dynamodb"), AuditStream.RUNBOOK)
    record(runbook, "redrive", "job@1")
    record(runbook, "redrive", "job@1")  # a retried write: its key is taken, nothing changes
    assert len(audit_items(resources)) == 1
    record(runbook, "redrive", "job@2")  # same instant, another target: its own item
    assert len(audit_items(resources)) == 2


def test_the_runbook_history_command_lists_the_runbook_stream(resources: Resources) -> None:
    from runbooks.automation.history import runbook_history
    from stack.resources import StackResources

    ddb = resources.client("dynamodb")
    record(AuditStore(resources.coordination_table, ddb), "set_count", "workflow_counter", datetime.now(UTC))
    record(AuditStore(resources.coordination_table, ddb, AuditStream.RUNBOOK), "quarantine", "job@1", datetime.now(UTC))
    stack = StackResources("pipeops", "", "", resources.tracking_table, resources.coordination_table, "", "", "", "")
    found = runbook_history(stack, resources, datetime.now(UTC) - timedelta(days=7))
    assert [r.action for r in found.records] == ["quarantine"]
