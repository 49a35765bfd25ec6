"""The game day's shell: a fresh sandbox served on loopback, the demo's traffic, a healthy phase,
then each fault in turn; what it saw goes to the pure verdicts (verdict.py, invariants.py).

Per fault: every alarm OK → inject → an expected alarm in ALARM → its notification on the alarm
state topic → clear the fault (the cause fixed, as on-call rolls back first: a redrive while the
cause is still there would fail again) → its runbook applied, or the scheduled reconciler left to
act → every alarm OK → the invariants, with the pipeline at rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from alarms.slo_alarms import window_alarm_ids
from pipeops.demo import SAMPLES_DIR, resources_of, sample_files
from pipeops.gameday import invariants as checks
from pipeops.gameday.inbox import drain_notifications, subscribe_a_queue
from pipeops.gameday.model import Action, FaultObservation, FaultSpec, GameDayResult
from pipeops.gameday.observe import (
    AtRest,
    Clock,
    Sampler,
    alarm_states,
    audit_actions,
    look_at_rest,
    metric_series,
    transitions,
    wait_for,
)
from pipeops.gameday.timing import GameDaySettings, sandbox_timings
from pipeops.gameday.traffic import LIGHT_WAVE, Traffic
from pipeops.gameday.verdict import false_alarms, game_day_problems, judge

if TYPE_CHECKING:
    from sandbox.sandbox import Sandbox

COMPOSITE = "PipelineUnhealthy"  # the only alarm the page topic hears


class FaultDriver(Protocol):
    """Injects and clears the named faults of the catalog on one sandbox (pipeops.faults)."""

    def inject(self, name: str) -> None: ...

    def clear(self, name: str) -> None: ...


Progress = Callable[[str], None]


@dataclass
class Stage:
    """The running game day's parts, for the per-fault steps."""

    sandbox: Sandbox
    settings: GameDaySettings
    clock: Clock
    traffic: Traffic
    sampler: Sampler
    state_inbox: str
    page_inbox: str
    keys_checked: set[str] = field(default_factory=set)
    silent: frozenset[str] = field(default_factory=window_alarm_ids)  # alarms that notify no one


    @property
    def resources(self) -> Any:
        return resources_of(self.sandbox)

    def states(self) -> dict[str, str]:
        return alarm_states(self.sandbox.client("cloudwatch"), self.sandbox.stack_name)

    def notifying_states(self) -> dict[str, str]:
        """The alarms someone hears about: a burn window is judged through its pair's composite."""
        return {name: state for name, state in self.states().items() if name not in self.silent}

    def in_alarm(self) -> list[str]:
        """The notifying alarms in ALARM: what "every alarm OK" is judged on."""
        return sorted(name for name, state in self.notifying_states().items() if state == "ALARM")

    def burning(self) -> list[str]:
        """Burn windows in ALARM: the budget an incident spent, remembered for up to a window."""
        return sorted(name for name, state in self.states().items() if state == "ALARM" and name in self.silent)


@contextmanager
def game_day_sandbox(settings: GameDaySettings) -> Iterator[Sandbox]:
    """A fresh sandbox served on loopback in this process, stopped at the end."""
    from moto.moto_api._internal.models import moto_api_backend

    from pipeline.handlers import _wiring
    from pipeops.pipeline_sandbox import pipeline_sandbox
    from sandbox.clock import TimeScale

    # A served sandbox keeps its state in this process's moto, as does one served before it in
    # the same process (a test run): start from an empty AWS, as /moto-api/reset would.
    moto_api_backend.reset()
    sandbox = pipeline_sandbox(
        parameters=settings.parameters(), serve=True, time_scale=TimeScale(settings.time_scale),
        min_handler_seconds=settings.min_handler_seconds,
    ).start()
    _wiring.reset()  # collaborators built for an earlier sandbox of this process are forgotten
    try:
        yield sandbox
    finally:
        sandbox.stop()
        _wiring.reset()


