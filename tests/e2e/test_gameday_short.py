"""The short game day in the default suite: every landing keeps detection, notification and repair
working on the catalog's short form (pipeops.gameday.catalog.SHORT_FAULTS). No timing is asserted:
the waits are generous and run out only when something is really wrong.
"""

from __future__ import annotations

import json
import time

import pytest

from pipeops.gameday import docs
from pipeops.gameday.catalog import SHORT_FAULTS, chosen
from pipeops.gameday.model import GameDayResult
from pipeops.gameday.report import render_html, timeline_text
from pipeops.gameday.runner import play
from pipeops.gameday.timing import GameDaySettings

pytestmark = pytest.mark.slow


def explained(result: GameDayResult, *names: str) -> str:
    """The problems, then the timeline of each fault named or failed: a failure says what happened."""
    failed = {v.fault for v in result.verdicts if not v.passed} | set(names)
    return "\n".join([*result.problems, *(timeline_text(o) for o in result.faults if o.fault.name in failed)])


def test_the_short_game_day_detects_notifies_and_repairs_every_fault(aws_env: None) -> None:
    faults = chosen(None, short=True)
    assert [f.name for f in faults] == list(SHORT_FAULTS)  # every short-form fault is in the catalog
    started = time.monotonic()
    # Each step with its time, printed: pytest shows it with a failure, beside the timelines.
    result = play(faults, GameDaySettings.short_form(), lambda text: print(f"{time.monotonic() - started:6.1f} s  {text}"))

    assert result.problems == [], explained(result)
    assert result.false_alarms == []
    assert [v.fault for v in result.verdicts] == list(SHORT_FAULTS)
    for verdict in result.verdicts:
        assert verdict.invariants_held, explained(result, verdict.fault)
        assert verdict.absorbed or (verdict.alarm is not None and verdict.notified), explained(result, verdict.fault)
    [count] = [o for o in result.faults if o.fault.name == "counter-negative"]
    assert any("set_count" in a.what for a in count.audit), explained(result, count.fault.name)  # the reconciler's repair
    [poison] = [o for o in result.faults if o.fault.name == "poison-messages"]
    # The poison reached the DLQ and the DLQ runbook quarantined it, audited in its own stream: a
    # runbook that found nothing means the poison was lost on the way, not repaired.
    assert poison.remedy_applied >= 1, explained(result, poison.fault.name)
    assert any(a.what.startswith("audit (runbook)") for a in poison.audit), explained(result, poison.fault.name)
    # What the report, the page and --json are made of survives JSON and draws a timeline per fault.
    again = GameDayResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.to_dict() == result.to_dict()
    assert render_html(again).count("<svg class='timeline'") == len(faults)
    assert "not measured yet" not in docs.render_markdown(faults, docs.record_of(again))


def test_an_alarm_disabled_makes_the_game_day_fail_naming_the_fault(aws_env: None) -> None:
    """Undetectable is a failure, not a skipped row."""
    settings = GameDaySettings.short_form(disabled=("CounterBelowRunning",), healthy_seconds=2.0, detect_timeout=15.0)
    result = play(chosen(["counter-negative"], short=False), settings)

    assert not result.passed
    assert any(p.startswith("counter-negative: undetected") and "disabled: CounterBelowRunning" in p for p in result.problems)
