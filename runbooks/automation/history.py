"""The runbook actions applied (redrives, replays, quarantines, re-runs): the `runbook` stream of
the coordination table's audit, apart from the reconciler's repairs (`pipeops reconcile --history`)."""

from __future__ import annotations

from datetime import datetime

from pipeline.stores.audit import AuditHistory, AuditStore, AuditStream
from runbooks.automation.remedy_request import Clients
from stack.resources import StackResources

HISTORY_LIMIT = 100  # records listed; a window holding more says so (narrow --since)


def runbook_history(resources: StackResources, clients: Clients, since: datetime, limit: int = HISTORY_LIMIT) -> AuditHistory:
    """The runbook actions written since `since`, newest first."""
    return AuditStore(resources.CoordinationTableName, clients.client("dynamodb"), AuditStream.RUNBOOK).history(since, limit)