def run_game_day(
    sandbox: Sandbox,
    faults: Sequence[FaultSpec],
    driver: FaultDriver,
    settings: GameDaySettings,
    progress: Progress = lambda _text: None,
    samples: Path = SAMPLES_DIR,
) -> GameDayResult:
    """The healthy phase, then every fault in `faults`; the judged result."""
    clock = Clock(datetime.now(UTC), settings.time_scale)
    resources = resources_of(sandbox)
    for alarm in settings.disabled:  # as if never deployed: the faults it alone sees go undetected
        sandbox.client("cloudwatch").delete_alarms(AlarmNames=[f"{sandbox.stack_name}-{alarm}"])
    resources_map = dict(sandbox.deployment.resources) if sandbox.deployment else {}
    stage = Stage(
        sandbox=sandbox,
        settings=settings,
        clock=clock,
        traffic=Traffic(lambda key, body: sandbox.client("s3").put_object(Bucket=resources.InputBucketName, Key=key, Body=body),
                        sample_files(samples), interval=settings.traffic_interval),
        sampler=Sampler(resources, sandbox.client, clock),
        state_inbox=subscribe_a_queue(sandbox.client, resources_map["AlarmStateTopic"], "gameday-AlarmStateTopic-inbox"),
        page_inbox=subscribe_a_queue(sandbox.client, resources_map["AlarmTopic"], "gameday-AlarmTopic-inbox"),
    )
    stage.sampler.start()
    stage.traffic.start()
    try:
        progress(f"healthy phase: {settings.healthy_seconds:.0f} s of traffic, no alarm may fire")
        time.sleep(settings.healthy_seconds)
        healthy_end = clock.now()
        false = false_alarms(transitions(sandbox, clock), 0.0, healthy_end)
        observations = []
        for number, fault in enumerate(faults, 1):
            progress(f"fault {number}/{len(faults)}: {fault.name}")
            observations.append(run_fault(stage, fault, driver, progress))
    finally:
        stage.traffic.stop()
        stage.sampler.stop()
    verdicts = [judge(o, settings.time_scale) for o in observations]
    return GameDayResult(
        time_scale=settings.time_scale,
        short=settings.short,
        faults=observations,
        verdicts=verdicts,
        false_alarms=false,
        healthy_seconds=round(healthy_end, 1),
        seconds=round(clock.now(), 1),
        max_concurrency=settings.max_concurrency,
        sandbox_timings=sandbox_timings(settings),
        disabled=list(settings.disabled),
        problems=game_day_problems(verdicts, false),
    )


def run_fault(stage: Stage, fault: FaultSpec, driver: FaultDriver, progress: Progress) -> FaultObservation:
    """One fault from all-OK to the invariants at rest."""
    settings, clock = stage.settings, stage.clock
    pace = fault.traffic_every * settings.time_scale if fault.traffic_every else settings.fault_traffic_interval
    stage.traffic.resume(fault.name, interval=pace, samples=LIGHT_WAVE)
    if fault.lead_seconds:
        lead = fault.lead_seconds * settings.time_scale
        progress(f"{fault.name}: {fault.lead_seconds / 3_600:.2f} virtual hours of traffic first ({lead:.0f} s), "
                 f"a file every {pace / settings.time_scale:.0f} virtual s: the burn windows' history")
        time.sleep(lead)
    started = clock.now()
    wait_for(lambda: not stage.in_alarm(), settings.calm_timeout)
    observation = FaultObservation(fault=fault, started_at=started, injected_at=None, not_ok_before=tuple(stage.in_alarm()),
                                   disabled=tuple(settings.disabled), silent=tuple(sorted(stage.silent)))
    drain_notifications(stage.sandbox.client, stage.state_inbox)
    drain_notifications(stage.sandbox.client, stage.page_inbox)
    actions = [Action("all alarms OK" if not observation.not_ok_before else "alarms not OK", started)]
    try:
        driver.inject(fault.name)
    except Exception as exc:
        observation.error = f"injection failed: {type(exc).__name__}: {str(exc)[:200]}"
        return _finish(stage, observation, actions)
    observation.injected_at = clock.now()
    actions.append(Action(f"inject {fault.name}", observation.injected_at))
    _let_it_act(stage, observation, actions, progress)
    try:
        driver.clear(fault.name)
    except Exception as exc:
        observation.error = f"clearing failed: {type(exc).__name__}: {str(exc)[:200]}"
    observation.cleared_at = clock.now()
    actions.append(Action(f"clear {fault.name}", observation.cleared_at))
    _remedy(stage, observation, actions, progress)
    progress(f"{fault.name}: waiting for every alarm to return to OK")
    for attempt in range(1, settings.remedy_attempts + 1):
        if wait_for(lambda: not stage.in_alarm(), settings.ok_timeout / settings.remedy_attempts) and _stays_ok(stage, observation):
            observation.ok_at = clock.now()
            observation.burning_after = tuple(stage.burning())
            burning = f" (budget spent: {', '.join(observation.burning_after)} still burning)" if observation.burning_after else ""
            actions.append(Action(f"every alarm OK{burning}", observation.ok_at))
            break
        still = ", ".join(stage.in_alarm())
        if observation.remedy_verdict in ("reconciler", "manual") or attempt == settings.remedy_attempts:
            continue
        # What was still on its way when the runbook ran (a poison message's last receives) is
        # there now: on-call runs the runbook again while its alarm stays in ALARM.
        progress(f"{fault.name}: still in ALARM ({still}): the runbook again")
        _remedy(stage, observation, actions, progress)
    else:
        progress(f"{fault.name}: still in ALARM after {settings.ok_timeout:.0f} s: {', '.join(stage.in_alarm())}")
    progress(f"{fault.name}: traffic paused, checking the invariants at rest")
    return _finish(stage, observation, actions)


