"""`pipeops dashboard render`: the operations dashboard as one self-contained HTML page.

The page is drawn from the same body CloudWatch shows (the deployed `<stack>-operations`, or the
body built from this checkout's template when the stack has none yet) and from the metrics in
CloudWatch, AWS's or a sandbox's (pipeops.dashboard draws it).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from pipeops import render
from pipeops.commands.common import CONNECTION_ERRORS


def _stderr() -> Console:
    return Console(stderr=True)


class _Progress:
    """A progress bar on stderr while the page is made, in steps: the body, each series read, the
    alarms, the page, the screenshot. Nothing when quiet (--json) or when stderr is no terminal."""

    def __init__(self, quiet: bool) -> None:
        self._bar: Any = None
        self._task: Any = None
        console = _stderr()
        if quiet or not console.is_terminal:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task("reading the dashboard body", total=None)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def step(self, description: str, done: int = 0, total: int | None = None) -> None:
        """Say what is being done now, after `done` more steps (the total once it is known)."""
        if self._bar is not None:
            extra = {"total": total} if total is not None else {}
            self._bar.update(self._task, description=description, advance=done, **extra)

    def advance(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=done)


def _fail(message: str) -> typer.Exit:
    """One line on stderr (with --json also the error envelope on stdout): pipeops.render's errors."""
    render.emit_error(message, render.ErrorCode.FAILED)
    return typer.Exit(render.ERROR_EXIT)


def render_command(
    out: Annotated[Path, typer.Option("--out", help="Where to write the HTML page.")],
    hours: Annotated[float, typer.Option(min=0.01, help="The time window: this many hours up to now.")] = 3.0,
    screenshot_path: Annotated[
        Path | None, typer.Option("--screenshot", help="Also write a PNG of the page (needs Chromium).")
    ] = None,
    endpoint_url: Annotated[
        str | None,
        typer.Option("--endpoint-url", help="AWS endpoint, e.g. the sandbox's (default: AWS_ENDPOINT_URL)."),
    ] = None,
    stack_name: Annotated[
        str | None, typer.Option("--stack-name", "--stack", help="The pipeops stack (default: pipeops).")
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(
            "--region",
            help="AWS region (default, as the aws CLI: AWS_REGION, AWS_DEFAULT_REGION, the profile's region, us-east-1).",
        ),
    ] = None,
    profile: Annotated[
        str | None, typer.Option("--profile", help="Named AWS profile for credentials and region (default: AWS_PROFILE).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print versioned JSON for scripts.")] = False,
) -> None:
    """Draw the operations dashboard, with the metrics and alarm states in CloudWatch, as one HTML page.

    The body is the deployed `<stack>-operations` dashboard's; a stack without one gets the body
    built from this checkout's template (said on stderr). The page is self-contained: no script,
    nothing fetched, it opens offline. Exit 2 on error (no stack, no credentials, no Chromium).
    """
    from pipeops.dashboard import DashboardError, render_dashboard
    from stack.resources import Connection

    try:
        connection = Connection.resolve(stack_name, endpoint_url, region, profile)
        resources = connection.any_resources()  # a sidecar stack draws its deployed dashboard
    except CONNECTION_ERRORS as exc:
        raise _fail(str(exc)) from None
    try:
        with _Progress(quiet=as_json) as progress:
            result = render_dashboard(connection, resources, out, hours=hours, screenshot_path=screenshot_path, progress=progress)
    except DashboardError as exc:
        raise _fail(str(exc)) from None
    for note in result.notes:
        _stderr().print(f"[yellow]note:[/yellow] {note}")
    if as_json:
        render.emit_json("dashboard_render", asdict(result))
        return
    start, end = datetime.fromisoformat(result.start), datetime.fromisoformat(result.end)
    render.console.print(
        f"wrote {out} ({result.source} body of {result.dashboard}, {start:%Y-%m-%d %H:%M} to {end:%H:%M} UTC): "
        f"{result.charts_with_data} of {result.charts} charts have data; "
        f"{sum(result.alarms.values())} alarm(s), {result.alarms.get('ALARM', 0)} in ALARM"
        + (f"; screenshot {screenshot_path}" if screenshot_path else "")
    )
