"""`pipeops reconcile`: the reconciler run on demand against a stack (AWS or the sandbox).

Builds the same `Reconciler` the scheduled Lambda runs, from the stack's Outputs and the router's
configuration, and turns its report into the result the CLI prints (text or `--json`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from monitors.reconcile.loop import Reconciler, ReconcileReport, reconcile
from pipeline.config import load_reconcile_settings
from pipeline.queue import JobQueue
from pipeline.stores.audit import AuditStore
from pipeline.stores.claims import ClaimsStore
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.run_index import RunIndex
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import TrackingStore
from stack.resources import StackResources

Client = Callable[[str], Any]
# A slot younger than the router's timeout plus this may still be in a router's hands.
GRACE_MARGIN_SECONDS = 60


def build(resources: StackResources, client: Client, *, grace_seconds: float | None = None) -> Reconciler:
    lambda_client = client("lambda")
    router = lambda_client.get_function_configuration(FunctionName=resources.RouterFunctionName)
    variables = (router.get("Environment") or {}).get("Variables", {})
    dynamodb = client("dynamodb")
    # The router's variables give the stack's slots and mode; the reconciler's own keep their defaults.
    settings = load_reconcile_settings(
        variables,
        grace_seconds=float(grace_seconds if grace_seconds is not None else int(router.get("Timeout", 60)) + GRACE_MARGIN_SECONDS),
    )
    return Reconciler(
        semaphore=Semaphore(resources.CoordinationTableName, dynamodb),
        executions=ExecutionsStore(client("stepfunctions"), resources.StateMachineArn),
        tracking=TrackingStore(resources.TrackingTableName, dynamodb),
        claims=ClaimsStore(resources.TrackingTableName, resources.CoordinationTableName, dynamodb),
        runs=RunIndex(resources.TrackingTableName, dynamodb),
        send=JobQueue(client("sqs"), resources.MainQueueUrl).send,
        audit=AuditStore(resources.CoordinationTableName, dynamodb),
        settings=settings,
        actor=_caller(client),
        clock=lambda: datetime.now(UTC),
    )


def _caller(client: Client) -> str:
    """Who applies the repairs, for the audit record: the CLI user's ARN."""
    try:
        return str(client("sts").get_caller_identity()["Arn"])
    except Exception:
        return "unknown (sts:GetCallerIdentity failed)"


def run(
    resources: StackResources,
    client: Client,
    *,
    apply: bool,
    grace_seconds: float | None = None,
    release: tuple[str, ...] = (),
) -> ReconcileReport:
    """One pass of the plan, or of the operator's override when `release` names holders."""
    return reconcile(build(resources, client, grace_seconds=grace_seconds), apply=apply, release=release)
