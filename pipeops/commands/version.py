"""`pipeops version`."""

from __future__ import annotations

from pipeops.commands.common import JsonOption
from pipeops.entry import print_version


def show_version(as_json: JsonOption = False) -> None:
    """Print the installed pipeops version."""
    print_version(as_json)
