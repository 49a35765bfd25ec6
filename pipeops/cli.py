"""The `pipeops` command line: thin wiring over the pipeline, monitors and sandbox.

Every command finds the stack's resources from its Outputs (`--stack-name`), talks to AWS or
to a sandbox (`--endpoint-url`, or AWS_ENDPOINT_URL), and prints rich text or `--json`.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from pipeline.stack import DEFAULT_STACK_NAME
from pipeops import render
from pipeops.dashboard_cli import dashboard_app
from pipeops.entry import PipeopsTyper, installed_version
from pipeops.render import ErrorCode
from pipeops.runbook_cli import runbook_app
from stack.resources import (
    BadConnectionError,
    Connection,
    NoCredentialsError,
    StackNotFoundError,
    StackResources,
)

# The option parser's UsageError (typer vendors click, and exports only this subclass of it).
_USAGE_ERROR = typer.BadParameter.__mro__[1]


class _Commands(TyperGroup):
    """The command groups: an AWS error that escapes a command becomes one line, exit 2 (never a
    traceback), and with --json also the error envelope on stdout."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        render.errors_as_json("--json" in args)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (BadConnectionError, NoCredentialsError, StackNotFoundError) as exc:
            render.emit_error(str(exc), _code(exc))
            raise typer.Exit(render.ERROR_EXIT) from None
        except Exception as exc:
            if isinstance(exc, _USAGE_ERROR):  # an unknown option, a missing argument: usage on stderr
                render.error_envelope(exc.format_message(), ErrorCode.BAD_INPUT)  # type: ignore[attr-defined]  # a UsageError
                raise
            if not type(exc).__module__.startswith("botocore"):
                raise
            render.emit_error(_aws_failure(exc), ErrorCode.AWS_ERROR)
            raise typer.Exit(render.ERROR_EXIT) from None
        finally:
            render.errors_as_json(False)  # nothing of this command line outlives it (tests run many)


def _code(exc: Exception) -> ErrorCode:
    if isinstance(exc, BadConnectionError):
        return ErrorCode.BAD_CONNECTION
    return ErrorCode.NO_CREDENTIALS if isinstance(exc, NoCredentialsError) else ErrorCode.STACK_NOT_FOUND


