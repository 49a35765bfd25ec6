"""`pipeops reconcile`: the reconciler run on demand against a stack (AWS or the sandbox).

Builds the same `Reconciler` the scheduled Lambda runs, from the stack's Outputs and the router's
configuration, and turns its report into the result the CLI prints (text or `--json`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from monitors.reconcile.loop import Reconciler, ReconcileReport, ReconcileTarget, build_reconciler, reconcile
from monitors.reconcile.model import ReconcileSettings
from pipeops.resources import StackResources

Client = Callable[[str], Any]
# A slot younger than the router's timeout plus this may still be in a router's hands.
GRACE_MARGIN_SECONDS = 60


def build(resources: StackResources, client: Client, *, grace_seconds: float | None = None, max_repairs: int = 25) -> Reconciler:
    """The scheduled Lambda's reconciler, for a stack seen from outside: its settings from the
    router's configuration, its tables from the stack's Outputs."""
    router = client("lambda").get_function_configuration(FunctionName=resources.RouterFunctionName)
    variables = (router.get("Environment") or {}).get("Variables", {})
    settings = ReconcileSettings(
        max_slots=int(variables.get("MAX_CONCURRENT_WORKFLOWS", 10)),
        grace_seconds=float(grace_seconds if grace_seconds is not None else int(router.get("Timeout", 60)) + GRACE_MARGIN_SECONDS),
        max_repairs=max_repairs,
        processing_mode=variables.get("PROCESSING_MODE", "realtime"),
    )
    target = ReconcileTarget(
        coordination_table=resources.CoordinationTableName,
        tracking_table=resources.TrackingTableName,
        state_machine_arn=resources.StateMachineArn,
        main_queue_url=resources.MainQueueUrl,
    )
    return build_reconciler(client, target, settings, actor=_caller(client))


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