def _stays_ok(stage: Stage, observation: FaultObservation) -> bool:
    """After a runbook, every alarm still OK a while later: what was on its way when it ran (a
    poison message still being received, an event being retried) would fire again by then."""
    if observation.remedy_verdict in ("reconciler", "manual", None):
        return True
    time.sleep(stage.settings.settle_virtual_seconds * stage.settings.time_scale)
    return not stage.in_alarm()


def _let_it_act(stage: Stage, observation: FaultObservation, actions: list[Action], progress: Progress) -> None:
    """Until an expected alarm fires (and its notification is looked for); a fault the pipeline
    absorbs acts for its duration (or the default), stopped early by any alarm, which fails it."""
    fault, clock, injected = observation.fault, stage.clock, observation.injected_at or 0.0
    expected = set(fault.expected_alarms)

    def fired() -> bool:
        return any(c.new == "ALARM" and (c.alarm in expected or not (expected or c.alarm in stage.silent))
                   for c in transitions(stage.sandbox, clock, injected))

    if fault.absorbed:
        seconds = max(fault.for_seconds or 0.0, stage.settings.absorb_virtual_seconds) * stage.settings.time_scale
        progress(f"{fault.name}: injected, absorbed by design: acting {seconds:.0f} s, no alarm may fire")
        wait_for(fired, seconds)
        return
    progress(f"{fault.name}: injected, waiting for {', '.join(fault.expected_alarms)}")
    if wait_for(fired, stage.settings.detect_timeout):
        progress(f"{fault.name}: detected after {clock.now() - injected:.1f} s")
        _collect_notifications(stage, observation, actions)
    else:
        progress(f"{fault.name}: no expected alarm within {stage.settings.detect_timeout:.0f} s")
    if fault.quiet_alarms and fault.for_seconds:  # acts its whole duration: its quiet alarms are judged over it
        left = injected + fault.for_seconds * stage.settings.time_scale - clock.now()
        if left > 0:
            progress(f"{fault.name}: acting {left:.0f} s more, {', '.join(fault.quiet_alarms)} must stay quiet")
            time.sleep(left)


