"""`pipeops sandbox up`: the sandbox served on loopback until Ctrl-C; `pipeops sandbox fault`:
break a served sandbox on purpose (`pipeops.faults`) and mend it."""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from pipeline.stack import DEFAULT_STACK_NAME
from pipeops import render
from pipeops.commands.common import JsonOption, RegionOption, StackOption, connect, fail
from pipeops.render import ErrorCode

if TYPE_CHECKING:
    from pipeops.faults import FaultTarget, NamedFault
    from sandbox.sandbox import Sandbox


def sandbox_up(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free port).")] = 0,
    stack_name: Annotated[str, typer.Option("--stack-name", help="Name of the deployed stack.")] = DEFAULT_STACK_NAME,
    time_scale: Annotated[float, typer.Option(help="Factor in (0, 1] that shortens every wait.")] = 0.05,
    parameter: Annotated[list[str] | None, typer.Option(help="Stack parameter KEY=VALUE (repeatable).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Serve the sandbox on loopback until Ctrl-C: template.yaml deployed, handlers running.

    The endpoint is printed (with --json: `"ready": true`) once the stack is deployed and every
    part runs; requests that arrive earlier are held until then.
    """
    from pipeops.pipeline_sandbox import pipeline_sandbox
    from sandbox.clock import TimeScale
    from sandbox.deploy import DeployError

    malformed = [p for p in parameter or [] if "=" not in p]
    if malformed:
        raise fail(f"--parameter {malformed[0]!r} is not KEY=VALUE: e.g. --parameter MaxConcurrentWorkflows=2")
    parameters = dict(p.split("=", 1) for p in parameter or [])
    try:
        scale = TimeScale(time_scale)
    except ValueError:
        raise fail(f"--time-scale {time_scale} is not in (0, 1]: e.g. 0.05 (20 virtual seconds a second) or 1") from None
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    # The endpoint is printed only once every part runs: until then the served sandbox holds
    # other clients' requests, so a script may also poll describe_stacks for CREATE_COMPLETE.
    try:
        sbx = pipeline_sandbox(stack_name=stack_name, parameters=parameters, serve=True, port=port, time_scale=scale).start()
    except DeployError as exc:
        raise fail(f"the sandbox cannot deploy template.yaml: {exc}") from None
    except OSError as exc:  # the port is taken, or not ours to bind
        raise fail(f"the sandbox cannot serve on port {port}: {exc.strerror or exc}: pick another --port (0: any)") from None
    try:  # start() stops what it started when it fails
        _announce(sbx, stack_name, as_json)
        try:
            while not stopped.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
    finally:
        sbx.stop()
    if not as_json:
        render.console.print("sandbox stopped")


def _announce(sbx: Sandbox, stack_name: str, as_json: bool) -> None:
    """The endpoint and the stack's Outputs, once every part runs."""
    endpoint_url, outputs = sbx.endpoint_url, dict(sbx.outputs)
    if as_json:
        info = {"endpoint_url": endpoint_url, "stack_name": stack_name, "ready": sbx.ready, "outputs": outputs}
        print(json.dumps(info), flush=True)
        return
    render.console.print(f"sandbox serving at [bold]{endpoint_url}[/bold] (stack {stack_name}); Ctrl-C stops it")
    for key, value in sorted(outputs.items()):
        render.console.print(f"  {key:32} {value}")
    render.console.print(f"try: pipeops status --endpoint-url {endpoint_url}")
    sys.stdout.flush()


# -- pipeops sandbox fault inject | clear | list ------------------------------------------------

FaultEndpointOption = Annotated[
    str | None,
    typer.Option("--endpoint-url", help="The served sandbox (`pipeops sandbox up`; default: AWS_ENDPOINT_URL)."),
]


def _fault_target(stack_name: str | None, endpoint_url: str | None, region: str | None) -> FaultTarget:
    """The served sandbox to break, or exit 2 saying how to start one."""
    import os

    if not (endpoint_url or os.environ.get("AWS_ENDPOINT_URL")):
        raise fail("faults are injected into a served sandbox: start one with `pipeops sandbox up`, then pass its --endpoint-url")
    from pipeops.faults import FaultTarget

    connection, resources = connect(stack_name, endpoint_url, region)
    assert connection.endpoint_url is not None
    return FaultTarget(connection.endpoint_url, resources, connection.region or "us-east-1")


def fault_inject(
    name: Annotated[str, typer.Argument(help="The fault (`pipeops sandbox fault list` names them).")],
    duration: Annotated[
        str | None, typer.Option("--for", help="How long, in virtual time (e.g. 5m; default: until cleared).")
    ] = None,
    share: Annotated[float, typer.Option("--share", help="Share of calls, invocations or events faulted, in (0, 1].")] = 1.0,
    endpoint_url: FaultEndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Break the served sandbox the way production breaks, to rehearse an incident by hand."""
    from pipeops.durations import parse_duration
    from pipeops.faults import FaultError, fault_named, inject

    try:
        fault = fault_named(name)
        seconds = parse_duration(duration, option="--for").total_seconds() if duration else None
    except (FaultError, ValueError) as exc:
        raise fail(str(exc)) from None
    if not 0.0 < share <= 1.0:
        raise fail(f"--share {share} is not in (0, 1]: e.g. 0.5 for every other call")
    if seconds is not None and fault.kind == "data":
        raise fail(f"{name} is data written once: it has no duration (it stays until repaired); drop --for")
    target = _fault_target(stack_name, endpoint_url, region)
    try:
        injected = inject(target, name, share=share, for_seconds=seconds)
    except FaultError as exc:
        raise fail(str(exc), ErrorCode.FAILED) from None
    result = {"fault": _fault_row(fault), "injected": injected}
    if as_json:
        render.emit_json("sandbox-fault-inject", result)
        return
    until = f"for {duration} (virtual)" if duration else "until `pipeops sandbox fault clear`"
    render.console.print(f"injected [bold]{name}[/bold] ({fault.description}) {until}")
    for item in injected:
        if "written" in item:
            render.console.print(f"  wrote: {item['written']}")
    alarms = ", ".join(fault.expected_alarms) or "none (the pipeline absorbs it)"
    render.console.print(f"  should fire: {alarms}; remedy: {_remedy(fault)}")


def fault_clear(
    name: Annotated[str | None, typer.Argument(help="The fault to end (default: every fault in force).")] = None,
    endpoint_url: FaultEndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """End a sandbox fault (or all); what a data fault wrote stays until it is repaired."""
    from pipeops.faults import FaultError, clear, fault_named

    try:
        fault = fault_named(name) if name else None
    except FaultError as exc:
        raise fail(str(exc)) from None
    target = _fault_target(stack_name, endpoint_url, region)
    try:
        cleared = clear(target, name)
    except FaultError as exc:
        raise fail(str(exc), ErrorCode.FAILED) from None
    if as_json:
        render.emit_json("sandbox-fault-clear", {"cleared": cleared})
        return
    if fault is not None and fault.kind == "data":
        render.console.print(f"{name} is data, not a fault in force: it stays until repaired (remedy: {_remedy(fault)})")
        return
    render.console.print(f"cleared: {', '.join(cleared)}" if cleared else "no fault was in force")


def fault_list(
    endpoint_url: FaultEndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    as_json: JsonOption = False,
) -> None:
    """The known faults (what each breaks, the alarms that should fire, the remedy), and with a
    sandbox endpoint those in force there."""
    import os

    from pipeops.faults import FAULTS, FaultError, active

    rows = [_fault_row(fault) for fault in FAULTS.values()]
    in_force: list[dict[str, Any]] | None = None
    if endpoint_url or os.environ.get("AWS_ENDPOINT_URL"):
        try:
            in_force = active(_fault_target(stack_name, endpoint_url, region))
        except FaultError as exc:
            raise fail(str(exc), ErrorCode.FAILED) from None
    if as_json:
        render.emit_json("sandbox-fault-list", {"faults": rows, "active": in_force})
        return
    render.console.print(_faults_table(rows, in_force))


def _faults_table(rows: list[dict[str, Any]], in_force: list[dict[str, Any]] | None) -> Table:
    """One row a fault: its name and what it breaks, the alarms that should fire, the remedy, and
    (with a sandbox) whether it is in force there."""
    table = Table(title="Faults (pipeops sandbox fault inject NAME)", show_lines=True)
    table.add_column("fault (data: written once)", ratio=6, overflow="fold")
    table.add_column("should fire", ratio=3, overflow="fold")
    table.add_column("remedy", ratio=2)
    if in_force is not None:
        table.add_column("in force", ratio=2)
    active_names = {a["name"]: a for a in in_force or []}
    for row in rows:
        name = row["name"] + (" (data)" if row["kind"] == "data" else "")
        cells = [f"[bold]{name}[/bold]\n{row['description']}", "\n".join(row["expected_alarms"]) or "none", row["remedy"] or "reconciler"]
        if in_force is not None:
            now = active_names.get(row["name"])
            left = "" if now is None or now.get("seconds_left") is None else f", {now['seconds_left']:.0f} s left"
            cells.append("-" if now is None else f"yes: {now['faulted']} of {now['matched']} faulted{left}")
        table.add_row(*cells)
    return table


def _fault_row(fault: NamedFault) -> dict[str, Any]:
    return {
        "name": fault.name,
        "kind": fault.kind,
        "description": fault.description,
        "expected_alarms": list(fault.expected_alarms),
        "remedy": fault.remedy.value if fault.remedy is not None else None,
        "for_seconds": fault.for_seconds,
    }


def _remedy(fault: NamedFault) -> str:
    if fault.remedy is None:
        return "the scheduled reconciler (or the redelivery) repairs it"
    return f"`pipeops runbook run {fault.remedy.value}`"
