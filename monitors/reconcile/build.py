"""The one way a `Reconciler` is assembled from its stores, for the scheduled Lambda and for
`pipeops reconcile` alike: the Lambda knows where it reads and writes from its environment, the
CLI from the stack's Outputs; both hand the same `ReconcileTarget` and settings to `build_reconciler`.

The loop itself (monitors.reconcile.loop) sees only the stores' protocols, so that the property
tests run it on in-memory fakes; this module is where the real stores are chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from monitors.reconcile.loop import Reconciler
from pipeline.config import ReconcileSettings
from pipeline.queue import JobQueue
from pipeline.stores.audit import AuditStore
from pipeline.stores.claims import ClaimsStore
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.run_index import RunIndex
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import TrackingStore

Client = Callable[[str], Any]


@dataclass(frozen=True)
class ReconcileTarget:
    """Where the reconciler reads and writes."""

    coordination_table: str  # the semaphore, the object claims, the audit
    tracking_table: str
    state_machine_arn: str
    main_queue_url: str


def build_reconciler(
    client: Client,
    target: ReconcileTarget,
    settings: ReconcileSettings,
    *,
    actor: str,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Reconciler:
    """A reconciler over the real stores; `client(service)` returns a boto3 client (AWS or the sandbox)."""
    dynamodb = client("dynamodb")
    return Reconciler(
        semaphore=Semaphore(target.coordination_table, dynamodb),
        executions=ExecutionsStore(client("stepfunctions"), target.state_machine_arn),
        tracking=TrackingStore(target.tracking_table, dynamodb),
        # The claims live in the coordination table: the reconciler reads them, only ingest writes them.
        claims=ClaimsStore(target.tracking_table, target.coordination_table, dynamodb),
        runs=RunIndex(target.tracking_table, dynamodb),
        send=JobQueue(client("sqs"), target.main_queue_url).send,
        audit=AuditStore(target.coordination_table, dynamodb),
        settings=settings,
        actor=actor,
        clock=clock,
    )
