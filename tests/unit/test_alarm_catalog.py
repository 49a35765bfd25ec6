"""Every alarm is proven to fire on a series that must fire it and to stay quiet on a healthy one,
with the offline evaluator (CloudWatch's semantics); and every alarm watches a metric some code
emits, names a runbook, and is in template.yaml as built."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from alarms.catalog import SERVICE_NAME, AlarmSpec, Series, build_catalog, critical
from alarms.cloudformation import COMPOSITE, resources
from alarms.evaluate import AlarmState, TreatMissingData, evaluate
from pipeline.telemetry.catalog import AWS_CATALOG, CATALOG
from pipeops.cli import app
from pipeops.template_build import build_text, is_current
from sandbox.template import load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template()
SPECS = build_catalog(TEMPLATE)
NOW = datetime(2026, 12, 1, 12, 0, 30, tzinfo=UTC)


def replay(spec: AlarmSpec, series: Series, previous: AlarmState = AlarmState.INSUFFICIENT_DATA) -> AlarmState:
    """Feed one value per period, the newest ending just before now (None: no datapoint)."""
    last_start = datetime.fromtimestamp((int(NOW.timestamp()) // spec.period - 1) * spec.period, UTC)
    points = {
        last_start - timedelta(seconds=spec.period * age): value
        for age, value in enumerate(reversed(series))
        if value is not None
    }
    return evaluate(spec.rule(), points, NOW, previous).state


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.logical_id)
def test_each_alarm_fires_on_its_failure_series(spec: AlarmSpec) -> None:
    assert replay(spec, spec.fires_on) is AlarmState.ALARM
    assert replay(spec, spec.fires_on, previous=AlarmState.OK) is AlarmState.ALARM


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.logical_id)
def test_each_alarm_stays_quiet_on_its_healthy_series(spec: AlarmSpec) -> None:
    assert replay(spec, spec.quiet_on) is AlarmState.OK
    assert replay(spec, spec.quiet_on, previous=AlarmState.ALARM) is AlarmState.OK


SILENCE_IS_FAILURE = {"ReconcilerSilentAlarm"}


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.logical_id)
def test_no_data_pages_only_where_silence_is_the_failure(spec: AlarmSpec) -> None:
    """An idle pipeline (no errors, no messages, no invocations) pages nobody; a reconciler that
    stops reporting does."""
    nothing: Series = (None,) * (spec.evaluation_periods + 2)
    if spec.treat_missing_data is TreatMissingData.IGNORE:  # AWS/DynamoDB: CloudWatch keeps the state
        assert spec.watched.namespace == "AWS/DynamoDB"
        assert replay(spec, nothing, previous=AlarmState.OK) is AlarmState.OK
        assert replay(spec, nothing) is AlarmState.INSUFFICIENT_DATA
        return
    expected = AlarmState.ALARM if spec.logical_id in SILENCE_IS_FAILURE else AlarmState.OK
    assert replay(spec, nothing) is expected
    assert replay(spec, nothing, previous=AlarmState.OK) is expected
    if spec.logical_id in SILENCE_IS_FAILURE:
        assert spec.treat_missing_data is TreatMissingData.BREACHING


def test_a_heartbeat_that_comes_back_clears_the_silent_reconciler() -> None:
    [silent] = [spec for spec in SPECS if spec.logical_id == "ReconcilerSilentAlarm"]
    assert replay(silent, (None, None, None)) is AlarmState.ALARM
    assert replay(silent, (None, None, 1), previous=AlarmState.ALARM) is AlarmState.OK


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.logical_id)
def test_each_alarm_watches_a_metric_that_is_emitted(spec: AlarmSpec) -> None:
    watched = spec.watched
    if watched.metric is not None:
        emitter = dict(watched.dimensions)["function"]["Ref"]
        assert emitter in {f.value for f in CATALOG[watched.metric].emitters}
        assert dict(watched.dimensions)["service"] == SERVICE_NAME
    else:
        assert watched.aws is not None and (watched.aws.kind, watched.name) in AWS_CATALOG
        [(_, value)] = watched.dimensions
        target = value.get("Ref") or value["Fn::GetAtt"][0]
        assert target in TEMPLATE["Resources"], f"{spec.logical_id} watches {target}, which the template does not have"


def test_the_service_dimension_is_the_one_the_functions_emit_with() -> None:
    assert TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == SERVICE_NAME


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.logical_id)
def test_each_alarm_names_its_runbook_and_first_step(spec: AlarmSpec) -> None:
    assert f"Runbook: {spec.runbook}." in spec.description and "First: " in spec.description
    assert len(spec.description) <= 1024


def test_every_function_queue_table_and_the_state_machine_is_watched() -> None:
    watched = {spec.watched.resource for spec in SPECS}
    kinds = {"AWS::Serverless::Function", "AWS::DynamoDB::Table", "AWS::Serverless::StateMachine"}
    expected = {logical_id for logical_id, r in TEMPLATE["Resources"].items() if r["Type"] in kinds}
    expected |= {"DeadLetterQueue", "TrackerDeadLetterQueue", "IngestDeadLetterQueue"}
    assert expected <= watched


def test_the_composite_pages_on_every_critical_alarm_and_each_alarm_notifies_on_alarm_and_ok() -> None:
    generated = resources(SPECS)
    rule = generated[COMPOSITE]["Properties"]["AlarmRule"]["Fn::Sub"]
    assert {spec.logical_id for spec in critical(SPECS)} == {
        name.split("}")[0] for name in rule.split("${")[1:]
    }
    for spec in SPECS:
        properties = generated[spec.logical_id]["Properties"]
        assert properties["AlarmActions"] == properties["OKActions"] == [{"Ref": "AlarmTopic"}]


def test_the_template_carries_the_alarms_as_built() -> None:
    text = (ROOT / "template.yaml").read_text(encoding="utf-8")
    assert build_text(text) == text, "template.yaml is stale: run `pipeops template build`"
    for spec in SPECS:
        assert TEMPLATE["Resources"][spec.logical_id]["Properties"]["Threshold"] == spec.threshold


def test_template_build_check_passes_and_fails_on_a_stale_template(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["template", "build", "--check"]).exit_code == 0
    stale = tmp_path / "template.yaml"
    text = (ROOT / "template.yaml").read_text(encoding="utf-8")
    stale.write_text(text.replace("Threshold: 20", "Threshold: 99", 1), encoding="utf-8")
    assert not is_current(stale)
    assert runner.invoke(app, ["template", "build", "--check", "--template", str(stale)]).exit_code == 1
    assert runner.invoke(app, ["template", "build", "--template", str(stale)]).exit_code == 0
    assert stale.read_text(encoding="utf-8") == text


def test_the_alarms_doc_is_generated_from_the_catalog() -> None:
    from alarms.docs import current

    assert (ROOT / "docs" / "ALARMS.md").read_text(encoding="utf-8") == current(), (
        "docs/ALARMS.md is stale: run `python -m alarms.docs`"
    )
