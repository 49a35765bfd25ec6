"""Every alarm is proven to fire on a series that must fire it and to stay quiet on a healthy one,
with the offline evaluator (CloudWatch's semantics); and every alarm watches a metric some code
emits, names a runbook, and is in template.yaml as built."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from alarms.catalog import (
    DEFAULT_RUNBOOK_BASE_URL,
    MAX_RUNBOOK_BASE_URL,
    RUNBOOK_BASE_PARAMETER,
    AlarmSpec,
    Series,
    build_catalog,
    critical,
)
from alarms.cloudformation import COMPOSITE, resources
from alarms.evaluate import AlarmState, Sample, TreatMissingData, evaluate, evaluate_samples
from pipeline.stack import SERVICE_NAME
from pipeline.telemetry.aws_catalog import AWS_CATALOG
from pipeline.telemetry.catalog import CATALOG
from pipeops.cli import app
from pipeops.template_build import build_text, is_current
from stack.template import load_template

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


HEARTBEAT = "ReconcilerSilentAlarm"
THROTTLES = [spec for spec in SPECS if spec.watched.namespace == "AWS/DynamoDB"]
[SILENT] = [spec for spec in SPECS if spec.logical_id == HEARTBEAT]


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.logical_id)
def test_no_data_pages_nobody(spec: AlarmSpec) -> None:
    """An idle pipeline (no errors, no messages, no invocations) pages nobody, and neither does a new
    stack whose reconciler has not reported yet: the heartbeat keeps its state until its first datapoint."""
    nothing: Series = (None,) * (spec.evaluation_periods + 2)
    if spec.logical_id == HEARTBEAT:
        assert replay(spec, nothing) is AlarmState.INSUFFICIENT_DATA
        assert replay(spec, nothing, previous=AlarmState.OK) is AlarmState.OK
        return
    assert replay(spec, nothing) in (AlarmState.OK, AlarmState.INSUFFICIENT_DATA)
    assert replay(spec, nothing, previous=AlarmState.OK) is AlarmState.OK


def test_a_heartbeat_that_stops_pages_until_it_comes_back() -> None:
    assert replay(SILENT, (1, 1, 1, 1, 1), previous=AlarmState.INSUFFICIENT_DATA) is AlarmState.OK  # the first runs
    assert replay(SILENT, (1, 1, None, None), previous=AlarmState.OK) is AlarmState.OK  # two runs missed: not yet
    assert replay(SILENT, (1, None, None, None), previous=AlarmState.OK) is AlarmState.ALARM  # three
    # Once the last heartbeat has left the evaluation range, the alarm keeps its ALARM.
    assert replay(SILENT, (None,) * 5, previous=AlarmState.ALARM) is AlarmState.ALARM
    assert replay(SILENT, (None, None, None, None, 1), previous=AlarmState.ALARM) is AlarmState.OK


@pytest.mark.parametrize("spec", THROTTLES, ids=lambda spec: spec.logical_id)
def test_a_throttle_alarm_returns_to_ok_after_its_episode(spec: AlarmSpec) -> None:
    """DynamoDB publishes throttles only when there are some and CloudWatch ignores missing data on
    AWS/DynamoDB alarms: on the bare metric the alarm would keep its ALARM; FILL(m, 0) lets it go."""
    assert spec.fill == 0 and spec.treat_missing_data is TreatMissingData.NOT_BREACHING
    episode: Series = (3,) * spec.evaluation_periods
    assert replay(spec, episode) is AlarmState.ALARM
    after = (*episode, None)
    assert replay(spec, after, previous=AlarmState.ALARM) is AlarmState.OK
    bare = replace(spec, fill=None, treat_missing_data=TreatMissingData.IGNORE)  # what CloudWatch would do
    assert replay(bare, after, previous=AlarmState.ALARM) is AlarmState.ALARM
    assert replay(bare, (None,) * 7, previous=AlarmState.ALARM) is AlarmState.ALARM


def test_the_count_below_its_holders_is_alarmed_as_well_as_above() -> None:
    drift = {spec.logical_id: spec for spec in SPECS if spec.watched.name == "CounterDrift"}
    assert set(drift) == {"CounterDriftAlarm", "CounterBelowRunningAlarm"}
    assert replay(drift["CounterBelowRunningAlarm"], (0, 0, -3)) is AlarmState.ALARM  # count -3, 0 running
    assert replay(drift["CounterDriftAlarm"], (0, 0, -3)) is AlarmState.OK
    assert all(spec.critical for spec in drift.values())



def test_a_low_count_pages_even_when_the_repairing_run_shares_its_period() -> None:
    """The run that sees -3 sets the count right; a second run in the same period (a late schedule,
    a retry) reports 0. The period's statistic must still show the low one (seen under load)."""
    [below] = [spec for spec in SPECS if spec.logical_id == "CounterBelowRunningAlarm"]
    last_start = datetime.fromtimestamp((int(NOW.timestamp()) // below.period - 1) * below.period, UTC)
    samples = [Sample(last_start - timedelta(seconds=below.period * age), 0.0) for age in (1, 2)]
    samples += [Sample(last_start + timedelta(seconds=1), -3.0), Sample(last_start + timedelta(seconds=2), 0.0)]
    assert evaluate_samples(below.rule(), samples, NOW).state is AlarmState.ALARM

def test_one_poison_message_fires_the_router_failures_alarm_and_one_bad_run_the_failure_rate() -> None:
    """A poison message fails once per visibility timeout (365 s), 5 times; one bad run in a quiet hour
    is the only sample of its period."""
    [router] = [spec for spec in SPECS if spec.logical_id == "RouterFailuresAlarm"]
    one_message = [0] * 30
    for minute in (0, 6, 12, 18, 24):
        one_message[minute] += 1
    assert replay(router, tuple(one_message[:7])) is AlarmState.ALARM  # at its second failure
    assert replay(router, (4,) + (0,) * 14) is AlarmState.OK  # a burst one retry cleared
    [rate] = [spec for spec in SPECS if spec.logical_id == "FileFailureRateAlarm"]
    assert replay(rate, (None, None, 60)) is AlarmState.ALARM


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


GENERATED = resources(SPECS)


def deployed_description(resource: dict, base: str) -> str:
    """A generated AlarmDescription as CloudFormation resolves it with RunbookBaseUrl=`base`."""
    text = resource["Properties"]["AlarmDescription"]["Fn::Sub"]
    return text.replace(f"${{{RUNBOOK_BASE_PARAMETER}}}", base)


def test_the_runbook_base_parameter_defaults_to_the_catalogs_base_and_bounds_its_length() -> None:
    parameter = TEMPLATE["Parameters"][RUNBOOK_BASE_PARAMETER]
    assert parameter["Default"] == DEFAULT_RUNBOOK_BASE_URL
    assert parameter["MaxLength"] == MAX_RUNBOOK_BASE_URL


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.logical_id)
def test_each_alarm_description_ends_with_its_runbook_link_within_cloudwatchs_limit(spec: AlarmSpec) -> None:
    """As deployed (Fn::Sub resolved) with the default base and with the longest one allowed."""
    resource = GENERATED[spec.logical_id]
    for base in (DEFAULT_RUNBOOK_BASE_URL, "https://" + "x" * (MAX_RUNBOOK_BASE_URL - 8)):
        deployed = deployed_description(resource, base)
        assert deployed.endswith(f" Runbook: {base}/{spec.runbook.value}.md")
        assert len(deployed) <= 1024
        assert f"First: {spec.first_step}. " in deployed
    assert deployed_description(resource, DEFAULT_RUNBOOK_BASE_URL) == spec.description


def test_the_composite_links_the_runbook_index() -> None:
    deployed = deployed_description(GENERATED[COMPOSITE], DEFAULT_RUNBOOK_BASE_URL)
    assert deployed.endswith(f"Runbooks: {DEFAULT_RUNBOOK_BASE_URL}/README.md") and len(deployed) <= 1024


def test_every_function_queue_table_and_the_state_machine_is_watched() -> None:
    watched = {spec.watched.resource for spec in SPECS}
    kinds = {"AWS::Serverless::Function", "AWS::DynamoDB::Table", "AWS::Serverless::StateMachine"}
    expected = {logical_id for logical_id, r in TEMPLATE["Resources"].items() if r["Type"] in kinds}
    expected |= {"DeadLetterQueue", "TrackerDeadLetterQueue", "IngestDeadLetterQueue"}
    assert expected <= watched


def test_one_incident_pages_once_through_the_composite_and_oks_never_page() -> None:
    generated = resources(SPECS)
    rule = generated[COMPOSITE]["Properties"]["AlarmRule"]["Fn::Sub"]
    assert {spec.logical_id for spec in critical(SPECS)} == {
        name.split("}")[0] for name in rule.split("${")[1:]
    }
    page, states = [{"Ref": "AlarmTopic"}], [{"Ref": "AlarmStateTopic"}]
    composite = generated[COMPOSITE]["Properties"]
    assert (composite["AlarmActions"], composite["OKActions"]) == (page, states)
    for spec in SPECS:  # the composite alone pages; a new stack's first OKs page nobody
        properties = generated[spec.logical_id]["Properties"]
        assert properties["AlarmActions"] == properties["OKActions"] == states
    assert generated["AlarmEmailSubscription"]["Properties"]["TopicArn"] == {"Ref": "AlarmTopic"}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"logical_id": "CounterDrift"}, "must end in 'Alarm'"),
        ({"summary": "no full stop"}, "a sentence ending in '.'"),
        ({"evaluation_periods": 2, "datapoints_to_alarm": 3}, "3 of 2 datapoints cannot alarm"),
        ({"datapoints_to_alarm": 0}, "0 of 3 datapoints cannot alarm"),
        ({"period": 90}, "period 90 s"),
        ({"period": 60}, "one run at the default schedule"),
        ({"fires_on": ()}, "a firing and a quiet example series"),
        ({"first_step": "x" * 1024}, "longer than CloudWatch's 1024 characters"),
    ],
)
def test_a_spec_that_cannot_deploy_or_be_read_is_refused_where_it_is_written(change: dict, problem: str) -> None:
    [drift] = [spec for spec in SPECS if spec.logical_id == "CounterDriftAlarm"]
    with pytest.raises(ValueError, match=re.escape(problem)):
        replace(drift, **change)


