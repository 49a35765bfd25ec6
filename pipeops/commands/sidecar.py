"""`pipeops sidecar build`: the SAM template that watches a pipeline we did not build, from its description."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from pipeops import render
from pipeops.commands.common import (
    CONNECTION_ERRORS,
    EndpointOption,
    JsonOption,
    ProfileOption,
    RegionOption,
    error_code,
    fail,
)


def sidecar_build(
    config: Annotated[Path, typer.Option("--config", help="The pipeline's description (pipeops.toml).")],
    out: Annotated[Path, typer.Option("--out", help="Where to write the sidecar's SAM template.")] = Path("sidecar.yaml"),
    check: Annotated[bool, typer.Option("--check", help="Change nothing; exit 1 when --out differs from what would be built.")] = False,
    code_uri: Annotated[
        str, typer.Option("--code-uri", help="The reconciler's CodeUri: the pipeops checkout (its Makefile builds it), relative to --out.")
    ] = ".",
    as_json: JsonOption = False,
) -> None:
    """Build the sidecar's template: the legacy-mode reconciler, its schedule, the alarms that apply and their topics."""
    from pipeops.sidecar.build import SidecarBuildError, build
    from pipeops.sidecar.config import ConfigError

    try:
        current = build(config, out, check=check, code_uri=code_uri)
    except ConfigError as exc:
        raise fail(f"{config}: fix {len(exc.problems)} field(s): " + " | ".join(str(problem) for problem in exc.problems)) from None
    except (SidecarBuildError, OSError) as exc:
        raise fail(str(exc)) from None
    if as_json:
        render.emit_json("sidecar_build", {"config": str(config), "out": str(out), "checked": check, "up_to_date": current})
    elif check:
        render.console.print(f"{out} is up to date" if current else f"[red]{out} is out of date:[/red] run `pipeops sidecar build --config {config} --out {out}`")
    else:
        render.console.print(f"{'unchanged:' if current else 'wrote'} {out}")
    if check and not current:
        raise typer.Exit(1)


def sidecar_doctor(
    config: Annotated[Path, typer.Option("--config", help="The pipeline's description (pipeops.toml).")],
    endpoint_url: EndpointOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check that every resource the description names exists as described (read only). Exit 0 when
    all do, 1 when one does not (each line names the field to fix), 2 when the description is wrong."""
    from pipeops.sidecar.config import ConfigError, loads
    from pipeops.sidecar.doctor import check
    from stack.resources import Connection

    try:
        description = loads(config.read_text(encoding="utf-8"))
    except ConfigError as exc:
        raise fail(f"{config}: fix {len(exc.problems)} field(s): " + " | ".join(str(problem) for problem in exc.problems)) from None
    except OSError as exc:
        raise fail(str(exc)) from None
    try:
        connection = Connection.resolve(None, endpoint_url, region, profile)
    except CONNECTION_ERRORS as exc:
        raise fail(str(exc), error_code(exc)) from None
    checks = check(description, connection.client)
    if as_json:
        render.emit_json("sidecar_doctor", {"config": str(config), "checks": [c.to_dict() for c in checks]})
    else:
        for found in checks:
            mark = "[green]ok[/green]  " if found.ok else "[red]FAIL[/red]"
            render.console.print(f"{mark} {found.field} ({escape(found.resource)}): {escape(found.detail)}", highlight=False)
    if not all(found.ok for found in checks):
        raise typer.Exit(1)
