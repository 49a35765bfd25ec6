"""`pipeops status` says what is wrong once: the alarms in ALARM, the DLQs and the reconciler's
signals under their alarms' names, then the reconciler's findings, each with its runbook. One
quiet status, one thing changed per case; the names are held against the alarm catalog."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from alarms.catalog import build_catalog
from monitors.reconcile.model import Finding, FindingKind, Holder, Observation, ReconcileSettings
from monitors.reconcile.signals import Signals
from monitors.snapshot import OutcomeWindow, Snapshot
from pipeline.jobs import format_timestamp
from pipeops.render import status_table
from pipeops.views import (
    BACKLOG_STALLED,
    DLQ_CONDITIONS,
    FINDING_RUNBOOKS,
    SLOTS_FULL_IDLE,
    DlqCondition,
    FiringAlarm,
    StatusView,
    status_findings,
)
from runbooks.catalog import Runbook
from stack.template import load_template
from tests.conftest import quiet_snapshot

NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
ALARMS = {spec.name_suffix: spec for spec in build_catalog(load_template())}
QUIET = quiet_snapshot(NOW)
CALM = Signals(slots_full_idle=False, oldest_queued_age=0.0, backlog_stalled=False)
OBSERVED = Observation(
    taken_at=NOW,
    semaphore_read_at=NOW,
    active_count=1,
    version=3,
    holders=(Holder("h", format_timestamp(NOW - timedelta(minutes=1))),),
    running=(),
    described={},
    active_runs=(),
    settings=ReconcileSettings(max_slots=10),
)
LEAK = Finding(FindingKind.LEAKED_SLOT, "exec-1", "its execution ended FAILED")


def names(snapshot: Snapshot = QUIET, seen: Signals = CALM, found: tuple[Finding, ...] = (), firing: tuple[FiringAlarm, ...] = ()) -> list[tuple[str, str]]:
    return [(f.name, f.source.value) for f in status_findings("pipeops", found, seen, snapshot, firing)]


def test_a_quiet_pipeline_has_nothing_wrong() -> None:
    assert names() == []


@pytest.mark.parametrize("dlq", DLQ_CONDITIONS, ids=lambda dlq: dlq.alarm)
def test_a_message_in_any_dlq_is_named_as_its_alarm_with_its_runbook(dlq: DlqCondition) -> None:
    [finding] = status_findings("pipeops", (), CALM, replace(QUIET, **{dlq.depth_field: 2}), ())
    spec = ALARMS[dlq.alarm]
    assert (finding.name, finding.runbook, finding.source.value) == (dlq.alarm, spec.runbook.value, "queue")
    assert spec.watched.resource == finding.target == dlq.queue  # the alarm watches that queue
    assert finding.reason.startswith("2 ")


def test_the_reconcilers_signals_are_named_as_the_alarms_that_watch_them() -> None:
    seen = Signals(slots_full_idle=True, oldest_queued_age=1000.0, backlog_stalled=True)
    found = status_findings("pipeops", (), seen, QUIET, ())
    assert [(f.name, f.runbook) for f in found] == [
        (SLOTS_FULL_IDLE, ALARMS[SLOTS_FULL_IDLE].runbook.value),
        (BACKLOG_STALLED, ALARMS[BACKLOG_STALLED].runbook.value),
    ]


def test_an_alarm_in_alarm_says_its_condition_once() -> None:
    dlq_alarm = FiringAlarm("pipeops-DlqNotEmpty", "1 datapoint greater than 0", "dlq-messages")
    assert names(replace(QUIET, dead_letter_depth=1), firing=(dlq_alarm,)) == [("DlqNotEmpty", "alarm")]
    other = FiringAlarm("pipeops-RouterFailures", "", "router-failures")
    assert names(replace(QUIET, dead_letter_depth=1), firing=(other,)) == [("RouterFailures", "alarm"), ("DlqNotEmpty", "queue")]


def test_reconciler_findings_keep_their_kind_and_carry_a_runbook() -> None:
    [finding] = status_findings("pipeops", (LEAK,), CALM, QUIET, ())
    assert (finding.name, finding.target, finding.runbook) == ("leaked_slot", "exec-1", "counter-drift")


def test_every_finding_kind_has_a_runbook_page() -> None:
    assert set(FINDING_RUNBOOKS) == set(FindingKind)
    assert all(isinstance(runbook, Runbook) for runbook in FINDING_RUNBOOKS.values())


def view(snapshot: Snapshot = QUIET, found: tuple[Finding, ...] = ()) -> StatusView:
    return StatusView("pipeops", OBSERVED, snapshot, status_findings("pipeops", found, CALM, snapshot, ()))


def test_everything_wrong_pages_by_name_and_target_and_nothing_else_does() -> None:
    assert view().pages() == []
    assert view(replace(QUIET, dead_letter_depth=1)).pages() == ["DlqNotEmpty: DeadLetterQueue"]
    assert view(found=(LEAK,)).to_dict()["pages"] == ["leaked_slot: exec-1"]


def test_the_json_carries_the_numbers_the_observation_and_one_findings_list() -> None:
    data = view(found=(LEAK,)).to_dict()
    assert (data["active_count"], data["max_concurrency"], data["running_executions"]) == (1, 10, 0)
    assert data["holders"] == {"h": OBSERVED.holders[0].acquired_at} and data["counter_drift"] == 1
    assert data["findings"] == [
        {"name": "leaked_slot", "target": "exec-1", "reason": "its execution ended FAILED", "runbook": "counter-drift", "source": "reconcile"}
    ]


def rows(shown: StatusView) -> dict[str, str]:
    console = Console(width=200, record=True)
    console.print(status_table(shown.to_dict()))
    cells = [[cell.strip() for cell in line.split("│")[1:3]] for line in console.export_text().splitlines() if "│" in line]
    return {name: value for name, value in cells}


def test_the_table_shows_a_capped_count_as_a_lower_bound_and_each_finding_with_its_runbook() -> None:
    widest = OutcomeWindow("24h", format_timestamp(NOW - timedelta(hours=24)), {"COMPLETE": 1000, "FAILED": 3}, lower_bounds=("COMPLETE",))
    shown = rows(view(replace(QUIET, active_runs={"QUEUED": 2}, recent_outcomes=(widest,)), (LEAK,)))
    assert shown["jobs by status"] == "QUEUED 2, COMPLETE ≥ 1000, FAILED 3"
    assert shown["leaked_slot"] == "exec-1: its execution ended FAILED (runbook counter-drift)"
    assert rows(view())["jobs by status"] == "-" and rows(view())["findings"] == "none"


def test_the_quarantine_depth_is_shown_beside_the_dlqs_and_carried_in_the_json() -> None:
    parked = view(replace(QUIET, quarantine_depth=3))
    assert rows(parked)["quarantine depth"] == "3" and rows(view())["quarantine depth"] == "0"
    assert parked.to_dict()["quarantine_depth"] == 3
    assert parked.pages() == ["QuarantineQueueNotEmpty: QuarantineQueue"]
