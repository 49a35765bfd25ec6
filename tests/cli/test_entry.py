"""pipeops.entry: `pipeops version [--json]` answered before Typer parses, with the command's own output."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from pipeops.cli import app

ENTRY = (
    "import sys; sys.argv = ['pipeops', *sys.argv[1:]]; from pipeops.cli import app; code = app(); "
    "print('IMPORTED:' + ','.join(sorted(m for m in ('pydantic', 'botocore', 'boto3') if m in sys.modules)), "
    "file=sys.stderr); sys.exit(code)"
)


@pytest.mark.parametrize("args", [["version"], ["version", "--json"]])
def test_version_is_answered_without_typer_parsing_and_says_what_the_command_says(args: list[str]) -> None:
    process = subprocess.run([sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, check=False)
    assert process.returncode == 0, process.stderr
    assert "IMPORTED:\n" in process.stderr  # no pydantic (Typer's coercion), no AWS SDK
    assert process.stdout == CliRunner().invoke(app, args).stdout


def test_any_other_command_line_goes_to_typer() -> None:
    process = subprocess.run([sys.executable, "-c", ENTRY, "version", "--help"], capture_output=True, text=True, check=False)
    assert process.returncode == 0 and "--json" in process.stdout
