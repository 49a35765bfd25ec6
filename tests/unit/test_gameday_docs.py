"""docs/GAMEDAY.md is generated from the fault catalog and the recorded last full game day: a pure
function of both, so it is checked byte for byte though the times in it were measured."""

from __future__ import annotations

from pipeops.gameday import docs
from pipeops.gameday.model import FaultSpec

FAULTS = [
    FaultSpec("count-below-holders", "active_count | hand-edited", ("CounterBelowRunning",), None),
    FaultSpec("poison-message", "a malformed message on the main queue", ("DlqNotEmpty",), "dlq-messages"),
]
RECORD = {
    "passed": True,
    "time_scale": 0.005,
    "seconds": 300.0,
    "healthy_seconds": 20.0,
    "false_alarms": [],
    "sandbox_timings": ["Time scale 0.005."],
    "verdicts": [
        {"fault": "count-below-holders", "alarm": "CounterBelowRunning", "detect_real": 2.0, "detect_virtual": 400.0,
         "notified": True, "paged": True, "remedy": "reconciler", "repair_real": 1.5, "repair_virtual": 300.0,
         "invariants_held": True, "problems": [], "passed": True},
    ],
}


def test_the_page_is_up_to_date() -> None:
    assert docs.PAGE.read_text(encoding="utf-8") == docs.current(), "run `python -m pipeops.gameday.docs`"
    assert docs.main(["--check"]) == 0


def test_a_row_per_catalog_fault_measured_where_the_record_has_it() -> None:
    page = docs.render_markdown(FAULTS, RECORD)
    assert "| `count-below-holders` | active_count \\| hand-edited | `CounterBelowRunning` | `CounterBelowRunning` | 2.0 s / 6.7 min |" in page
    assert "| `poison-message` | a malformed message on the main queue | `DlqNotEmpty` | not measured yet | - | dlq-messages |" in page
    assert "Last full run: **passed**, 1 fault(s) in 300 s real" in page and "- Time scale 0.005." in page
    assert docs.render_markdown(FAULTS, RECORD) == page  # the same inputs, the same bytes
    assert "No full game day recorded yet" in docs.render_markdown(FAULTS, None)
