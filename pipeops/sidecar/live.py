"""The CLI against a deployed sidecar stack: what it watches, its status, a reconcile pass, its audit.

What the sidecar watches is read from its reconciler's environment (`pipeops sidecar build` wrote
it there; the scheduled reconciler reads the same), so the CLI and the Lambda never disagree about
the counter, the state machines, the queue or the max. A pass from the CLI runs the scheduled
reconciler's own code (`monitors.reconcile.sidecar.run`): the same two-observation rule against
the previous observation the schedule kept, a dry run by default that writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from alarms.catalog import AlarmSpec
from monitors.reconcile import sidecar as reconciler
from pipeline.stores.audit import AuditHistory, AuditStore
from pipeops.sidecar.config import SidecarConfig, parse
from runbooks.catalog import Runbook
from stack.resources import SidecarStack

Client = Callable[[str], Any]
HISTORY_LIMIT = 50


def _environment(sidecar: SidecarStack, client: Client) -> dict[str, str]:
    config = client("lambda").get_function_configuration(FunctionName=sidecar.ReconcilerFunctionName)
    return dict((config.get("Environment") or {}).get("Variables", {}))


def target(sidecar: SidecarStack, client: Client) -> reconciler.SidecarTarget:
    """What the sidecar's reconciler watches, from its environment."""
    return reconciler.SidecarTarget.from_env(_environment(sidecar, client))


def described(sidecar: SidecarStack, env: Mapping[str, str]) -> SidecarConfig:
    """Pure: the description the stack was built from, as far as its alarms need it, from its
    outputs and its reconciler's environment (read back through the description's own parser)."""
    fixed = env.get("MAX_CONCURRENT", "")
    maximum: Any = int(fixed) if fixed else {"function": env.get("MAX_FUNCTION", ""), "variable": env.get("MAX_VARIABLE", "")}
    functions: list[Any] = [
        {"name": name, "timeout": int(timeout)} if timeout else name
        for name, _, timeout in (listed.partition(":") for listed in sidecar.watched_functions)
    ]
    return parse(
        {
            "pipeline": {"name": sidecar.pipeline},
            "queue": {"main": env.get("MAIN_QUEUE_NAME", ""), "dead_letter": list(sidecar.dead_letter_queues)},
            "counter": {
                "table": env.get("COUNTER_TABLE", ""),
                "key_name": env.get("COUNTER_KEY_NAME", ""),
                "key_value": env.get("COUNTER_KEY_VALUE", ""),
                "count_attribute": env.get("COUNTER_ATTRIBUTE", ""),
                "max": maximum,
            },
            "workflow": {"state_machines": [arn for arn in env.get("STATE_MACHINE_ARNS", "").split(",") if arn]},
            "alarms": {"functions": functions},
        }
    )


def alarm_specs(sidecar: SidecarStack, client: Client) -> list[AlarmSpec]:
    """The sidecar's alarms as `pipeops sidecar build` made them (their runbooks, for `pipeops alarms`)."""
    from pipeops.sidecar.build import alarm_specs as built

    return built(described(sidecar, _environment(sidecar, client)))


def _actor(client: Client) -> str:
    try:
        return str(client("sts").get_caller_identity()["Arn"])
    except Exception:
        return "unknown (sts:GetCallerIdentity failed)"


def reconcile(sidecar: SidecarStack, client: Client, *, apply: bool, now: datetime | None = None) -> dict[str, Any]:
    """One pass of the sidecar's reconciler from here: a dry run writes nothing (not even the
    observation the schedule keeps); with `apply` a repair the two observations agree on is
    written conditionally and audited under the caller's ARN, as the schedule's would be."""
    watched = target(sidecar, client)
    actor = _actor(client) if apply else "dry run"
    try:
        result = reconciler.run(watched, apply=apply, actor=actor, now=now or datetime.now(UTC), aws=client, remember=apply)
    except Exception as exc:
        from pipeline.aws import error_code

        if error_code(exc) not in reconciler.BLIND_ERRORS and not isinstance(exc, reconciler.MaxUnreadable):
            raise
        result = reconciler.blind(exc, watched)
    return {"stack": sidecar.stack_name, "pipeline": sidecar.pipeline, **result}


def history(sidecar: SidecarStack, client: Client, since: datetime) -> AuditHistory:
    """The repairs the sidecar made (its own table's audit), newest first."""
    return AuditStore(sidecar.SidecarTableName, client("dynamodb")).history(since, HISTORY_LIMIT)


def runbook_history(sidecar: SidecarStack, client: Client, since: datetime) -> AuditHistory:
    """The runbook actions taken on the sidecar (its DLQ redrives), newest first."""
    from pipeline.stores.audit import AuditStream

    return AuditStore(sidecar.SidecarTableName, client("dynamodb"), stream=AuditStream.RUNBOOK).history(since, HISTORY_LIMIT)


