"""Each fact has one room; what cannot import it (the template, the Makefile, samconfig.toml) is
held equal to it here."""

from __future__ import annotations

import re
import tomllib
from functools import cache
from typing import Any

import pytest

from pipeline.config import (
    ALL_ENV_NAMES,
    ConfigurationError,
    ReconcileSettings,
    Settings,
    env_fields,
    load_reconcile_settings,
    load_settings,
    minimum_of,
)
from pipeline.stack import DEFAULT_STACK_NAME, SERVICE_NAME, SERVICE_NAME_ENV, Function
from runbooks.automation.handler import STACK_ENV_NAMES
from stack.template import PROJECT_ROOT, functions, load_template

SETTINGS_CLASSES = (Settings, ReconcileSettings)


@cache
def template() -> dict[str, Any]:
    return load_template()


def template_functions() -> dict[str, dict[str, Any]]:
    return functions(template())


def template_variables() -> dict[str, Any]:
    """Every variable the template sets (Globals and each function), with its value."""
    found = dict(template()["Globals"]["Function"]["Environment"]["Variables"])
    for resource in template_functions().values():
        found |= resource["Properties"].get("Environment", {}).get("Variables", {})
    return found


def parameter_fed_fields() -> list[tuple[str, str, Any]]:
    """(parameter, variable, field) for every settings field a template Parameter sets."""
    fed = []
    variables = template_variables()
    for cls in SETTINGS_CLASSES:
        for settings_field in env_fields(cls):
            value = variables.get(settings_field.metadata["env"])
            if isinstance(value, dict) and value.get("Ref") in template()["Parameters"]:
                fed.append((value["Ref"], settings_field.metadata["env"], settings_field))
    return fed


def test_the_parameters_feeding_settings_are_found() -> None:
    parameters = {parameter for parameter, _, _ in parameter_fed_fields()}
    assert {"MaxConcurrentWorkflows", "ProcessingMode", "ReconcileGraceSeconds", "ReconcileApply"} <= parameters


FED = parameter_fed_fields()


@pytest.mark.parametrize(("parameter", "variable", "settings_field"), FED, ids=[f"{p}-{v}" for p, v, _ in FED])
def test_each_parameter_default_is_its_fields_default(parameter: str, variable: str, settings_field: Any) -> None:
    declared = template()["Parameters"][parameter]
    default = str(declared["Default"]).lower() if isinstance(declared["Default"], bool) else str(declared["Default"])
    for cls in SETTINGS_CLASSES:
        if settings_field in env_fields(cls):
            loaded = load_settings({variable: default}) if cls is Settings else load_reconcile_settings({variable: default})
            assert getattr(loaded, settings_field.name) == settings_field.default, (parameter, default)
    minimum = minimum_of(settings_field)
    if minimum is not None and "MinValue" in declared:
        assert float(declared["MinValue"]) >= minimum, f"{parameter} allows less than {variable} accepts"


def test_the_template_sets_only_variables_the_settings_read() -> None:
    ours = {name for name in template_variables() if not name.startswith(("POWERTOOLS_", "OTEL_"))}
    assert ours <= ALL_ENV_NAMES | STACK_ENV_NAMES, ours - ALL_ENV_NAMES - STACK_ENV_NAMES


def test_the_runbook_function_is_given_every_name_of_the_stack_but_its_own() -> None:
    variables = set(template_functions()[Function.RUNBOOK]["Properties"]["Environment"]["Variables"])
    assert variables == STACK_ENV_NAMES - {f"{Function.RUNBOOK}Name"}


def test_a_bound_and_a_type_are_checked_where_they_are_written() -> None:
    with pytest.raises(ConfigurationError, match="MAX_CONCURRENT_WORKFLOWS must be >= 1"):
        load_settings({"MAX_CONCURRENT_WORKFLOWS": "0"})
    with pytest.raises(ConfigurationError, match="RECONCILE_MAX_REPAIRS must be an integer"):
        load_reconcile_settings({"RECONCILE_MAX_REPAIRS": "many"})
    with pytest.raises(ConfigurationError, match="RECONCILE_APPLY must be true or false"):
        load_reconcile_settings({"RECONCILE_APPLY": "yes"})
    with pytest.raises(ConfigurationError, match="PROCESSING_MODE must be one of realtime, batch"):
        load_settings({"PROCESSING_MODE": "nightly"})


def test_the_reconciler_reads_the_pipelines_slots_and_mode_from_the_same_variables() -> None:
    env = {"MAX_CONCURRENT_WORKFLOWS": "7", "PROCESSING_MODE": "BATCH", "RECONCILE_GRACE_SECONDS": "30"}
    reconcile, pipeline = load_reconcile_settings(env), load_settings(env)
    assert (reconcile.max_slots, reconcile.processing_mode) == (pipeline.max_concurrent_workflows, pipeline.processing_mode)
    assert (reconcile.grace_seconds, reconcile.apply) == (30.0, True)
    assert load_reconcile_settings(env, grace_seconds=5.0).grace_seconds == 5.0  # an argument wins


# ----------------------------------------------------------------------------------- the stack


def makefile_list(name: str) -> list[str]:
    text = (PROJECT_ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    match = re.search(rf"^{name} :?= (.*)$", text, re.MULTILINE)
    assert match, f"the Makefile defines no {name}"
    return match.group(1).split()


def test_the_templates_functions_and_handlers_are_the_stacks() -> None:
    functions = template_functions()
    assert list(functions) == [function.value for function in Function]
    for function in Function:
        assert functions[function]["Properties"]["Handler"] == function.handler
        assert (PROJECT_ROOT / (function.handler_module.replace(".", "/") + ".py")).is_file(), function


def test_the_makefiles_function_lists_are_the_stacks() -> None:
    assert makefile_list("PIPELINE_FUNCTIONS") == [f.value for f in Function if not (f.ships_monitors or f.ships_runbooks)]
    assert makefile_list("RECONCILER_FUNCTIONS") == [f.value for f in Function if f.ships_monitors]
    assert makefile_list("RUNBOOK_FUNCTIONS") == [f.value for f in Function if f.ships_runbooks]


def test_one_service_name_deployed_and_local() -> None:
    assert template()["Globals"]["Function"]["Environment"]["Variables"][SERVICE_NAME_ENV] == SERVICE_NAME


def test_sam_deploys_the_default_stack_name() -> None:
    config = tomllib.loads((PROJECT_ROOT / "samconfig.toml").read_text(encoding="utf-8"))
    assert config["default"]["global"]["parameters"]["stack_name"] == DEFAULT_STACK_NAME


# ------------------------------------------------------------------------------- file outcomes


def test_a_runs_account_keeps_one_list_per_failed_file_kind() -> None:
    from pipeline.status import FailedFileKind, FileOutcome, empty_failed_files
    from pipeline.tasks import Tolerance, account

    detections = [
        {"outcome": FileOutcome.OK.value, "entities": {"EMAIL": 1}, "redacted": True},
        {"outcome": FileOutcome.EMPTY.value, "redacted": True},
        {"outcome": FileOutcome.FAILED.value},
    ]
    event = {"execution_name": "run", "files": ["a.txt", "b.txt", "c.txt"], "detections": detections, "unsupported": ["d.bin"]}
    failed = account(event, artifacts=None, tolerance=Tolerance(100.0))["failed_files"]  # type: ignore[arg-type]
    assert list(failed) == list(empty_failed_files()) == [kind.value for kind in FailedFileKind]
    assert (failed["detect"][0]["key"], failed["redact"], failed["unsupported"], failed["empty"]) == (
        "c.txt", [], ["d.bin"], ["b.txt"]
    )
