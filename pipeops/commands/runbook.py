"""`pipeops runbook list | show ID`: the runbook pages, in the terminal (offline)."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeops import render
from pipeops.commands.common import JsonOption
from pipeops.render import ErrorCode


def list_runbooks(as_json: JsonOption = False) -> None:
    """Every runbook: its id, title and the alarms that name it."""
    from rich.table import Table

    from pipeops.runbook_index import runbook_entries

    entries = runbook_entries()
    if as_json:
        render.emit_json("runbooks", [entry.to_dict() for entry in entries])
        return
    table = Table(title="Runbooks (pipeops runbook show ID)")
    for column in ("id", "title", "alarms"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        table.add_row(entry.id, entry.title, ", ".join(entry.alarms) or "- (incident page)")
    render.console.print(table)


def show_runbook(
    runbook_id: Annotated[
        str, typer.Argument(metavar="ID", help="A runbook id, e.g. dlq-messages (`pipeops runbook list`).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Print one runbook page, rendered for the terminal."""
    from pipeops.runbook_index import runbook_page
    from runbooks.catalog import UnknownRunbookError, parse

    try:
        runbook = parse(runbook_id)
    except UnknownRunbookError as exc:
        render.emit_error(str(exc), ErrorCode.BAD_INPUT, as_json=as_json)
        raise typer.Exit(render.ERROR_EXIT) from None
    page = runbook_page(runbook)
    if as_json:
        render.emit_json("runbook_page", page.to_dict())
        return
    from rich.markdown import Markdown  # ~70 ms of imports (markdown-it): only for `show`

    render.console.print(Markdown(page.markdown or ""))
