"""The objectives' alarms as deployed, moved by the sandbox's alarm engine: a lost file pages."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from sandbox.clock import TimeScale
from tests.conftest import alarm_states

pytestmark = pytest.mark.slow


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_a_lost_file_pages_through_the_composite_and_the_burn_alarms_deploy_quiet(make_sandbox: Any) -> None:
    """The reconciler's FilesLost gauge (published here as the reconciler would on finding one
    lost file) turns FilesLost and PipelineUnhealthy to ALARM; no burn pair fires on no traffic."""
    sandbox = make_sandbox(time_scale=TimeScale(0.02))
    cloudwatch = sandbox.client("cloudwatch")
    lost = {
        "MetricName": "FilesLost",
        "Dimensions": [
            {"Name": "service", "Value": "pipeops-pipeline"},
            {"Name": "stage", "Value": "dev"},
            {"Name": "function", "Value": sandbox.outputs["ReconcilerFunctionName"]},
        ],
        "Value": 1,
        "Unit": "Count",
    }

    def paged() -> bool:
        cloudwatch.put_metric_data(Namespace="PipeOps", MetricData=[lost])
        states = alarm_states(sandbox)
        return states.get("FilesLost") == "ALARM" and states.get("PipelineUnhealthy") == "ALARM"

    wait_until(paged, 300, "FilesLost and the composite in ALARM")
    states = alarm_states(sandbox)
    burns = {name: state for name, state in states.items() if name.startswith("FilesOnTime")}
    assert len(burns) == 9 and "ALARM" not in burns.values()