def _aws_failure(exc: Exception) -> str:
    """A botocore error as one line: the operation, AWS's code and message (a ClientError), or what
    botocore could not do (no answer, a timeout)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        operation = getattr(exc, "operation_name", "a request")
        return f"AWS refused {operation}: {error.get('Code', '?')}: {error.get('Message', '')} (check the profile's permissions and --region)"
    return f"{type(exc).__name__}: {exc}"


def _fail(message: str, code: ErrorCode = ErrorCode.BAD_INPUT) -> typer.Exit:
    """Say what to fix (stderr; with --json also the envelope on stdout); raise what this returns."""
    render.emit_error(message, code)
    return typer.Exit(render.ERROR_EXIT)


app = PipeopsTyper(
    cls=_Commands,
    help="Observability and reliability for serverless file-processing pipelines.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
sandbox_app = typer.Typer(help="The embedded sandbox: template.yaml on moto with the real handlers.", no_args_is_help=True)
job_app = typer.Typer(cls=_Commands, help="One job in detail.", no_args_is_help=True)
alarms_app = typer.Typer(cls=_Commands, help="The stack's alarms: states, runbooks, and the evaluator's verdict.", no_args_is_help=True)
template_app = typer.Typer(help="template.yaml: write the alarms and dashboards built from the catalogs.", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(job_app, name="job")
app.add_typer(alarms_app, name="alarms")
app.add_typer(template_app, name="template")
app.add_typer(dashboard_app, name="dashboard")
app.add_typer(runbook_app, name="runbook")

JsonOption = Annotated[bool, typer.Option("--json", help="Print versioned JSON for scripts.")]
EndpointOption = Annotated[
    str | None, typer.Option("--endpoint-url", help="AWS endpoint, e.g. the sandbox's (default: AWS_ENDPOINT_URL).")
]
StackOption = Annotated[str | None, typer.Option("--stack-name", help="The pipeops stack (default: pipeops).")]
RegionOption = Annotated[
    str | None,
    typer.Option(
        "--region",
        help="AWS region (default, as the aws CLI: AWS_REGION, AWS_DEFAULT_REGION, the profile's region, us-east-1).",
    ),
]
ProfileOption = Annotated[
    str | None, typer.Option("--profile", help="Named AWS profile for credentials and region (default: AWS_PROFILE).")
]


def _connect(
    stack_name: str | None, endpoint_url: str | None, region: str | None, profile: str | None = None
) -> tuple[Connection, StackResources]:
    try:
        connection = Connection.resolve(stack_name, endpoint_url, region, profile)
        return connection, connection.resources()
    except (StackNotFoundError, NoCredentialsError, BadConnectionError) as exc:
        raise _fail(str(exc), _code(exc)) from None


@app.command("version")
def show_version(as_json: JsonOption = False) -> None:
    """Print the installed pipeops version."""
    installed = installed_version()
    if as_json:
        render.emit_json("version", {"version": installed})
    else:
        typer.echo(installed)


@app.command()
def demo(
    as_json: JsonOption = False,
    samples: Annotated[Path, typer.Option(help="Folder to upload (default: the bundled sample dataset).")] = Path(),
) -> None:
    """Run the reference pipeline end to end on an in-process sandbox, then an incident on it.

    Act 1 uploads the sample dataset in blackout and in synthetic mode, shows progress until every
    file's run is terminal, prints each job and the health snapshot, and checks the invariants.
    Act 2 leaks a slot and poisons the main queue by hand, then shows the alarms that fire, the
    reconcile that repairs the leak, the DLQ's runbook, and the alarms back to OK. Exits 1 if a
    file is lost, an invariant fails, or the incident does not play out.
    """
    from pipeops.demo import SAMPLES_DIR, run_demo, sample_files

    files = sample_files(samples if samples != Path() else SAMPLES_DIR)
    if not files:
        raise _fail(f"no files under {samples}: pass --samples a folder that holds some")
    if run_demo(files, render.console, as_json=as_json):
        raise typer.Exit(1)


@sandbox_app.command("up")
def sandbox_up(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free port).")] = 0,
    stack_name: Annotated[str, typer.Option("--stack-name", help="Name of the deployed stack.")] = DEFAULT_STACK_NAME,
    time_scale: Annotated[float, typer.Option(help="Factor in (0, 1] that shortens every wait.")] = 0.05,
    parameter: Annotated[list[str] | None, typer.Option(help="Stack parameter KEY=VALUE (repeatable).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Serve the sandbox on loopback until Ctrl-C: template.yaml deployed, handlers running.

    The endpoint is printed (with --json: `"ready": true`) once the stack is deployed and every
    part runs; requests that arrive earlier are held until then.
    """
    from pipeops.pipeline_sandbox import pipeline_sandbox
    from sandbox.clock import TimeScale
    from sandbox.deploy import DeployError

    malformed = [p for p in parameter or [] if "=" not in p]
    if malformed:
        raise _fail(f"--parameter {malformed[0]!r} is not KEY=VALUE: e.g. --parameter MaxConcurrentWorkflows=2")
    parameters = dict(p.split("=", 1) for p in parameter or [])
    try:
        scale = TimeScale(time_scale)
    except ValueError:
        raise _fail(f"--time-scale {time_scale} is not in (0, 1]: e.g. 0.05 (20 virtual seconds a second) or 1") from None
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    # The endpoint is printed only once every part runs: until then the served sandbox holds
    # other clients' requests, so a script may also poll describe_stacks for CREATE_COMPLETE.
    try:
        sbx = pipeline_sandbox(stack_name=stack_name, parameters=parameters, serve=True, port=port, time_scale=scale).start()
    except DeployError as exc:
        raise _fail(f"the sandbox cannot deploy template.yaml: {exc}") from None
    except OSError as exc:  # the port is taken, or not ours to bind
        raise _fail(f"the sandbox cannot serve on port {port}: {exc.strerror or exc}: pick another --port (0: any)") from None
    try:  # start() stops what it started when it fails
        info = {"endpoint_url": sbx.endpoint_url, "stack_name": stack_name, "ready": sbx.ready, "outputs": dict(sbx.outputs)}
        if as_json:
            print(json.dumps(info), flush=True)
        else:
            render.console.print(f"sandbox serving at [bold]{sbx.endpoint_url}[/bold] (stack {stack_name}); Ctrl-C stops it")
            for key, value in sorted(sbx.outputs.items()):
                render.console.print(f"  {key:32} {value}")
            render.console.print(f"try: pipeops status --endpoint-url {sbx.endpoint_url}")
            sys.stdout.flush()
        try:
            while not stopped.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
    finally:
        sbx.stop()
    if not as_json:
        render.console.print("sandbox stopped")


