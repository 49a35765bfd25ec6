"""`pipeops runbook list | show ID`: the runbook pages, in the terminal (offline); `pipeops runbook
run ID [--apply]`: the runbook carried out (runbooks/automation); `pipeops runbook history`: the
runbook actions applied (their own audit stream, apart from the reconciler's repairs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pipeops import render
from pipeops.commands.common import (
    EndpointOption,
    JsonOption,
    ProfileOption,
    RegionOption,
    StackOption,
    connect_any,
    fail,
)
from pipeops.render import ErrorCode
from stack.resources import SidecarStack

if TYPE_CHECKING:
    from runbooks.automation.result import RunbookResult
    from stack.resources import Connection, StackResources


def list_runbooks(as_json: JsonOption = False) -> None:
    """Every runbook: its id, title and the alarms that name it."""
    from rich.table import Table

    from pipeops.runbook_index import runbook_entries

    entries = runbook_entries()
    if as_json:
        render.emit_json("runbooks", [entry.to_dict() for entry in entries])
        return
    table = Table(title="Runbooks (pipeops runbook show ID)")
    for column in ("id", "title", "alarms"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        table.add_row(entry.id, entry.title, ", ".join(entry.alarms) or "- (incident page)")
    render.console.print(table)


def show_runbook(
    runbook_id: Annotated[
        str, typer.Argument(metavar="ID", help="A runbook id, e.g. dlq-messages (`pipeops runbook list`).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Print one runbook page, rendered for the terminal."""
    from pipeops.runbook_index import runbook_page
    from runbooks.catalog import UnknownRunbookError, parse

    try:
        runbook = parse(runbook_id)
    except UnknownRunbookError as exc:
        render.emit_error(str(exc), ErrorCode.BAD_INPUT, as_json=as_json)
        raise typer.Exit(render.ERROR_EXIT) from None
    page = runbook_page(runbook)
    if as_json:
        render.emit_json("runbook_page", page.to_dict())
        return
    from rich.markdown import Markdown  # ~70 ms of imports (markdown-it): only for `show`

    render.console.print(Markdown(page.markdown or ""))


def run_runbook(
    runbook_id: Annotated[str, typer.Argument(metavar="ID", help="A runbook id, e.g. dlq-messages (`pipeops runbook list`).")],
    apply: Annotated[bool, typer.Option("--apply", help="Carry the plan out (default: a dry run that changes nothing).")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="With --apply: act without asking first.")] = False,
    group: Annotated[
        list[str] | None,
        typer.Option("--group", metavar="ID", help="Act on these groups only (ids from the dry run). Repeatable."),
    ] = None,
    holder: Annotated[
        list[str] | None,
        typer.Option("--holder", metavar="NAME", help="The reconciler runbooks: release these holders only. Repeatable."),
    ] = None,
    run_id: Annotated[
        list[str] | None,
        typer.Option("--run", metavar="ID", help="executions-failed / file-failure-rate: re-run these runs. Repeatable."),
    ] = None,
    grace_seconds: Annotated[
        int | None,
        typer.Option("--grace-seconds", min=0, help="The reconciler runbooks: how old a holder must be to act on."),
    ] = None,
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Diagnose, plan and (with --apply) act, then verify.

    Dry run by default: the evidence and the plan, nothing changed. --apply asks before acting
    unless --yes; every action is audited. Exit 0 when the condition is cleared or was absent, 1
    when it remains (a dry run that found something included), 2 on error.
    """
    from runbooks.automation.engine import run_runbook as run
    from runbooks.catalog import UnknownRunbookError, parse

    try:
        runbook = parse(runbook_id)
    except UnknownRunbookError as exc:
        raise fail(str(exc)) from None
    connection, resources = connect_any(stack_name, endpoint_url, region, profile)
    if isinstance(resources, SidecarStack):
        _sidecar_runbook(resources, connection, runbook.value, apply=apply, yes=yes, as_json=as_json)
        return
    groups = list(group) if group else None
    options = _options(holder, run_id, grace_seconds)
    if apply and not yes:
        preview = run(runbook, resources, connection, apply=False, groups=groups, options=options)
        if preview.exit_code != 1 or not preview.plan:  # nothing to do, or an error: say so, ask nothing
            _report(preview, as_json)
            return
        if not as_json:
            _print(preview)
        typer.confirm(f"Carry out these {len(preview.plan)} action(s)?", abort=True, err=True)
    result = run(runbook, resources, connection, apply=apply, groups=groups, options=options)
    _report(result, as_json, lambda done: _settle(done, connection, resources, show=not as_json))


def runbook_history(
    since: Annotated[str, typer.Option(help="How far back, e.g. 2h, 7d (the audit is kept 30 days).")] = "7d",
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """The runbook actions applied (redrives, replays, quarantines, re-runs), newest first; changes
    nothing. The reconciler's repairs, the reconciler runbooks' included: `pipeops reconcile --history`."""
    from datetime import UTC, datetime

    from pipeops.durations import parse_duration
    from runbooks.automation.history import runbook_history as read_history

    try:
        window = parse_duration(since, option="--since")
    except ValueError as exc:
        raise fail(str(exc)) from None
    connection, resources = connect_any(stack_name, endpoint_url, region, profile)
    if isinstance(resources, SidecarStack):  # its redrives, in its own table
        from pipeops.sidecar.live import runbook_history as sidecar_history

        found = sidecar_history(resources, connection.client, datetime.now(UTC) - window)
    else:
        found = read_history(resources, connection, datetime.now(UTC) - window)
    if as_json:
        render.emit_json("runbook_history", {"since": since, **found.to_dict()})
    else:
        render.console.print(render.history_table(f"runbook actions in the last {since}", found.to_dict()))


def _options(holders: list[str] | None, runs: list[str] | None, grace_seconds: int | None) -> dict[str, Any]:
    """The runbook's own selection (runbooks.automation.remedy_request): only what was given."""
    options: dict[str, Any] = {}
    if holders:
        options["holders"] = list(holders)
    if runs:
        options["runs"] = list(runs)
    if grace_seconds is not None:
        options["grace_seconds"] = grace_seconds
    return options


