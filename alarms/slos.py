"""The service level objectives, declared once: what users feel, its target, and how fast a burn pages.

Users of the pipeline feel one thing: their file is done, or not, in time. So the objectives are
about files, not causes (the alarm catalog watches causes):

- **on time**: at least `SloTarget` percent (a template parameter, default 99) of the files that
  were due in the last 28 days were done (their run COMPLETE, the file not failed) within
  `FileDeadlineMinutes` of their upload. Good events: `FilesOnTime`; bad events: `FilesMissed`
  (failed or late: a file failed, its run FAILED, or its outcome past the deadline) and
  `FilesOverdue` (no outcome past the deadline, counted once by the reconciler: a lost or stuck
  file never reaches an outcome, so an indicator measured only at completion would never see it).
- **lost**: no file is lost (`FilesLost`, the reconciler's gauge). An invariant, not a ratio: a
  100% objective leaves no budget to burn, so its alarm is a count (`alarms.catalog.lost_alarm`).

The burn-rate policy is the SRE workbook's multi-window, multi-burn-rate alert ("Alerting on
SLOs", https://sre.google/workbook/alerting-on-slos/): page when 2% of the 28-day budget burns in
an hour (14.4x) or 5% in six hours (6x), ticket when 10% burns in a day (3x), each confirmed by a
short window (1/12 of the long one) so that an alarm stops once the burn stops. The workbook's
ticket pair is 3 days AND 6 hours; a CloudWatch alarm cannot look back further than one day
(Period x EvaluationPeriods <= 86,400 s), so here it is 1 day AND 2 hours, at the same 3x.

Pure: data and arithmetic only (the alarms are built in `alarms.slo_alarms`, the budget read by
`pipeops slo`). Percentages are Decimals from their text, so 99% gives thresholds 0.144, 0.06
and 0.03 exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from pipeline.telemetry.catalog import Metric

TARGET_PARAMETER = "SloTarget"
DEFAULT_TARGET = "99"
SLO_TARGETS = ("95", "98", "99", "99.5", "99.9")
"""SloTarget's AllowedValues (percent), each accepted by `target_problems`. A CloudWatch alarm's
threshold is a number, not an expression: the burn alarms pick theirs by conditions on the
parameter (`alarms.slo_alarms.by_target`), so the parameter is restricted to these values."""
BUDGET_DAYS = 28
DAY_SECONDS = 86_400
BUDGET_SECONDS = BUDGET_DAYS * DAY_SECONDS
MAX_ALARM_LOOKBACK_SECONDS = DAY_SECONDS  # CloudWatch: Period x EvaluationPeriods <= 1 day
# The defaults of the template parameters that decide when a file can first count as bad.
DEFAULT_FILE_DEADLINE_MINUTES = 15
DEFAULT_RECONCILE_RUN_MINUTES = 5


class Indicator(StrEnum):
    """The indicator metrics (`pipeline.telemetry.catalog`), by name."""

    ON_TIME = Metric.FILES_ON_TIME.value
    MISSED = Metric.FILES_MISSED.value
    OVERDUE = Metric.FILES_OVERDUE.value
    LOST = Metric.FILES_LOST.value


class Severity(StrEnum):
    PAGE = "page"  # pages through the composite PipelineUnhealthy, like every critical alarm
    TICKET = "ticket"  # the state topic only (a chat channel or a ticket queue)


@dataclass(frozen=True)
class BurnAlert:
    """One pair: ALARM when the budget burns at `burn_rate` over both windows."""

    name: str  # the composite's logical id is `FilesOnTime<name>Alarm`
    severity: Severity
    burn_rate: float
    long_seconds: int
    short_seconds: int

    @property
    def exhaustion_days(self) -> float:
        """Days until a 28-day budget is gone at this burn rate."""
        return exhaustion_seconds(self.burn_rate) / DAY_SECONDS

    @property
    def windows(self) -> tuple[int, int]:
        return (self.long_seconds, self.short_seconds)


POLICY = (
    BurnAlert("FastBurn", Severity.PAGE, 14.4, 3_600, 300),
    BurnAlert("SlowBurn", Severity.PAGE, 6, 6 * 3_600, 1_800),
    BurnAlert("SteadyBurn", Severity.TICKET, 3, DAY_SECONDS, 2 * 3_600),
)
WINDOWS = tuple(sorted({window for alert in POLICY for window in alert.windows}))


@dataclass(frozen=True)
class Objective:
    """One objective over a rolling budget period; `target` None: the invariant "never" (a count)."""

    name: str
    summary: str
    good: tuple[Indicator, ...]
    bad: tuple[Indicator, ...]
    target_parameter: str | None
    period_days: int = BUDGET_DAYS


ON_TIME = Objective(
    "on-time",
    "files are done (not failed) within FileDeadlineMinutes of their upload",
    good=(Indicator.ON_TIME,),
    bad=(Indicator.MISSED, Indicator.OVERDUE),
    target_parameter=TARGET_PARAMETER,
)
LOST = Objective("lost", "no file is lost", good=(), bad=(Indicator.LOST,), target_parameter=None)
OBJECTIVES = (ON_TIME, LOST)


def window_label(seconds: int) -> str:
    """1h, 5m, 1d: the window as the alarm names and the CLI show it."""
    for unit, size in (("d", DAY_SECONDS), ("h", 3_600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def fraction(target: str) -> Decimal:
    """The target as a fraction of 1 (99 -> 0.99)."""
    return Decimal(target) / 100


def error_budget(target: str) -> Decimal:
    """The share of files allowed to be bad (99 -> 0.01)."""
    return 1 - fraction(target)


def threshold(alert: BurnAlert, target: str) -> float:
    """The bad share at which `alert`'s windows breach: burn rate x (1 - target)."""
    return float(Decimal(str(alert.burn_rate)) * error_budget(target))


