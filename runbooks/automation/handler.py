"""The runbook Lambda: `run_runbook` behind an event, for the stack's SSM Automation documents.

One implementation serves the CLI and the documents (the documents invoke this function with
`DryRun` true to diagnose, then false after an approval). The stack's names come from the
environment the template sets (one variable per StackResources field), never from
CloudFormation; writes are not paced (a Lambda never sleeps to wait), so a large redrive is
done by an Automation loop or the CLI, not by a long invocation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from pipeline.telemetry.handler import instrumented
from runbooks.automation.remedy_request import Selection
from runbooks.automation.result import RunbookResult, Verdict
from runbooks.catalog import Runbook, UnknownRunbookError, parse
from stack.resources import StackResources

STACK_NAME_ENV = "STACK_NAME"
# Every variable resources_from_env reads (tests/unit/test_facts.py holds the template to them).
STACK_ENV_NAMES = frozenset({STACK_NAME_ENV} | {f.name for f in fields(StackResources) if f.name != "stack_name"})
NO_PACING = 0.0  # writes a second: unpaced (runbooks.automation.pacing never waits at 0)


class BadEventError(ValueError):
    """An event this function cannot run: the message says which field and why."""


@dataclass(frozen=True)
class RunbookEvent:
    """What one invocation asks: a runbook, dry run or apply, and the operator's selection."""

    runbook: Runbook
    dry_run: bool
    groups: tuple[str, ...] | None
    options: Mapping[str, Any]


def _names(event: Mapping[str, Any], field: str) -> tuple[str, ...] | None:
    """A list of names (or one comma-separated string), None when absent or empty."""
    value = event.get(field)
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise BadEventError(f"{field} must be a list of strings")
    names = tuple(name.strip() for name in value if name.strip())
    return names or None


def _dry_run(event: Mapping[str, Any]) -> bool:
    """`DryRun` is required: a document's Boolean, or its text ("true"/"false") from a String."""
    value = event.get("DryRun")
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise BadEventError("DryRun must be true or false")


def _grace_seconds(event: Mapping[str, Any]) -> int | None:
    """`GraceSeconds`: whole seconds (a document's String, "" when not given), None when absent."""
    value = event.get(Selection.GRACE_SECONDS.value)
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise BadEventError("GraceSeconds must be a whole number of seconds")


def parse_event(event: Mapping[str, Any]) -> RunbookEvent:
    """The invocation's request, checked; pure."""
    runbook_id = event.get("RunbookId")
    if not isinstance(runbook_id, str) or not runbook_id:
        raise BadEventError("RunbookId is required")
    try:
        runbook = parse(runbook_id)
    except UnknownRunbookError as exc:
        raise BadEventError(str(exc)) from None
    options: dict[str, Any] = {}
    if (holders := _names(event, Selection.HOLDERS.value)) is not None:
        options["holders"] = list(holders)
    if (runs := _names(event, Selection.RUNS.value)) is not None:
        options["runs"] = list(runs)
    if (grace := _grace_seconds(event)) is not None:
        options["grace_seconds"] = grace
    return RunbookEvent(runbook, _dry_run(event), _names(event, Selection.GROUPS.value), options)


def resources_from_env(environ: Mapping[str, str]) -> StackResources:
    """The stack's names from the variables the template sets: each StackResources field by its
    own name, the stack's name from STACK_NAME. A required one missing is a KeyError."""
    named = [f for f in fields(StackResources) if f.name != "stack_name"]
    values = {f.name: environ[f.name] for f in named if f.default is MISSING or f.name in environ}
    return StackResources(stack_name=environ.get(STACK_NAME_ENV, ""), **values)


class LambdaClients:
    """The function's own credentials and region, as the engine's Clients."""

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(service)  # type: ignore[call-overload]  # any service the runbook names


def response(result: RunbookResult) -> dict[str, Any]:
    """The result as the documents read it: RunbookResult.to_dict() and its exit code."""
    return result.to_dict() | {"exit_code": result.exit_code}


@instrumented("runbook")
def handler(event: Mapping[str, Any], context: object) -> dict[str, Any]:
    from runbooks.automation.engine import run_runbook

    try:
        request = parse_event(event)
    except BadEventError as exc:
        return response(RunbookResult(str(event.get("RunbookId", "")), {}, [], [], Verdict.ERROR, error=str(exc)))
    result = run_runbook(
        request.runbook,
        resources_from_env(os.environ),
        LambdaClients(),
        apply=not request.dry_run,
        groups=request.groups,
        rate=NO_PACING,
        options=request.options,
    )
    return response(result)
