"""What a game day observes and concludes, as plain data (JSON in and out, no AWS).

Times are seconds since the game day started, real (`real_at`) and as the stack would see them
on AWS (`virtual_at` = real / time scale): the sandbox runs on a scaled clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


class Fault(Protocol):
    """One named fault of the fault catalog (pipeops.faults): what it breaks, the alarms that
    must see it, and who repairs it (a runbook id, or None: the scheduled reconciler)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def expected_alarms(self) -> tuple[str, ...] | list[str]: ...

    @property
    def remedy(self) -> Any: ...  # a runbook id (a str enum), or None


@dataclass(frozen=True)
class FaultSpec:
    """A fault as the game day records it (read from the catalog, or from a recorded run). No
    expected alarm: the pipeline absorbs it by construction, and no alarm may fire."""

    name: str
    description: str
    expected_alarms: tuple[str, ...]
    remedy: str | None
    for_seconds: float | None = None  # how long it acts, virtual seconds (absorbed faults; at least, with quiet alarms)
    # Alarms that must not go to ALARM while the fault acts (a burn pair that must not page).
    quiet_alarms: tuple[str, ...] = ()
    # Virtual seconds of traffic before the injection, at `traffic_every` (virtual seconds between
    # files; None: the game day's fault traffic): a burn rate is a share of the files in a window,
    # so the windows must hold the history the fault is about.
    lead_seconds: float | None = None
    traffic_every: float | None = None
    # The computed time to fire (virtual seconds), counted from `timed_from` going to ALARM (a burn
    # pair's short window: it breaches at the first bad file).
    computed_seconds: float | None = None
    timed_from: str | None = None

    @classmethod
    def of(cls, fault: Fault) -> FaultSpec:
        remedy = getattr(fault.remedy, "value", fault.remedy)
        alarms = tuple(alarm_id(a) for a in fault.expected_alarms)
        return cls(
            fault.name, fault.description, alarms, None if remedy is None else str(remedy), getattr(fault, "for_seconds", None),
            quiet_alarms=tuple(alarm_id(a) for a in getattr(fault, "quiet_alarms", ())),
            lead_seconds=getattr(fault, "lead_seconds", None),
            traffic_every=getattr(fault, "traffic_every", None),
            computed_seconds=getattr(fault, "computed_seconds", None),
            timed_from=getattr(fault, "timed_from", None),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultSpec:
        """A recorded spec; one recorded before a field existed gets its default."""
        return cls(**{**data, "expected_alarms": tuple(data["expected_alarms"]),
                      "quiet_alarms": tuple(data.get("quiet_alarms", ()))})

    @property
    def absorbed(self) -> bool:
        return not self.expected_alarms


def alarm_id(name: str) -> str:
    """An alarm's id as the catalog's deployed suffix: `CounterDrift` for `CounterDriftAlarm` or
    `pipeops-CounterDrift`."""
    return name.rsplit("-", 1)[-1].removesuffix("Alarm")


@dataclass(frozen=True)
class AlarmChange:
    """One state change the sandbox's alarm engine made, and the topics it was published to."""

    alarm: str  # the alarm id (deployed name without the stack prefix)
    old: str
    new: str
    real_at: float
    virtual_at: float
    reason: str = ""


@dataclass(frozen=True)
class Action:
    """Something done or seen on a fault's timeline: injected, notified, a runbook, an audit record."""

    what: str
    real_at: float


@dataclass(frozen=True)
class Point:
    real_at: float
    value: float


@dataclass
class FaultObservation:
    """Everything the shell saw of one fault, from the moment it checked that every alarm was OK."""

    fault: FaultSpec
    started_at: float  # the all-OK check before the injection
    injected_at: float | None
    not_ok_before: tuple[str, ...] = ()  # alarms in ALARM when the fault was to be injected
    changes: tuple[AlarmChange, ...] = ()
    notified: tuple[str, ...] = ()  # alarms whose ALARM reached the alarm state topic
    paged: bool = False  # the composite's ALARM reached the page topic
    cleared_at: float | None = None
    remedy_started_at: float | None = None
    remedy_verdict: str | None = None  # the runbook's verdict, or "reconciler"
    remedy_applied: int = 0  # actions the runbook applied
    ok_at: float | None = None  # every alarm back to OK
    ended_at: float = 0.0
    audit: tuple[Action, ...] = ()  # the audit records written during the fault
    actions: tuple[Action, ...] = ()
    violations: tuple[str, ...] = ()  # invariants broken (invariants.py)
    series: Mapping[str, tuple[Point, ...]] = field(default_factory=dict)  # alarm id -> its metric
    disabled: tuple[str, ...] = ()  # alarms the game day was asked to run without
    error: str = ""  # the injection or the remedy could not be done
    # Alarms that notify no one (the burn pairs' windows, judged through their composites), and
    # those of them still in ALARM once every notifying alarm was OK: budget the fault spent.
    silent: tuple[str, ...] = ()
    burning_after: tuple[str, ...] = ()


@dataclass(frozen=True)
class FaultVerdict:
    """The judgement of one fault: detection, notification, repair, invariants, and why it failed."""

    fault: str
    alarm: str | None  # the expected alarm that fired first
    detect_real: float | None
    detect_virtual: float | None
    notified: bool
    paged: bool
    remedy: str  # the runbook id, or "reconciler"
    repair_real: float | None  # from the fault cleared to every alarm OK
    repair_virtual: float | None
    invariants_held: bool
    problems: tuple[str, ...]
    absorbed: bool = False  # no alarm expected, and none fired
    # A fault with a computed time to fire: that time, and the measured one, virtual seconds from
    # its `timed_from` alarm going to ALARM (the first bad file).
    computed_virtual: float | None = None
    timed_virtual: float | None = None

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def timed_text(self) -> str:
        """The computed time to fire beside the measured one ('' for a fault with none)."""
        if self.computed_virtual is None:
            return ""
        measured = "not measured" if self.timed_virtual is None else f"measured {self.timed_virtual / 60:.1f}"
        return f"from the first bad file: computed {self.computed_virtual / 60:.1f} vmin, {measured}"


@dataclass
class GameDayResult:
    """A whole game day: settings, the healthy phase, every fault observed and judged."""

    time_scale: float
    short: bool
    faults: list[FaultObservation]
    verdicts: list[FaultVerdict]
    false_alarms: list[AlarmChange]  # ALARM transitions in the healthy phase
    healthy_seconds: float
    seconds: float
    max_concurrency: int
    sandbox_timings: list[str]  # where the sandbox times something differently from AWS
    disabled: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # every reason to exit 1, one line each

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        for verdict in data["verdicts"]:
            verdict["passed"] = not verdict["problems"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GameDayResult:
        def change(d: Mapping[str, Any]) -> AlarmChange:
            return AlarmChange(**d)

        def action(d: Mapping[str, Any]) -> Action:
            return Action(**d)

        faults = []
        for f in data["faults"]:
            spec = f["fault"]
            faults.append(
                FaultObservation(
                    **{
                        **f,
                        "fault": FaultSpec.from_dict(spec),
                        "not_ok_before": tuple(f["not_ok_before"]),
                        "changes": tuple(change(c) for c in f["changes"]),
                        "notified": tuple(f["notified"]),
                        "audit": tuple(action(a) for a in f["audit"]),
                        "actions": tuple(action(a) for a in f["actions"]),
                        "violations": tuple(f["violations"]),
                        "series": {k: tuple(Point(**p) for p in v) for k, v in f["series"].items()},
                        "disabled": tuple(f["disabled"]),
                        "silent": tuple(f.get("silent", ())),
                        "burning_after": tuple(f.get("burning_after", ())),
                    }
                )
            )
        verdicts = [
            FaultVerdict(**{k: v for k, v in d.items() if k != "passed"} | {"problems": tuple(d["problems"])})
            for d in data["verdicts"]
        ]
        return cls(
            time_scale=data["time_scale"],
            short=data["short"],
            faults=faults,
            verdicts=verdicts,
            false_alarms=[change(c) for c in data["false_alarms"]],
            healthy_seconds=data["healthy_seconds"],
            seconds=data["seconds"],
            max_concurrency=data["max_concurrency"],
            sandbox_timings=list(data["sandbox_timings"]),
            disabled=list(data.get("disabled", [])),
            problems=list(data.get("problems", [])),
        )
