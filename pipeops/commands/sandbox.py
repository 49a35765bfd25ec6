"""`pipeops sandbox up`: the sandbox served on loopback until Ctrl-C."""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import TYPE_CHECKING, Annotated

import typer

from pipeline.stack import DEFAULT_STACK_NAME
from pipeops import render
from pipeops.commands.common import JsonOption, fail

if TYPE_CHECKING:
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
