"""The runbook pages against the runbook catalog and the alarm catalog, in both directions: every
alarm's runbook is a page, every page has the one shape and names exactly the alarms that send
people to it, the generated parts are current, and `pipeops runbook` shows each page."""

from __future__ import annotations

import json
import re

import pytest
import typer
from typer.testing import CliRunner

from alarms.catalog import build_catalog
from alarms.runbook_pages import (
    INDEX,
    alarm_names_of,
    alarms_of,
    listed_alarms,
    refresh,
    render_index,
    sections,
)
from pipeline.pii.offline import OfflineDetector
from pipeops.cli import runbook_app
from runbooks.catalog import SECTIONS, Runbook, UnknownRunbookError, load_page, page_path, parse
from stack.template import load_template

SPECS = build_catalog(load_template())
RUNBOOKS = list(Runbook)


def cli() -> typer.Typer:
    """`pipeops runbook` on its own (the real CLI registers the same sub-app)."""
    app = typer.Typer()
    app.add_typer(runbook_app, name="runbook")
    return app


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.logical_id)
def test_every_alarm_names_a_runbook_of_the_catalog(spec) -> None:
    """The alarm catalog names runbooks by the enum itself: a new id is added to Runbook first."""
    assert isinstance(spec.runbook, Runbook), f"{spec.logical_id} names {spec.runbook!r}: use a Runbook member"
    assert spec.description.endswith(f"/{spec.runbook.value}.md")


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=str)
def test_each_page_has_the_one_shape(runbook: Runbook) -> None:
    text = load_page(runbook)
    assert text.splitlines()[0] == f"# {runbook.page_title}"
    found = sections(text)
    assert tuple(found) == SECTIONS
    assert all(found.values()), f"{runbook}: an empty section"


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=str)
def test_each_page_names_exactly_the_alarms_that_send_people_to_it(runbook: Runbook) -> None:
    expected = alarm_names_of(runbook, SPECS)
    assert listed_alarms(load_page(runbook)) == expected
    # An incident page is one no alarm names; every other page is named by at least one alarm.
    assert runbook.incident == (not expected)


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=str)
def test_each_pages_generated_alarms_block_is_current(runbook: Runbook) -> None:
    text = load_page(runbook)
    assert refresh(text, runbook, SPECS) == text, "run `python -m alarms.docs`"


def test_the_index_is_current() -> None:
    assert INDEX.read_text(encoding="utf-8") == render_index(SPECS), "run `python -m alarms.docs`"


def test_the_generated_block_follows_a_changed_alarm() -> None:
    """The staleness check can fail: a page whose block predates a new threshold is rewritten."""
    page = load_page(Runbook.DLQ_MESSAGES)
    spec = alarms_of(Runbook.DLQ_MESSAGES, SPECS)[0]
    from dataclasses import replace

    changed = [replace(spec, threshold=3)] + [other for other in SPECS if other is not spec]
    rewritten = refresh(page, Runbook.DLQ_MESSAGES, changed)
    assert rewritten != page and "greater than 3 in" in rewritten


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=str)
def test_each_page_links_only_to_pages_that_exist(runbook: Runbook) -> None:
    links = re.findall(r"\]\(([^)#]+\.md)\)", load_page(runbook))
    assert set(links) <= {page_path(other).name for other in Runbook} | {INDEX.name}


def _pipeops_calls(text: str) -> list[list[str]]:
    """Every `pipeops ...` a page shows: code-block lines and inline code, as words."""
    lines = re.findall(r"^\s*(pipeops [^\n#]*)", text, re.MULTILINE) + re.findall(r"`(pipeops [^`]*)`", text)
    return [line.split() for line in lines]


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=str)
def test_each_page_uses_only_pipeops_commands_and_options_that_exist(runbook: Runbook) -> None:
    from pipeops.cli import app

    root = typer.main.get_command(app)
    planned: set[tuple[str, str]] = set()  # commands a page may name before they are built
    for words in _pipeops_calls(load_page(runbook)):
        name = words[1]
        command = typer.main.get_command(runbook_app) if name == "runbook" else root.commands.get(name)  # type: ignore[attr-defined]
        assert command is not None, f"{runbook}: unknown command `pipeops {name}`"
        if hasattr(command, "commands") and len(words) > 2:  # a group: its subcommand
            if (name, words[2]) in planned:
                continue
            command = command.commands.get(words[2])
            assert command is not None, f"{runbook}: unknown command `{' '.join(words[:3])}`"
        options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        unknown = [word for word in words if word.startswith("--") and word not in options]
        assert not unknown, f"{runbook}: `{' '.join(words)}` has unknown option(s) {unknown}"


