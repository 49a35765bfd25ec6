"""The operations dashboard as one self-contained HTML page (`pipeops dashboard render`).

The page is drawn from the same body CloudWatch shows (the deployed `<stack>-operations`, or the
body built from this checkout's template when the stack has none yet) and from the metrics in
CloudWatch, AWS's or a sandbox's. Alarm states go on top. It opens with no network, so it works
where the console is out of reach: on a laptop sandbox, or in an incident with an expired session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from stack.resources import Connection, SidecarStack, StackResources

MAX_QUERIES_PER_CALL = 500  # GetMetricData's limit on MetricDataQueries
STANDARD_STATISTICS = frozenset({"SampleCount", "Average", "Sum", "Minimum", "Maximum"})
_NOT_FOUND = {
    "ResourceNotFound",
    "ResourceNotFoundException",
}  # AWS's code for a missing dashboard; moto's too
_CHART = re.compile(r'<svg class="chart"[^>]*?data-widget="(\d+)" data-series="(\d+)" data-points="(\d+)"')

MetricKey = tuple[str, str, tuple[tuple[str, str], ...], str, int]
Points = list[tuple[datetime, float]]


# -- the body ---------------------------------------------------------------------------------


def stack_names(
    resources: StackResources, parameters: Mapping[str, str], region: str, template: Mapping[str, Any]
) -> dict[str, str]:
    """The value of every placeholder a dashboard body may hold, for a deployed stack.

    Resource names come from the stack's Outputs (each template Output that is a `Ref` of a
    resource names it; a queue's `QueueName` is the last part of its URL), parameters from the
    stack (template defaults for any it does not list), account and partition from the state
    machine's ARN.
    """
    outputs = {f.name: getattr(resources, f.name) for f in fields(resources) if f.name != "stack_name"}
    declared = template.get("Parameters", {})
    names = {name: str(spec.get("Default", "")) for name, spec in declared.items()} | dict(parameters)
    for key, output in template.get("Outputs", {}).items():
        value = output.get("Value") if isinstance(output, Mapping) else None
        if not (isinstance(value, Mapping) and set(value) == {"Ref"} and outputs.get(key)):
            continue
        logical_id = value["Ref"]
        names[logical_id] = outputs[key]
        if template["Resources"].get(logical_id, {}).get("Type") == "AWS::SQS::Queue":
            names[f"{logical_id}.QueueName"] = outputs[key].rstrip("/").rsplit("/", 1)[-1]
    arn = resources.StateMachineArn.split(":")
    names |= {
        "AWS::Region": region,
        "AWS::StackName": resources.stack_name,
        "AWS::Partition": arn[1] if len(arn) > 4 else "aws",
        "AWS::AccountId": arn[4] if len(arn) > 4 else "",
        "AWS::URLSuffix": "amazonaws.com",
    }
    return names


def stack_parameters(connection: Connection, stack_name: str) -> dict[str, str]:
    """The stack's parameter values, as deployed."""
    stack = connection.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    return {p["ParameterKey"]: p.get("ParameterValue", "") for p in stack.get("Parameters", [])}


def built_body(connection: Connection, resources: StackResources) -> dict[str, Any]:
    """The operations body built from this checkout's template, resolved for the deployed stack."""
    from alarms.catalog import build_catalog
    from dashboards.build import operations_body, resolve
    from stack.template import load_template

    template = load_template()
    names = stack_names(
        resources, stack_parameters(connection, resources.stack_name), connection.region or "", template
    )
    return resolve(operations_body(build_catalog(template), template), names)


def deployed_body(cloudwatch: Any, name: str) -> dict[str, Any] | None:
    """The body of dashboard `name`, or None when there is no such dashboard."""
    import botocore.exceptions

    try:
        text = cloudwatch.get_dashboard(DashboardName=name)["DashboardBody"]
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _NOT_FOUND:
            return None
        raise
    body = json.loads(text)
    if not isinstance(body, dict):
        raise ValueError(f"the body of dashboard {name} is not a JSON object")
    return body


# -- metrics ------------------------------------------------------------------------------------


