"""`pipeops dashboard render` shows its progress on stderr, and nothing with --json."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from pipeops.commands import dashboard as dashboard_command


def run_steps(quiet: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    stream = io.StringIO()
    monkeypatch.setattr(dashboard_command, "_stderr", lambda: Console(file=stream, force_terminal=True, width=100))
    with dashboard_command._Progress(quiet=quiet) as progress:
        progress.step("reading 3 series", done=1, total=6)
        progress.advance(3)
        progress.step("reading the alarms")
        progress._bar and progress._bar.refresh()
    return stream.getvalue()


def test_progress_is_shown_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = run_steps(False, monkeypatch)
    assert "reading the alarms" in shown and "4/6" in shown


def test_progress_is_quiet_with_json(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_steps(True, monkeypatch) == ""
