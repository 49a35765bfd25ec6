"""`pipeops reconcile`: a reconcile pass (dry run or --apply), the operator's override, the
repairs' history, and legacy mode for a plain counter."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pipeops import render
from pipeops.commands.common import (
    EndpointOption,
    JsonOption,
    ProfileOption,
    RegionOption,
    StackOption,
    connect,
    connect_any,
    fail,
)
from pipeops.render import ErrorCode
from stack.resources import SidecarStack

if TYPE_CHECKING:
    from monitors.reconcile.legacy import LegacyCounter
    from stack.resources import Connection


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
    from pipeops import reconcile as library

    connection_options = (stack_name, endpoint_url, region, profile)
    if history:
        if apply or release or legacy_table:
            raise fail("--history only reads the audit: drop --apply, --release and --legacy-table")
        _history(since, connection_options, as_json)
        return
    if legacy_table:
        from monitors.reconcile.legacy import LegacyCounter

        counter = LegacyCounter(legacy_table, legacy_key_name, legacy_key_value, legacy_count_attribute)
        _legacy(counter, state_machine_arn, state_file, grace_seconds, apply, connection_options, as_json)
        return
    connection, resources = connect_any(*connection_options)
    if isinstance(resources, SidecarStack):
        if release:
            raise fail(f"{resources.stack_name} is a sidecar: its counter has no holders to --release; drop --release")
        _sidecar(connection, resources, apply, as_json)
        return
    try:
        report = library.run(resources, connection.client, apply=apply, grace_seconds=grace_seconds, release=tuple(release or ()))
    except Exception as exc:  # an observation that cannot be made is an error, never "nothing to do"
        raise fail(f"reconcile failed: {type(exc).__name__}: {exc}", ErrorCode.FAILED) from None
    data = report.to_dict()
    if as_json:
        render.emit_json("reconcile", data)
    else:
        render.console.print(render.reconcile_table(data))
    if data["remaining_findings"]:
        raise typer.Exit(1)


ConnectionOptions = tuple[str | None, str | None, str | None, str | None]  # stack, endpoint, region, profile


def _legacy(
    counter: LegacyCounter,
    state_machine_arn: str | None,
    state_file: Path | None,
    grace_seconds: float | None,
    apply: bool,
    connection_options: ConnectionOptions,
    as_json: bool,
) -> None:
    from pipeops.reconcile import run_legacy
    from stack.resources import Connection, NoCredentialsError

    connection = Connection.resolve(*connection_options)
    try:
        arn = state_machine_arn or connect(*connection_options)[1].StateMachineArn
        path = state_file or Path.home() / ".cache" / "pipeops" / f"legacy-{counter.table}-{counter.key_value}.json"
        result = run_legacy(
            connection.client, counter, arn, path, grace_seconds=120.0 if grace_seconds is None else grace_seconds, apply=apply
        )
    except typer.Exit:
        raise
    except NoCredentialsError as exc:
        raise fail(str(exc), ErrorCode.NO_CREDENTIALS) from None
    except Exception as exc:
        raise fail(f"legacy reconcile failed: {type(exc).__name__}: {exc}", ErrorCode.FAILED) from None
    if as_json:
        render.emit_json("reconcile", result.to_dict())
    else:
        render.console.print(f"legacy counter {counter.table}/{counter.key_value}: {result.decision.verdict}: {result.decision.reason}")
        if result.applied is not None:
            render.console.print("[green]repaired[/green]" if result.applied else "[yellow]race lost: the counter moved; left[/yellow]")
    if result.unresolved:
        raise typer.Exit(1)


def _sidecar(connection: Connection, sidecar: SidecarStack, apply: bool, as_json: bool) -> None:
    """A sidecar stack: its reconciler's pass (legacy mode, the schedule's previous observation)."""
    from pipeops.sidecar.live import reconcile as sidecar_reconcile

    try:
        result = sidecar_reconcile(sidecar, connection.client, apply=apply)
    except Exception as exc:  # an observation that cannot be made is an error, never "nothing to do"
        raise fail(f"reconcile failed: {type(exc).__name__}: {exc}", ErrorCode.FAILED) from None
    if as_json:
        render.emit_json("reconcile", result)
    else:
        observed = result.get("observed") or {}
        render.console.print(
            f"sidecar {sidecar.stack_name} ({sidecar.pipeline}): counter {observed.get('active_count')}, "
            f"{observed.get('running_executions')} running: {result['verdict']}: {result.get('reason') or result.get('implausible', '')}"
        )
        if result.get("applied") is not None:
            render.console.print("[green]repaired[/green]" if result["applied"] else "[yellow]race lost: the counter moved; left[/yellow]")
    if result.get("implausible") or (result["verdict"] != "in_sync" and not result.get("applied")):
        raise typer.Exit(1)


def _history(since: str, connection_options: ConnectionOptions, as_json: bool) -> None:
    """The repairs written since `since`, newest first."""
    from pipeops.durations import parse_duration
    from pipeops.reconcile import history

    try:
        window = parse_duration(since, option="--since")
    except ValueError as exc:
        raise fail(str(exc)) from None
    connection, resources = connect_any(*connection_options)
    if isinstance(resources, SidecarStack):
        from pipeops.sidecar.live import history as sidecar_history

        found = sidecar_history(resources, connection.client, datetime.now(UTC) - window)
    else:
        found = history(connection.client, resources, datetime.now(UTC) - window)
    if as_json:
        render.emit_json("reconcile_history", {"since": since, **found.to_dict()})
    else:
        render.console.print(render.history_table(f"repairs in the last {since}", found.to_dict()))
