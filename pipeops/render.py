"""One renderer for every command: rich tables for people, versioned JSON for scripts.

Errors go to stderr as one line; with `--json` the same error is also an envelope on stdout
(`kind` "error"), so a script reads one JSON document whatever happened.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from alarms.text import shorten
from pipeline.status import FailedFileKind

# The envelope's version: raised when a result's shape changes incompatibly (2: `status` says what is
# wrong in one `findings` list, by the names the alarms and runbooks use; README: JSON output).
JSON_VERSION = 2
console = Console()
# Errors: never wrapped into several lines, whatever the terminal's width.
error_console = Console(stderr=True, soft_wrap=True)
# Every error exits 2; 1 is kept for "ran, and found something that pages" (README: exit codes).
ERROR_EXIT = 2


class ErrorCode(StrEnum):
    """What kind of error, for scripts (the `code` of the error envelope)."""

    BAD_INPUT = "bad_input"  # an option or argument that cannot work
    BAD_CONNECTION = "bad_connection"  # profile, region or endpoint
    NO_CREDENTIALS = "no_credentials"
    STACK_NOT_FOUND = "stack_not_found"  # or nothing answers where the stack was looked for
    NOT_FOUND = "not_found"  # a job, a file
    AWS_ERROR = "aws_error"  # AWS (or the sandbox) refused or failed a request mid-command
    FAILED = "failed"  # the command could not do its work (e.g. an observation failed)


def emit_json(kind: str, payload: Any) -> None:
    print(json.dumps({"version": JSON_VERSION, "kind": kind, "data": payload}, indent=2, default=str, ensure_ascii=False))


# Whether the command line asked for --json: set by the CLI's command groups before a command
# runs, so that an error raised anywhere (option parsing done, or not) can answer in JSON too.
_errors_as_json = False


def errors_as_json(requested: bool) -> None:
    global _errors_as_json
    _errors_as_json = requested


def emit_error(message: str, code: ErrorCode, *, as_json: bool | None = None) -> None:
    """One line on stderr; with --json also `{"kind": "error", "data": {message, code, exit_code}}`
    on stdout, in the same versioned envelope as every result."""
    one_line = " ".join(message.split())
    error_console.print(f"[red]error:[/red] {escape(one_line)}", highlight=False)
    error_envelope(one_line, code, as_json=as_json)


def error_envelope(message: str, code: ErrorCode, *, as_json: bool | None = None) -> None:
    """Only the JSON half of an error, when --json was asked for (the option parser prints its
    own message on stderr)."""
    if _errors_as_json if as_json is None else as_json:
        emit_json("error", {"message": " ".join(message.split()), "code": code.value, "exit_code": ERROR_EXIT})


def _entities(entities: Mapping[str, int]) -> str:
    return ", ".join(f"{name} x{count}" for name, count in sorted(entities.items())) or "-"


def _failed(failed: Mapping[str, Sequence[Any]]) -> str:
    parts = []
    for entry in list(failed.get(FailedFileKind.DETECT, [])) + list(failed.get(FailedFileKind.REDACT, [])):
        parts.append(f"{entry['key']} ({entry.get('error')})")
    for kind in (FailedFileKind.UNSUPPORTED, FailedFileKind.EMPTY):
        parts += [f"{key} ({kind})" for key in failed.get(kind, [])]
    return "\n".join(parts) or "-"


def runs_table(title: str, runs: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title=title, show_lines=True)
    for column in ("job", "status", "files", "PII found", "not redacted (reason)"):
        table.add_column(column, overflow="fold")
    for run in runs:
        status = run["status"]
        style = "green" if status == "COMPLETE" else "red" if status == "FAILED" else "yellow"
        # The run's own error (retries_exhausted, StaleJobReclaimed, States.…): why it FAILED.
        reason = f"\n{escape(str(run['error']))}" if run.get("error") else ""
        table.add_row(
            run["job_id"], f"[{style}]{status}[/{style}]{reason}", str(run["files"]), _entities(run["entities"]), _failed(run["failed"])
        )
    return table


def _jobs_by_status(status: Mapping[str, Any]) -> str:
    """Active runs, then the widest window's ended runs: a count the read was capped at shows "≥"."""
    windows = status.get("recent_outcomes") or []
    lower_bounds = set(windows[-1]["lower_bounds"]) if windows else set()
    return ", ".join(f"{k} {'≥ ' if k in lower_bounds else ''}{v}" for k, v in status["jobs_by_status"].items()) or "-"


def _last_run(last: Mapping[str, Any] | None) -> str:
    if not last:
        return "never"
    return f"{last['at']}: {last['finding_count']} finding(s), {last['repairs']} repair(s), {last['remaining_findings']} left"