def _sidecar_runbook(sidecar: SidecarStack, connection: Connection, runbook_id: str, *, apply: bool, yes: bool, as_json: bool) -> None:
    """A reconciler runbook against a sidecar stack: its reconciler's pass, as its document runs it."""
    from pipeops.sidecar.live import NotOnSidecar
    from pipeops.sidecar.live import runbook as sidecar_runbook

    try:
        if apply and not yes:
            preview = sidecar_runbook(sidecar, connection.client, runbook_id, apply=False)
            if preview["verdict"] == "remains":
                typer.confirm(f"Carry out {runbook_id} on {sidecar.stack_name} ({preview['evidence']})?", abort=True, err=True)
        answer = sidecar_runbook(sidecar, connection.client, runbook_id, apply=apply)
    except NotOnSidecar as exc:
        raise fail(str(exc)) from None
    except (typer.Abort, typer.Exit):
        raise
    except Exception as exc:  # what it watches cannot be read, or AWS refused: one line, never a traceback
        raise fail(f"runbook {runbook_id} failed: {type(exc).__name__}: {exc}", ErrorCode.FAILED) from None
    if answer["verdict"] == "error":
        raise fail(f"runbook {runbook_id} failed: {answer['error']}", ErrorCode.FAILED)
    if as_json:
        render.emit_json("runbook", answer)
    else:
        evidence = answer["evidence"]
        if "moves" in answer:  # dlq-messages: the depth of each DLQ, the move tasks started
            said = ", ".join(f"{queue} {depth}" for queue, depth in evidence.items())
            render.console.print(f"{runbook_id} on {sidecar.stack_name}: {said}")
            for queue, task in answer["moves"].items():
                render.console.print(f"{queue} back to its source queue: {task}")
        else:
            render.console.print(f"{runbook_id} on {sidecar.stack_name}: {evidence['decision']}: {evidence['reason']}")
        render.console.print(f"verdict: {answer['verdict']}" + ("" if apply else " (dry run: --apply to act)"))
    if answer["exit_code"]:
        raise typer.Exit(answer["exit_code"])


def _report(
    result: RunbookResult, as_json: bool, settle: Callable[[RunbookResult], RunbookResult] = lambda done: done
) -> None:
    """Print the result; `settle` waits for what SQS still does (a move task) and reads the verdict again."""
    if result.verdict.value == "error":
        raise fail(f"runbook {result.id} failed: {result.error}", ErrorCode.FAILED)
    if as_json:
        result = settle(result)
        render.emit_json("runbook", result.to_dict())
    else:
        _print(result)
        settled = settle(result)
        if settled is not result:
            render.console.print(f"verdict once the move task ended: {settled.verdict.value}")
        result = settled
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _print(result: RunbookResult) -> None:
    """The groups found, what was (or would be) done to each, and the verdict."""
    from rich.markup import escape
    from rich.table import Table

    evidence = result.evidence
    outcomes = {outcome.action.group: outcome for outcome in result.actions}
    table = Table(title=f"{result.id}: {evidence.get('queue', '')} ({evidence.get('read', 0)} message(s) read)")
    for column in ("group", "reason", "run / target", "messages", "plan", "result"):
        table.add_column(column, overflow="fold")
    planned = {action.group: action for action in result.plan}
    for found in evidence.get("groups", []):
        action = planned.get(found["group"])
        outcome = outcomes.get(found["group"])
        table.add_row(
            found["group"],
            escape(found["reason"]),
            escape(found["run"] or "-"),
            str(found["count"]),
            escape(f"{action.kind}: {action.reason}") if action else "-",
            outcome.result.value if outcome else "-",
        )
    render.console.print(table)
    for task in move_task_handles(result):
        render.console.print(f"SQS moves the messages (task {escape(task)})")
    hint = "" if result.applied or not result.plan else " (dry run: --apply to act)"
    render.console.print(f"verdict: {result.verdict.value}{hint}")


def move_task_handles(result: RunbookResult) -> list[str]:
    """The SQS move tasks the result names: the one it started, or the one running that it raced."""
    handles = {str(o.detail["task_handle"]) for o in result.actions if "task_handle" in o.detail}
    handles |= {str(handle) for o in result.actions for handle in o.detail.get("running", ())}
    return sorted(handles)


def _settle(result: RunbookResult, connection: Connection, resources: StackResources, *, show: bool) -> RunbookResult:
    """Each move task the result names, followed until it ends (with a progress bar when `show`;
    Ctrl-C leaves it running), then the DLQ read again so that the verdict matches the queue. Here
    in the CLI, never in the runbook automation: a Lambda must not wait."""
    handles = move_task_handles(result)
    if not handles:
        return result
    import time

    from pipeops.move_watch import follow
    from runbooks.automation.dead_letters import DlqKind
    from runbooks.automation.engine import reverify
    from runbooks.automation.redrive import DlqEndpoints, follow_move_task

    queue_url = DlqEndpoints.of(DlqKind(result.evidence["kind"]), resources).queue_url
    sqs = connection.client("sqs")
    for handle in handles:
        if show:
            follow(sqs, queue_url, handle, render.console)
        else:
            for _ in follow_move_task(sqs, queue_url, handle, sleep=time.sleep):
                pass
    return reverify(result, resources, connection)
