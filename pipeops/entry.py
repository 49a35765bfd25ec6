"""The `pipeops` Typer app class: `pipeops version` answered before Typer parses anything.

Typer coerces every parameter through a pydantic TypeAdapter, and importing pydantic for that is
about 0.13 s of CPU, more than the rest of `pipeops version` (the goal: the CLI starts in <= 0.3 s).
The two exact command lines of `version` are answered here with the command's own output; any other
command line (options, `--help`, a typo) goes to Typer as before.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

VERSION_LINES = (["version"], ["version", "--json"])


def installed_version() -> str:
    from importlib.metadata import version

    return version("pipeops")


def print_version(as_json: bool) -> None:
    """What `pipeops version [--json]` prints."""
    installed = installed_version()
    if as_json:
        from pipeops import render

        render.emit_json("version", {"version": installed})
    else:
        print(installed)


class PipeopsTyper(typer.Typer):
    """A Typer app whose process entry answers `pipeops version [--json]` itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs and sys.argv[1:] in VERSION_LINES:
            print_version("--json" in sys.argv[1:])
            return 0
        return super().__call__(*args, **kwargs)