TEMPLATE = load_template()
# SAM names an event's resource after its function and the event (e.g. ReconcilerFunctionSchedule).
RESOURCES = set(TEMPLATE["Resources"]) | {
    logical_id + event
    for logical_id, resource in TEMPLATE["Resources"].items()
    for event in resource.get("Properties", {}).get("Events", {})
}


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=str)
def test_each_page_names_only_outputs_resources_and_parameters_of_the_template(runbook: Runbook) -> None:
    text = load_page(runbook)
    outputs = set(re.findall(r"\bout ([A-Z][a-z][A-Za-z]*)", text))
    resources = set(re.findall(r"\bres ([A-Z][a-z][A-Za-z]*)", text))
    parameters = set(re.findall(r"ParameterKey=='([A-Za-z]+)'", text)) | set(
        re.findall(r"overrides ([A-Za-z]+)=", text)
    )
    assert outputs <= set(TEMPLATE["Outputs"]), (
        f"{runbook}: no such Output {sorted(outputs - set(TEMPLATE['Outputs']))}"
    )
    assert resources <= RESOURCES, f"{runbook}: no such resource {sorted(resources - RESOURCES)}"
    assert parameters <= set(TEMPLATE["Parameters"]), (
        f"{runbook}: no such parameter {sorted(parameters - set(TEMPLATE['Parameters']))}"
    )


def _widget_titles() -> set[str]:
    """The title of every widget of the dashboards, as dashboards/build.py builds them."""
    from dashboards.build import drilldown_body, operations_body

    widgets = operations_body(SPECS, TEMPLATE)["widgets"] + drilldown_body(TEMPLATE)["widgets"]
    return {widget["properties"]["title"] for widget in widgets if "title" in widget.get("properties", {})}


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=str)
def test_each_dashboard_widget_a_page_names_exists(runbook: Runbook) -> None:
    """Widgets are named in italics, by their title (outside code)."""
    text = re.sub(r"```.*?```", "", load_page(runbook), flags=re.DOTALL)
    text = re.sub(r"\s+", " ", re.sub(r"`[^`]*`", "``", text))
    named = set(re.findall(r"(?<![*\w])\*([^*\s](?:[^*]*[^*\s])?)\*(?!\*)", text))
    assert named <= _widget_titles(), f"{runbook}: no such widget {sorted(named - _widget_titles())}"


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=str)
def test_no_page_carries_pii(runbook: Runbook) -> None:
    """The pipeline's own detector finds nothing in a page but example.com-style addresses."""
    text = load_page(runbook)
    found = [text[e.start : e.end] for e in OfflineDetector().detect(text)]
    assert [value for value in found if not value.endswith("example.com")] == []


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=str)
def test_show_renders_each_page(runbook: Runbook) -> None:
    result = CliRunner().invoke(cli(), ["runbook", "show", runbook.value])
    assert result.exit_code == 0, result.output
    assert runbook.page_title in result.stdout
    assert "## Diagnosis" not in result.stdout and "Diagnosis" in result.stdout  # rendered, not raw


def test_show_json_carries_the_page_and_its_alarms() -> None:
    result = CliRunner().invoke(cli(), ["runbook", "show", "counter-drift", "--json"])
    assert result.exit_code == 0
    envelope = json.loads(result.stdout)
    assert envelope["kind"] == "runbook_page"
    data = envelope["data"]
    assert data["id"] == "counter-drift" and data["markdown"] == load_page(Runbook.COUNTER_DRIFT)
    assert data["alarms"] == [spec.name_suffix for spec in alarms_of(Runbook.COUNTER_DRIFT, SPECS)]


def test_an_unknown_id_is_one_line_naming_the_valid_ids() -> None:
    result = CliRunner().invoke(cli(), ["runbook", "show", "dlq-mesages"])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert "dlq-mesages" in line and all(runbook.value in line for runbook in Runbook)
    assert result.stdout == ""
    with_json = CliRunner().invoke(cli(), ["runbook", "show", "dlq-mesages", "--json"])
    assert with_json.exit_code == 2 and json.loads(with_json.stdout)["kind"] == "error"


def test_parse_takes_any_case_and_refuses_the_rest() -> None:
    assert parse(" Tracker-DLQ ") is Runbook.TRACKER_DLQ
    with pytest.raises(UnknownRunbookError, match="valid ids: dlq-messages"):
        parse("reboot")


def test_list_names_every_runbook_with_its_alarms() -> None:
    result = CliRunner().invoke(cli(), ["runbook", "list", "--json"])
    assert result.exit_code == 0
    entries = json.loads(result.stdout)["data"]
    assert [entry["id"] for entry in entries] == [runbook.value for runbook in Runbook]
    named = {suffix for entry in entries for suffix in entry["alarms"]}
    assert named == {spec.name_suffix for spec in SPECS}
    text = CliRunner().invoke(cli(), ["runbook", "list"])
    assert text.exit_code == 0 and "implausible-drift" in text.stdout
