"""`pipeops failures`: what failed, where and why, from the execution histories."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

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


def failures(
    since: Annotated[str, typer.Option(help="How far back: e.g. 30m, 1h, 2d.")] = "1h",
    limit: Annotated[int, typer.Option(help="Read at most this many executions, newest first.")] = 50,
    include_recovered: Annotated[bool, typer.Option("--include-recovered", help="Also list failures a retry recovered.")] = False,
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Failed, timed-out and aborted executions and task failures: the state, the error, the cause
    and the file key it was working on, read from the execution history (Lambda timeouts included)."""
    from monitors.failures import failures as find_failures
    from pipeops.durations import parse_duration

    try:
        window = parse_duration(since, option="--since")
    except ValueError as exc:
        raise fail(str(exc)) from None
    connection, resources = connect_any(stack_name, endpoint_url, region, profile)
    if isinstance(resources, SidecarStack):  # every state machine the sidecar watches
        from pipeops.sidecar.live import target

        try:
            machines = list(target(resources, connection.client).state_machine_arns)
        except Exception as exc:  # its reconciler cannot be read: say which, never a traceback
            raise fail(f"cannot read what {resources.stack_name} watches: {type(exc).__name__}: {exc}", ErrorCode.FAILED) from None
    else:
        machines = [resources.StateMachineArn]
    sfn, start = connection.client("stepfunctions"), datetime.now(UTC) - window
    found = [
        failure
        for machine in machines
        for failure in find_failures(sfn, machine, start, limit=limit, include_recovered=include_recovered)
    ]
    rows = [failure.to_dict() for failure in found]
    if as_json:
        render.emit_json("failures", rows)
    else:
        render.console.print(render.failures_table(f"{len(rows)} failure(s) since {since}", rows))
