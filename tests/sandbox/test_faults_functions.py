"""Functions and APIs failing under injected faults, with the pipeline running: the detect function
raising or timing out fails its files and the run (each file's key and error recorded), as on AWS;
the router's DynamoDB calls throttled are retried by botocore until the invocation fails, and the
message is redelivered; every fault cleared, the pipeline completes runs again."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.status import JobStatus
from pipeops import faults
from pipeops.faults import FaultTarget
from sandbox.faults import ApiFault
from sandbox.runtime import TIMEOUT_ERROR_TYPE
from tests.conftest import eventually, put, run_of, semaphore_item

pytestmark = pytest.mark.slow


def ended(sandbox: Any, key: str) -> Any:
    run = run_of(sandbox, key)
    return run if run is not None and run.status in (JobStatus.COMPLETE, JobStatus.FAILED) else None


def records_of(sandbox: Any, output: str) -> list[Any]:
    name = sandbox.outputs[output]
    return [record for record in sandbox.runtime.invocations if record.function_name == name]


def test_detect_errors_and_timeouts_fail_the_run_then_clear_restores_it(make_sandbox: Any) -> None:
    sandbox = make_sandbox()
    target = FaultTarget.of_sandbox(sandbox)

    faults.inject(target, "function-errors")
    put(sandbox, "errors.txt")
    run = eventually(lambda: ended(sandbox, "errors.txt"), "the run ended")
    assert run.status is JobStatus.FAILED
    [failed] = run.failed_files["detect"]
    assert "errors.txt" in str(failed) and "InjectedFault" in str(failed)
    assert {r.error_type for r in records_of(sandbox, "DetectFunctionName")} == {"InjectedFault"}
    faults.clear(target)

    faults.inject(target, "function-timeouts")
    put(sandbox, "slow.txt")
    run = eventually(lambda: ended(sandbox, "slow.txt"), "the run ended")
    assert run.status is JobStatus.FAILED
    timed_out = [r for r in records_of(sandbox, "DetectFunctionName") if r.timed_out]
    assert timed_out and {r.error_type for r in timed_out} == {TIMEOUT_ERROR_TYPE}
    assert "Task timed out after" in timed_out[0].payload
    faults.clear(target)

    put(sandbox, "fine.txt")
    assert eventually(lambda: ended(sandbox, "fine.txt"), "the run ended").status is JobStatus.COMPLETE
    assert sandbox.wait_until_idle(120)
    assert semaphore_item(sandbox) == {"active_count": 0, "holders": {}}


def test_throttled_router_calls_fail_the_invocation_and_the_message_comes_back(make_sandbox: Any) -> None:
    sandbox = make_sandbox()
    router = sandbox.outputs["RouterFunctionName"]
    throttle = ApiFault(
        name="router-ddb", service="dynamodb", code="ProvisionedThroughputExceededException", callers=("RouterFunction",)
    )
    sandbox.faults.inject(throttle)
    put(sandbox, "throttled.txt")
    [failed, *_] = eventually(
        lambda: [r for r in records_of(sandbox, "RouterFunctionName") if r.errored], "a router invocation failed"
    )
    # The router's adaptive retries back off for real (up to 20 s a retry): at every call throttled
    # they either give up with AWS's error or outlast the invocation's timeout, as they would on AWS.
    gave_up = "ProvisionedThroughputExceededException" in failed.payload and "reached max retries" in failed.payload
    assert gave_up or failed.error_type == TIMEOUT_ERROR_TYPE, failed.payload
    [active] = sandbox.faults.active()
    assert active["callers"] == [router] and active["faulted"] > 1, "botocore retried the throttled call"
    sandbox.faults.clear()
    run = eventually(lambda: ended(sandbox, "throttled.txt"), "the redelivered message's run ended")
    assert run.status is JobStatus.COMPLETE