def min_files(alert: BurnAlert, target: str) -> int:
    """The long window's minimum-files guard: the fewest files at which one bad file alone stays
    below the threshold, so that a quiet hour with one failed or late file does not page (99%: 7
    an hour for the fast pair, 17 in six hours, 34 in a day). The short window needs one file: it only confirms
    that the burn the long window saw goes on."""
    return math.floor(1 / threshold(alert, target)) + 1


def detection_floor_minutes(
    deadline_minutes: int = DEFAULT_FILE_DEADLINE_MINUTES, reconcile_minutes: int = DEFAULT_RECONCILE_RUN_MINUTES
) -> int:
    """The earliest a total outage can show in the indicators when no run ends at all: such a file
    counts as bad only past its deadline (overdue on the first reconciler run past it). A run that
    ends FAILED counts its files bad at once."""
    return deadline_minutes + reconcile_minutes


def target_problems(target: str, *, deadline_minutes: int = DEFAULT_FILE_DEADLINE_MINUTES,
                    reconcile_minutes: int = DEFAULT_RECONCILE_RUN_MINUTES) -> list[str]:
    """Why the alarms cannot work at `target` (percent); empty when they can.

    - Too low: the fast pair fires at a bad share of 14.4 x (1 - target); at 1 or more it could fire
      only when every file is bad, so the target must be above 1 - 1/14.4 (93.06%).
    - Too high: a total outage spends the whole 28-day budget in (1 - target) x 28 days, and its
      first bad file shows only past its deadline plus one reconciler run (20 minutes at the
      defaults); if the budget is gone by then every alarm fires after it is gone: the target must
      be below 1 - 20 min / 28 days (99.9504%).
    """
    try:
        share = fraction(target)
    except ArithmeticError:
        return [f"{target!r} is not a number (percent)"]
    if not 0 < share < 1:
        return [f"{target}% is not a target: a ratio objective is between 0 and 100% (a 100% objective has no "
                "budget: make it an invariant with a count alarm)"]
    found = []
    fastest = max(POLICY, key=lambda alert: alert.burn_rate)
    if threshold(fastest, target) >= 1:
        lowest = (1 - 1 / Decimal(str(fastest.burn_rate))) * 100
        found.append(f"{target}% is too low: the {fastest.burn_rate}x pair would need more than every file bad "
                     f"({fastest.burn_rate} x {error_budget(target)} >= 1); the target must be above {lowest:.2f}%")
    floor = detection_floor_minutes(deadline_minutes, reconcile_minutes)
    outage_minutes = error_budget(target) * BUDGET_DAYS * 24 * 60
    if outage_minutes <= floor:
        highest = (1 - Decimal(floor) / (BUDGET_DAYS * 24 * 60)) * 100
        found.append(f"{target}% is too high: a total outage spends the {BUDGET_DAYS}-day budget in "
                     f"{float(outage_minutes):g} minutes, before its first bad file can show ({floor} minutes: "
                     f"the {deadline_minutes}-minute deadline plus a {reconcile_minutes}-minute reconciler run), "
                     f"so every alarm would fire after the budget is gone; the target must be below {highest:.4f}%")
    for alert in POLICY:
        if alert.long_seconds > MAX_ALARM_LOOKBACK_SECONDS:
            found.append(f"{alert.name}: a {window_label(alert.long_seconds)} window is longer than a CloudWatch "
                         "alarm can look back (1 day)")
    return found


def time_to_fire_seconds(alert: BurnAlert, target: str, error_rate: float) -> float | None:
    """Seconds from the first bad file counted to the pair firing, at a steady `error_rate` (the
    bad share of the files due) after a long window full of good files at the same file rate, with
    files enough for the guard: the long window's share reaches the threshold after threshold /
    error_rate of the window (the short window's share is the error rate from its first file).
    None: this error rate never fires the pair. A failed file (its run FAILED) counts bad at once,
    when its run ends; only a file with no outcome waits for its deadline (overdue on the first
    reconciler run past it, `detection_floor_minutes`): add that to time a stall from its start.
    `bench.slo_burn` measures it on the sandbox."""
    limit = threshold(alert, target)
    if error_rate < limit:
        return None
    return alert.long_seconds * limit / error_rate


# -- the budget, from counts ---------------------------------------------------------------------


def exhaustion_seconds(burn_rate: float, remaining: float = 1.0) -> float:
    """Seconds until `remaining` (a share of the whole budget) is gone at `burn_rate` (inf at 0)."""
    if burn_rate <= 0:
        return math.inf
    return max(remaining, 0.0) * BUDGET_SECONDS / burn_rate


def bad_share(good: float, bad: float) -> float | None:
    """bad / (good + bad), None with no file in the window."""
    total = good + bad
    return bad / total if total > 0 else None


def burn_rate(good: float, bad: float, target: str) -> float | None:
    """How many times faster than allowed the budget burns: the bad share over the budget's share."""
    share = bad_share(good, bad)
    return None if share is None else share / float(error_budget(target))


def budget_remaining(good: float, bad: float, target: str) -> float:
    """The share of the 28-day budget left, from the period's counts: 1 - bad / (budget x total).
    Negative when it is overspent; 1 with no file (nothing was spent)."""
    total = good + bad
    if total <= 0:
        return 1.0
    return 1 - bad / (float(error_budget(target)) * total)