def status_table(status: Mapping[str, Any]) -> Table:
    """`pipeops status`: the numbers, the reconciler's observation and its last run, its newest
    repairs, then every finding (alarm, queue or reconciler) with its runbook."""
    table = Table(title="Status", show_header=False)
    table.add_column("what")
    table.add_column("value")
    queue = status["main_queue"]
    age = status.get("oldest_message_age_seconds")
    reconciler = status["reconciler"]
    rows = [
        ("main queue (visible / in flight / delayed)", f"{queue['visible']} / {queue['in_flight']} / {queue['delayed']}"),
        ("oldest message age (max, last minute)", "unknown (no AWS/SQS metric)" if age is None else f"{age:.0f} s"),
        ("DLQ depth", str(status["dead_letter_depth"])),
        ("tracker DLQ depth", str(status["tracker_dead_letter_depth"])),
        ("ingest DLQ depth", str(status["ingest_dead_letter_depth"])),
        ("quarantine depth", str(status["quarantine_depth"])),
        ("active_count / max", f"{status['active_count']} / {status['max_concurrency']}"),
        ("holders", ", ".join(status["holders"]) or "-"),
        ("running executions", str(status["running_executions"])),
        ("counter drift", str(status["counter_drift"])),
        ("jobs by status", _jobs_by_status(status)),
        ("reconciler last run", _last_run(reconciler["last_run"])),
    ]
    for name, value in rows:
        table.add_row(name, value)
    for repair in reconciler["recent_repairs"]:
        changed = "; ".join(repair["changes"]) or "-"
        who = {"scheduled": "scheduled reconciler", "person": escape(repair["by"])}.get(repair["by_kind"], "unknown")
        table.add_row(
            f"repair {repair['at']}", f"{escape(repair['action'])} {escape(repair['target'])}: {escape(changed)} (by {who})"
        )
    for finding in status["findings"]:
        said = "ALARM " if finding["source"] == "alarm" else ""
        runbook = f" (runbook {finding['runbook']})" if finding.get("runbook") else ""
        table.add_row(
            f"[red]{said}{escape(finding['name'])}[/red]",
            f"{escape(finding['target'])}: {escape(shorten(finding['reason'], 160))}{runbook}",
        )
    if not status["findings"]:
        table.add_row("[green]findings[/green]", "none")
    return table


def reconcile_table(data: Mapping[str, Any]) -> Table:
    observed = data["observed"]
    title = "Reconcile (applied)" if data["applied"] else "Reconcile (dry run: nothing changed)"
    table = Table(title=title, show_header=False)
    table.add_column("what")
    table.add_column("value", overflow="fold")
    table.add_row("active_count / max", f"{observed['active_count']} / {observed['max']}")
    table.add_row("holders", ", ".join(observed["holders"]) or "-")
    table.add_row("running executions", ", ".join(observed["running_executions"]) or "-")
    table.add_row("active runs", str(observed["active_runs"]))
    drift_after = "" if data["drift_after"] is None else f" -> {data['drift_after']}"
    table.add_row("counter drift", f"{data['drift_before']}{drift_after}")
    for finding in data["findings"]:
        table.add_row(f"[red]{finding['kind']}[/red]", f"{escape(finding['target'])}: {escape(finding['reason'])}")
    for action in data["actions"]:
        colour = {"applied": "green", "race_lost": "yellow"}.get(action["result"], "cyan")
        table.add_row(f"[{colour}]{action['result']}[/{colour}]", f"{action['kind']} {escape(action['target'])}")
    if not data["findings"]:
        table.add_row("[green]findings[/green]", "none")
    return table


def failures_table(title: str, rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title=title, show_lines=True)
    for column in ("execution", "state", "file", "error", "attempts", "cause"):
        table.add_column(column, overflow="fold")
    for row in rows:
        error = f"{escape(row['error'])}" + (" [green](recovered)[/green]" if row["recovered"] else "")
        table.add_row(
            escape(row["execution"]),
            escape(row["state"]),
            escape(row["file_key"] or "-"),
            error,
            str(row["attempts"]),
            escape(row["cause"][:200]),
        )
    return table


def _state(state: str) -> str:
    colour = {"ALARM": "red", "OK": "green"}.get(state, "yellow")
    return f"[{colour}]{state}[/{colour}]"


def alarms_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="Alarms (ALARM first)")
    for column in ("alarm", "state", "runbook", "metric", "reason"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(escape(row["name"]), _state(row["state"]), row["runbook"] or "-", escape(row["metric"]), escape(shorten(row["reason"], 160)))
    return table


def alarm_checks_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="Alarm check: the evaluator's verdict from the metrics now", show_lines=True)
    for column in ("alarm", "now", "verdict", "datapoints (newest first)", "reason"):
        table.add_column(column, overflow="fold")
    for row in rows:
        points = ", ".join(
            f"{'-' if p['value'] is None else format(p['value'], 'g')}{'!' if p['breaching'] else ''}" for p in row["datapoints"]
        )
        table.add_row(escape(row["name"]), _state(row["state"]), _state(row["verdict"]), points or "-", escape(shorten(row["reason"], 200)))
    return table


def _by(record: Mapping[str, Any]) -> str:
    kind = {"scheduled": "the scheduled reconciler", "person": "a person"}.get(record["by_kind"], "unknown")
    return f"{kind}\n{escape(record['by'])}"


def history_table(title: str, history: Mapping[str, Any]) -> Table:
    """The reconciler's repairs, newest first: when, what on which target and why, what it
    observed and what it wrote (pipeline.stores.audit), by whom."""
    records = history["records"]
    more = " (more: narrow --since)" if history["truncated"] else ""
    read = " (read by scanning the table: redeploy for the audit index)" if history["method"] == "scan" else ""
    table = Table(title=f"{title}: {len(records)} repair(s){more}{read}", show_lines=True)
    for column in ("when", "repair", "observed -> written", "by"):
        table.add_column(column, overflow="fold")
    for record in records:
        table.add_row(
            record["at"],
            f"{escape(record['action'])} {escape(record['target'])}\n[dim]{escape(record['reason'])}[/dim]",
            escape("\n".join(record["changes"]) or "-"),
            _by(record),
        )
    return table
