"""`pipeops gameday`'s input errors: said plainly, exit 2, before any sandbox starts."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pipeops.cli import app


def test_an_unknown_fault_is_refused_with_the_known_ones() -> None:
    result = CliRunner().invoke(app, ["gameday", "--faults", "no-such-fault", "--json"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["kind"] == "error" and "no fault named no-such-fault" in error["data"]["message"]


def test_record_keeps_full_runs_only() -> None:
    result = CliRunner().invoke(app, ["gameday", "--short", "--record"])
    assert result.exit_code == 2
    assert "--record keeps a full run (or the --slo scenario) only" in " ".join(result.output.split())
