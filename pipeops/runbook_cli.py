"""`pipeops runbook list | show ID`: the runbook pages, in the terminal.

The pages are `runbooks/<id>.md`; the alarms that send people to each come from the alarm catalog
(the template's alarms), so what `list` prints is what the alarms name. Offline: no AWS call.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from pipeops import render
from pipeops.render import ErrorCode
from runbooks.catalog import Runbook, UnknownRunbookError, load_page, page_path, parse

runbook_app = typer.Typer(
    help="The runbooks: what an alarm means, how to diagnose and repair it, one page per id.",
    no_args_is_help=True,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print versioned JSON for scripts.")]


def _alarms_by_runbook() -> dict[str, list[str]]:
    """Each runbook id's alarms (deployed suffixes), from the template's alarm catalog."""
    from alarms.catalog import build_catalog
    from stack.template import load_template

    found: dict[str, list[str]] = {runbook.value: [] for runbook in Runbook}
    for spec in build_catalog(load_template()):
        found.setdefault(spec.runbook, []).append(spec.name_suffix)
    return found


def _entry(runbook: Runbook, alarms: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "id": runbook.value,
        "title": runbook.page_title,
        "incident": runbook.incident,
        "alarms": alarms.get(runbook.value, []),
        "path": f"runbooks/{page_path(runbook).name}",
    }


@runbook_app.command("list")
def list_runbooks(as_json: JsonOption = False) -> None:
    """Every runbook: its id, title and the alarms that name it."""
    alarms = _alarms_by_runbook()
    entries = [_entry(runbook, alarms) for runbook in Runbook]
    if as_json:
        render.emit_json("runbooks", entries)
        return
    table = Table(title="Runbooks (pipeops runbook show ID)")
    for column in ("id", "title", "alarms"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        table.add_row(entry["id"], entry["title"], ", ".join(entry["alarms"]) or "- (incident page)")
    render.console.print(table)


@runbook_app.command("show")
def show_runbook(
    runbook_id: Annotated[
        str, typer.Argument(metavar="ID", help="A runbook id, e.g. dlq-messages (`pipeops runbook list`).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Print one runbook page, rendered for the terminal."""
    try:
        runbook = parse(runbook_id)
    except UnknownRunbookError as exc:
        render.emit_error(str(exc), ErrorCode.BAD_INPUT, as_json=as_json)
        raise typer.Exit(render.ERROR_EXIT) from None
    text = load_page(runbook)
    if as_json:
        render.emit_json("runbook_page", {**_entry(runbook, _alarms_by_runbook()), "markdown": text})
        return
    from rich.markdown import Markdown  # ~70 ms of imports (markdown-it): only for `show`

    render.console.print(Markdown(text))
