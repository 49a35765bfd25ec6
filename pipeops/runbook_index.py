"""The runbooks as the CLI lists them: each id with its page and the alarms that name it (from
the template's alarm catalog, so the list is what the alarms say). Offline: no AWS call."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from runbooks.catalog import Runbook, load_page, page_path


@dataclass(frozen=True)
class RunbookEntry:
    id: str
    title: str
    incident: bool
    alarms: list[str]
    path: str
    markdown: str | None = field(default=None)  # only for one page shown

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.markdown is None:
            del data["markdown"]
        return data


def _alarms_by_runbook() -> dict[str, list[str]]:
    """Each runbook id's alarms (deployed suffixes), from the template's alarm catalog."""
    from alarms.catalog import build_catalog
    from stack.template import load_template

    found: dict[str, list[str]] = {runbook.value: [] for runbook in Runbook}
    for spec in build_catalog(load_template()):
        found.setdefault(spec.runbook, []).append(spec.name_suffix)
    return found


def _entry(runbook: Runbook, alarms: dict[str, list[str]], markdown: str | None = None) -> RunbookEntry:
    return RunbookEntry(
        id=runbook.value,
        title=runbook.page_title,
        incident=runbook.incident,
        alarms=alarms.get(runbook.value, []),
        path=f"runbooks/{page_path(runbook).name}",
        markdown=markdown,
    )


def runbook_entries() -> list[RunbookEntry]:
    """Every runbook, in the catalog's order."""
    alarms = _alarms_by_runbook()
    return [_entry(runbook, alarms) for runbook in Runbook]


def runbook_page(runbook: Runbook) -> RunbookEntry:
    """One runbook with its page's markdown."""
    return _entry(runbook, _alarms_by_runbook(), load_page(runbook))
