"""The sidecar's scheduled reconciler: legacy mode on a plain counter of a pipeline we did not build.

Configured by environment variables only (`pipeops sidecar build` writes them into the sidecar's
template), so that it ships like the stack's own reconciler (pipeline/ and monitors/reconcile/).
Each run: read the counter item and the running executions of every watched state machine
(`legacy.sample`), decide against the previous sample kept in the sidecar's own table
(`legacy.decide`: two agreeing observations a grace window apart), write the repair conditional on
the count seen twice, audit it, keep this sample, and emit the reconciler's metrics so that the same
alarms as the stack's (CounterDrift, SlotsFullIdle, BacklogStalled, ImplausibleDrift,
ReconcilerSilent) watch it.

A blind observer is not a healthy one: a counter item that is missing (a wrong key), a count that is
no number, or a table or state machine that does not exist is reported as `implausible_drift` (an
alarm that pages) with one line naming it, and nothing is written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from monitors.reconcile import legacy
from pipeline.aws import client, error_code
from pipeline.stores.audit import AuditStore
from pipeline.stores.executions import ExecutionsStore
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented

SAMPLE_KEY = "legacy#sample"  # the previous observation, in the sidecar's own table
# The errors that mean "the description names something that is not there" (or not reachable).
BLIND_ERRORS = frozenset(
    {"ResourceNotFoundException", "StateMachineDoesNotExist", "AccessDeniedException", "AccessDenied", "InvalidArn",
     "ResourceNotFound", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}
)  # fmt: skip


class MaxUnreadable(LookupError):
    """The function named for the max has no such whole-number variable."""


@dataclass(frozen=True)
class SidecarTarget:
    """What the sidecar watches and where it keeps its own state, from its environment."""

    sidecar_table: str
    counter: legacy.LegacyCounter
    state_machine_arns: tuple[str, ...]
    main_queue_name: str
    max_fixed: int | None  # the max, or where to read it:
    max_function: str | None
    max_variable: str | None
    grace_seconds: float
    apply: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SidecarTarget:
        fixed = env.get("MAX_CONCURRENT", "")
        return cls(
            sidecar_table=env["SIDECAR_TABLE"],
            counter=legacy.LegacyCounter(env["COUNTER_TABLE"], env["COUNTER_KEY_NAME"], env["COUNTER_KEY_VALUE"], env["COUNTER_ATTRIBUTE"]),
            state_machine_arns=tuple(arn for arn in env["STATE_MACHINE_ARNS"].split(",") if arn),
            main_queue_name=env["MAIN_QUEUE_NAME"],
            max_fixed=int(fixed) if fixed else None,
            max_function=env.get("MAX_FUNCTION") or None,
            max_variable=env.get("MAX_VARIABLE") or None,
            grace_seconds=float(env.get("RECONCILE_GRACE_SECONDS", "120")),
            apply=env.get("RECONCILE_APPLY", "true").lower() == "true",
        )


@dataclass(frozen=True)
class Observation:
    """One look: the counter sample (count and running summed over the state machines), the max, the queue."""

    sample: legacy.LegacySample
    max_slots: int
    waiting: int  # messages visible in the main queue
    item_found: bool


@dataclass(frozen=True)
class Signals:
    slots_full_idle: bool
    backlog_stalled: bool
    implausible: str  # why the observation cannot be trusted; "" when it can


def signals(previous: legacy.LegacySample | None, previous_waiting: int | None, now: Observation) -> Signals:
    """Pure: the conditions the alarms watch, from this observation and the previous one."""
    current = now.sample
    implausible = ""
    if not now.item_found:
        implausible = "no counter item under its key (a wrong key name or value?)"
    full_idle = current.count >= now.max_slots and current.running == 0
    stalled = (
        now.waiting > 0
        and current.running == 0
        and previous is not None
        and previous.running == 0
        and (previous_waiting or 0) > 0
    )
    return Signals(full_idle, stalled, implausible)


def _max_slots(target: SidecarTarget) -> int:
    if target.max_fixed is not None:
        return target.max_fixed
    assert target.max_function and target.max_variable
    config = client("lambda").get_function_configuration(FunctionName=target.max_function)
    value = (config.get("Environment") or {}).get("Variables", {}).get(target.max_variable)
    if value is None or not str(value).strip().isdigit():
        raise MaxUnreadable(f"{target.max_function} has no whole-number environment variable {target.max_variable}")
    return int(value)


def observe(target: SidecarTarget, now: datetime) -> Observation:
    """Read the counter item first, then the executions (as legacy.sample), then the max and the queue."""
    dynamodb, sfn = client("dynamodb"), client("stepfunctions")
    key = target.counter.key
    item = dynamodb.get_item(TableName=target.counter.table, Key=key, ConsistentRead=True).get("Item")
    count_value = (item or {}).get(target.counter.count_attribute, {}).get("N", "0")
    running = sum(sum(1 for _ in ExecutionsStore(sfn, arn).running()) for arn in target.state_machine_arns)
    sample = legacy.LegacySample(now.isoformat(), int(count_value), json.dumps(item or {}, sort_keys=True), running)
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=target.main_queue_name)["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    return Observation(sample, _max_slots(target), int(attributes.get("ApproximateNumberOfMessages", 0)), item is not None)


def _load_previous(target: SidecarTarget) -> tuple[legacy.LegacySample | None, int | None]:
    item = client("dynamodb").get_item(TableName=target.sidecar_table, Key={"doc_key": {"S": SAMPLE_KEY}}, ConsistentRead=True).get("Item")
    if not item:
        return None, None
    stored = json.loads(item["sample"]["S"])
    return legacy.LegacySample(**stored["sample"]), int(stored["waiting"])


def _save(target: SidecarTarget, previous: legacy.LegacySample | None, now: Observation) -> None:
    body = json.dumps({"sample": asdict(legacy.kept(previous, now.sample)), "waiting": now.waiting})
    client("dynamodb").put_item(TableName=target.sidecar_table, Item={"doc_key": {"S": SAMPLE_KEY}, "sample": {"S": body}})


def run(target: SidecarTarget, *, apply: bool, actor: str, now: datetime) -> dict[str, Any]:
    """One pass: observe, decide, repair (conditional, audited) when two observations agree."""
    previous, previous_waiting = _load_previous(target)
    seen = observe(target, now)
    flags = signals(previous, previous_waiting, seen)
    decision = legacy.decide(previous, seen.sample, target.grace_seconds)
    if flags.implausible and decision.verdict == "repair":
        decision = legacy.LegacyDecision("held_back", f"implausible_drift: {flags.implausible}")
    applied = None
    if apply and decision.verdict == "repair":
        applied = legacy.repair(client("dynamodb"), target.counter, decision)
        if applied:
            AuditStore(target.sidecar_table, client("dynamodb")).record(
                action="set_count", target=f"{target.counter.table}/{target.counter.key_value}", reason=decision.reason,
                before={"active_count": seen.sample.count, "running": seen.sample.running},
                after={"active_count": decision.set_to}, by=actor, at=now,
            )  # fmt: skip
    _save(target, None if applied else previous, seen)
    result = dict(legacy.to_dict(previous, seen.sample, decision, applied))
    return result | {"max": seen.max_slots, "waiting": seen.waiting, "dry_run": not apply} | {
        "slots_full_idle": flags.slots_full_idle, "backlog_stalled": flags.backlog_stalled, "implausible": flags.implausible
    }  # fmt: skip


# Every metric a run emits: the only metrics of ours the sidecar's alarms and dashboard may watch.
EMITTED = (
    Metric.RECONCILE_RUNS, Metric.CONCURRENCY_ACTIVE, Metric.WORKFLOWS_RUNNING, Metric.COUNTER_DRIFT,
    Metric.IMPLAUSIBLE_DRIFT, Metric.SLOTS_FULL_IDLE, Metric.BACKLOG_STALLED, Metric.RECONCILE_RACES_LOST,
)  # fmt: skip


def emit_result(result: Mapping[str, Any]) -> None:
    """The reconciler's metrics (EMITTED), every run, zeros included (the names of the stack's reconciler)."""
    observed = result.get("observed") or {}
    count, running = int(observed.get("active_count", 0)), int(observed.get("running_executions", 0))
    emit(Metric.RECONCILE_RUNS)
    emit(Metric.CONCURRENCY_ACTIVE, count)
    emit(Metric.WORKFLOWS_RUNNING, running)
    emit(Metric.COUNTER_DRIFT, count - running)
    emit(Metric.IMPLAUSIBLE_DRIFT, 1 if result.get("implausible") else 0)
    emit(Metric.SLOTS_FULL_IDLE, 1 if result.get("slots_full_idle") else 0)
    emit(Metric.BACKLOG_STALLED, 1 if result.get("backlog_stalled") else 0)
    emit(Metric.RECONCILE_RACES_LOST, 1 if result.get("applied") is False else 0)


def blind(exc: Exception, target: SidecarTarget) -> dict[str, Any]:
    """A named resource that is not there: one line naming what the description got wrong."""
    names = f"counter table {target.counter.table}, state machines {', '.join(target.state_machine_arns)}, queue {target.main_queue_name}"
    return {"mode": "legacy", "verdict": "blind", "implausible": f"{error_code(exc) or type(exc).__name__}: {exc} (check {names})"}


def runbook_answer(runbook: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """Pure: a run's result as a runbook document's step reads it (the runbook Lambda's shape:
    verdict absent | cleared | remains | error, exit 0 | 1 | 2, evidence of strings)."""
    observed = result.get("observed") or {}
    evidence = {key: str(value) for key, value in observed.items()} | {
        "decision": str(result.get("verdict", "")), "reason": str(result.get("reason", "")),
        "implausible": str(result.get("implausible", "")),
    }  # fmt: skip
    if result.get("implausible"):
        verdict, error = "error", str(result["implausible"])
    elif result.get("verdict") == "in_sync":
        verdict, error = "absent", ""
    else:
        verdict, error = ("cleared" if result.get("applied") else "remains"), ""
    exit_code = {"absent": 0, "cleared": 0, "remains": 1, "error": 2}[verdict]
    return {"id": runbook, "verdict": verdict, "exit_code": exit_code, "evidence": evidence, "error": error, "result": dict(result)}


@instrumented("sidecar-reconciler")
def handler(event: dict[str, Any] | None, context: Any) -> dict[str, Any]:
    """The schedule's run (`{}`), a run on demand (`{"dry_run": bool}`), or a runbook document's
    step (`{"RunbookId": …, "DryRun": bool}`: the reconciler runbooks apply the reconciler)."""
    target = SidecarTarget.from_env(os.environ)
    event = event or {}
    runbook = str(event.get("RunbookId", ""))
    dry_run = bool(event.get("DryRun", True)) if runbook else bool(event.get("dry_run", not target.apply))
    actor = str(getattr(context, "invoked_function_arn", "") or "sidecar-reconciler")
    try:
        result = run(target, apply=not dry_run, actor=actor, now=datetime.now(UTC))
    except Exception as exc:
        if error_code(exc) not in BLIND_ERRORS and not isinstance(exc, MaxUnreadable):
            raise
        result = blind(exc, target)
    emit_result(result)
    log = logger.error if result.get("implausible") else logger.warning if result["verdict"] != "in_sync" else logger.info
    log("sidecar reconcile run", extra={key: result.get(key) for key in ("verdict", "reason", "implausible", "applied", "dry_run")})
    return runbook_answer(runbook, result) if runbook else result
