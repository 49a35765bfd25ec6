"""The pipeline's CloudWatch dashboards, built from the metric and alarm catalogs.

Two dashboards, generated into template.yaml beside the alarms (`pipeops template build`):

- *Operations* (`<stack>-operations`): opens on what on-call needs first: the composite alarm's
  state, the alarms not OK (an alarm status widget filtered to ALARM and INSUFFICIENT_DATA: the
  healthy ones are not listed), and the charts behind the critical alarms. Then the rest: backlog,
  the semaphore, executions, throughput, run latency, the reconciler, the functions side by side,
  both tables, and every alarm's status in one widget at the bottom. Each alarm's threshold is
  drawn on the widget that shows its metric, as cdk-monitoring-constructs puts alarms beside their
  graphs.
- *Run drill-down* (`<stack>-run-drilldown`): Logs Insights widgets over the functions' log groups
  (errors with job id, execution name and file key; one run's timeline).

A body is a plain dict whose resource names are CloudFormation `Fn::Sub` placeholders
(`${MainQueue.QueueName}`, `${RouterFunction}`, `${AWS::Region}`, ...). `resources()` wraps both
bodies as `AWS::CloudWatch::Dashboard` resources; `resolve()` substitutes real names, so the same
body can be checked against CloudWatch's limits and drawn offline (`pipeops dashboard render`).

Every metric row comes from `pipeline.telemetry.catalog` (ours: `CATALOG`; AWS's: `AWS_CATALOG`)
through the alarm catalog's own `pipeline_metric` / `resource_metric`, so a dashboard row and an
alarm on the same metric always carry the same dimensions.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from alarms.catalog import (
    DEAD_LETTER_QUEUES,
    STATE_MACHINE,
    TABLES,
    AlarmSpec,
    WatchedMetric,
    function_timeouts,
    pipeline_metric,
    resource_metric,
)
from alarms.cloudformation import COMPOSITE
from alarms.evaluate import Comparison
from dashboards.limits import GRID_COLUMNS, MAX_ALARMS_PER_WIDGET
from pipeline.stack import Function
from pipeline.telemetry.aws_catalog import ResourceKind
from pipeline.telemetry.catalog import CATALOG, Metric

OPERATIONS = "OperationsDashboard"
DRILLDOWN = "RunDrilldownDashboard"
OPERATIONS_SUFFIX = "operations"  # DashboardName: <stack>-operations
DRILLDOWN_SUFFIX = "run-drilldown"
PSEUDO_PARAMETERS = frozenset(
    {"AWS::AccountId", "AWS::Partition", "AWS::Region", "AWS::StackName", "AWS::URLSuffix"}
)
# Placeholders that stand for a number (an annotation's value): unquoted in the Fn::Sub string.
NUMBER_PLACEHOLDERS = frozenset({"MaxConcurrentWorkflows"})
MAIN_QUEUE = "MainQueue"
JOB_ID_PLACEHOLDER = "REPLACE_WITH_JOB_ID"  # the drill-down's timeline query: edit it in the console
DEFAULT_START = "-PT3H"
CRITICAL_WIDTH, CHART_HEIGHT = 6, 6  # the charts behind the critical alarms, four a row
REST_WIDTH, REST_HEIGHT = 6, 5  # the rest: four a row, a little lower
STATUS_HEIGHT = 3  # the composite's state and the alarms not OK, side by side
COMPOSITE_WIDTH = 6
ALARMS_PER_ROW = 8  # the every-alarm widget: four columns of names, two lines to a grid row
NOT_OK_STATES = ("ALARM", "INSUFFICIENT_DATA")
GROUPED_LABEL_MAX = 2  # more alarms than this on one threshold line: "9 …Errors alarms > 0"
THRESHOLD_COLOR = "#d13212"  # alarm thresholds (the renderer's and the console's alarm red)
LIMIT_COLOR = "#545b64"  # limits that are no alarm: a function's timeout, the semaphore's max
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
_SYMBOLS = {
    Comparison.GREATER_THAN_THRESHOLD: ">",
    Comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD: ">=",
    Comparison.LESS_THAN_THRESHOLD: "<",
    Comparison.LESS_THAN_OR_EQUAL_TO_THRESHOLD: "<=",
}


# -- placeholders -----------------------------------------------------------------------------


def sub(name: str) -> str:
    """`${name}`: a Ref (`RouterFunction`, `Stage`, `AWS::Region`) or a GetAtt (`MainQueue.QueueName`)."""
    return "${" + name + "}"


def _expression(value: Any) -> str:
    """A CloudFormation expression of the alarm catalog (a literal, Ref or GetAtt) as Fn::Sub text."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and set(value) == {"Ref"}:
        return sub(str(value["Ref"]))
    if isinstance(value, Mapping) and set(value) == {"Fn::GetAtt"}:
        logical_id, attribute = value["Fn::GetAtt"]
        return sub(f"{logical_id}.{attribute}")
    if isinstance(value, Mapping) and set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
        return str(value["Fn::Sub"])  # already Fn::Sub text (an ARN built in the stack's account and region)
    raise ValueError(f"no Fn::Sub form for {value!r}")


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def placeholders(body: Mapping[str, Any]) -> set[str]:
    """Every `${name}` in the body's strings (`${!literal}` escapes excluded)."""
    return {
        name for text in _strings(body) for name in _PLACEHOLDER.findall(text) if not name.startswith("!")
    }


