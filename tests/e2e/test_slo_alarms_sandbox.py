"""The objectives' alarms as deployed, moved by the sandbox's alarm engine: a lost file pages; a
missed (failed or late) file alone pages nothing; files all missed page through the fast burn pair,
and so do files all failing, on time, from the real handlers (a failed file is not done)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pipeline.telemetry.catalog import Metric
from pipeops import faults
from pipeops.faults import FaultTarget
from sandbox.clock import TimeScale
from tests.conftest import alarm_states, datapoints, indicator_datum, put, wait_for

pytestmark = pytest.mark.slow


def test_a_lost_file_pages_through_the_composite_and_the_burn_alarms_deploy_quiet(make_sandbox: Any) -> None:
    """The reconciler's FilesLost gauge (published here as the reconciler would on finding one
    lost file) turns FilesLost and PipelineUnhealthy to ALARM; no burn pair fires on no traffic."""
    sandbox = make_sandbox(time_scale=TimeScale(0.02))
    cloudwatch = sandbox.client("cloudwatch")
    lost = indicator_datum(sandbox, "FilesLost", "ReconcilerFunction", 1)

    def paged() -> bool:
        cloudwatch.put_metric_data(Namespace="PipeOps", MetricData=[lost])
        states = alarm_states(sandbox)
        return states.get("FilesLost") == "ALARM" and states.get("PipelineUnhealthy") == "ALARM"

    wait_for(paged, 300, "FilesLost and the composite in ALARM", every=0.5)
    states = alarm_states(sandbox)
    burns = {name: state for name, state in states.items() if name.startswith("FilesOnTime")}
    assert len(burns) == 9 and "ALARM" not in burns.values()


def test_one_missed_file_pages_nothing_and_files_all_missed_page_through_the_fast_pair(make_sandbox: Any) -> None:
    sandbox = make_sandbox(time_scale=TimeScale(0.02))  # a virtual minute is 1.2 s
    cloudwatch = sandbox.client("cloudwatch")
    cloudwatch.put_metric_data(Namespace="PipeOps", MetricData=[indicator_datum(sandbox, "FilesMissed", "WorkflowTrackerFunction", 1)])
    target = sandbox.alarms.virtual_now() + timedelta(minutes=10)
    wait_for(lambda: sandbox.alarms.virtual_now() >= target, 300, "10 virtual minutes", every=0.5)
    sandbox.alarms.evaluate_now()
    states = alarm_states(sandbox)
    pairs = ("FilesOnTimeFastBurn", "FilesOnTimeSlowBurn", "FilesOnTimeSteadyBurn", "PipelineUnhealthy")
    assert [states[name] for name in pairs] == ["OK"] * 4, states
    # A short window may breach on that one file (it needs one file); alone it notifies nobody.
    assert states["FilesOnTimeFastBurn1h"] == states["FilesOnTimeSlowBurn6h"] == states["FilesOnTimeSteadyBurn1d"] == "OK"

    def paged() -> bool:  # two missed files a virtual minute or so, no file on time
        cloudwatch.put_metric_data(Namespace="PipeOps", MetricData=[indicator_datum(sandbox, "FilesMissed", "WorkflowTrackerFunction", 2)])
        states = alarm_states(sandbox)
        return states.get("FilesOnTimeFastBurn") == "ALARM" and states.get("PipelineUnhealthy") == "ALARM"

    wait_for(paged, 300, "the fast burn pair and the composite in ALARM", every=0.5)
    states = alarm_states(sandbox)
    assert states["FilesOnTimeFastBurn1h"] == states["FilesOnTimeFastBurn5m"] == "ALARM"


def test_files_all_failing_page_through_the_fast_pair(make_sandbox: Any) -> None:
    """The detect function fails every invocation: every run ends FAILED, well within its deadline,
    and its files count FilesMissed, so the fast pair pages. The time it takes is computed, not
    asserted here (`alarms.slos.time_to_fire_seconds`)."""
    sandbox = make_sandbox(time_scale=TimeScale(0.02))
    faults.inject(FaultTarget.of_sandbox(sandbox), "function-errors", share=1.0)
    uploaded = iter(range(10_000))

    def paged() -> bool:  # a file a second or so, every one failing
        put(sandbox, f"failing/{next(uploaded)}.txt")
        states = alarm_states(sandbox)
        return states.get("FilesOnTimeFastBurn") == "ALARM" and states.get("PipelineUnhealthy") == "ALARM"

    wait_for(paged, 400, "the fast burn pair and the composite in ALARM", every=0.5)
    states = alarm_states(sandbox)
    assert states["FilesOnTimeFastBurn1h"] == states["FilesOnTimeFastBurn5m"] == "ALARM"
    assert sum(datapoints(sandbox, Metric.FILES_MISSED, "Sum")) > 0  # the failed runs counted their files
    assert sum(datapoints(sandbox, Metric.FILES_ON_TIME, "Sum")) == 0  # and none as done
