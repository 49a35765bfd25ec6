"""CounterDrift counts the slots the reconciler would repair, never a slot in transit.

A slot is in transit when a router took it and its execution is not listed yet, or its execution
ended and the tracker has not released it yet: at full throughput almost every reconciler run sees
one, so counting them would page on a healthy pipeline.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from enum import Enum

from hypothesis import given
from hypothesis import strategies as st

from monitors.reconcile.model import FindingKind, Holder, Observation, counter_drift
from monitors.reconcile.plan import plan
from pipeline.status import ExecutionStatus
from pipeline.stores.executions import ExecutionOutcome
from tests.unit.test_reconcile_plan import HEALTHY, LONG_AGO, running, stamp

READ_AT = HEALTHY.semaphore_read_at
GRACE = HEALTHY.settings.grace_seconds
REPAIRABLE = {FindingKind.LEAKED_SLOT, FindingKind.SLOT_WITHOUT_EXECUTION}


class Slot(Enum):
    """Where one holder's execution is, as the reconciler observes it."""

    RUNNING = "listed RUNNING"
    STARTED_AFTER_LISTING = "described RUNNING after the listing"
    JUST_ENDED = "ended within the grace"
    JUST_TAKEN = "no execution yet, taken within the grace"
    ENDED_LONG_AGO = "ended past the grace"
    NEVER_STARTED = "no execution, taken past the grace"

    @property
    def in_transit(self) -> bool:
        return self in (Slot.STARTED_AFTER_LISTING, Slot.JUST_ENDED, Slot.JUST_TAKEN)


def outcome(name: str, status: ExecutionStatus | None, stopped_ago: float | None = None) -> ExecutionOutcome:
    stopped = READ_AT - timedelta(seconds=stopped_ago) if stopped_ago is not None else None
    return ExecutionOutcome(name, f"arn:aws:states:us-east-1:1:execution:sm:{name}", status, stopped_at=stopped)


def world(slots: list[Slot], extra_count: int = 0) -> Observation:
    """One holder a slot, named by its position; `active_count` the holders plus `extra_count`."""
    holders, listed, described = [], [], {}
    for i, slot in enumerate(slots):
        name = f"x{i}"
        taken = READ_AT - timedelta(seconds=5) if slot is Slot.JUST_TAKEN else LONG_AGO
        holders.append(Holder(name, stamp(taken)))
        if slot is Slot.RUNNING:
            listed.append(running(name))
        elif slot is Slot.STARTED_AFTER_LISTING:
            described[name] = replace(outcome(name, ExecutionStatus.RUNNING), started_at=READ_AT)
        elif slot in (Slot.JUST_ENDED, Slot.ENDED_LONG_AGO):
            ago = GRACE / 4 if slot is Slot.JUST_ENDED else GRACE * 5
            described[name] = outcome(name, ExecutionStatus.SUCCEEDED, stopped_ago=ago)
        else:
            described[name] = outcome(name, None)
    return replace(
        HEALTHY,
        active_count=len(slots) + extra_count,
        holders=tuple(holders),
        running=tuple(listed),
        described=described,
        active_runs=(),
        settings=replace(HEALTHY.settings, max_slots=max(1, len(slots))),
    )


def old_drift(observation: Observation) -> int:
    """The definition before slots in transit were taken out: the count minus the holders running."""
    listed = {execution.name for execution in observation.running}
    return observation.active_count - sum(1 for holder in observation.holders if holder.name in listed)


slot_lists = st.lists(st.sampled_from(Slot), max_size=12)


@given(slot_lists)
def test_a_pipeline_whose_slots_all_run_or_are_in_transit_shows_no_drift(slots: list[Slot]) -> None:
    healthy = [slot if slot.in_transit else Slot.RUNNING for slot in slots]
    assert world(healthy).drift == 0


@given(slot_lists)
def test_drift_is_the_holders_the_plan_finds_to_release(slots: list[Slot]) -> None:
    """With a count that matches its holders, every unit of drift is a holder the plan finds
    leaked or without an execution, and every such holder is one unit of drift."""
    observed = world(slots)
    found = [finding for finding in plan(observed).findings if finding.kind in REPAIRABLE]
    assert observed.drift == len(found) == sum(1 for slot in slots if slot in (Slot.ENDED_LONG_AGO, Slot.NEVER_STARTED))


@given(slot_lists, st.integers(min_value=0, max_value=5))
def test_with_nothing_in_transit_drift_is_what_it_always_was(slots: list[Slot], extra: int) -> None:
    settled = [slot for slot in slots if not slot.in_transit]
    observed = world(settled, extra)
    assert observed.drift == old_drift(observed) == extra + len(settled) - settled.count(Slot.RUNNING)


@given(slot_lists, st.integers(min_value=0, max_value=5))
def test_a_count_above_its_holders_is_drift_whatever_is_in_transit(slots: list[Slot], extra: int) -> None:
    """The count repair sets the count to the holders: what it removes is drift, on top of the
    holders the plan releases."""
    observed = world(slots, extra)
    repairable = sum(1 for slot in slots if slot in (Slot.ENDED_LONG_AGO, Slot.NEVER_STARTED))
    assert observed.drift == extra + repairable
    assert 0 <= observed.drift <= old_drift(observed)


def test_a_count_at_the_max_with_no_holder_is_all_drift() -> None:
    assert world([], extra_count=10).drift == 10


@given(slot_lists, st.integers(min_value=1, max_value=12))
def test_a_count_below_the_holders_running_keeps_its_negative_drift(slots: list[Slot], short: int) -> None:
    """CounterBelowRunning watches the other side: a count below the running holders is never
    hidden by a slot in transit."""
    observed = world(slots, slots.count(Slot.RUNNING) - short - len(slots))
    assert observed.drift == old_drift(observed) == -short


def test_a_holder_that_was_not_described_is_drift_not_transit() -> None:
    """Nothing vouches for it: the alarm is not blinded by a missing DescribeExecution."""
    unlisted = replace(HEALTHY, running=(running("a"),))
    assert unlisted.drift == old_drift(unlisted) == 1


def test_slots_in_transit_at_full_throughput_page_nobody() -> None:
    """Max 50, jobs of ~30 s on a 5-minute schedule: some slots are always in transit."""
    busy = world([Slot.RUNNING] * 44 + [Slot.JUST_TAKEN] * 2 + [Slot.STARTED_AFTER_LISTING] + [Slot.JUST_ENDED] * 3)
    assert old_drift(busy) == 6 and busy.drift == 0
    assert world([Slot.RUNNING] * 44 + [Slot.JUST_ENDED] * 5 + [Slot.ENDED_LONG_AGO]).drift == 1


@given(st.integers(-60, 60), st.integers(0, 60), st.integers(0, 60))
def test_counter_drift_never_counts_transit_as_drift_nor_hides_a_low_count(active: int, held_running: int, transit: int) -> None:
    drift = counter_drift(active, held_running, transit)
    low = active - held_running
    assert (drift == low) if low <= 0 else (0 <= drift <= low)
    assert counter_drift(active, held_running, 0) == low
