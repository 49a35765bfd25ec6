"""`pipeops template build`: the generated alarms and dashboards written into template.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeops import render
from pipeops.commands.common import JsonOption, fail


def template_build(
    check: Annotated[bool, typer.Option("--check", help="Change nothing; exit 1 when template.yaml is out of date.")] = False,
    template: Annotated[Path, typer.Option(help="The SAM template to write into.")] = Path("template.yaml"),
    as_json: JsonOption = False,
) -> None:
    """Write the alarms and dashboards, built from the metric and alarm catalogs, into template.yaml."""
    from pipeops.template_build import TemplateBuildError, build, is_current

    try:
        current = is_current(template) if check else not build(template)
    except (TemplateBuildError, OSError) as exc:
        raise fail(str(exc)) from None
    if as_json:
        render.emit_json("template_build", {"template": str(template), "checked": check, "up_to_date": current})
    elif check:
        render.console.print(f"{template} is up to date" if current else f"[red]{template} is out of date:[/red] run `pipeops template build`")
    else:
        render.console.print(f"{'unchanged:' if current else 'wrote'} {template}")
    if check and not current:
        raise typer.Exit(1)
