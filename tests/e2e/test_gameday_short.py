"""The short game day in the default suite: every landing keeps detection, notification and repair
working. It runs the catalog's short form (pipeops.gameday.catalog.SHORT_FAULTS) when the fault
catalog is there, and always a data fault done here with boto3 (active_count hand-edited below its
holders: CounterBelowRunning fires, the scheduled reconciler repairs). No timing is asserted: the
waits are generous and only run out when something is really wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipeline.stores.semaphore import SEMAPHORE_KEY
from pipeops.demo import resources_of
from pipeops.gameday import docs
from pipeops.gameday.catalog import chosen
from pipeops.gameday.model import FaultSpec, GameDayResult
from pipeops.gameday.report import render_html
from pipeops.gameday.runner import play
from pipeops.gameday.timing import GameDaySettings

pytestmark = pytest.mark.slow

COUNT_BELOW = FaultSpec("count-below-holders", "active_count hand-edited to -2", ("CounterBelowRunning",), None)


@dataclass
class CountEditor:
    """Drives the catalog's faults, and the hand edit above by name."""

    sandbox: Any
    catalog: Any

    def inject(self, name: str) -> None:
        if name != COUNT_BELOW.name:
            return self.catalog.inject(name)
        table = resources_of(self.sandbox).CoordinationTableName
        self.sandbox.client("dynamodb").update_item(
            TableName=table, Key={"doc_key": {"S": SEMAPHORE_KEY}},
            UpdateExpression="SET active_count = :v", ExpressionAttributeValues={":v": {"N": "-2"}},
        )
        return None

    def clear(self, name: str) -> None:
        if name != COUNT_BELOW.name:
            self.catalog.clear(name)


def driver(sandbox: Any) -> CountEditor:
    from pipeops.gameday.catalog import CatalogDriver

    return CountEditor(sandbox, CatalogDriver(sandbox.endpoint_url, resources_of(sandbox)))


def test_the_short_game_day_detects_notifies_and_repairs_every_fault(aws_env: None, tmp_path: Path) -> None:
    faults = [*chosen(None, short=True), COUNT_BELOW]
    result = play(faults, GameDaySettings.short_form(), driver_for=driver)

    assert result.problems == [] and result.false_alarms == []
    assert [v.fault for v in result.verdicts] == [f.name for f in faults]
    for verdict in result.verdicts:
        assert verdict.alarm is not None and verdict.notified and verdict.invariants_held, verdict
        assert verdict.detect_virtual is not None and verdict.repair_real is not None
    [count] = [o for o in result.faults if o.fault.name == COUNT_BELOW.name]
    assert any(a.what.startswith("audit: set_count") for a in count.audit)  # the reconciler's repair, audited
    # What the report, the page and --json are made of survives JSON and draws a timeline per fault.
    again = GameDayResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.to_dict() == result.to_dict()
    page = render_html(again)
    assert page.count("<svg class='timeline'") == len(faults)
    table = docs.render_markdown(faults, docs.record_of(again))
    assert f"| `{COUNT_BELOW.name}` |" in table and "not measured yet" not in table


def test_an_alarm_disabled_makes_the_game_day_fail_naming_the_fault(aws_env: None) -> None:
    """Undetectable is a failure, not a skipped row."""
    result = play([COUNT_BELOW], GameDaySettings.short_form(disabled=("CounterBelowRunning",), healthy_seconds=2.0, detect_timeout=15.0), driver_for=driver)

    assert not result.passed
    assert any(p.startswith(f"{COUNT_BELOW.name}: undetected") and "disabled: CounterBelowRunning" in p for p in result.problems)