def metric_queries(body: Mapping[str, Any]) -> list[Any]:
    """Every metric the renderer will fetch: visible metric rows, expanded as the page expands them."""
    from dashboards.metric_rows import DEFAULT_PERIOD, DEFAULT_STAT, expand_metrics

    queries = []
    for widget in body.get("widgets", []):
        properties = widget.get("properties", {}) if isinstance(widget, Mapping) else {}
        if (
            not isinstance(widget, Mapping)
            or widget.get("type") != "metric"
            or not isinstance(properties, Mapping)
        ):
            continue
        stat = given if isinstance(given := properties.get("stat"), str) else DEFAULT_STAT
        period = properties.get("period")
        period = (
            period
            if isinstance(period, int) and not isinstance(period, bool) and period > 0
            else DEFAULT_PERIOD
        )
        try:
            expanded = expand_metrics(properties.get("metrics") or [], stat=stat, period=period)
        except ValueError:
            continue  # the page says why it cannot draw this widget
        queries += [query for query in expanded if query.visible and query.expression is None]
    return queries


def series_count(queries: Sequence[Any]) -> int:
    """How many series `fetch_metrics` reads for `queries` (each metric key once)."""
    return len(dict.fromkeys(metric_key(query) for query in queries))


def metric_key(query: Any) -> MetricKey:
    return query.namespace, query.name, tuple(query.dimensions), query.stat, query.period


@dataclass
class Fetched:
    """Every series by metric key, and what the caller should be told about how they were read."""

    series: dict[MetricKey, Points] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    calls: int = 0


def _metric_stat(key: MetricKey) -> dict[str, Any]:
    namespace, name, dimensions, stat, period = key
    metric = {
        "Namespace": namespace,
        "MetricName": name,
        "Dimensions": [{"Name": n, "Value": v} for n, v in dimensions],
    }
    return {"Metric": metric, "Period": period, "Stat": stat}


def get_metric_data(
    cloudwatch: Any,
    keys: Sequence[MetricKey],
    start: datetime,
    end: datetime,
    fetched: Fetched,
    advance: Callable[[int], None] | None = None,
) -> None:
    """Every series of `keys` with GetMetricData: at most 500 queries a call, every NextToken followed;
    `advance(series read)` after each batch."""
    for first in range(0, len(keys), MAX_QUERIES_PER_CALL):
        batch = keys[first : first + MAX_QUERIES_PER_CALL]
        ids = {f"m{first + offset}": key for offset, key in enumerate(batch)}
        queries = [
            {"Id": id_, "MetricStat": _metric_stat(key), "ReturnData": True} for id_, key in ids.items()
        ]
        token: str | None = None  # annotated: left partial, mypy 2.4 never settles this nested loop (internal error)
        points: dict[MetricKey, Points] = {key: [] for key in batch}
        while True:
            extra = {"NextToken": token} if token else {}
            response = cloudwatch.get_metric_data(
                MetricDataQueries=queries, StartTime=start, EndTime=end, ScanBy="TimestampAscending", **extra
            )
            fetched.calls += 1
            for result in response.get("MetricDataResults", []):
                key = ids.get(result["Id"])
                if key is not None:
                    points[key] += [
                        (_utc(moment), float(value))
                        for moment, value in zip(
                            result.get("Timestamps", []), result.get("Values", []), strict=False
                        )
                        if value is not None
                    ]
            token = response.get("NextToken")
            if not token:
                break
        fetched.series |= {key: sorted(found) for key, found in points.items()}
        if advance is not None:
            advance(len(batch))


def get_metric_statistics(
    cloudwatch: Any, key: MetricKey, start: datetime, end: datetime, fetched: Fetched
) -> Points:
    """One series with GetMetricStatistics (an ExtendedStatistic for a percentile)."""
    namespace, name, dimensions, stat, period = key
    extended = stat not in STANDARD_STATISTICS
    response = cloudwatch.get_metric_statistics(
        Namespace=namespace,
        MetricName=name,
        Dimensions=[{"Name": n, "Value": v} for n, v in dimensions],
        StartTime=start,
        EndTime=end,
        Period=period,
        **({"ExtendedStatistics": [stat]} if extended else {"Statistics": [stat]}),
    )
    fetched.calls += 1
    points = []
    for point in response.get("Datapoints", []):
        value = point.get("ExtendedStatistics", {}).get(stat) if extended else point.get(stat)
        if value is not None:
            points.append((_utc(point["Timestamp"]), float(value)))
    return sorted(points)


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def _fatal() -> tuple[type[Exception], ...]:
    """What ends the whole render (botocore imported here: `pipeops` starts without it)."""
    import botocore.exceptions

    return botocore.exceptions.NoCredentialsError, botocore.exceptions.EndpointConnectionError


