"""One renderer for every command: rich tables for people, versioned JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

JSON_VERSION = 1
console = Console()


def emit_json(kind: str, payload: Any) -> None:
    print(json.dumps({"version": JSON_VERSION, "kind": kind, "data": payload}, indent=2, default=str, ensure_ascii=False))


def _entities(entities: Mapping[str, int]) -> str:
    return ", ".join(f"{name} x{count}" for name, count in sorted(entities.items())) or "-"


def _failed(failed: Mapping[str, Sequence[Any]]) -> str:
    parts = []
    for entry in list(failed.get("detect", [])) + list(failed.get("redact", [])):
        parts.append(f"{entry['key']} ({entry.get('error')})")
    parts += [f"{key} (unsupported)" for key in failed.get("unsupported", [])]
    parts += [f"{key} (empty)" for key in failed.get("empty", [])]
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


def health_table(health: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="Health snapshot", show_header=False)
    table.add_column("what")
    table.add_column("value")
    queue = health["main_queue"]
    age = health.get("oldest_message_age_seconds")
    rows = [
        ("main queue (visible / in flight / delayed)", f"{queue['visible']} / {queue['in_flight']} / {queue['delayed']}"),
        ("oldest message age (max, last minute)", "unknown (no AWS/SQS metric)" if age is None else f"{age:.0f} s"),
        ("DLQ depth", str(health["dead_letter_depth"])),
        ("tracker DLQ depth", str(health["tracker_dead_letter_depth"])),
        ("ingest DLQ depth", str(health["ingest_dead_letter_depth"])),
        ("active_count / max", f"{health['active_count']} / {health['max_concurrency']}"),
        ("holders", ", ".join(health["holders"]) or "-"),
        ("running executions", str(health["running_executions"])),
        ("jobs by status", ", ".join(f"{k} {v}" for k, v in health["jobs_by_status"].items()) or "-"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    for finding in findings:
        colour = "red" if finding["severity"] == "critical" else "yellow"
        table.add_row(f"[{colour}]{finding['code']}[/{colour}]", finding["message"])
    if not findings:
        table.add_row("[green]findings[/green]", "none")
    return table
