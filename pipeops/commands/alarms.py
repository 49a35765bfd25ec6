"""`pipeops alarms list | check`: the stack's alarms, and the evaluator's verdict on them."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer

from pipeops import render
from pipeops.commands.common import (
    EndpointOption,
    JsonOption,
    ProfileOption,
    RegionOption,
    StackOption,
    connect_any,
)
from stack.resources import Connection, SidecarStack, StackResources

if TYPE_CHECKING:
    from alarms.catalog import AlarmSpec
    from alarms.live import SandboxClock


def _sidecar_specs(connection: Connection, resources: StackResources | SidecarStack) -> list[AlarmSpec] | None:
    """A sidecar's alarms name their runbooks from its own build (None: the reference catalog's)."""
    if not isinstance(resources, SidecarStack):
        return None
    from pipeops.sidecar.live import alarm_specs

    return alarm_specs(resources, connection.client)


def _in_process_clock() -> SandboxClock | None:
    """A time-scaled in-process sandbox in this process (no endpoint to ask): its alarm engine's clock."""
    if "sandbox.sandbox" not in sys.modules:
        return None  # never imported, so none runs here (and a call to AWS loads no sandbox)
    from alarms.live import SandboxClock
    from sandbox.sandbox import in_process_clock

    found = in_process_clock()
    clock = SandboxClock.from_dict(found) if found else None
    return clock if clock is not None and clock.time_scale != 1.0 else None


def alarms_list(
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every alarm of the stack with its state, reason and runbook, ALARM first. Exit 1 if any is in ALARM."""
    from alarms.live import list_alarms

    connection, resources = connect_any(stack_name, endpoint_url, region, profile)
    specs = _sidecar_specs(connection, resources)
    rows = [view.to_dict() for view in list_alarms(connection.client("cloudwatch"), resources.stack_name, specs)]
    if as_json:
        render.emit_json("alarms", rows)
    else:
        render.console.print(render.alarms_table(rows))
    if any(row["state"] == "ALARM" for row in rows):
        raise typer.Exit(1)


def alarms_check(
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Replay every metric alarm over the metrics in CloudWatch now, with the datapoints that decide it.

    Exit 1 when the evaluator puts any alarm in ALARM. A time-scaled sandbox is judged on its alarm
    engine's virtual clock, as the engine judges it.
    """
    from alarms.live import check_alarms, sandbox_clock

    connection, resources = connect_any(stack_name, endpoint_url, region, profile)
    clock, specs = sandbox_clock(connection.endpoint_url) or _in_process_clock(), _sidecar_specs(connection, resources)
    rows = [
        check.to_dict()
        for check in check_alarms(connection.client("cloudwatch"), resources.stack_name, datetime.now(UTC), clock, specs)
    ]
    if as_json:
        render.emit_json("alarm_checks", rows)
    else:
        render.console.print(render.alarm_checks_table(rows))
    if any(row["verdict"] == "ALARM" for row in rows):
        raise typer.Exit(1)
