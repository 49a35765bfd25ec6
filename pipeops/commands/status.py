"""`pipeops status`: what is wrong now, and the numbers around it."""

from __future__ import annotations

from typing import Any

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


def status(
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Queue and DLQ depth, oldest message age, active_count and holders, running executions, every
    active run by status, and the runs that ended (COMPLETE, FAILED) in the last hour and 24 hours.

    Then what is wrong, once, under the names the alarms and runbooks use, each with its runbook: the
    alarms in ALARM, a message in any DLQ, every slot held with nothing running (SlotsFullIdle), a
    stalled backlog, and the reconciler's dry-run findings. Exit 1 when anything is wrong, 0
    otherwise. Reads indexes, never the whole tracking table:
    active runs from the sparse active index, ended runs newest first up to a cap per status (a
    count at the cap is shown as a lower bound, "≥").
    """
    from pipeops.views import status as status_view

    connection, resources = connect_any(stack_name, endpoint_url, region, profile)
    if isinstance(resources, SidecarStack):
        _sidecar_status(connection.client, resources, as_json)
        return
    view = status_view(resources, connection.client)
    if as_json:
        render.emit_json("status", view.to_dict())
    else:
        data = view.to_dict()
        table = render.status_table(data)
        table.caption = _outcomes_caption(data)
        table.caption_justify = "left"
        render.console.print(table)
    if view.pages():
        raise typer.Exit(1)


def _outcomes_caption(data: dict[str, Any]) -> str:
    """What "jobs by status" counts, and the ended runs per window (labelled with its start)."""
    windows = data.get("recent_outcomes") or []
    parts = []
    for window in windows:
        counts = ", ".join(
            f"{status} {'≥ ' if status in window['lower_bounds'] else ''}{count}" for status, count in window["counts"].items()
        )
        parts.append(f"ended in the last {window['window']} (since {window['since']}): {counts}")
    scope = f"jobs by status: every active run; ended runs of the last {windows[-1]['window']}" if windows else ""
    return "\n".join([*parts, scope])


def _sidecar_status(client: Any, sidecar: SidecarStack, as_json: bool) -> None:
    """A sidecar stack: the watched counter, executions, queue and DLQs, its alarms; exit 1 when anything is wrong."""
    from pipeops.sidecar.live import status as sidecar_status

    try:
        data = sidecar_status(sidecar, client)
    except Exception as exc:  # an observation that cannot be made is an error, never "nothing wrong"
        raise fail(f"sidecar status failed: {type(exc).__name__}: {exc}", ErrorCode.FAILED) from None
    if as_json:
        render.emit_json("sidecar_status", data)
    else:
        dlqs = ", ".join(f"{name} {depth}" for name, depth in data["dead_letter_queues"].items()) or "none"
        render.console.print(
            f"sidecar {data['stack']} watching {data['pipeline']}: counter {data['counter']} of max {data['max']}, "
            f"{data['running_executions']} running, {data['waiting']} waiting; DLQs: {dlqs}; "
            f"reconciler: {data['reconcile']['verdict']}"
        )
        for finding in data["findings"]:
            render.console.print(f"[red]{finding['name']}[/red] {finding['target']}: {finding['reason']} (runbook {finding['runbook']})")
    if data["findings"]:
        raise typer.Exit(1)