@dataclass(frozen=True)
class SidecarFinding:
    name: str
    target: str
    reason: str
    runbook: str


def _dead_letter_depths(sidecar: SidecarStack, client: Client) -> dict[str, int]:
    from runbooks.automation.sidecar_redrive import depths

    return depths(client("sqs"), sidecar.dead_letter_queues)


def findings(result: dict[str, Any], depths: dict[str, int], firing: list[dict[str, str]]) -> list[SidecarFinding]:
    """Pure: what is wrong, once: the alarms in ALARM, then what the numbers show no alarm says yet."""
    found = [SidecarFinding(a["name"], a["alarm"], a["reason"], a["runbook"]) for a in firing]
    early = [
        SidecarFinding("DeadLetterQueueMessages", queue, f"{depth} message(s)", Runbook.DLQ_MESSAGES.value)
        for queue, depth in depths.items()
        if depth
    ]
    if result.get("implausible"):
        early.append(SidecarFinding("ImplausibleDrift", "counter", str(result["implausible"]), Runbook.IMPLAUSIBLE_DRIFT.value))
    if result.get("slots_full_idle"):
        early.append(SidecarFinding("SlotsFullIdle", "counter", "the counter is at the max and nothing runs", Runbook.SLOTS_FULL_IDLE.value))
    if result.get("backlog_stalled"):
        early.append(SidecarFinding("BacklogStalled", "queue", "messages wait and nothing ran twice in a row", Runbook.BACKLOG_STALLED.value))
    if result.get("verdict") in ("repair", "changing", "remember"):
        early.append(SidecarFinding("CounterDrift", "counter", str(result.get("reason", "")), Runbook.COUNTER_DRIFT.value))
    said = {finding.name for finding in found}
    return found + [finding for finding in early if not any(name.endswith(finding.name) for name in said)]


def status(sidecar: SidecarStack, client: Client, now: datetime | None = None) -> dict[str, Any]:
    """The counter, the running executions, the max, the waiting messages, the DLQs, the alarms
    firing, and the reconciler's dry-run verdict; `findings` empty when nothing is wrong."""
    from alarms.live import list_alarms

    result = reconcile(sidecar, client, apply=False, now=now)
    depths = _dead_letter_depths(sidecar, client)
    firing = [
        {"name": view.name.removeprefix(f"{sidecar.stack_name}-"), "alarm": view.name, "reason": view.reason, "runbook": view.runbook}
        for view in list_alarms(client("cloudwatch"), sidecar.stack_name, alarm_specs(sidecar, client))
        if view.state == "ALARM"
    ]
    observed = result.get("observed") or {}
    return {
        "stack": sidecar.stack_name,
        "pipeline": sidecar.pipeline,
        "counter": observed.get("active_count"),
        "running_executions": observed.get("running_executions"),
        "max": result.get("max"),
        "waiting": result.get("waiting"),
        "dead_letter_queues": depths,
        "reconcile": {key: result.get(key) for key in ("verdict", "reason", "set_to", "implausible")},
        "alarms_firing": [a["name"] for a in firing],
        "findings": [asdict(finding) for finding in findings(result, depths, firing)],
    }


class NotOnSidecar(LookupError):
    """A runbook the sidecar does not carry (it carries the reconciler runbooks only)."""


def redrive(sidecar: SidecarStack, client: Client, *, apply: bool, now: datetime | None = None) -> dict[str, Any]:
    """`dlq-messages` against the sidecar, as its Automation document runs it
    (`runbooks.automation.sidecar_redrive`): a dry run counts each DLQ, an apply moves them back,
    audited under the caller's ARN."""
    from runbooks.automation.sidecar_redrive import SidecarQueues
    from runbooks.automation.sidecar_redrive import redrive as move_back

    queues = SidecarQueues(sidecar.dead_letter_queues, target(sidecar, client).main_queue_name, sidecar.SidecarTableName)
    actor = _actor(client) if apply else "dry run"
    return move_back(queues, client, apply=apply, actor=actor, now=now or datetime.now(UTC))


def runbook(sidecar: SidecarStack, client: Client, runbook_id: str, *, apply: bool) -> dict[str, Any]:
    """A reconciler runbook against the sidecar: its reconciler's pass, answered as the runbook's
    Automation document's step is (verdict absent | cleared | remains | error, exit 0 | 1 | 2);
    `dlq-messages`: the redrive above."""
    from pipeops.sidecar.build import RUNBOOKS

    if runbook_id == Runbook.DLQ_MESSAGES.value:
        return redrive(sidecar, client, apply=apply)
    carried = [str(r.value) for r in (*RUNBOOKS, Runbook.DLQ_MESSAGES)]
    if runbook_id not in carried:
        raise NotOnSidecar(
            f"runbook {runbook_id} does not run against the sidecar {sidecar.stack_name}: it carries {', '.join(carried)}"
        )
    return reconciler.runbook_answer(runbook_id, reconcile(sidecar, client, apply=apply))