def test_a_reconciler_alarm_must_watch_a_metric_sampled_once_a_run() -> None:
    [drift] = [spec for spec in SPECS if spec.logical_id == "CounterDriftAlarm"]
    [router] = [spec for spec in SPECS if spec.logical_id == "RouterFailuresAlarm"]
    with pytest.raises(ValueError, match="sampled at the default schedule"):
        replace(drift, watched=router.watched)


def test_the_reconciler_alarms_take_one_scheduled_run_as_their_period() -> None:
    from alarms.catalog import RECONCILE_SCHEDULES, schedule_conditions

    parameter = TEMPLATE["Parameters"]["ReconcileSchedule"]
    assert parameter["AllowedValues"] == list(RECONCILE_SCHEDULES)
    assert parameter["Default"] == "rate(5 minutes)" and "rate(1 minutes)" not in RECONCILE_SCHEDULES
    for name, condition in schedule_conditions().items():
        assert TEMPLATE["Conditions"][name] == condition
    generated = resources(SPECS)
    followers = [spec for spec in SPECS if spec.follows_schedule]
    assert followers == [spec for spec in SPECS if spec.watched.resource == "ReconcilerFunction" and spec.watched.metric]
    for spec in followers:
        properties = generated[spec.logical_id]["Properties"]
        period = properties["Metrics"][0]["MetricStat"]["Period"] if spec.fill is not None else properties["Period"]
        chosen = {}
        for expression in RECONCILE_SCHEDULES:
            node = period
            while isinstance(node, dict):  # walk the Fn::If chain as CloudFormation would
                name, then, otherwise = node["Fn::If"]
                node = then if schedule_conditions()[name]["Fn::Equals"][1] == expression else otherwise
            chosen[expression] = node
        assert chosen == RECONCILE_SCHEDULES


def test_the_build_refuses_a_schedule_parameter_its_alarms_do_not_handle() -> None:
    from pipeops.template_build import TemplateBuildError

    text = (ROOT / "template.yaml").read_text(encoding="utf-8")
    with pytest.raises(TemplateBuildError, match="AllowedValues"):
        build_text(text.replace("rate(15 minutes)]", "rate(1 hour)]", 1))
    with pytest.raises(TemplateBuildError, match="ReconcileEvery2Minutes"):
        build_text(text.replace("ReconcileEvery2Minutes: !Equals", "ReconcileEveryTwo: !Equals", 1))


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
