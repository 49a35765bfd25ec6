"""The verdicts, pure: was each fault detected, notified and repaired with the invariants held,
did anything fire on healthy traffic, and what makes the game day exit 1."""

from __future__ import annotations

from collections.abc import Sequence

from pipeops.gameday.model import AlarmChange, FaultObservation, FaultVerdict

RECONCILER = "reconciler"  # the remedy of a fault the scheduled reconciler repairs
# A measured time to fire may exceed the computed one (which assumes the files' rate steady through
# the outage) by the alarms' evaluation, once a virtual minute (the short window that times the
# first bad file, then the composite's children), and by the rate's drop: on the sandbox failed runs
# end at 60-75% of the pace of done ones (bench.slo_burn, docs/PERFORMANCE.md), which stretches the
# time to fire to up to ~1.45x. Later than this is a pair that does not fire as computed.
EVALUATION_SLACK_SECONDS = 120.0
RATE_DROP_FACTOR = 1.5


def first_detection(observation: FaultObservation) -> AlarmChange | None:
    """The first expected alarm to go to ALARM after the injection."""
    if observation.injected_at is None:
        return None
    expected = set(observation.fault.expected_alarms)
    return next(
        (c for c in observation.changes if c.new == "ALARM" and c.alarm in expected and c.real_at >= observation.injected_at),
        None,
    )


def judge(observation: FaultObservation, time_scale: float) -> FaultVerdict:
    """One fault's verdict. Undetectable is a failure, not a skipped row: a fault whose expected
    alarms are disabled, absent or silent fails, named."""
    fault = observation.fault
    problems: list[str] = []
    if observation.error:
        problems.append(observation.error)
    if observation.not_ok_before:
        problems.append(f"alarms not OK before the injection: {', '.join(observation.not_ok_before)}")
    detected = first_detection(observation)
    if fault.absorbed:
        problems += _absorbed_problems(observation)
    elif detected is None:
        disabled = sorted(set(fault.expected_alarms) & set(observation.disabled))
        why = f" (disabled: {', '.join(disabled)})" if disabled else ""
        problems.append(f"undetected: none of {', '.join(fault.expected_alarms) or 'no alarm'} went to ALARM{why}")
    notified = detected is not None and detected.alarm in observation.notified
    if detected is not None and not notified and not fault.absorbed:
        problems.append(f"{detected.alarm}'s ALARM never reached the alarm state topic")
    problems += _quiet_problems(observation)
    computed, timed = fault.computed_seconds, time_to_fire(observation, detected, time_scale)
    if computed is not None and timed is not None and timed > computed * RATE_DROP_FACTOR + EVALUATION_SLACK_SECONDS:
        problems.append(f"{detected.alarm if detected else 'the alarm'} fired {timed:.0f} s (virtual) after "
                        f"{fault.timed_from} (the first bad file): later than its computed {computed:.0f} s allows")
    if observation.ok_at is None:
        problems.append("not every alarm returned to OK")
    problems += [f"invariant: {v}" for v in observation.violations]
    detect_real = detected.real_at - observation.injected_at if detected and observation.injected_at is not None else None
    repaired_from = observation.cleared_at
    repair_real = observation.ok_at - repaired_from if observation.ok_at is not None and repaired_from is not None else None
    return FaultVerdict(
        fault=fault.name,
        alarm=detected.alarm if detected else None,
        detect_real=_round(detect_real),
        detect_virtual=_round(detect_real / time_scale) if detect_real is not None else None,
        notified=notified,
        paged=observation.paged,
        remedy=fault.remedy or RECONCILER,
        repair_real=_round(max(repair_real, 0.0)) if repair_real is not None else None,
        repair_virtual=_round(max(repair_real, 0.0) / time_scale) if repair_real is not None else None,
        invariants_held=not observation.violations,
        problems=tuple(problems),
        absorbed=fault.absorbed,
        computed_virtual=_round(computed),
        timed_virtual=_round(timed),
    )


def time_to_fire(observation: FaultObservation, detected: AlarmChange | None, time_scale: float) -> float | None:
    """Virtual seconds from the fault's `timed_from` alarm first going to ALARM after the injection
    (a burn pair's short window: the first bad file) to the detecting alarm; None without both."""
    start = observation.fault.timed_from
    if detected is None or start is None or observation.injected_at is None:
        return None
    began = next((c for c in observation.changes
                  if c.alarm == start and c.new == "ALARM" and c.real_at >= observation.injected_at), None)
    return None if began is None else max(detected.real_at - began.real_at, 0.0) / time_scale


def _quiet_problems(observation: FaultObservation) -> list[str]:
    """Alarms the fault must not fire (a burn pair that must not page) that went to ALARM while it
    acted (from the injection to the clearing, or to the end if it was never cleared)."""
    quiet = set(observation.fault.quiet_alarms)
    if not quiet or observation.injected_at is None:
        return []
    until = observation.cleared_at if observation.cleared_at is not None else observation.ended_at
    fired = sorted({c.alarm for c in observation.changes
                    if c.new == "ALARM" and c.alarm in quiet and observation.injected_at <= c.real_at <= until})
    return [f"{', '.join(fired)} went to ALARM while the fault acted: it must stay quiet"] if fired else []


def _absorbed_problems(observation: FaultObservation) -> list[str]:
    """A fault the pipeline absorbs by construction: any alarm it makes fire is a false alarm."""
    if observation.injected_at is None:
        return []
    # A burn window alone notifies no one; a long one may cross its threshold on an earlier fault's
    # bad files as the window's file count passes its guard. Its pair's composite is judged.
    silent = set(observation.silent)
    fired = sorted({c.alarm for c in observation.changes
                    if c.new == "ALARM" and c.real_at >= observation.injected_at and c.alarm not in silent})
    return [f"absorbed by design, yet {', '.join(fired)} went to ALARM"] if fired else []


def false_alarms(changes: Sequence[AlarmChange], start: float, end: float) -> list[AlarmChange]:
    """Every alarm that went to ALARM on healthy traffic, between `start` and `end`."""
    return [c for c in changes if c.new == "ALARM" and start <= c.real_at <= end]


def game_day_problems(verdicts: Sequence[FaultVerdict], false: Sequence[AlarmChange]) -> list[str]:
    """Every reason to exit 1, one line each: a false alarm, and each fault's problems by name."""
    problems = [f"false alarm in the healthy phase: {c.alarm} ({c.reason[:120]})" for c in false]
    for verdict in verdicts:
        problems += [f"{verdict.fault}: {problem}" for problem in verdict.problems]
    return problems


def _round(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)
