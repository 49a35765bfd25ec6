"""The `pipeops` command line: the app and its command groups.

Every command lives in `pipeops/commands/<group>.py`, finds the stack's resources from its Outputs
(`--stack-name`), talks to AWS or to a sandbox (`--endpoint-url`, or AWS_ENDPOINT_URL), and prints
rich text or `--json`. This module only puts the commands on the app, in the order `--help` lists
them, and turns an error that escapes a command into one line and exit 2.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from pipeops import render
from pipeops.commands import (
    alarms,
    dashboard,
    demo,
    doctor,
    failures,
    gameday,
    jobs,
    metrics,
    reconcile,
    runbook,
    sandbox,
    sidecar,
    status,
    template,
    upload,
    version,
)
from pipeops.commands.common import CONNECTION_ERRORS, error_code
from pipeops.entry import PipeopsTyper
from pipeops.render import ErrorCode

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
        except CONNECTION_ERRORS as exc:
            render.emit_error(str(exc), error_code(exc))
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


def _aws_failure(exc: Exception) -> str:
    """A botocore error as one line: the operation, AWS's code and message (a ClientError), or what
    botocore could not do (no answer, a timeout)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        operation = getattr(exc, "operation_name", "a request")
        return f"AWS refused {operation}: {error.get('Code', '?')}: {error.get('Message', '')} (check the profile's permissions and --region)"
    return f"{type(exc).__name__}: {exc}"


app = PipeopsTyper(
    cls=_Commands,
    help="Observability and reliability for serverless file-processing pipelines.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
sandbox_app = typer.Typer(help="The embedded sandbox: template.yaml on moto with the real handlers.", no_args_is_help=True)
fault_app = typer.Typer(
    cls=_Commands, help="Break a served sandbox on purpose, to rehearse an incident; and mend it.", no_args_is_help=True
)
job_app = typer.Typer(cls=_Commands, help="One job in detail.", no_args_is_help=True)
alarms_app = typer.Typer(cls=_Commands, help="The stack's alarms: states, runbooks, and the evaluator's verdict.", no_args_is_help=True)
template_app = typer.Typer(help="template.yaml: write the alarms and dashboards built from the catalogs.", no_args_is_help=True)
dashboard_app = typer.Typer(help="The stack's CloudWatch dashboards, drawn offline from the metrics in CloudWatch.", no_args_is_help=True)
sidecar_app = typer.Typer(
    cls=_Commands, help="The sidecar on a pipeline we did not build: its template, from the pipeline's description.", no_args_is_help=True
)
runbook_app = typer.Typer(
    help="The runbooks: what an alarm means, how to diagnose and repair it, one page per id.", no_args_is_help=True
)


@dashboard_app.callback()
def _dashboard() -> None:
    """The stack's CloudWatch dashboards, drawn offline from the metrics in CloudWatch."""


app.command("version")(version.show_version)
app.command("demo")(demo.demo)
app.command("gameday")(gameday.gameday)
sandbox_app.command("up")(sandbox.sandbox_up)
fault_app.command("inject")(sandbox.fault_inject)
fault_app.command("clear")(sandbox.fault_clear)
fault_app.command("list")(sandbox.fault_list)
sandbox_app.add_typer(fault_app, name="fault")
app.command("upload")(upload.upload)
app.command("status")(status.status)
app.command("jobs")(jobs.jobs)
job_app.command("show")(jobs.job_show)
app.command("reconcile")(reconcile.reconcile)
app.command("failures")(failures.failures)
app.command("doctor")(doctor.doctor)
app.command("metrics")(metrics.metrics_catalog)
alarms_app.command("list")(alarms.alarms_list)
alarms_app.command("check")(alarms.alarms_check)
template_app.command("build")(template.template_build)
dashboard_app.command("render")(dashboard.render_command)
runbook_app.command("list")(runbook.list_runbooks)
runbook_app.command("show")(runbook.show_runbook)
runbook_app.command("run")(runbook.run_runbook)
runbook_app.command("history")(runbook.runbook_history)
sidecar_app.command("build")(sidecar.sidecar_build)
sidecar_app.command("doctor")(sidecar.sidecar_doctor)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(job_app, name="job")
app.add_typer(alarms_app, name="alarms")
app.add_typer(template_app, name="template")
app.add_typer(dashboard_app, name="dashboard")
app.add_typer(runbook_app, name="runbook")
app.add_typer(sidecar_app, name="sidecar")

if __name__ == "__main__":
    app()
