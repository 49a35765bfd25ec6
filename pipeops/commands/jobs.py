"""`pipeops jobs` and `pipeops job show`: job runs, newest first, and one job in detail."""

from __future__ import annotations

from typing import Annotated

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


def jobs(
    status_filter: Annotated[str | None, typer.Option("--status", help="Only runs in this status, e.g. FAILED.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs, newest first.")] = 50,
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """List job runs, newest first, optionally by status."""
    from pipeline.status import JobStatus
    from pipeops.views import jobs as jobs_view

    wanted = None
    if status_filter:
        try:
            wanted = JobStatus(status_filter.upper())
        except ValueError:
            raise fail(f"unknown status {status_filter!r}: use one of {', '.join(JobStatus)}") from None
    connection, resources = connect(stack_name, endpoint_url, region, profile)
    runs = jobs_view(resources, connection.client, wanted, limit)
    if as_json:
        render.emit_json("jobs", runs)
    else:
        render.console.print(render.runs_table(f"{len(runs)} run(s)", runs))


def job_show(
    job_id: Annotated[str, typer.Argument(help="The job id: a folder ('claims/') or a root-level file key.")],
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """A job's runs, its execution's state path, each file's outcome and its log lines."""
    from pipeops.views import job_detail

    connection, resources = connect(stack_name, endpoint_url, region, profile)
    try:
        detail = job_detail(resources, connection.client, job_id)
    except LookupError as exc:
        raise fail(str(exc), ErrorCode.NOT_FOUND) from None
    if as_json:
        render.emit_json("job", detail.to_dict())
        return
    render.console.print(render.runs_table(f"job {job_id}", detail.runs))
    render.console.print("state path: " + (" → ".join(detail.state_path) or "-"))
    for key, outcome in detail.file_outcomes.items():
        render.console.print(f"  {key}: {outcome}")
    render.console.print(f"{len(detail.log_lines)} log line(s):")
    for line in detail.log_lines:
        render.console.print(f"  {line.get('timestamp', '')} {line['function']} {line.get('level', '')} {line.get('message', '')}")