def _collect_notifications(stage: Stage, observation: FaultObservation, actions: list[Action]) -> None:
    """What reached the state topic (each alarm's ALARM) and the page topic (the composite)."""
    client, clock = stage.sandbox.client, stage.clock
    expected = set(observation.fault.expected_alarms)
    notified: set[str] = set()

    def heard() -> bool:
        for note in drain_notifications(client, stage.state_inbox):
            if note.get("NewStateValue") == "ALARM":
                notified.add(str(note.get("AlarmName", "")).rsplit("-", 1)[-1])
        return bool(notified & expected)

    if wait_for(heard, stage.settings.notify_timeout):
        actions.append(Action(f"notified: {', '.join(sorted(notified & expected))}", clock.now()))
    observation.notified = tuple(sorted(notified))
    pages = drain_notifications(client, stage.page_inbox)
    observation.paged = any(p.get("NewStateValue") == "ALARM" and str(p.get("AlarmName", "")).endswith(COMPOSITE) for p in pages)
    if observation.paged:
        actions.append(Action("paged (PipelineUnhealthy)", clock.now()))


def _remedy(stage: Stage, observation: FaultObservation, actions: list[Action], progress: Progress) -> None:
    """The fault's runbook, applied as on-call would (`pipeops runbook run ID --apply`), or
    nothing: the scheduled reconciler repairs on its next run."""
    from runbooks.automation.engine import ACTING_RUNBOOKS, run_runbook
    from runbooks.automation.result import ActionResult

    runbook = observation.fault.remedy
    observation.remedy_started_at = stage.clock.now()
    if runbook is None:
        observation.remedy_verdict = "reconciler"
        return
    if runbook not in {r.value for r in ACTING_RUNBOOKS}:  # its page's steps: the cause found and cleared
        observation.remedy_verdict = "manual"
        actions.append(Action(f"runbook {runbook}: no automated repair (runbooks/{runbook}.md), cause cleared", stage.clock.now()))
        return
    _wait_for_the_runbooks_alarm(stage, runbook, progress)
    progress(f"{observation.fault.name}: pipeops runbook run {runbook} --apply")
    result = run_runbook(runbook, stage.resources, stage.sandbox, apply=True, actor="gameday")
    applied = sum(1 for a in result.actions if a.result is ActionResult.APPLIED)
    observation.remedy_verdict = result.verdict.value
    observation.remedy_applied += applied
    actions.append(Action(f"runbook {runbook}: {result.verdict.value}, {applied} applied", stage.clock.now()))
    if result.error:
        observation.error = f"runbook {runbook}: {result.error}"
    if deleted := _review_quarantine(stage):
        actions.append(Action(f"quarantine reviewed: {deleted} malformed message(s) deleted", stage.clock.now()))


def _wait_for_the_runbooks_alarm(stage: Stage, runbook: str, progress: Progress) -> None:
    """On-call runs the runbook an alarm names once that alarm pages: a DLQ redrive run when the
    first failure was seen elsewhere (the router's) would find the DLQ still empty."""
    from alarms.live import spec_of

    stack = stage.sandbox.stack_name
    states = stage.states()
    named = {a for a in states if (spec := spec_of(f"{stack}-{a}", stack)) is not None and spec.runbook.value == runbook}
    if named and not named & set(stage.in_alarm()):
        progress(f"waiting for an alarm whose runbook is {runbook}: {', '.join(sorted(named))}")
        wait_for(lambda: bool(named & set(stage.in_alarm())), stage.settings.detect_timeout)


def _review_quarantine(stage: Stage) -> int:
    """What the person does next (runbooks/dlq-messages.md): a parked message that names no run
    (malformed) has nothing to send back, and is read and deleted. Any other parked message stays,
    its alarm with it, and fails the game day: it is a run someone must look at."""
    from runbooks.automation.dead_letters import MALFORMED

    url = stage.resources.QuarantineQueueUrl
    if not url:
        return 0
    sqs, deleted = stage.sandbox.client("sqs"), 0
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=5).get("Messages", []):
        malformed = [m for m in batch if _reason(m).split(":", 1)[0] == MALFORMED]  # "<reason>: why"
        for message in malformed:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        deleted += len(malformed)
        if len(malformed) < len(batch):
            break
    return deleted


def _reason(message: Mapping[str, Any]) -> str:
    return str(message.get("MessageAttributes", {}).get("pipeops-reason", {}).get("StringValue", ""))


