"""The verdicts, pure: was each fault detected, notified and repaired with the invariants held,
did anything fire on healthy traffic, and what makes the game day exit 1."""

from __future__ import annotations

from collections.abc import Sequence

from pipeops.gameday.model import AlarmChange, FaultObservation, FaultVerdict

RECONCILER = "reconciler"  # the remedy of a fault the scheduled reconciler repairs


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
    )


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
