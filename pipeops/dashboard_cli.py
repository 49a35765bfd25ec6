"""`pipeops dashboard render`: the operations dashboard as one self-contained HTML page.

The page is drawn from the same body CloudWatch shows (the deployed `<stack>-operations`, or the
body built from this checkout's template when the stack has none yet) and from the metrics in
CloudWatch, AWS's or a sandbox's. Alarm states go on top. It opens with no network, so it works
where the console is out of reach: on a laptop sandbox, or in an incident with an expired session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from pipeops import render
from stack.resources import (
    BadConnectionError,
    Connection,
    NoCredentialsError,
    StackNotFoundError,
    StackResources,
)

dashboard_app = typer.Typer(
    help="The stack's CloudWatch dashboards, drawn offline from the metrics in CloudWatch.",
    no_args_is_help=True,
)

MAX_QUERIES_PER_CALL = 500  # GetMetricData's limit on MetricDataQueries
STANDARD_STATISTICS = frozenset({"SampleCount", "Average", "Sum", "Minimum", "Maximum"})
_NOT_FOUND = {
    "ResourceNotFound",
    "ResourceNotFoundException",
}  # AWS's code for a missing dashboard; moto's too
_CHART = re.compile(r'<svg class="chart"[^>]*?data-widget="(\d+)" data-series="(\d+)" data-points="(\d+)"')

MetricKey = tuple[str, str, tuple[tuple[str, str], ...], str, int]
Points = list[tuple[datetime, float]]


def _stderr() -> Console:
    return Console(stderr=True)


@dashboard_app.callback()
def dashboard() -> None:
    """The stack's CloudWatch dashboards, drawn offline from the metrics in CloudWatch."""


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


# -- the command --------------------------------------------------------------------------------


class _Progress:
    """A progress bar on stderr while the page is made, in steps: the body, each series read, the
    alarms, the page, the screenshot. Nothing when quiet (--json) or when stderr is no terminal."""

    def __init__(self, quiet: bool) -> None:
        self._bar: Any = None
        self._task: Any = None
        console = _stderr()
        if quiet or not console.is_terminal:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task("reading the dashboard body", total=None)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def step(self, description: str, done: int = 0, total: int | None = None) -> None:
        """Say what is being done now, after `done` more steps (the total once it is known)."""
        if self._bar is not None:
            extra = {"total": total} if total is not None else {}
            self._bar.update(self._task, description=description, advance=done, **extra)

    def advance(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=done)


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


def _fail(message: str) -> typer.Exit:
    """One line on stderr (with --json also the error envelope on stdout): pipeops.render's errors."""
    render.emit_error(message, render.ErrorCode.FAILED)
    return typer.Exit(render.ERROR_EXIT)


@dashboard_app.command("render")
def render_command(
    out: Annotated[Path, typer.Option("--out", help="Where to write the HTML page.")],
    hours: Annotated[float, typer.Option(min=0.01, help="The time window: this many hours up to now.")] = 3.0,
    screenshot_path: Annotated[
        Path | None, typer.Option("--screenshot", help="Also write a PNG of the page (needs Chromium).")
    ] = None,
    endpoint_url: Annotated[
        str | None,
        typer.Option("--endpoint-url", help="AWS endpoint, e.g. the sandbox's (default: AWS_ENDPOINT_URL)."),
    ] = None,
    stack_name: Annotated[
        str | None, typer.Option("--stack-name", "--stack", help="The pipeops stack (default: pipeops).")
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(
            "--region",
            help="AWS region (default, as the aws CLI: AWS_REGION, AWS_DEFAULT_REGION, the profile's region, us-east-1).",
        ),
    ] = None,
    profile: Annotated[
        str | None, typer.Option("--profile", help="Named AWS profile for credentials and region (default: AWS_PROFILE).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print versioned JSON for scripts.")] = False,
) -> None:
    """Draw the operations dashboard, with the metrics and alarm states in CloudWatch, as one HTML page.

    The body is the deployed `<stack>-operations` dashboard's; a stack without one gets the body
    built from this checkout's template (said on stderr). The page is self-contained: no script,
    nothing fetched, it opens offline. Exit 2 on error (no stack, no credentials, no Chromium).
    """
    from dashboards.build import OPERATIONS_SUFFIX

    try:
        connection = Connection.resolve(stack_name, endpoint_url, region, profile)
        resources = connection.resources()
    except (StackNotFoundError, NoCredentialsError, BadConnectionError) as exc:
        raise _fail(str(exc)) from None
    name = f"{resources.stack_name}-{OPERATIONS_SUFFIX}"
    # Up to the next whole second: a datapoint of the last instant (CloudWatch APIs take whole seconds) is in.
    end = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    start = end - timedelta(hours=hours)
    notes: list[str] = []
    with _Progress(quiet=as_json) as progress:
        page, badges, fetched, body, source = _draw(
            connection, resources, name, start, end, out, screenshot_path, notes, progress
        )
    result = _summary(
        body, page, out, screenshot_path, name, source, start, end, badges, notes, fetched.calls
    )
    for note in notes:
        _stderr().print(f"[yellow]note:[/yellow] {note}")
    if as_json:
        render.emit_json("dashboard_render", asdict(result))
        return
    render.console.print(
        f"wrote {out} ({result.source} body of {name}, {start:%Y-%m-%d %H:%M} to {end:%H:%M} UTC): "
        f"{result.charts_with_data} of {result.charts} charts have data; "
        f"{sum(result.alarms.values())} alarm(s), {result.alarms.get('ALARM', 0)} in ALARM"
        + (f"; screenshot {screenshot_path}" if screenshot_path else "")
    )


def _draw(
    connection: Any,
    resources: Any,
    name: str,
    start: datetime,
    end: datetime,
    out: Path,
    screenshot_path: Path | None,
    notes: list[str],
    progress: _Progress,
) -> tuple[str, list[Any], Fetched, dict[str, Any], str]:
    """Read the body, its metrics and the alarms; write the page (and the screenshot)."""
    from dashboards.render import layout, render_html, screenshot

    try:
        cloudwatch = connection.client("cloudwatch")
        body = deployed_body(cloudwatch, name)
        source = "deployed"
        if body is None:
            source = "built"
            try:
                body = built_body(connection, resources)
            except Exception as exc:  # no template.yaml (an installed pipeops), or one that does not load
                raise _fail(
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
        raise _fail(f"cannot read the dashboard and its metrics: {type(exc).__name__}: {exc}") from None
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
        raise _fail(str(exc)) from None
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