@app.command()
def upload(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to upload (folders recursively).")],
    prefix: Annotated[str, typer.Option(help="Key prefix, e.g. 'claims/'.")] = "",
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Upload files to the pipeline's input bucket (keys relative to each folder given)."""
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        raise _fail(f"{', '.join(missing)} does not exist: pass files or folders that do")
    connection, resources = _connect(stack_name, endpoint_url, region, profile)
    s3 = connection.client("s3")
    uploaded = []
    for path in paths:
        files = [(p, p.relative_to(path).as_posix()) for p in sorted(path.rglob("*")) if p.is_file()] if path.is_dir() else [(path, path.name)]
        for local, relative in files:
            key = f"{prefix}{relative}"
            s3.upload_file(str(local), resources.InputBucketName, key)
            uploaded.append(key)
    if as_json:
        render.emit_json("upload", {"bucket": resources.InputBucketName, "keys": uploaded})
    else:
        render.console.print(f"uploaded {len(uploaded)} file(s) to {resources.InputBucketName}")


@app.command()
def status(
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Queue and DLQ depth, oldest message age, active_count and holders, running executions, every
    active run by status, and the runs that ended (COMPLETE, FAILED) in the last hour and 24 hours.

    Exit 1 when it shows anything that pages: an alarm in ALARM, a critical finding (a DLQ message
    is one) or a reconcile finding; 0 otherwise. Reads indexes, never the whole tracking table:
    active runs from the sparse active index, ended runs newest first up to a cap per status (a
    count at the cap is shown as a lower bound, "≥").
    """
    from pipeops.views import status as status_view

    connection, resources = _connect(stack_name, endpoint_url, region, profile)
    view = status_view(resources, connection.client)
    if as_json:
        render.emit_json("status", view.to_dict())
    else:
        data = view.to_dict()
        table = render.health_table(data, data["findings"])
        table.caption = _outcomes_caption(data)
        table.caption_justify = "left"
        render.console.print(table)
    if view.pages():
        raise typer.Exit(1)


def _outcomes_caption(data: dict[str, Any]) -> str:
    """What "jobs by status" counts, and the ended runs per window (labelled with its start)."""
    windows = data.get("recent_outcomes") or []
    parts = []
    for window in windows:
        counts = ", ".join(
            f"{status} {'≥ ' if status in window['lower_bounds'] else ''}{count}" for status, count in window["counts"].items()
        )
        parts.append(f"ended in the last {window['window']} (since {window['since']}): {counts}")
    scope = f"jobs by status: every active run; ended runs of the last {windows[-1]['window']}" if windows else ""
    return "\n".join([*parts, scope])


@app.command()
def jobs(
    status_filter: Annotated[str | None, typer.Option("--status", help="Only runs in this status, e.g. FAILED.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs, newest first.")] = 50,
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """List job runs, newest first, optionally by status."""
    from pipeline.status import JobStatus
    from pipeops.views import jobs as jobs_view

    wanted = None
    if status_filter:
        try:
            wanted = JobStatus(status_filter.upper())
        except ValueError:
            raise _fail(f"unknown status {status_filter!r}: use one of {', '.join(JobStatus)}") from None
    connection, resources = _connect(stack_name, endpoint_url, region, profile)
    runs = jobs_view(resources, connection.client, wanted, limit)
    if as_json:
        render.emit_json("jobs", runs)
    else:
        render.console.print(render.runs_table(f"{len(runs)} run(s)", runs))


@job_app.command("show")
def job_show(
    job_id: Annotated[str, typer.Argument(help="The job id: a folder ('claims/') or a root-level file key.")],
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """A job's runs, its execution's state path, each file's outcome and its log lines."""
    from pipeops.views import job_detail

    connection, resources = _connect(stack_name, endpoint_url, region, profile)
    try:
        detail = job_detail(resources, connection.client, job_id)
    except LookupError as exc:
        raise _fail(str(exc), ErrorCode.NOT_FOUND) from None
    if as_json:
        render.emit_json("job", detail.to_dict())
        return
    render.console.print(render.runs_table(f"job {job_id}", detail.runs))
    render.console.print("state path: " + (" → ".join(detail.state_path) or "-"))
    for key, outcome in detail.file_outcomes.items():
        render.console.print(f"  {key}: {outcome}")
    render.console.print(f"{len(detail.log_lines)} log line(s):")
    for line in detail.log_lines:
        render.console.print(f"  {line.get('timestamp', '')} {line['function']} {line.get('level', '')} {line.get('message', '')}")


@app.command()
def reconcile(
    apply: Annotated[bool, typer.Option("--apply", help="Carry the plan out (default: a dry run that changes nothing).")] = False,
    release: Annotated[
        list[str] | None,
        typer.Option(
            "--release",
            metavar="HOLDER",
            help="The operator's override: release only these holders (execution names), past the implausible-drift "
            "guard; never one whose execution runs. Repeatable; audited like any repair.",
        ),
    ] = None,
    grace_seconds: Annotated[
        float | None,
        typer.Option(help="Leave slots and runs younger than this alone (default: the router's timeout + 60 s)."),
    ] = None,
    legacy_table: Annotated[
        str | None, typer.Option(help="Legacy mode: the table of a plain counter with no holders (seed-style pipelines).")
    ] = None,
    legacy_key_name: Annotated[str, typer.Option(help="Legacy mode: the counter item's partition key name.")] = "pk",
    legacy_key_value: Annotated[str, typer.Option(help="Legacy mode: the counter item's key value.")] = "workflow_counter",
    legacy_count_attribute: Annotated[str, typer.Option(help="Legacy mode: the counter attribute.")] = "active_count",
    state_machine_arn: Annotated[
        str | None, typer.Option(help="Legacy mode: the state machine whose RUNNING executions the counter counts (default: the stack's).")
    ] = None,
    state_file: Annotated[
        Path | None, typer.Option(help="Legacy mode: where the previous observation is kept between runs.")
    ] = None,
    history: Annotated[
        bool, typer.Option("--history", help="List the repairs made (the audit), newest first; changes nothing.")
    ] = False,
    since: Annotated[str, typer.Option(help="With --history: how far back, e.g. 2h, 7d (audit kept 30 days).")] = "7d",
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Compare the semaphore's holders with the running executions and the active runs; repair drift.

    Dry run by default: prints what it observed, what it found and what it would do. With --apply
    every repair is conditional on what was observed and audited; then it observes again. Exit 0 when
    nothing is wrong after the run, 1 when findings remain, 2 on error. With --legacy-table, a plain
    counter is repaired to the running executions only when two runs a grace window apart agree.
    With --history, the repairs of the last --since: what was observed, written, by whom, when.
    """
    from pipeops import reconcile as reconcile_command

    if history:
        if apply or release or legacy_table:
            raise _fail("--history only reads the audit: drop --apply, --release and --legacy-table")
        _reconcile_history(since, endpoint_url, stack_name, region, profile, as_json)
        return
    if legacy_table:
        _reconcile_legacy(
            legacy_table, legacy_key_name, legacy_key_value, legacy_count_attribute, state_machine_arn,
            state_file, grace_seconds, apply, endpoint_url, stack_name, region, profile, as_json,
        )
        return
    connection, resources = _connect(stack_name, endpoint_url, region, profile)
    try:
        report = reconcile_command.run(
            resources, connection.client, apply=apply, grace_seconds=grace_seconds, release=tuple(release or ())
        )
    except Exception as exc:  # an observation that cannot be made is an error, never "nothing to do"
        raise _fail(f"reconcile failed: {type(exc).__name__}: {exc}", ErrorCode.FAILED) from None
    data = report.to_dict()
    if as_json:
        render.emit_json("reconcile", data)
    else:
        render.console.print(render.reconcile_table(data))
    if data["remaining_findings"]:
        raise typer.Exit(1)


def _reconcile_legacy(
    table: str,
    key_name: str,
    key_value: str,
    count_attribute: str,
    state_machine_arn: str | None,
    state_file: Path | None,
    grace_seconds: float | None,
    apply: bool,
    endpoint_url: str | None,
    stack_name: str | None,
    region: str | None,
    profile: str | None,
    as_json: bool,
) -> None:
    from datetime import UTC, datetime

    from monitors.reconcile import legacy

    connection = Connection.resolve(stack_name, endpoint_url, region, profile)
    try:
        arn = state_machine_arn or _connect(stack_name, endpoint_url, region, profile)[1].StateMachineArn
        counter = legacy.LegacyCounter(table, key_name, key_value, count_attribute)
        path = state_file or Path.home() / ".cache" / "pipeops" / f"legacy-{table}-{key_value}.json"
        previous = legacy.load_sample(path)
        dynamodb = connection.client("dynamodb")
        current = legacy.sample(dynamodb, connection.client("stepfunctions"), counter, arn, datetime.now(UTC))
        decision = legacy.decide(previous, current, 120.0 if grace_seconds is None else grace_seconds)
        applied = legacy.repair(dynamodb, counter, decision) if apply and decision.verdict == "repair" else None
        legacy.save_sample(path, current)
    except typer.Exit:
        raise
    except NoCredentialsError as exc:
        raise _fail(str(exc), ErrorCode.NO_CREDENTIALS) from None
    except Exception as exc:
        raise _fail(f"legacy reconcile failed: {type(exc).__name__}: {exc}", ErrorCode.FAILED) from None
    data = legacy.to_dict(previous, current, decision, applied)
    if as_json:
        render.emit_json("reconcile", data)
    else:
        render.console.print(f"legacy counter {table}/{key_value}: {decision.verdict}: {decision.reason}")
        if applied is not None:
            render.console.print("[green]repaired[/green]" if applied else "[yellow]race lost: the counter moved; left[/yellow]")
    if decision.verdict in ("remember", "changing") or (decision.verdict == "repair" and not applied):
        raise typer.Exit(1)


def _reconcile_history(
    since: str, endpoint_url: str | None, stack_name: str | None, region: str | None, profile: str | None, as_json: bool
) -> None:
    """The repairs written since `since`, newest first (pipeline.stores.audit reads them)."""
    from datetime import UTC, datetime

    from pipeline.stores.audit import AuditStore
    from pipeops.durations import parse_duration

    try:
        window = parse_duration(since, option="--since")
    except ValueError as exc:
        raise _fail(str(exc)) from None
    connection, resources = _connect(stack_name, endpoint_url, region, profile)
    found = AuditStore(resources.CoordinationTableName, connection.client("dynamodb")).history(datetime.now(UTC) - window, HISTORY_LIMIT)
    if as_json:
        render.emit_json("reconcile_history", {"since": since, **found.to_dict()})
    else:
        render.console.print(render.history_table(f"repairs in the last {since}", found.to_dict()))


# At most this many repairs are listed (a window holding more says so: narrow --since).
HISTORY_LIMIT = 100


@app.command()
def failures(
    since: Annotated[str, typer.Option(help="How far back: e.g. 30m, 1h, 2d.")] = "1h",
    limit: Annotated[int, typer.Option(help="Read at most this many executions, newest first.")] = 50,
    include_recovered: Annotated[bool, typer.Option("--include-recovered", help="Also list failures a retry recovered.")] = False,
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Failed, timed-out and aborted executions and task failures: the state, the error, the cause
    and the file key it was working on, read from the execution history (Lambda timeouts included)."""
    from datetime import UTC, datetime

    from monitors.failures import failures as find_failures
    from pipeops.durations import parse_duration

    try:
        window = parse_duration(since, option="--since")
    except ValueError as exc:
        raise _fail(str(exc)) from None
    connection, resources = _connect(stack_name, endpoint_url, region, profile)
    found = find_failures(
        connection.client("stepfunctions"),
        resources.StateMachineArn,
        datetime.now(UTC) - window,
        limit=limit,
        include_recovered=include_recovered,
    )
    rows = [failure.to_dict() for failure in found]
    if as_json:
        render.emit_json("failures", rows)
    else:
        render.console.print(render.failures_table(f"{len(rows)} failure(s) since {since}", rows))


@app.command("metrics")
def metrics_catalog(as_json: JsonOption = False) -> None:
    """List the metric catalog: every metric the pipeline emits, its unit and meaning."""
    from rich.table import Table

    from pipeline.telemetry.catalog import CATALOG, NAMESPACE

    rows: list[dict[str, Any]] = [
        {"name": spec.name.value, "unit": spec.unit.value, "dimensions": list(spec.dimensions), "description": spec.description}
        for spec in CATALOG.values()
    ]
    if as_json:
        render.emit_json("metrics", {"namespace": NAMESPACE, "metrics": rows})
        return
    table = Table(title=f"Metrics in namespace {NAMESPACE}")
    for column in ("name", "unit", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["name"], row["unit"], row["description"])
    render.console.print(table)


@alarms_app.command("list")
def alarms_list(
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every alarm of the stack with its state, reason and runbook, ALARM first. Exit 1 if any is in ALARM."""
    from alarms.live import list_alarms

    connection, resources = _connect(stack_name, endpoint_url, region, profile)
    rows = [view.to_dict() for view in list_alarms(connection.client("cloudwatch"), resources.stack_name)]
    if as_json:
        render.emit_json("alarms", rows)
    else:
        render.console.print(render.alarms_table(rows))
    if any(row["state"] == "ALARM" for row in rows):
        raise typer.Exit(1)


@alarms_app.command("check")
def alarms_check(
    endpoint_url: EndpointOption = None,
    stack_name: StackOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Replay every metric alarm over the metrics in CloudWatch now, with the datapoints that decide it.

    Exit 1 when the evaluator puts any alarm in ALARM. A time-scaled sandbox is judged on its alarm
    engine's virtual clock, as the engine judges it.
    """
    from datetime import UTC, datetime

    from alarms.live import check_alarms, sandbox_clock

    connection, resources = _connect(stack_name, endpoint_url, region, profile)
    clock = sandbox_clock(connection.endpoint_url)
    rows = [
        check.to_dict()
        for check in check_alarms(connection.client("cloudwatch"), resources.stack_name, datetime.now(UTC), clock)
    ]
    if as_json:
        render.emit_json("alarm_checks", rows)
    else:
        render.console.print(render.alarm_checks_table(rows))
    if any(row["verdict"] == "ALARM" for row in rows):
        raise typer.Exit(1)


@template_app.command("build")
def template_build(
    check: Annotated[bool, typer.Option("--check", help="Change nothing; exit 1 when template.yaml is out of date.")] = False,
    template: Annotated[Path, typer.Option(help="The SAM template to write into.")] = Path("template.yaml"),
    as_json: JsonOption = False,
) -> None:
    """Write the alarms and dashboards, built from the metric and alarm catalogs, into template.yaml."""
    from pipeops.template_build import TemplateBuildError, build, is_current

    try:
        current = is_current(template) if check else not build(template)
    except (TemplateBuildError, OSError) as exc:
        raise _fail(str(exc)) from None
    if as_json:
        render.emit_json("template_build", {"template": str(template), "checked": check, "up_to_date": current})
    elif check:
        render.console.print(f"{template} is up to date" if current else f"[red]{template} is out of date:[/red] run `pipeops template build`")
    else:
        render.console.print(f"{'unchanged:' if current else 'wrote'} {template}")
    if check and not current:
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
