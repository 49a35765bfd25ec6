"""The router dying around StartExecution (`router-crash-before-start`, `router-crash-after-start`),
injected into a running sandbox: the invocation fails there as a crash would, what it leaves behind
is what such a crash leaves, and once the fault is cleared the redelivered message finishes the
run, started once, with the slot given back."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.jobs import execution_name
from pipeline.status import JobStatus
from pipeops import faults
from pipeops.faults import FaultTarget
from tests.conftest import eventually, put, run_of, semaphore_item

pytestmark = pytest.mark.slow


def crashed_router(sandbox: Any, seen: int) -> list[Any]:
    router = sandbox.outputs["RouterFunctionName"]
    died = [r for r in sandbox.runtime.invocations if r.function_name == router and r.error_type == "Runtime.ExitError"]
    return died if len(died) > seen else []


def executions_named(sandbox: Any, name: str) -> list[dict[str, Any]]:
    sfn = sandbox.client("stepfunctions")
    listed = sfn.list_executions(stateMachineArn=sandbox.outputs["StateMachineArn"])["executions"]
    return [e for e in listed if e["name"] == name]


def test_the_router_dies_before_and_after_start_execution(make_sandbox: Any) -> None:
    sandbox = make_sandbox(ReconcileApply="false")  # the redelivery repairs, not the reconciler
    target = FaultTarget.of_sandbox(sandbox)

    faults.inject(target, "router-crash-before-start")
    put(sandbox, "before.txt")
    [died] = eventually(lambda: crashed_router(sandbox, 0), "the router died before StartExecution")
    assert "died before states:StartExecution" in died.payload
    run = run_of(sandbox, "before.txt")
    assert run is not None and run.status is JobStatus.IN_PROGRESS and run.execution_arn is None
    name = execution_name(run.job_id, run.started_at)
    assert name in semaphore_item(sandbox)["holders"], "the admission took the slot"
    assert executions_named(sandbox, name) == [], "no execution started"
    assert faults.clear(target, "router-crash-before-start") == ["router-crash-before-start"]
    eventually(lambda: (r := run_of(sandbox, "before.txt")) and r.status is JobStatus.COMPLETE, "the run completed")
    assert len(executions_named(sandbox, name)) == 1

    faults.inject(target, "router-crash-after-start")
    put(sandbox, "after.txt")
    [_, died] = eventually(lambda: crashed_router(sandbox, 1), "the router died after StartExecution")
    assert "died after states:StartExecution" in died.payload
    run = run_of(sandbox, "after.txt")
    assert run is not None
    name = execution_name(run.job_id, run.started_at)
    assert len(executions_named(sandbox, name)) == 1, "the execution started before the router died"
    faults.clear(target)
    eventually(lambda: (r := run_of(sandbox, "after.txt")) and r.status is JobStatus.COMPLETE, "the run completed")
    assert sandbox.wait_until_idle(120)
    assert len(executions_named(sandbox, name)) == 1, "the redelivery started nothing twice"
    assert semaphore_item(sandbox) == {"active_count": 0, "holders": {}}
