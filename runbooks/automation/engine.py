"""One runbook run: diagnose -> plan -> apply -> verify, as one library call.

`run_runbook` is what `pipeops runbook run` and an Automation document call. A runbook with no
automation yet answers with an error result that points at its page. The DLQ redrives
(`dlq-messages`, `ingest-dlq`, `tracker-dlq`) are here; the others run from runbooks.automation.remedies.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from pipeline.stores.audit import AuditStore, AuditStream
from pipeline.stores.tracking import TrackingStore
from runbooks.automation.alert_delivery import run_alert_delivery
from runbooks.automation.dead_letters import DLQ_OF_RUNBOOK
from runbooks.automation.pacing import Pacer
from runbooks.automation.redrive import DlqEndpoints, DlqRedrive, error_code, verify_queues
from runbooks.automation.redrive_plan import plan_redrive, use_move_task
from runbooks.automation.remedies import DIAGNOSE_ONLY, RECONCILER, REMEDIES, RERUNS, run_remedy
from runbooks.automation.remedy_request import Clients, RemedyRequest, Selection, caller_arn
from runbooks.automation.result import ActionOutcome, ActionResult, RunbookResult, Verdict
from runbooks.catalog import Runbook, parse
from stack.resources import StackResources

DEFAULT_RATE = 10.0  # messages a second sent, replayed or quarantined by one run
# The runbooks that change something when applied, in catalog order: the DLQ redrives and every
# remedy but the diagnose-only ones (each gets an SSM Automation document: alarms/automation.py).
ACTING_RUNBOOKS: tuple[Runbook, ...] = tuple(
    runbook for runbook in Runbook if runbook in DLQ_OF_RUNBOOK or (runbook in REMEDIES and runbook not in DIAGNOSE_ONLY)
)


def selections(runbook: Runbook) -> tuple[Selection, ...]:
    """What an operator may pick for one run of `runbook` (its document's parameters, its
    function event's fields): the DLQ groups of a redrive, the holders of implausible-drift (it
    never applies without them), the runs of a re-run, the grace of a reconciler runbook."""
    if runbook in DLQ_OF_RUNBOOK:
        return (Selection.GROUPS,)
    if runbook is Runbook.IMPLAUSIBLE_DRIFT:
        return (Selection.HOLDERS, Selection.GRACE_SECONDS)
    if runbook in RECONCILER:
        return (Selection.GRACE_SECONDS,)
    if runbook in RERUNS:
        return (Selection.RUNS,)
    return ()


def utc_now() -> datetime:
    return datetime.now(UTC)


def run_runbook(
    runbook_id: str | Runbook,
    resources: StackResources,
    clients: Clients,
    *,
    apply: bool,
    groups: Collection[str] | None = None,
    rate: float = DEFAULT_RATE,
    actor: str | None = None,
    clock: Callable[[], datetime] = utc_now,
    options: Mapping[str, Any] | None = None,
) -> RunbookResult:
    """Run one runbook: a dry run unless `apply`; `groups` selects the DLQ groups to act on (None:
    all), or another runbook's selection (runbooks.automation.remedies), which `options` may name.
    Never raises for an AWS error: the result's verdict is `error` (exit 2)."""
    runbook = parse(runbook_id) if isinstance(runbook_id, str) else runbook_id
    if runbook is Runbook.ALERT_DELIVERY:  # diagnose only: `apply` changes nothing
        return run_alert_delivery(resources, clients)
    if (remedied := run_remedy(RemedyRequest(runbook, resources, clients, apply, actor or "", clock, groups, options or {}))) is not None:
        return remedied
    kind = DLQ_OF_RUNBOOK.get(runbook)
    if kind is None:
        return RunbookResult(
            runbook.value, {}, [], [], Verdict.ERROR, error=f"no automation for {runbook.value} yet: follow runbooks/{runbook.value}.md"
        )
    try:
        redrive = DlqRedrive(
            endpoints=DlqEndpoints.of(kind, resources),
            sqs=clients.client("sqs"),
            lambda_client=clients.client("lambda"),
            audit=AuditStore(resources.CoordinationTableName, clients.client("dynamodb"), AuditStream.RUNBOOK),
            tracking=TrackingStore(resources.TrackingTableName, clients.client("dynamodb")),
            actor=actor or caller_arn(clients),
            clock=clock,
            pacer=Pacer(rate),
        )
        return run_redrive(runbook, redrive, apply=apply, groups=groups)
    except (ClientError, BotoCoreError, LookupError) as exc:  # reported, never a traceback
        detail = error_code(exc) or type(exc).__name__
        return RunbookResult(runbook.value, {}, [], [], Verdict.ERROR, error=f"{detail}: {str(exc)[:300]}")


def run_redrive(runbook: Runbook, redrive: DlqRedrive, *, apply: bool, groups: Collection[str] | None = None) -> RunbookResult:
    diagnosis = redrive.diagnose()
    kind = redrive.endpoints.kind
    plan = plan_redrive(kind, diagnosis.groups, groups)
    evidence = diagnosis.evidence(redrive.endpoints)
    if groups is not None:
        evidence["unknown_groups"] = sorted(set(groups) - {group.id for group in diagnosis.groups})
    if not apply or not plan:
        redrive.release(diagnosis.letters)
        verdict = Verdict.ABSENT if diagnosis.absent else Verdict.REMAINS
        skipped = [ActionOutcome(action, ActionResult.SKIPPED) for action in plan]
        return RunbookResult(runbook.value, evidence, plan, skipped, verdict)
    move = use_move_task(kind, diagnosis.groups, plan, bool(diagnosis.move_task.get("available")))
    if move and diagnosis.move_task.get("running"):
        redrive.release(diagnosis.letters)
        raced = [ActionOutcome(a, ActionResult.RACE_LOST, {"running": list(diagnosis.move_task["running"])}) for a in plan]
        return RunbookResult(runbook.value, evidence, plan, raced, Verdict.REMAINS, redrive.verify(), applied=True)
    outcomes = redrive.apply(diagnosis, plan, move_task=move)
    verified = redrive.verify()
    verdict = Verdict.CLEARED if verified["remaining"] == 0 else Verdict.REMAINS
    return RunbookResult(runbook.value, evidence, plan, outcomes, verdict, verified, applied=True)


def with_verified(result: RunbookResult, verified: Mapping[str, Any]) -> RunbookResult:
    """A redrive's result with the DLQ read again: cleared when nothing remains. Pure."""
    verdict = Verdict.CLEARED if verified["remaining"] == 0 else Verdict.REMAINS
    return replace(result, verified=dict(verified), verdict=verdict)


def reverify(result: RunbookResult, resources: StackResources, clients: Clients) -> RunbookResult:
    """A redrive's verdict once its SQS move task has ended (the caller waited for it: see
    pipeops.move_watch): the verdict the run returned said "remains" while SQS was still moving."""
    kind = DLQ_OF_RUNBOOK.get(parse(result.id))
    if kind is None or result.verdict is Verdict.ERROR or not result.applied:
        return result
    return with_verified(result, verify_queues(clients.client("sqs"), DlqEndpoints.of(kind, resources)))