def resolve(body: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """The body with every placeholder replaced by its value in `names`, as CloudFormation would.

    A string that is one number placeholder (`NUMBER_PLACEHOLDERS`) becomes the number. Raises
    KeyError naming every placeholder `names` lacks.
    """
    missing = sorted(placeholders(body) - set(names))
    if missing:
        raise KeyError(f"no value for the placeholders {', '.join(missing)}")

    def one(value: Any) -> Any:
        if isinstance(value, str):
            whole = _PLACEHOLDER.fullmatch(value)
            if whole and whole.group(1) in NUMBER_PLACEHOLDERS:
                return _number(names[whole.group(1)])
            return _PLACEHOLDER.sub(
                lambda found: (
                    "${" + found.group(1)[1:] + "}"
                    if found.group(1).startswith("!")
                    else str(names[found.group(1)])
                ),
                value,
            )
        if isinstance(value, Mapping):
            return {key: one(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [one(item) for item in value]
        return value

    resolved: dict[str, Any] = one(body)
    return resolved


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def known_placeholder(name: str, template: Mapping[str, Any]) -> bool:
    """A name Fn::Sub can resolve in `template`: a pseudo parameter, a parameter, a resource or `Resource.Attr`."""
    resources = template.get("Resources", {})
    if name in PSEUDO_PARAMETERS or name in template.get("Parameters", {}) or name in resources:
        return True
    logical_id, dot, attribute = name.partition(".")
    return bool(dot and attribute) and logical_id in resources


# -- metric rows --------------------------------------------------------------------------------


def _short(logical_id: str) -> str:
    return logical_id.removesuffix("Function")


# Legend labels stay short: a legend shows two lines of labels offline.
_LEGEND_NAMES = {
    "WorkflowTrackerFunction": "Tracker",
    "BatchTriggerFunction": "Batch",
    "GenerateSyntheticFunction": "Synthetic",
}


def _legend_name(logical_id: str) -> str:
    return _LEGEND_NAMES.get(logical_id, _short(logical_id))


def _row(watched: WatchedMetric, stat: str, period: int, label: str) -> list[Any]:
    flat = [part for name, value in watched.dimensions for part in (name, _expression(value))]
    return [watched.namespace, watched.name, *flat, {"stat": stat, "period": period, "label": label}]


def _key(watched: WatchedMetric) -> tuple[str, str, frozenset[tuple[str, str]]]:
    return (
        watched.namespace,
        watched.name,
        frozenset((name, _expression(value)) for name, value in watched.dimensions),
    )


def ours(
    metric: Metric, emitter: Function, *, stat: str | None = None, label: str | None = None
) -> list[Any]:
    """One of our metrics as `emitter` emits it: dimensions service, stage and function."""
    spec = CATALOG[metric]
    return _row(pipeline_metric(metric, emitter), stat or spec.statistic, spec.period, label or metric.value)


def ours_by_emitter(metric: Metric, *, stat: str | None = None, label: str | None = None) -> list[list[Any]]:
    """One row per function that emits `metric` (a dimension set each), labelled with the function."""
    emitters = CATALOG[metric].emitters
    name = label or metric.value
    return [
        ours(
            metric,
            emitter,
            stat=stat,
            label=name if len(emitters) == 1 else f"{name} ({_legend_name(emitter.value)})",
        )
        for emitter in emitters
    ]


def aws(
    kind: ResourceKind,
    name: str,
    logical_id: str,
    *,
    stat: str | None = None,
    label: str | None = None,
    dimension: Any = None,
) -> list[Any]:
    """A metric AWS publishes about the template resource `logical_id` (AWS_CATALOG), or about a
    resource of another stack named by `dimension` (a literal name or ARN, as the alarm catalog's)."""
    watched = resource_metric(kind, name, logical_id, dimension)
    assert watched.aws is not None
    return _row(watched, stat or watched.aws.statistic, watched.aws.period, label or name)


# -- widgets ------------------------------------------------------------------------------------


@dataclass
class _Chart:
    title: str
    rows: list[list[Any]]
    width: int = 8
    height: int = CHART_HEIGHT
    y_max: float | None = None
    limits: list[dict[str, Any]] = field(default_factory=list)  # annotations that are no alarm
    alarms: list[AlarmSpec] = field(default_factory=list)

    def shows(self, spec: AlarmSpec) -> bool:
        wanted = _key(spec.watched)
        return any(_row_key(row) == wanted for row in self.rows)

    def shows_with_stat(self, spec: AlarmSpec) -> bool:
        wanted = _key(spec.watched)
        return any(_row_key(row) == wanted and row[-1]["stat"] == spec.statistic for row in self.rows)

    def widget(self, x: int, y: int) -> dict[str, Any]:
        y_axis: dict[str, Any] = {"min": 0}
        if self.y_max is not None:
            y_axis["max"] = self.y_max
        properties: dict[str, Any] = {
            "title": self.title,
            "view": "timeSeries",
            "stacked": False,
            "region": sub("AWS::Region"),
            "period": 60,
            "metrics": self.rows,
            "yAxis": {"left": y_axis},
        }
        horizontal = self.limits + _threshold_annotations(self.alarms)
        if horizontal:
            properties["annotations"] = {"horizontal": horizontal}
        return {
            "type": "metric",
            "x": x,
            "y": y,
            "width": self.width,
            "height": self.height,
            "properties": properties,
        }


def _row_key(row: list[Any]) -> tuple[str, str, frozenset[tuple[str, str]]]:
    namespace, name, *rest = row[:-1]
    return namespace, name, frozenset(zip(rest[::2], rest[1::2], strict=True))


def _threshold_annotations(specs: Sequence[AlarmSpec]) -> list[dict[str, Any]]:
    """One line per threshold; alarms on one widget sharing a threshold and comparison share its label."""
    grouped: dict[tuple[float, Comparison], list[str]] = {}
    for spec in specs:
        grouped.setdefault((spec.threshold, spec.comparison), []).append(spec.name_suffix)
    return [
        {
            "label": f"{alarm_names_label(suffixes)} {_SYMBOLS[comparison]} {threshold:g}",
            "value": threshold,
            "color": THRESHOLD_COLOR,
        }
        for (threshold, comparison), suffixes in grouped.items()
    ]


def alarm_names_label(suffixes: Sequence[str]) -> str:
    """The alarms of one threshold line: "A, B" for a few; "9 …Errors alarms" for many that share a
    CamelCase ending (a line's label has room for a few names only). Pure."""
    if len(suffixes) <= GROUPED_LABEL_MAX:
        return ", ".join(suffixes)
    ending = os.path.commonprefix([suffix[::-1] for suffix in suffixes])[::-1]  # noqa: RUF071 (characters meant)
    common = "".join(re.findall(r"[A-Z][a-z0-9]*", ending))  # whole words: "…rErrors" -> "Errors"
    return f"{len(suffixes)} …{common} alarms" if common else f"{len(suffixes)} alarms"


def _limit(label: str, value: float | str) -> dict[str, Any]:
    return {"label": label, "value": value, "color": LIMIT_COLOR}


def _text(markdown: str, x: int, y: int, width: int = GRID_COLUMNS, height: int = 1) -> dict[str, Any]:
    return {
        "type": "text",
        "x": x,
        "y": y,
        "width": width,
        "height": height,
        "properties": {"markdown": markdown},
    }


@dataclass
class _Placed:
    chart: _Chart
    x: int
    y: int


class _Grid:
    """Places widgets left to right in rows on the 24-column grid, each at an explicit x and y."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any] | _Placed] = []
        self.y = 0

    def full_width(self, widget: Callable[[int, int], dict[str, Any]], height: int) -> None:
        self.items.append(widget(0, self.y))
        self.y += height

    def section(self, markdown: str) -> None:
        self.full_width(lambda x, y: _text(markdown, x, y), 1)

    def charts(self, charts: Sequence[_Chart]) -> None:
        x, height = 0, 0
        for chart in charts:
            if x + chart.width > GRID_COLUMNS:
                x, self.y, height = 0, self.y + height, 0
            self.items.append(_Placed(chart, x, self.y))
            x, height = x + chart.width, max(height, chart.height)
        self.y += height

    def widgets(self) -> list[dict[str, Any]]:
        """The body's widgets (charts drawn now: their alarms are attached by then)."""
        return [
            item.chart.widget(item.x, item.y) if isinstance(item, _Placed) else item for item in self.items
        ]


# -- the operations dashboard -------------------------------------------------------------------


def _backlog() -> list[_Chart]:
    q = ResourceKind.QUEUE
    return [
        _Chart(
            "Main queue: visible and in flight",
            [
                aws(q, "ApproximateNumberOfMessagesVisible", MAIN_QUEUE, label="visible"),
                aws(q, "ApproximateNumberOfMessagesNotVisible", MAIN_QUEUE, label="in flight"),
            ],
        ),
        _Chart(
            "Age of oldest: message (SQS) and QUEUED run (s)",
            [
                aws(q, "ApproximateAgeOfOldestMessage", MAIN_QUEUE, label="oldest message"),
                ours(Metric.OLDEST_QUEUED_AGE, Function.RECONCILER, label="oldest QUEUED run"),
            ],
        ),
        _Chart(
            "Runs queued and started",
            [
                *ours_by_emitter(Metric.JOBS_QUEUED, label="queued"),
                ours(Metric.JOBS_STARTED, Function.ROUTER, label="started"),
                ours(Metric.CAPACITY_WAITS, Function.ROUTER, label="capacity waits"),
            ],
        ),
    ]


def _dead_letter_queues() -> list[_Chart]:
    """One chart for the three DLQs: each message is work that failed every retry."""
    return [
        _Chart(
            "Dead-letter queues: messages",
            [
                aws(
                    ResourceKind.QUEUE,
                    "ApproximateNumberOfMessagesVisible",
                    queue,
                    label=queue.removesuffix("DeadLetterQueue") or "main",
                )
                for queue, *_ in DEAD_LETTER_QUEUES
            ],
        )
    ]


def _semaphore() -> list[_Chart]:
    return [
        _Chart(
            "Semaphore: slots held vs running",
            [
                ours(Metric.CONCURRENCY_ACTIVE, Function.RECONCILER, stat="Average", label="active (avg)"),
                ours(Metric.CONCURRENCY_ACTIVE, Function.RECONCILER, stat="Minimum", label="active (min)"),
                ours(Metric.WORKFLOWS_RUNNING, Function.RECONCILER, label="workflows running"),
            ],
            limits=[_limit("MaxConcurrentWorkflows", sub("MaxConcurrentWorkflows"))],
        ),
        _Chart(
            "Counter drift (held - running)",
            [
                ours(Metric.COUNTER_DRIFT, Function.RECONCILER, stat="Minimum", label="drift (min)"),
                ours(Metric.COUNTER_DRIFT, Function.RECONCILER, stat="Maximum", label="drift (max)"),
            ],
        ),
        _Chart(
            "Slots acquired and released",
            [
                ours(Metric.SLOTS_ACQUIRED, Function.ROUTER, label="acquired"),
                *ours_by_emitter(Metric.SLOTS_RELEASED, label="released"),
                ours(Metric.DUPLICATE_RELEASES, Function.TRACKER, label="duplicate releases"),
            ],
        ),
    ]


def _executions() -> list[_Chart]:
    sm = ResourceKind.STATE_MACHINE
    return [
        _Chart(
            "Executions started, succeeded, throttled",
            [
                aws(sm, "ExecutionsStarted", STATE_MACHINE, label="started"),
                aws(sm, "ExecutionsSucceeded", STATE_MACHINE, label="succeeded"),
                aws(sm, "ExecutionThrottled", STATE_MACHINE, label="throttled"),
            ],
        ),
        _Chart(
            "Executions failed, timed out, aborted",
            [
                aws(sm, "ExecutionsFailed", STATE_MACHINE, label="failed"),
                aws(sm, "ExecutionsTimedOut", STATE_MACHINE, label="timed out"),
                aws(sm, "ExecutionsAborted", STATE_MACHINE, label="aborted"),
            ],
        ),
        _Chart(
            "Router failures and duplicate deliveries",
            [
                ours(Metric.ROUTER_FAILURES, Function.ROUTER, label="router failures"),
                ours(Metric.START_EXECUTION_FAILURES, Function.ROUTER, label="start failures"),
                ours(Metric.MALFORMED_MESSAGES, Function.ROUTER, label="malformed"),
                *ours_by_emitter(Metric.DUPLICATE_DELIVERIES, label="duplicates"),
            ],
        ),
    ]


def _throughput() -> list[_Chart]:
    return [
        _Chart(
            "Files: ingested, processed, failed, empty, unsupported",
            [
                ours(Metric.FILES_INGESTED, Function.INGEST, label="ingested"),
                ours(Metric.FILES_DETECTED, Function.DETECT, label="scanned"),
                *ours_by_emitter(Metric.FILES_REDACTED, label="redacted"),
                *ours_by_emitter(Metric.FILE_FAILURES, label="failed"),
                ours(Metric.EMPTY_FILES, Function.DETECT, label="empty"),
                ours(Metric.UNSUPPORTED_FILES, Function.ROUTER, label="unsupported"),
            ],
        ),
        _Chart(
            "PII entities detected (all types)",
            [
                ours(Metric.PII_ENTITIES_DETECTED, Function.DETECT, label="PII entities"),
                ours(
                    Metric.SYNTHETIC_VALUES_GENERATED, Function.GENERATE_SYNTHETIC, label="synthetic values"
                ),
            ],
        ),
        _Chart(
            "Files against their deadline: on time, late, overdue, lost",
            [
                *ours_by_emitter(Metric.FILES_ON_TIME, label="on time"),
                *ours_by_emitter(Metric.FILES_LATE, label="late"),
                ours(Metric.FILES_OVERDUE, Function.RECONCILER, label="overdue"),
                ours(Metric.FILES_LOST, Function.RECONCILER, stat="Maximum", label="lost"),
            ],
        ),
        _Chart(
            "Runs succeeded and failed",
            [
                ours(Metric.JOBS_SUCCEEDED, Function.TRACKER, label="succeeded"),
                *ours_by_emitter(Metric.JOBS_FAILED, label="failed"),
            ],
        ),
    ]


def _latency() -> list[_Chart]:
    return [
        _Chart(
            "Queue wait: QUEUED to started (s)",
            [
                ours(Metric.QUEUE_WAIT, Function.ROUTER, stat="p90", label="p90"),
                ours(Metric.QUEUE_WAIT, Function.ROUTER, stat="Maximum", label="max"),
            ],
        ),
        _Chart(
            "Run duration: start to end (s)",
            [
                ours(Metric.JOB_DURATION, Function.TRACKER, stat="p50", label="p50"),
                ours(Metric.JOB_DURATION, Function.TRACKER, stat="p90", label="p90"),
                ours(Metric.JOB_DURATION, Function.TRACKER, stat="Maximum", label="max"),
            ],
        ),
        _Chart(
            "Files failed per run (%)",
            [ours(Metric.RUN_FILE_FAILURE_PERCENT, Function.FINALIZE, label="failed files %")],
            y_max=100,
        ),
        _Chart(
            "Batch trigger and stale work",
            [
                ours(Metric.BATCH_JOBS_SCHEDULED, Function.BATCH_TRIGGER, label="jobs scheduled"),
                ours(Metric.STALE_JOBS_RECLAIMED, Function.BATCH_TRIGGER, label="stale jobs reclaimed"),
                ours(Metric.STALE_STATUS_WRITES, Function.TRACKER, label="stale status writes"),
            ],
        ),
    ]


def _reconciler() -> list[_Chart]:
    recon = Function.RECONCILER
    return [
        _Chart("Reconciler runs (heartbeat)", [ours(Metric.RECONCILE_RUNS, recon, label="runs")]),
        _Chart(
            "Stall signals",
            [
                ours(Metric.SLOTS_FULL_IDLE, recon, label="slots full, idle"),
                ours(Metric.BACKLOG_STALLED, recon, label="backlog stalled"),
            ],
        ),
        _Chart(
            "Implausible drift, orphans",
            [
                ours(Metric.IMPLAUSIBLE_DRIFT, recon, label="implausible drift"),
                ours(Metric.ORPHAN_EXECUTIONS, recon, label="orphan executions"),
            ],
        ),
        _Chart(
            "Reconciler repairs",
            [
                ours(Metric.LEAKED_SLOTS_RELEASED, recon, label="leaked slots"),
                ours(Metric.STUCK_RUNS_REPAIRED, recon, label="stuck runs"),
                ours(Metric.UNANNOUNCED_RUNS_REPAIRED, recon, label="unannounced runs"),
                ours(Metric.RECONCILE_RACES_LOST, recon, label="races lost"),
            ],
        ),
    ]


def _functions(template: Mapping[str, Any]) -> list[_Chart]:
    """The functions side by side, one line each: invocations, errors, throttles, concurrency; then
    p99 duration against the timeout, one chart per timeout (so one threshold and one limit each)."""
    fn = ResourceKind.FUNCTION
    timeouts = function_timeouts(template)

    def by_function(name: str, *, stat: str | None = None) -> list[list[Any]]:
        return [aws(fn, name, function, stat=stat, label=_legend_name(function)) for function in timeouts]

    charts = [
        _Chart("Invocations by function", by_function("Invocations")),
        _Chart("Errors by function (raised or timed out)", by_function("Errors")),
        _Chart("Throttles by function", by_function("Throttles")),
        _Chart("Concurrent executions by function (max)", by_function("ConcurrentExecutions")),
    ]
    groups: dict[int, list[str]] = {}
    for function, timeout in timeouts.items():
        groups.setdefault(timeout, []).append(function)
    for timeout, functions in sorted(groups.items()):
        charts.append(
            _Chart(
                f"Duration p99 (ms), timeout {timeout} s: {', '.join(_legend_name(f) for f in functions)}",
                [
                    aws(fn, "Duration", function, stat="p99", label=_legend_name(function))
                    for function in functions
                ],
                limits=[_limit(f"timeout {timeout} s", timeout * 1000)],
            )
        )
    return charts


def _tables() -> list[_Chart]:
    return [
        _Chart(
            f"{table}: throttles and condition failures",
            [
                aws(ResourceKind.TABLE, "ReadThrottleEvents", table, label="read throttles"),
                aws(ResourceKind.TABLE, "WriteThrottleEvents", table, label="write throttles"),
                aws(ResourceKind.TABLE, "ConditionalCheckFailedRequests", table, label="condition failures"),
            ],
        )
        for table in TABLES
    ]


def alarm_arn(suffix: str) -> str:
    """The ARN of the stack's alarm `<stack>-<suffix>`, in Fn::Sub form."""
    return (
        f"arn:{sub('AWS::Partition')}:cloudwatch:{sub('AWS::Region')}:{sub('AWS::AccountId')}:alarm:"
        f"{sub('AWS::StackName')}-{suffix}"
    )


def _alarm_widget(
    title: str, arns: Sequence[str], width: int, height: int, **extra: Any
) -> Callable[[int, int], dict[str, Any]]:
    return lambda x, y: {
        "type": "alarm",
        "x": x,
        "y": y,
        "width": width,
        "height": height,
        "properties": {"title": title, "alarms": list(arns), "sortBy": "stateUpdatedTimestamp", **extra},
    }


def _chunks(arns: Sequence[str]) -> list[Sequence[str]]:
    return [
        arns[start : start + MAX_ALARMS_PER_WIDGET] for start in range(0, len(arns), MAX_ALARMS_PER_WIDGET)
    ]


def _status(specs: Sequence[AlarmSpec], grid: _Grid) -> None:
    """The composite's state, and beside it every alarm that is not OK (the healthy ones are not listed)."""
    composite = alarm_arn(COMPOSITE.removesuffix("Alarm"))
    grid.items.append(
        _alarm_widget("Pipeline health (any critical alarm)", [composite], COMPOSITE_WIDTH, STATUS_HEIGHT)(
            0, grid.y
        )
    )
    chunks = _chunks([alarm_arn(spec.name_suffix) for spec in specs])
    width = (GRID_COLUMNS - COMPOSITE_WIDTH) // len(chunks)
    for number, chunk in enumerate(chunks):
        title = "Alarms not OK (ALARM first; OK ones not listed)" + (
            f" {number + 1}/{len(chunks)}" if len(chunks) > 1 else ""
        )
        grid.items.append(
            _alarm_widget(title, chunk, width, STATUS_HEIGHT, states=list(NOT_OK_STATES))(
                COMPOSITE_WIDTH + number * width, grid.y
            )
        )
    grid.y += STATUS_HEIGHT


def _all_alarms(specs: Sequence[AlarmSpec], grid: _Grid) -> None:
    arns = [alarm_arn(COMPOSITE.removesuffix("Alarm"))] + [alarm_arn(spec.name_suffix) for spec in specs]
    chunks = _chunks(arns)
    for number, chunk in enumerate(chunks, 1):
        title = "Every alarm (ALARM first)" + (f" {number}/{len(chunks)}" if len(chunks) > 1 else "")
        height = 1 + -(-len(chunk) // ALARMS_PER_ROW)  # the title, then every name without scrolling
        grid.full_width(_alarm_widget(title, chunk, GRID_COLUMNS, height), height)


def _attach(specs: Sequence[AlarmSpec], charts: Sequence[_Chart]) -> None:
    """Each alarm onto the chart that shows its metric (with its statistic, if one does).

    Raises ValueError for an alarm whose metric no widget shows (add the widget, never drop the alarm).
    """
    for spec in specs:
        chart = next((c for c in charts if c.shows_with_stat(spec)), None) or next(
            (c for c in charts if c.shows(spec)), None
        )
        if chart is None:
            raise ValueError(
                f"{spec.logical_id}: no widget shows {spec.watched.namespace}/{spec.watched.name}"
            )
        chart.alarms.append(spec)


def _sized(charts: Sequence[_Chart], width: int, height: int) -> list[_Chart]:
    for chart in charts:
        chart.width, chart.height = width, height
    return list(charts)


# For a dashboard of other sections (the sidecar's): `operations_body(sections=...)`.
Chart = _Chart
limit = _limit
Section = tuple[str, list[_Chart]]  # a markdown heading and its charts


def operations_body(
    specs: Sequence[AlarmSpec],
    template: Mapping[str, Any],
    sections: Sequence[Section] | None = None,
    *,
    drilldown: bool = True,
) -> dict[str, Any]:
    """The operations dashboard: status first, the charts behind the critical alarms next, then the rest.

    Each alarm of `specs` is drawn on the widget that shows its metric; a chart that carries a
    critical alarm (one the composite watches) moves up to the first section. Raises ValueError for
    an alarm whose metric no widget shows. `sections`: the stack's own unless given (the sidecar's);
    `drilldown`: whether the stack has the run drill-down dashboard the header points to.
    """
    sections = sections if sections is not None else _sections(template)
    _attach(specs, [chart for _, charts in sections for chart in charts])
    critical = [
        chart for _, charts in sections for chart in charts if any(spec.critical for spec in chart.alarms)
    ]
    see_drilldown = f"Errors by run and file: the `{sub('AWS::StackName')}-{DRILLDOWN_SUFFIX}` dashboard." if drilldown else ""
    grid = _Grid()
    grid.full_width(
        lambda x, y: _text(
            f"# {sub('AWS::StackName')}: operations (stage {sub('Stage')})\n"
            "Red dashed lines are alarm thresholds (alarm name after the stack name); runbooks in `runbooks/`. "
            + see_drilldown,
            x,
            y,
            height=2,
        ),
        2,
    )
    _status(specs, grid)
    grid.section("## Behind the critical alarms (the composite's): where a page starts")
    grid.charts(_sized(critical, CRITICAL_WIDTH, CHART_HEIGHT))
    for markdown, charts in sections:
        rest = [chart for chart in charts if chart not in critical]
        if rest:
            grid.section(markdown)
            grid.charts(_sized(rest, REST_WIDTH, REST_HEIGHT))
    grid.section("## Every alarm")
    _all_alarms(specs, grid)
    return {"start": DEFAULT_START, "periodOverride": "inherit", "widgets": grid.widgets()}


def _sections(template: Mapping[str, Any]) -> list[Section]:
    """The stack's own sections, in the order on-call reads them."""
    return [
        (
            "## Backlog, the semaphore (slots held, sampled by the reconciler) and executions",
            _backlog() + _semaphore() + _executions(),
        ),
        ("## Dead-letter queues: each message is work that failed every retry", _dead_letter_queues()),
        (
            "## Throughput, run latency, stale work and the reconciler",
            _throughput() + _latency() + _reconciler(),
        ),
        ("## Functions side by side, and p99 duration against each timeout", _functions(template)),
        ("## DynamoDB: throttles, and conditional writes refused (lost races, duplicates)", _tables()),
    ]


# -- the run drill-down -------------------------------------------------------------------------


def log_group_names(template: Mapping[str, Any]) -> dict[str, str]:
    """Each function's log group name (Fn::Sub form), from its `<Function>LogGroup` resource when the
    template declares one, else Lambda's default `/aws/lambda/<name>`."""
    resources = template["Resources"]
    names = {}
    for function in function_timeouts(template):
        group = resources.get(f"{function}LogGroup", {})
        declared = (
            group.get("Properties", {}).get("LogGroupName")
            if group.get("Type") == "AWS::Logs::LogGroup"
            else None
        )
        if isinstance(declared, Mapping) and isinstance(declared.get("Fn::Sub"), str):
            names[function] = declared["Fn::Sub"]
        elif isinstance(declared, str):
            names[function] = declared
        else:
            names[function] = f"/aws/lambda/{sub(function)}"
    return names


def _state_machine_log_group(template: Mapping[str, Any]) -> str | None:
    group = template["Resources"].get(f"{STATE_MACHINE}LogGroup", {})
    declared = group.get("Properties", {}).get("LogGroupName")
    if isinstance(declared, Mapping) and isinstance(sub := declared.get("Fn::Sub"), str):
        return sub
    return declared if isinstance(declared, str) else None


def _sources(groups: Iterable[str]) -> str:
    return " | ".join(f"SOURCE '{group}'" for group in groups)


def _log(title: str, query: str, x: int, y: int, width: int, height: int) -> dict[str, Any]:
    return {
        "type": "log",
        "x": x,
        "y": y,
        "width": width,
        "height": height,
        "properties": {"title": title, "query": query, "region": sub("AWS::Region"), "view": "table"},
    }


def drilldown_body(template: Mapping[str, Any]) -> dict[str, Any]:
    """Logs Insights widgets over the functions' log groups: errors with run and file, one run's timeline."""
    sources = _sources(log_group_names(template).values())
    errors = (
        f"{sources} | fields @timestamp, function_name, level, reason, job_id, execution_name, file_key, message, "
        "errorType, errorMessage | filter level = 'ERROR' or ispresent(errorType) | sort @timestamp desc | limit 200"
    )
    by_reason = (
        f"{sources} | filter level = 'ERROR' or ispresent(errorType) "
        "| stats count(*) as errors by function_name, reason, errorType | sort errors desc"
    )
    timeline = (
        f"{sources} | fields @timestamp, function_name, level, execution_name, file_key, message "
        f"| filter job_id = '{JOB_ID_PLACEHOLDER}' | sort @timestamp asc | limit 1000"
    )
    widgets = [
        _text(
            f"# {sub('AWS::StackName')}: run drill-down\n"
            "Logs Insights over every function's log group (job id, execution name and file key are fields of "
            "each log line). To follow one run: edit the timeline query below and replace "
            f"`{JOB_ID_PLACEHOLDER}` with the job id (`pipeops jobs` lists them, e.g. `claims/`).",
            0,
            0,
            height=2,
        ),
        _log("Errors: job, run and file", errors, 0, 2, GRID_COLUMNS, 8),
        _log("Errors by function and reason", by_reason, 0, 10, GRID_COLUMNS // 2, 6),
    ]
    machine = _state_machine_log_group(template)
    if machine is not None:
        executions = (
            f"SOURCE '{machine}' | fields @timestamp, type, execution_arn, details.error, details.cause "
            "| filter type like /ExecutionFailed|ExecutionTimedOut|ExecutionAborted|TaskFailed|LambdaFunctionFailed/ "
            "| sort @timestamp desc | limit 100"
        )
        widgets.append(
            _log(
                "Executions failed, timed out, aborted",
                executions,
                GRID_COLUMNS // 2,
                10,
                GRID_COLUMNS // 2,
                6,
            )
        )
    widgets.append(
        _log(
            f"One run's timeline (job id {JOB_ID_PLACEHOLDER}: edit the query)",
            timeline,
            0,
            16,
            GRID_COLUMNS,
            10,
        )
    )
    return {"start": "-PT1H", "widgets": widgets}


# -- CloudFormation -----------------------------------------------------------------------------


def body_text(body: Mapping[str, Any], template: Mapping[str, Any]) -> str:
    """The body as the `Fn::Sub` string of a DashboardBody: one widget a line; every `${` that is no
    placeholder of `template` escaped as `${!`; number placeholders unquoted."""
    widgets = body.get("widgets", [])
    head = {key: value for key, value in body.items() if key != "widgets"}
    lines = [json.dumps(widget, separators=(",", ":"), ensure_ascii=False) for widget in widgets]
    opening = json.dumps(head, separators=(",", ":"), ensure_ascii=False)[:-1]
    text = opening + ("," if head else "") + '"widgets":[\n' + ",\n".join(lines) + "\n]}"

    def escape(found: re.Match[str]) -> str:
        name = found.group(1)
        return found.group(0) if known_placeholder(name, template) else "${!" + name + "}"

    text = _PLACEHOLDER.sub(escape, text)
    for name in NUMBER_PLACEHOLDERS:
        text = text.replace(json.dumps(sub(name)), sub(name))
    return text


def resources(specs: Sequence[AlarmSpec], template: Mapping[str, Any]) -> dict[str, Any]:
    """The two `AWS::CloudWatch::Dashboard` resources for template.yaml."""

    def dashboard(suffix: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "Type": "AWS::CloudWatch::Dashboard",
            "Properties": {
                "DashboardName": {"Fn::Sub": f"{sub('AWS::StackName')}-{suffix}"},
                "DashboardBody": {"Fn::Sub": body_text(body, template)},
            },
        }

    return {
        OPERATIONS: dashboard(OPERATIONS_SUFFIX, operations_body(specs, template)),
        DRILLDOWN: dashboard(DRILLDOWN_SUFFIX, drilldown_body(template)),
    }
