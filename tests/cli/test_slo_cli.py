"""`pipeops slo` on a sandbox: the budget and burn rates from the indicators put into CloudWatch."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from pipeops.cli import app
from tests.conftest import envelope, indicator_datum


def put_indicator(sandbox, name: str, function: str, value: float, when: datetime) -> None:
    sandbox.client("cloudwatch").put_metric_data(Namespace="PipeOps", MetricData=[indicator_datum(sandbox, name, function, value, when)])


def test_slo_reports_the_budget_and_burn_of_what_was_emitted(sandbox) -> None:
    now = datetime.now(UTC)
    # 1,000 files due 12 minutes ago, 5 of them bad (3 missed, 2 overdue): at 99%, half the budget left.
    put_indicator(sandbox, "FilesOnTime", "WorkflowTrackerFunction", 600, now - timedelta(minutes=12))
    put_indicator(sandbox, "FilesOnTime", "FinalizeFunction", 395, now - timedelta(minutes=14))  # both emitters count
    put_indicator(sandbox, "FilesMissed", "WorkflowTrackerFunction", 3, now - timedelta(minutes=12))
    # A function that emits no indicator: not counted.
    put_indicator(sandbox, "FilesOnTime", "RouterFunction", 1000, now - timedelta(minutes=12))
    put_indicator(sandbox, "FilesOverdue", "ReconcilerFunction", 2, now - timedelta(minutes=12))
    # Outside the 28 days: not counted.
    put_indicator(sandbox, "FilesMissed", "WorkflowTrackerFunction", 50, now - timedelta(days=29))
    result = CliRunner().invoke(app, ["slo", "--json"])
    assert result.exit_code == 0, result.output
    report = envelope(result.output, "slo")
    assert (report["target"], report["good"], report["bad"]) == ("99", 995, 5)
    assert report["budget_remaining"] == pytest.approx(0.5)
    windows = {w["window"]: w for w in report["windows"]}
    assert (windows["5m"]["good"], windows["5m"]["bad"], windows["5m"]["burn_rate"]) == (0, 0, None)
    assert (windows["1h"]["good"], windows["1h"]["bad"]) == (995, 5)
    assert windows["1h"]["burn_rate"] == pytest.approx(0.5)
    # Half of 28 days' budget at half the allowed rate: 0.5 * 672 h / 0.5 = 672 h.
    assert report["exhaustion_hours"] == pytest.approx(672)
    assert not any(pair["firing"] for pair in report["pairs"])
    text = " ".join(CliRunner().invoke(app, ["slo", "--target", "99.9"]).output.split())
    assert "budget left -400.0%" in text and "1h" in text


def test_slo_refuses_a_target_the_alarms_cannot_work_at(sandbox) -> None:
    result = CliRunner().invoke(app, ["slo", "--target", "90", "--json"])
    assert result.exit_code == 2
    assert "too low" in result.stderr and json.loads(result.stdout)["data"]["code"] == "bad_input"


def test_the_burn_alarms_deploy_in_the_sandbox(sandbox) -> None:
    found = sandbox.client("cloudwatch").describe_alarms(AlarmNamePrefix="pipeops-FilesOnTime", AlarmTypes=["MetricAlarm", "CompositeAlarm"])
    metric = {a["AlarmName"]: a for a in found["MetricAlarms"]}
    assert sorted(a["AlarmName"] for a in found["CompositeAlarms"]) == [
        "pipeops-FilesOnTimeFastBurn", "pipeops-FilesOnTimeSlowBurn", "pipeops-FilesOnTimeSteadyBurn"
    ]
    fast = metric["pipeops-FilesOnTimeFastBurn1h"]
    assert fast["Threshold"] == 0.144
    [burn] = [q for q in fast["Metrics"] if q.get("ReturnData")]
    assert burn["Expression"] == "IF(total >= 7, bad / total, 0)"
