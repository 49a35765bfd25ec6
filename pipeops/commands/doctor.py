"""`pipeops doctor`: does the stack's alerting reach a person? The alert-delivery runbook's
checks (runbooks/automation/alert_delivery.py), read only: a confirmed subscription on the page
topic, alarm actions enabled and the composite paging the topic, the topic key's policy letting
CloudWatch publish, the reconciler's schedule enabled. Exit 0 when all hold, 1 when one fails
(each failed check names its fix), 2 when AWS could not be read."""

from __future__ import annotations

import typer

from pipeops import render
from pipeops.commands.common import (
    EndpointOption,
    JsonOption,
    ProfileOption,
    RegionOption,
    StackOption,
    connect,
    fail,
)
from pipeops.render import ErrorCode


def doctor(
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check that the stack's alarms can notify someone (the alert-delivery runbook)."""
    from rich.markup import escape

    from runbooks.automation.alert_delivery import doctor as run_doctor

    connection, resources = connect(stack_name, endpoint_url, region, profile)
    result = run_doctor(resources, connection)
    if result.error:
        raise fail(f"alert-delivery could not read the stack: {result.error}", ErrorCode.AWS_ERROR)
    if as_json:
        render.emit_json("doctor", result.to_dict())
        raise typer.Exit(result.exit_code)
    render.console.print(
        f"Alert delivery of {resources.stack_name} (runbooks/alert-delivery.md):", highlight=False
    )
    for check in result.evidence["checks"]:
        mark = "[green]ok  [/green]" if check["ok"] else "[red]FAIL[/red]"
        render.console.print(f"{mark} {check['id']}: {escape(check['detail'])}", highlight=False)
        if check["fix"]:
            render.console.print(f"     fix: {escape(check['fix'])}", highlight=False)
    raise typer.Exit(result.exit_code)
