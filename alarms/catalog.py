"""The alarm catalog: every alarm the pipeline ships, built from the metric catalog and the template.

One facade per resource kind (queue, function, state machine, table, semaphore), in the manner
of cdk-monitoring-constructs: each takes a resource's logical id and gives its alarms, with the
metric they watch named through `pipeline.telemetry.catalog` only. So an alarm can never watch a
metric that no code emits (a test checks each alarm's metric against the catalog's emitters).

Every alarm watches one metric (docs/ARCHITECTURE.md#alarms). A condition that combines signals (the stall
signature, a stalled backlog) is a metric the reconciler computes. Who is notified of what is
decided in `alarms.cloudformation` (one page per incident). Its description names its runbook
and the first thing to do. Its TreatMissingData is chosen on purpose: an idle DLQ, or a function
that was not invoked, is not breaching. A metric published only when non-zero (DynamoDB's
throttles) or a heartbeat (the reconciler's) is watched through `FILL(m, 0)` metric math, so
that an alarm on it can return to OK, and a reconciler that stops reporting breaches. Each alarm
also carries two example series, one that must fire it and one that must not, which the offline
evaluator replays in the tests.

The reconciler's alarms have one period per reconciler run: their period follows the
ReconcileSchedule parameter, restricted to the schedules in `RECONCILE_SCHEDULES`.

Thresholds follow the shape of AWS's recommended alarms
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Best_Practice_Recommended_Alarms_AWS_Services.html):
1-minute periods, and any execution failed, timed out or throttled counts. Where we chose
otherwise, `rationale` says why (for example, a DLQ pages on its first message, since each one is
a lost job).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from alarms.evaluate import AlarmRule, Comparison, TreatMissingData
from alarms.repository import runbook_base_url
from alarms.slos import LOST
from pipeline.stack import SERVICE_NAME, Function
from pipeline.telemetry.aws_catalog import AwsMetricSpec, ResourceKind, aws_metric
from pipeline.telemetry.catalog import CATALOG, NAMESPACE, Metric
from runbooks.catalog import Runbook
from stack.template import functions

# The function dimension carries the deployed name; service and stage come from the template.
TOPIC = "AlarmTopic"
Series = tuple[float | None, ...]  # one value per period, oldest first; None: no datapoint


@dataclass(frozen=True)
class WatchedMetric:
    """One metric with its full dimension set. Values are CloudFormation expressions (a Ref, a
    GetAtt) or literals; `resource` is the logical id of what it describes."""

    namespace: str
    name: str
    dimensions: tuple[tuple[str, Any], ...]
    resource: str
    metric: Metric | None = None  # when it is one of ours
    aws: AwsMetricSpec | None = None  # when AWS publishes it


RECONCILE_SCHEDULES: dict[str, int] = {
    "rate(1 minute)": 60,
    "rate(2 minutes)": 120,
    "rate(5 minutes)": 300,
    "rate(10 minutes)": 600,
    "rate(15 minutes)": 900,
}
"""The ReconcileSchedule values the reconciler's alarms handle (its AllowedValues), with their
periods. EventBridge wants `minute` for 1 and `minutes` otherwise; longer intervals would make a
stall page after an hour or more."""
DEFAULT_RECONCILE_SCHEDULE = "rate(5 minutes)"
SCHEDULE_PARAMETER = "ReconcileSchedule"
# One reconciler run at the default schedule: the period the reconciler's alarms are written for.
RECONCILE_RUN_SECONDS = RECONCILE_SCHEDULES[DEFAULT_RECONCILE_SCHEDULE]
# Periods CloudWatch accepts for an alarm: high resolution 10 or 30 s, else a multiple of a minute.
_HIGH_RESOLUTION_PERIODS = (10, 30)
_MAX_DESCRIPTION = 1024  # CloudWatch's limit on AlarmDescription

# Every alarm description ends with its runbook page's link, `<RunbookBaseUrl>/<id>.md`: the
# template parameter (no trailing slash) substituted by Fn::Sub, so a fork points at its own pages.
RUNBOOK_BASE_PARAMETER = "RunbookBaseUrl"
RUNBOOK_BASE_SUB = f"${{{RUNBOOK_BASE_PARAMETER}}}"
# The repository's runbooks/ folder, from pyproject.toml [project.urls] (alarms/repository.py);
# `pipeops template build` writes it as the parameter's Default.
DEFAULT_RUNBOOK_BASE_URL = runbook_base_url()
MAX_RUNBOOK_BASE_URL = 256  # the parameter's MaxLength: every description fits 1,024 with it
_LINK_LABEL = "Runbook: "


def runbook_link(runbook: Runbook, base: str = RUNBOOK_BASE_SUB) -> str:
    """The page of `runbook` under `base` (the template's parameter, for Fn::Sub, by default)."""
    return f"{base}/{runbook.value}.md"


@dataclass(frozen=True, kw_only=True)
class AlarmSpec:
    """One alarm, by keyword, in the manner of cdk-monitoring-constructs' alarm props.

    Required: what it means (`summary`, a sentence), where to send a person (`runbook`,
    `first_step`), what it watches, and two example series the tests replay (`fires_on` must fire
    it, `quiet_on` must not). The rule defaults to the common shape: the Sum of a 1-minute period
    above 0 once, missing data not breaching; an alarm states only where it differs. Every check
    of a spec is in `__post_init__`, so a spec that cannot deploy or cannot be read is refused
    where it is written.
    """

    logical_id: str
    summary: str  # what it means when it fires, one sentence
    runbook: Runbook
    first_step: str
    watched: WatchedMetric
    fires_on: Series
    quiet_on: Series
    statistic: str = "Sum"
    period: int = 60
    evaluation_periods: int = 1
    datapoints_to_alarm: int = 1
    threshold: float = 0
    comparison: Comparison = Comparison.GREATER_THAN_THRESHOLD
    treat_missing_data: TreatMissingData = TreatMissingData.NOT_BREACHING
    rationale: str = ""  # where we chose otherwise than AWS's recommended alarm, and why
    critical: bool = False  # part of the composite "pipeline unhealthy"
    fill: float | None = None  # watched as FILL(m, fill) metric math (alarms.evaluate, 9.)
    # The period is one reconciler run: ReconcileSchedule's interval (`period` is the default's).
    follows_schedule: bool = False

    def __post_init__(self) -> None:
        problems = [
            *([] if self.logical_id.endswith("Alarm") else ["its logical id must end in 'Alarm'"]),
            *([] if self.summary.endswith(".") else ["its summary must be a sentence ending in '.'"]),
            *self._rule_problems(),
            *self._schedule_problems(),
            *([] if self.fires_on and self.quiet_on else ["it needs a firing and a quiet example series"]),
        ]
        if "${" in self.summary + self.first_step:
            problems.append("`${` in its texts: the description is a Fn::Sub string")
        if len(self.description_at("x" * MAX_RUNBOOK_BASE_URL)) > _MAX_DESCRIPTION:
            problems.append(
                f"description longer than CloudWatch's {_MAX_DESCRIPTION} characters with a "
                f"{MAX_RUNBOOK_BASE_URL}-character {RUNBOOK_BASE_PARAMETER}"
            )
        if problems:
            raise ValueError(f"{self.logical_id}: {'; '.join(problems)}")

    def _rule_problems(self) -> list[str]:
        found = []
        if not 1 <= self.datapoints_to_alarm <= self.evaluation_periods:
            found.append(f"{self.datapoints_to_alarm} of {self.evaluation_periods} datapoints cannot alarm")
        if self.period not in _HIGH_RESOLUTION_PERIODS and (self.period <= 0 or self.period % 60):
            found.append(f"period {self.period} s: CloudWatch wants 10, 30 or a multiple of 60")
        return found

    def _schedule_problems(self) -> list[str]:
        """A reconciler alarm's period is one run, and its metric is sampled once a run."""
        if not self.follows_schedule:
            return []
        found = []
        if self.period != RECONCILE_RUN_SECONDS:
            found.append(f"a reconciler alarm's period is one run at the default schedule, {RECONCILE_RUN_SECONDS} s")
        metric = self.watched.metric
        if metric is None or CATALOG[metric].period != self.period:
            found.append("a reconciler alarm watches a reconciler metric sampled at the default schedule")
        return found

    @property
    def name_suffix(self) -> str:
        """The deployed AlarmName is `<stack>-<suffix>`."""
        return self.logical_id.removesuffix("Alarm")

    def description_at(self, base: str) -> str:
        """What it means, the first step, and its runbook page's link under `base` (last, so
        that a notification cut short by a client still shows the meaning first)."""
        return f"{self.summary} First: {self.first_step}. {_LINK_LABEL}{runbook_link(self.runbook, base)}"

    @property
    def description(self) -> str:
        """The description as deployed with the default RunbookBaseUrl."""
        return self.description_at(DEFAULT_RUNBOOK_BASE_URL)

    def rule(self, name: str | None = None) -> AlarmRule:
        """The evaluator's view of this alarm (the same numbers the template carries)."""
        return AlarmRule(
            name=name or self.name_suffix,
            statistic=self.statistic,
            period_seconds=self.period,
            evaluation_periods=self.evaluation_periods,
            datapoints_to_alarm=self.datapoints_to_alarm,
            threshold=self.threshold,
            comparison=self.comparison,
            treat_missing_data=self.treat_missing_data,
            fill=self.fill,
        )


# -- metrics ---------------------------------------------------------------------------------


def pipeline_metric(metric: Metric, emitter: Function) -> WatchedMetric:
    """One of our metrics as one function emits it (alarms watch one dimension set)."""
    spec = CATALOG[metric]
    if emitter not in spec.emitters:
        raise ValueError(f"{metric.value} is not emitted by {emitter.value}: an alarm on it could never fire")
    dimensions = (("service", SERVICE_NAME), ("stage", {"Ref": "Stage"}), ("function", {"Ref": emitter.value}))
    return WatchedMetric(NAMESPACE, metric.value, dimensions, emitter.value, metric=metric)


def resource_metric(kind: ResourceKind, name: str, logical_id: str, dimension: Any = None) -> WatchedMetric:
    """A metric AWS publishes about one template resource, with the dimension AWS gives it: the
    resource's Ref or GetAtt, or `dimension` for a resource of another stack (a literal name or ARN)."""
    spec = aws_metric(kind, name)
    value_by_kind: dict[ResourceKind, dict[str, Any]] = {
        ResourceKind.QUEUE: {"Fn::GetAtt": [logical_id, "QueueName"]},
        ResourceKind.FUNCTION: {"Ref": logical_id},
        ResourceKind.STATE_MACHINE: {"Ref": logical_id},
        ResourceKind.TABLE: {"Ref": logical_id},
    }
    value = value_by_kind[kind] if dimension is None else dimension
    return WatchedMetric(spec.namespace, name, ((spec.dimension, value),), logical_id, aws=spec)


# -- wording -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wording:
    """What the alarms call the parts of the pipeline they watch, and where they send a person first:
    the reference pipeline's by default. A sidecar (`pipeops sidecar build`) words the same alarms
    for a pipeline we did not build: one alarm, its words a parameter, never a second copy."""

    count: str = "active_count"  # the count attribute
    holders: str = "the executions holding slots"  # what the count should equal
    beyond_transit: str = ", beyond the slots in transit,"  # holders mode only: a slot taken or ended a moment ago
    started: str = "router-started execution"  # whose absence makes a full counter idle
    max_setting: str = "MaxConcurrentWorkflows"  # where the max is set
    drift_step: str = "`pipeops reconcile` (dry run) shows which holder leaked and why; then `pipeops reconcile --apply`"
    below_step: str = (
        "`pipeops reconcile` (dry run) names the count_mismatch; `pipeops reconcile --apply` sets the count to the holders"
    )
    backlog: str = "A run has waited QUEUED past the stall window (BacklogStallSeconds) while no run moved."
    backlog_step: str = "`pipeops status` shows the oldest QUEUED run and the slots; `pipeops reconcile` says why nothing starts"
    implausible: str = (
        "The reconciler held back releasing slots on absence (no execution of their names found, more than "
        "half the max at once, or a listing that missed running executions): suspect its view (the state "
        "machine ARN, its permissions) before the pipeline. Slots of ended executions were still released."
    )
    implausible_step: str = "`pipeops reconcile` names the holders; once checked, `pipeops reconcile --apply --release NAME`"
    execution_failed: str = "A workflow execution failed: its run is FAILED and its files were not all redacted."
    failure_names: str = "the state, error, cause and file key"  # what `pipeops failures` shows of one
    timed_out_shows: str = "shows there with its file key"
    errors_step: str = (
        "read its ERROR lines (Logs Insights on its log group, or the run drill-down dashboard); "
        "`pipeops failures` names the file for a task function"
    )


REFERENCE = Wording()


# -- facades, one per resource kind ------------------------------------------------------------

_GE, _LT = Comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD, Comparison.LESS_THAN_THRESHOLD


def dead_letter_queue_alarms(
    logical_id: str, holds: str, runbook: Runbook, first_step: str, *, dimension: Any = None
) -> list[AlarmSpec]:
    return [
        AlarmSpec(
            logical_id=f"{logical_id.replace('DeadLetterQueue', 'Dlq')}NotEmptyAlarm",
            summary=f"{logical_id} holds {holds}: each message is work that failed every retry and now waits for a person.",
            runbook=runbook,
            first_step=first_step,
            watched=resource_metric(ResourceKind.QUEUE, "ApproximateNumberOfMessagesVisible", logical_id, dimension),
            statistic="Maximum",
            fires_on=(0, 0, 1),
            quiet_on=(0, None, 0),
            rationale="pages on the first message (AWS's backlog alarms wait for a depth): a DLQ message is a lost job",
            critical=True,
        )
    ]


def function_alarms(logical_id: str, timeout_seconds: int, *, dimension: Any = None, wording: Wording = REFERENCE) -> list[AlarmSpec]:
    short = logical_id.removesuffix("Function")
    near_timeout = round(0.8 * timeout_seconds * 1000)
    return [
        AlarmSpec(
            logical_id=f"{short}ErrorsAlarm",
            summary=f"{logical_id} raised or timed out in 3 of the last 5 minutes.",
            runbook=Runbook.FUNCTION_ERRORS,
            first_step=wording.errors_step,
            watched=resource_metric(ResourceKind.FUNCTION, "Errors", logical_id, dimension),
            evaluation_periods=5,
            datapoints_to_alarm=3,
            fires_on=(0, 1, 2, 0, 1),
            quiet_on=(0, 1, None, 0, 0),
            rationale="3 of 5 minutes rather than 3 of 3: retries make single errors normal; a sustained rate is not",
        ),
        AlarmSpec(
            logical_id=f"{short}ThrottlesAlarm",
            summary=f"{logical_id} was throttled in 5 consecutive minutes (account or reserved concurrency).",
            runbook=Runbook.FUNCTION_THROTTLES,
            first_step=f"compare ConcurrentExecutions with the account limit; check {wording.max_setting}",
            watched=resource_metric(ResourceKind.FUNCTION, "Throttles", logical_id, dimension),
            evaluation_periods=5,
            datapoints_to_alarm=5,
            fires_on=(1, 2, 1, 1, 3),
            quiet_on=(1, 0, 1, None, 1),
        ),
        AlarmSpec(
            logical_id=f"{short}DurationAlarm",
            summary=f"{logical_id}'s p99 duration passed 80% of its {timeout_seconds} s timeout in 3 of 5 minutes.",
            runbook=Runbook.FUNCTION_DURATION,
            first_step="look for the slow dependency in its traces and logs before the timeouts start",
            watched=resource_metric(ResourceKind.FUNCTION, "Duration", logical_id, dimension),
            statistic="p99",
            evaluation_periods=5,
            datapoints_to_alarm=3,
            threshold=near_timeout,
            comparison=_GE,
            fires_on=(near_timeout, 10, near_timeout + 1, near_timeout * 1.1, 10),
            quiet_on=(near_timeout, 10, None, near_timeout - 1, 10),
            rationale="80% of the timeout at p99 (AWS recommends p90 against the timeout): the tail is what times out",
        ),
    ]


def state_machine_alarms(
    logical_id: str, *, dimension: Any = None, id_prefix: str = "", wording: Wording = REFERENCE
) -> list[AlarmSpec]:
    """`id_prefix` tells apart the alarms of several state machines in one stack (a sidecar's)."""

    def any_of(metric: str, suffix: str, summary: str, runbook: Runbook, first_step: str, *, critical: bool) -> AlarmSpec:
        """Any execution that `metric` counts, in one minute."""
        return AlarmSpec(
            logical_id=f"{id_prefix}Executions{suffix}Alarm",
            summary=summary,
            runbook=runbook,
            first_step=first_step,
            watched=resource_metric(ResourceKind.STATE_MACHINE, metric, logical_id, dimension),
            fires_on=(0, 0, 1),
            quiet_on=(0, None, 0),
            critical=critical,
        )

    return [
        any_of(
            "ExecutionsFailed",
            "Failed",
            wording.execution_failed,
            Runbook.EXECUTIONS_FAILED,
            f"`pipeops failures --since 1h` names {wording.failure_names}",
            critical=True,
        ),
        any_of(
            "ExecutionsTimedOut",
            "TimedOut",
            "A workflow execution ran past the state machine's TimeoutSeconds.",
            Runbook.EXECUTIONS_FAILED,
            f"`pipeops failures --since 1h`; a task that always times out {wording.timed_out_shows}",
            critical=True,
        ),
        any_of(
            "ExecutionThrottled",
            "Throttled",
            "Step Functions throttled StartExecution or state transitions.",
            Runbook.EXECUTION_THROTTLED,
            f"lower {wording.max_setting} or ask for a higher Step Functions quota",
            critical=False,
        ),
    ]


def table_alarms(logical_id: str) -> list[AlarmSpec]:
    short = logical_id.removesuffix("Table")
    return [
        AlarmSpec(
            logical_id=f"{short}{direction}ThrottlesAlarm",
            summary=f"DynamoDB throttled {direction.lower()}s on {logical_id} in 5 consecutive minutes.",
            runbook=Runbook.DYNAMODB_THROTTLES,
            first_step="on the coordination table the semaphore's one item is hot: lower MaxConcurrentWorkflows or "
            "the router's batch size",
            watched=resource_metric(ResourceKind.TABLE, f"{direction}ThrottleEvents", logical_id),
            evaluation_periods=5,
            datapoints_to_alarm=5,
            fill=0,
            fires_on=(1, 1, 4, 2, 1),
            quiet_on=(1, 1, 0, 2, 0),
            rationale="watched as `FILL(m, 0)`: DynamoDB publishes throttles only when there are some, and "
            "CloudWatch ignores missing data for every AWS/DynamoDB alarm whatever TreatMissingData says, so on "
            "the bare metric the alarm would stay in ALARM after its first episode. Filled, the minutes without "
            "throttles count as 0 and the alarm returns to OK; a table with no throttle in the range has "
            "nothing to fill, and its missing data is not breaching: OK",
        )
        for direction in ("Read", "Write")
    ]


def schedule_condition(expression: str) -> str:
    """The template condition that holds when ReconcileSchedule is `expression`."""
    minutes = RECONCILE_SCHEDULES[expression] // 60
    return f"ReconcileEvery{minutes}Minute{'s' if minutes > 1 else ''}"


def schedule_conditions() -> dict[str, Any]:
    """The conditions the reconciler alarms' period needs (hand-written in template.yaml's
    Conditions; `pipeops template build` refuses a template whose conditions differ)."""
    return {
        schedule_condition(expression): {"Fn::Equals": [{"Ref": SCHEDULE_PARAMETER}, expression]}
        for expression in RECONCILE_SCHEDULES
        if expression != DEFAULT_RECONCILE_SCHEDULE
    }


def schedule_period() -> Any:
    """ReconcileSchedule's interval in seconds, as a CloudFormation expression (nested Fn::If)."""
    period: Any = RECONCILE_SCHEDULES[DEFAULT_RECONCILE_SCHEDULE]
    for expression, seconds in reversed(RECONCILE_SCHEDULES.items()):
        if expression != DEFAULT_RECONCILE_SCHEDULE:
            period = {"Fn::If": [schedule_condition(expression), seconds, period]}
    return period


# The reconciler's alarms: the pipeline's own failure modes, from the metrics the reconciler emits
# once a run. Each has one period per run (`follows_schedule`) and pages (critical).


def _reconciler_metric(metric: Metric) -> WatchedMetric:
    return pipeline_metric(metric, Function.RECONCILER)


def counter_alarms(wording: Wording = REFERENCE) -> list[AlarmSpec]:
    """The semaphore's count against the executions holding its slots, in both directions."""
    return [
        AlarmSpec(
            logical_id="CounterDriftAlarm",
            summary=f"{wording.count} has stayed above {wording.holders}{wording.beyond_transit} for 3 reconciler runs: "
            "slots are leaking faster than they are repaired, or the reconciler reports without repairing.",
            runbook=Runbook.COUNTER_DRIFT,
            first_step=wording.drift_step,
            watched=_reconciler_metric(Metric.COUNTER_DRIFT),
            statistic="Minimum",
            period=RECONCILE_RUN_SECONDS,
            follows_schedule=True,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            threshold=1,
            comparison=_GE,
            fires_on=(0, 1, 2, 1),
            quiet_on=(1, 2, 0, 1),
            rationale="the minimum over each run, and only the slots the reconciler would repair: a slot in transit "
            "(taken and not started yet, or ended and not released yet, within the reconciler's grace) is no drift, "
            "and at full throughput almost every run sees one",
            critical=True,
        ),
        AlarmSpec(
            logical_id="CounterBelowRunningAlarm",
            summary=f"{wording.count} is below {wording.holders}: admission trusts the count, so more than "
            f"{wording.max_setting} may run until it is set right.",
            runbook=Runbook.COUNTER_DRIFT,
            first_step=wording.below_step,
            watched=_reconciler_metric(Metric.COUNTER_DRIFT),
            # Minimum: the run that sees the count low repairs it, and a second run in the same
            # period (a late schedule, a retry) reports 0; the low one must still show.
            statistic="Minimum",
            period=RECONCILE_RUN_SECONDS,
            follows_schedule=True,
            comparison=_LT,
            fires_on=(0, 0, -3),
            quiet_on=(0, None, 2),
            rationale="the other side of CounterDrift, on the first run that sees it: a count can only fall below "
            "its holders by a bad write (a hand edit, a bug), never by a race, and while it is low the cap is broken",
            critical=True,
        ),
    ]


def _raised_flag(logical_id: str, metric: Metric, summary: str, runbook: Runbook, first_step: str, rationale: str = "") -> AlarmSpec:
    """A 0/1 signal the reconciler computes: one run that raises it pages."""
    return AlarmSpec(
        logical_id=logical_id,
        summary=summary,
        runbook=runbook,
        first_step=first_step,
        watched=_reconciler_metric(metric),
        statistic="Maximum",
        period=RECONCILE_RUN_SECONDS,
        follows_schedule=True,
        threshold=1,
        comparison=_GE,
        fires_on=(0, 0, 1),
        quiet_on=(0, None, 0),
        rationale=rationale,
        critical=True,
    )


def stall_alarms(wording: Wording = REFERENCE) -> list[AlarmSpec]:
    """Nothing moves: every slot taken with nothing running, a run waiting, or a release held back."""
    return [
        AlarmSpec(
            logical_id="SlotsFullIdleAlarm",
            summary=f"Every slot is counted taken while no {wording.started} runs: the pipeline is stalled "
            "at max concurrency with nothing running.",
            runbook=Runbook.SLOTS_FULL_IDLE,
            first_step="`pipeops reconcile --apply` releases the leaked slots (check `pipeops status` first)",
            watched=_reconciler_metric(Metric.SLOTS_FULL_IDLE),
            statistic="Maximum",
            period=RECONCILE_RUN_SECONDS,
            follows_schedule=True,
            evaluation_periods=2,
            datapoints_to_alarm=2,
            threshold=1,
            comparison=_GE,
            fires_on=(0, 1, 1),
            quiet_on=(1, 0, 1),
            critical=True,
        ),
        _raised_flag(
            "BacklogStalledAlarm",
            Metric.BACKLOG_STALLED,
            wording.backlog,
            Runbook.BACKLOG_STALLED,
            wording.backlog_step,
            rationale="not SQS's ApproximateAgeOfOldestMessage: every capacity wait re-sends the message and resets it",
        ),
        _raised_flag(
            "ImplausibleDriftAlarm",
            Metric.IMPLAUSIBLE_DRIFT,
            wording.implausible,
            Runbook.IMPLAUSIBLE_DRIFT,
            wording.implausible_step,
        ),
    ]


def heartbeat_alarm() -> AlarmSpec:
    """The reconciler itself: one heartbeat a run, and its absence pages."""
    return AlarmSpec(
        logical_id="ReconcilerSilentAlarm",
        summary="The reconciler has stopped reporting for 3 of its runs: nothing repairs drift and its alarms see "
        "nothing.",
        runbook=Runbook.RECONCILER_SILENT,
        first_step="check the ReconcilerFunction's errors and its schedule rule (enabled, ReconcileSchedule)",
        watched=_reconciler_metric(Metric.RECONCILE_RUNS),
        period=RECONCILE_RUN_SECONDS,
        follows_schedule=True,
        evaluation_periods=3,
        datapoints_to_alarm=3,
        threshold=1,
        comparison=_LT,
        treat_missing_data=TreatMissingData.IGNORE,
        fill=0,
        fires_on=(1, None, None, None),
        quiet_on=(1, None, 1, None),
        rationale="watched as `FILL(m, 0)` with missing data ignored, so that a new stack is quiet until there "
        "is something to say: while a heartbeat is in the evaluation range every run without one counts as 0, "
        "and 3 in a row page (15 minutes at the default 5-minute ReconcileSchedule; the period is always one "
        "scheduled run). Before the first heartbeat there is nothing to fill and the alarm stays "
        "INSUFFICIENT_DATA (the price: a reconciler that never runs at all pages nobody; `pipeops alarms list` "
        "shows ReconcilerSilent INSUFFICIENT_DATA and its errors reach the state topic as ReconcilerErrors); "
        "once the last heartbeat leaves the range, `ignore` keeps the ALARM until the reconciler reports again",
        critical=True,
    )


def semaphore_alarms(wording: Wording = REFERENCE) -> list[AlarmSpec]:
    """The pipeline's own failure modes, from the reconciler's metrics (one sample per run)."""
    return [*counter_alarms(wording), *stall_alarms(wording), heartbeat_alarm()]


def router_alarms() -> list[AlarmSpec]:
    return [
        AlarmSpec(
            logical_id="RouterFailuresAlarm",
            summary="The router failed to route messages in 2 of the last 15 minutes (retried, then the DLQ).",
            runbook=Runbook.ROUTER_FAILURES,
            first_step="Logs Insights on the router: `filter level = \"ERROR\" | stats count() by reason`",
            watched=pipeline_metric(Metric.ROUTER_FAILURES, Function.ROUTER),
            evaluation_periods=15,
            datapoints_to_alarm=2,
            fires_on=(1, 0, 0, 0, 0, 0, 1),
            quiet_on=(4, 0, 0, 0, 0, 0, None),
            rationale="2 of the last 15 minutes, not 3 of 5: one poison message fails once per visibility timeout "
            "(365 s), 5 times before the DLQ, so its failures are 6 minutes apart and no 5 minutes ever held 3 "
            "of them; a message fails again only a visibility timeout later, so a burst that one retry clears "
            "stays in one minute. Critical, so that the poison message that also fills the DLQ pages once",
            critical=True,
        )
    ]


def pipeline_alarms() -> list[AlarmSpec]:
    return [
        AlarmSpec(
            logical_id="FileFailureRateAlarm",
            summary="On average more than 20% of the files of the runs accounted for in 5 minutes failed.",
            runbook=Runbook.FILE_FAILURE_RATE,
            first_step="`pipeops jobs --status FAILED` and `pipeops job show <id>`: one bad file type, or a detector "
            "outage",
            watched=pipeline_metric(Metric.RUN_FILE_FAILURE_PERCENT, Function.FINALIZE),
            statistic="Average",
            period=CATALOG[Metric.RUN_FILE_FAILURE_PERCENT].period,
            threshold=20,
            fires_on=(0, None, 50),
            quiet_on=(50, None, 10),
            rationale="one period, not two in a row: in a quiet hour the one bad run is the only sample of its "
            "period and the next period has none, so 'two in a row' never fired; in a busy period one bad run is "
            "averaged with the good ones. Critical, so that a run that fails its files and its execution pages once",
            critical=True,
        )
    ]


def lost_alarm() -> list[AlarmSpec]:
    """The lost objective (`alarms.slos.LOST`), an invariant: any lost file pages."""
    [indicator] = LOST.bad
    metric = Metric(indicator.value)
    return [
        AlarmSpec(
            logical_id="FilesLostAlarm",
            summary="The reconciler found a file in no run and with no claim past its deadline: it will never be "
            "processed unless someone uploads or redrives it (the objective: no file is lost).",
            runbook=Runbook.FILE_LOST,
            first_step="list the claims past the deadline in the unsettled-claims index, check each with `pipeops job show`, "
            "then upload each lost file again (`pipeops upload`)",
            watched=_reconciler_metric(metric),
            statistic="Maximum",
            period=RECONCILE_RUN_SECONDS,
            follows_schedule=True,
            fires_on=(0, 0, 1),
            quiet_on=(0, None, 0),
            rationale="a count, not a burn rate: an objective of 100% leaves no budget, so the first lost file "
            "pages (the Maximum of the reconciler's gauge over its run)",
            critical=True,
        )
    ]


# -- the catalog -------------------------------------------------------------------------------

DEAD_LETTER_QUEUES = (
    ("DeadLetterQueue", "job messages the router could not route", Runbook.DLQ_MESSAGES,
     "`pipeops status` shows the depth; read the router's ERROR lines (reason), fix it, then redrive the DLQ"),
    ("TrackerDeadLetterQueue", "execution status events the tracker could not handle (their slots may leak)",
     Runbook.TRACKER_DLQ, "`pipeops reconcile` repairs the slots; then read the events and redrive them"),
    ("IngestDeadLetterQueue", "S3 object events ingest could not put into a run (those files are not processed)",
     Runbook.INGEST_DLQ, "read the ingest errors, fix them, then re-upload or redrive the events"),
    ("ScheduledDeadLetterQueue", "scheduled batch-trigger and reconciler invocations that failed (not retried)",
     Runbook.FUNCTION_ERRORS, "read the failed function's ERROR lines (each message holds the event and the error)"),
    ("QuarantineQueue", "dead letters a redrive parked (failed again after a redrive, or no redrive can fix them)",
     Runbook.DLQ_MESSAGES, "`pipeops status` shows the depth; read each message's `pipeops-reason` attribute, "
     "fix the cause, then send it back by hand (a redrive never takes it)"),
)  # fmt: skip
TABLES = ("TrackingTable", "CoordinationTable")
STATE_MACHINE = "PipelineStateMachine"


def function_timeouts(template: Mapping[str, Any]) -> dict[str, int]:
    """Each function's Timeout (its own, or the Globals'), read from the template."""
    default = int(template.get("Globals", {}).get("Function", {}).get("Timeout", 3))
    return {
        logical_id: int(resource.get("Properties", {}).get("Timeout", default))
        for logical_id, resource in functions(template).items()
    }


def build_catalog(template: Mapping[str, Any]) -> list[AlarmSpec]:
    """Every alarm, for the resources of `template` (functions and their timeouts from it)."""
    specs: list[AlarmSpec] = []
    for queue, holds, runbook, first_step in DEAD_LETTER_QUEUES:
        specs += dead_letter_queue_alarms(queue, holds, runbook, first_step)
    specs += semaphore_alarms() + router_alarms() + pipeline_alarms() + lost_alarm()
    specs += state_machine_alarms(STATE_MACHINE)
    for function, timeout in function_timeouts(template).items():
        specs += function_alarms(function, timeout)
    for table in TABLES:
        specs += table_alarms(table)
    ids = [spec.logical_id for spec in specs]
    if len(ids) != len(set(ids)):
        raise ValueError("two alarms share a logical id")
    return specs


def critical(specs: Sequence[AlarmSpec]) -> list[AlarmSpec]:
    return [spec for spec in specs if spec.critical]