def fetch_metrics(
    cloudwatch: Any,
    queries: Sequence[Any],
    start: datetime,
    end: datetime,
    advance: Callable[[int], None] | None = None,
) -> Fetched:
    """Every series the body draws. Standard statistics with GetMetricData. Percentiles (and other
    extended statistics) with GetMetricData too; when the endpoint cannot compute them there (moto
    fails the whole call), or returns none for a metric that has data, with GetMetricStatistics'
    ExtendedStatistics; what still has no datapoints is reported in `notes`. `advance(series read)`
    reports progress."""
    fetched = Fetched()
    keys = list(dict.fromkeys(metric_key(query) for query in queries))
    standard = [key for key in keys if key[3] in STANDARD_STATISTICS]
    extended = [key for key in keys if key[3] not in STANDARD_STATISTICS]
    get_metric_data(cloudwatch, standard, start, end, fetched, advance)
    if not extended:
        return fetched
    try:  # one query first: an endpoint that cannot compute percentiles fails once, not per batch
        get_metric_data(cloudwatch, extended[:1], start, end, fetched, advance)
        get_metric_data(cloudwatch, extended[1:], start, end, fetched, advance)
        retry = [key for key in extended if not fetched.series.get(key) and _has_data(key, fetched)]
    except _fatal():
        raise
    except Exception as exc:  # moto raises from its serializer (TypeError), or answers 500
        stats = sorted({key[3] for key in extended})
        fetched.notes.append(
            f"GetMetricData could not compute {', '.join(stats)} here ({type(exc).__name__}); "
            "read them with GetMetricStatistics' ExtendedStatistics instead"
        )
        retry = extended
    for key in retry:
        try:
            fetched.series[key] = get_metric_statistics(cloudwatch, key, start, end, fetched)
        except _fatal():
            raise
        except Exception as exc:  # one series lost, not the page
            fetched.series[key] = []
            fetched.notes.append(
                f"GetMetricStatistics failed for {key[1]} {key[3]}: {type(exc).__name__}: {exc}"
            )
    starved = sorted({key[3] for key in extended if not fetched.series.get(key) and _has_data(key, fetched)})
    if starved:
        count = sum(1 for key in extended if not fetched.series.get(key) and _has_data(key, fetched))
        fetched.notes.append(
            f"{count} {'/'.join(starved)} series have no datapoints although the same metrics have data: this "
            "endpoint computes no percentiles (moto does not); they are drawn empty"
        )
    return fetched


def _has_data(key: MetricKey, fetched: Fetched) -> bool:
    """Whether the same metric (any standard statistic) has datapoints."""
    return any(
        points and other[:3] == key[:3] and other[3] in STANDARD_STATISTICS
        for other, points in fetched.series.items()
    )


# -- alarms -------------------------------------------------------------------------------------


def alarm_badges(cloudwatch: Any, stack_name: str) -> list[Any]:
    """Every alarm of the stack (`<stack>-…`, DescribeAlarms paginated) with its runbook."""
    from alarms.live import list_alarms
    from dashboards.render import AlarmBadge

    return [
        AlarmBadge(view.name, view.state, view.reason, view.runbook)
        for view in list_alarms(cloudwatch, stack_name)
    ]


# -- the page -----------------------------------------------------------------------------------


class DashboardError(RuntimeError):
    """The page cannot be made: the message says why, in one line."""


class Progress(Protocol):
    """What the page's making reports as it goes (the CLI shows a bar; anything else may ignore it)."""

    def step(self, description: str, done: int = 0, total: int | None = None) -> None: ...

    def advance(self, done: int) -> None: ...


def render_dashboard(
    connection: Connection,
    resources: StackResources | SidecarStack,
    out: Path,
    *,
    hours: float,
    screenshot_path: Path | None,
    progress: Progress,
) -> Rendered:
    """Draw `<stack>-operations` over the last `hours` into `out` (and a PNG): what was drawn, and
    notes on what was missing. Raises DashboardError when the page cannot be made."""
    from dashboards.build import OPERATIONS_SUFFIX

    name = f"{resources.stack_name}-{OPERATIONS_SUFFIX}"
    # Up to the next whole second: a datapoint of the last instant (CloudWatch APIs take whole seconds) is in.
    end = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    start = end - timedelta(hours=hours)
    notes: list[str] = []
    page, badges, fetched, body, source = _draw(connection, resources, name, start, end, out, screenshot_path, notes, progress)
    return _summary(body, page, out, screenshot_path, name, source, start, end, badges, notes, fetched.calls)