def _finish(stage: Stage, observation: FaultObservation, actions: list[Action]) -> FaultObservation:
    """Traffic paused and the pipeline at rest: the invariants, the audit, the timeline's data."""
    settings, clock, sandbox = stage.settings, stage.clock, stage.sandbox
    stage.traffic.pause()
    keys = [k for k in stage.traffic.keys if k not in stage.keys_checked]
    rest = _wait_for_rest(stage, keys)
    router_names = {run.execution_name for run in rest.runs if run.execution_name}
    outside = {name for _at, s in stage.sampler.samples for name in s.running} - router_names
    violations = [
        *checks.lost_files(rest.outcomes),
        *checks.runs_started_twice(rest.runs),
        *checks.counter_agrees(rest.active_count, rest.holders, rest.running - outside),
        *checks.never_above_max(stage.sampler.between(observation.started_at, clock.now()), settings.max_concurrency, outside),
        *checks.alarms_back_to_ok(_states_at_rest(stage)),
    ]
    audit = audit_actions(stage.resources, sandbox.client, clock, observation.started_at)
    violations += checks.repairs_audited(observation.fault.remedy, observation.remedy_applied, len(audit))
    stage.keys_checked.update(k for k, outcome in rest.outcomes.items() if outcome)
    end = clock.now()
    series = metric_series(sandbox.client("cloudwatch"), sandbox.stack_name, observation.fault.expected_alarms, clock,
                           observation.started_at, end)
    return replace(
        observation,
        changes=tuple(transitions(sandbox, clock, observation.started_at)),
        ended_at=end,
        audit=tuple(audit),
        actions=tuple(sorted(actions, key=lambda a: a.real_at)),
        violations=tuple(violations),
        series=series,
    )


def _states_at_rest(stage: Stage) -> dict[str, str]:
    """Every alarm's state once the alarms have judged the pipeline at rest: one whose evaluation
    range still holds datapoints from before the rest (CounterDrift: three reconciler runs that
    each saw a slot in transit) has the calm wait to see it; one still in ALARM after it breaks
    the invariant."""
    wait_for(lambda: not stage.in_alarm(), stage.settings.calm_timeout)
    return stage.notifying_states()


def _wait_for_rest(stage: Stage, keys: Sequence[str]) -> AtRest:
    """Looks until every file has an outcome and the counter agrees, or the wait runs out (then
    the last look: its violations are reported)."""
    resources, client = stage.resources, stage.sandbox.client
    looked = [look_at_rest(resources, client, keys)]

    def settled() -> bool:
        rest = looked[-1] = look_at_rest(resources, client, keys)
        router = {run.execution_name for run in rest.runs if run.execution_name}
        return not checks.lost_files(rest.outcomes) and not checks.counter_agrees(rest.active_count, rest.holders, rest.running & router)

    wait_for(settled, stage.settings.rest_timeout, interval=0.5)
    return looked[-1]


def catalog_specs(catalog: Mapping[str, Any], names: Sequence[str] | None) -> list[FaultSpec]:
    """The faults to run, in catalog order (or the order given); an unknown name raises KeyError."""
    chosen = list(names) if names else list(catalog)
    return [FaultSpec.of(catalog[name]) for name in chosen]


def play(faults: Sequence[FaultSpec], settings: GameDaySettings, progress: Progress = lambda _text: None,
         driver_for: Callable[[Sandbox], FaultDriver] | None = None) -> GameDayResult:
    """A whole game day on a fresh sandbox: the faults driven through the catalog (pipeops.faults)
    unless `driver_for` builds another driver for the sandbox."""
    from pipeops.gameday.catalog import CatalogDriver

    progress("starting a fresh sandbox (template.yaml deployed, handlers running)")
    with game_day_sandbox(settings) as sandbox:
        assert sandbox.endpoint_url is not None
        driver = driver_for(sandbox) if driver_for else CatalogDriver(sandbox.endpoint_url, resources_of(sandbox))
        return run_game_day(sandbox, faults, driver, settings, progress)
