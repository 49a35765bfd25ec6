"""`pipeops reconcile`: the reconciler run on demand against a stack (AWS or the sandbox), its
history (the audit), and legacy mode for a plain counter.

Builds the same `Reconciler` the scheduled Lambda runs, from the stack's Outputs and the router's
configuration, and turns its report into the result the CLI prints (text or `--json`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from monitors.reconcile import legacy
from monitors.reconcile.build import ReconcileTarget, build_reconciler
from monitors.reconcile.loop import Reconciler, ReconcileReport, reconcile
from pipeline.config import load_reconcile_settings
from pipeline.stores.audit import AuditHistory, AuditStore
from stack.resources import StackResources

Client = Callable[[str], Any]
# A slot younger than the router's timeout plus this may still be in a router's hands.
GRACE_MARGIN_SECONDS = 60


def build(resources: StackResources, client: Client, *, grace_seconds: float | None = None) -> Reconciler:
    """The scheduled Lambda's reconciler, for a stack seen from outside: its settings from the
    router's configuration, its tables from the stack's Outputs."""
    router = client("lambda").get_function_configuration(FunctionName=resources.RouterFunctionName)
    variables = (router.get("Environment") or {}).get("Variables", {})
    # The router's variables give the stack's slots and mode; the reconciler's own keep their defaults.
    settings = load_reconcile_settings(
        variables,
        grace_seconds=float(grace_seconds if grace_seconds is not None else int(router.get("Timeout", 60)) + GRACE_MARGIN_SECONDS),
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


# At most this many repairs are listed (a window holding more says so: narrow --since).
HISTORY_LIMIT = 100


def history(client: Client, resources: StackResources, since: datetime) -> AuditHistory:
    """The repairs written since `since`, newest first (pipeline.stores.audit reads them)."""
    return AuditStore(resources.CoordinationTableName, client("dynamodb")).history(since, HISTORY_LIMIT)


@dataclass(frozen=True)
class LegacyResult:
    """One legacy-mode run: the sample kept from the last run, this one, the verdict, the write."""

    previous: legacy.LegacySample | None
    current: legacy.LegacySample
    decision: legacy.LegacyDecision
    applied: bool | None  # None: nothing was written (a dry run, or no repair decided)

    @property
    def unresolved(self) -> bool:
        """The counter may still be wrong: waiting for a confirming run, changing, or a lost race."""
        verdict = self.decision.verdict
        return verdict in ("remember", "changing") or (verdict == "repair" and not self.applied)

    def to_dict(self) -> Mapping[str, Any]:
        return legacy.to_dict(self.previous, self.current, self.decision, self.applied)


def run_legacy(
    client: Client,
    counter: legacy.LegacyCounter,
    state_machine_arn: str,
    state_file: Path,
    *,
    grace_seconds: float,
    apply: bool,
) -> LegacyResult:
    """Sample the plain counter and the running executions, decide against the previous sample (kept
    in `state_file` between runs), repair when two agree and `apply`, and keep this sample."""
    previous = legacy.load_sample(state_file)
    dynamodb = client("dynamodb")
    current = legacy.sample(dynamodb, client("stepfunctions"), counter, state_machine_arn, datetime.now(UTC))
    decision = legacy.decide(previous, current, grace_seconds)
    applied = legacy.repair(dynamodb, counter, decision) if apply and decision.verdict == "repair" else None
    legacy.save_sample(state_file, current)
    return LegacyResult(previous, current, decision, applied)