@dataclass
class Rendered:
    out: str
    screenshot: str | None
    dashboard: str
    source: str  # "deployed" or "built"
    start: str
    end: str
    widgets: int
    charts: int
    charts_with_data: int
    empty_charts: list[str]
    alarms: dict[str, int]
    notes: list[str]
    metric_calls: int


def _aws_errors() -> tuple[type[Exception], ...]:
    import botocore.exceptions

    return botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError


def _draw(
    connection: Any,
    resources: Any,
    name: str,
    start: datetime,
    end: datetime,
    out: Path,
    screenshot_path: Path | None,
    notes: list[str],
    progress: Progress,
) -> tuple[str, list[Any], Fetched, dict[str, Any], str]:
    """Read the body, its metrics and the alarms; write the page (and the screenshot)."""
    from dashboards.render import layout, render_html, screenshot

    try:
        cloudwatch = connection.client("cloudwatch")
        body = deployed_body(cloudwatch, name)
        source = "deployed"
        if body is None and isinstance(resources, SidecarStack):
            raise DashboardError(
                f"no dashboard {name} in the sidecar stack: deploy the template `pipeops sidecar build` makes, with its dashboard"
            )
        if body is None:
            source = "built"
            try:
                body = built_body(connection, resources)
            except Exception as exc:  # no template.yaml (an installed pipeops), or one that does not load
                raise DashboardError(
                    f"no dashboard {name} in the stack, and none can be built here ({type(exc).__name__}: {exc}); "
                    "run from a pipeops checkout, or deploy the template with its dashboards"
                ) from None
            notes.append(
                f"no dashboard {name} in the stack: drawing the operations body built from this checkout's "
                "template.yaml (`pipeops template build`, then deploy, to get it in CloudWatch)"
            )
        queries = metric_queries(body)
        series = series_count(queries)
        progress.step(f"reading {series} series", done=1, total=1 + series + 2 + (screenshot_path is not None))
        fetched = fetch_metrics(cloudwatch, queries, start, end, progress.advance)
        progress.step("reading the alarms")
        badges = alarm_badges(cloudwatch, resources.stack_name)
    except (*_aws_errors(), KeyError, ValueError) as exc:  # type: ignore[misc]  # mypy reads no starred except tuple
        raise DashboardError(f"cannot read the dashboard and its metrics: {type(exc).__name__}: {exc}") from None
    notes += fetched.notes
    if not badges:
        notes.append(
            f"no alarms named {resources.stack_name}-… in CloudWatch: the page shows no alarm states"
        )

    def fetch(query: Any, window_start: datetime, window_end: datetime) -> Points:
        return fetched.series.get(metric_key(query), [])

    progress.step("drawing the page", done=1)
    page = render_html(
        body, fetch, start=start, end=end, alarms=badges, title=f"{resources.stack_name}: operations"
    )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")
        if screenshot_path is not None:
            progress.step("taking the screenshot", done=1)
            geometry = layout(body, alarm_count=len(badges))
            screenshot(out, screenshot_path, geometry.width, geometry.height)
    except (OSError, RuntimeError) as exc:  # RuntimeError: ChromiumMissing, or Chromium failed
        raise DashboardError(str(exc)) from None
    progress.advance(1)
    return page, badges, fetched, body, source


def _summary(
    body: Mapping[str, Any],
    page: str,
    out: Path,
    png: Path | None,
    name: str,
    source: str,
    start: datetime,
    end: datetime,
    badges: Sequence[Any],
    notes: list[str],
    calls: int,
) -> Rendered:
    widgets = body.get("widgets", [])
    charts = [(int(index), int(series)) for index, series, _ in _CHART.findall(page)]

    def title(index: int) -> str:
        widget = widgets[index] if index < len(widgets) and isinstance(widgets[index], Mapping) else {}
        properties = widget.get("properties", {})
        return (
            str(properties.get("title") or f"widget {index}")
            if isinstance(properties, Mapping)
            else f"widget {index}"
        )

    states: dict[str, int] = {}
    for badge in badges:
        states[badge.state] = states.get(badge.state, 0) + 1
    return Rendered(
        out=str(out),
        screenshot=str(png) if png else None,
        dashboard=name,
        source=source,
        start=start.isoformat(),
        end=end.isoformat(),
        widgets=len(widgets),
        charts=len(charts),
        charts_with_data=sum(1 for _, series in charts if series),
        empty_charts=[title(index) for index, series in charts if not series],
        alarms=states,
        notes=notes,
        metric_calls=calls,
    )
