"""The data faults, written into a running sandbox as a hand or a bug would: each leaves what the
reconciler (or the DLQ's alarm) is built to find, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.status import JobStatus
from pipeops import faults
from pipeops.cli import app
from pipeops.faults import GHOST_HOLDER, FaultTarget
from tests.conftest import envelope, eventually, held_off, put, run_of, semaphore_item

pytestmark = pytest.mark.slow


def findings() -> list[tuple[str, str]]:
    """`pipeops reconcile` (dry run): (kind, target) of each finding."""
    result = CliRunner().invoke(app, ["reconcile", "--json"])
    assert result.exit_code in (0, 1), result.output
    return [(f["kind"], f["target"]) for f in envelope(result.output, "reconcile")["findings"]]


def test_data_faults_leave_what_the_reconciler_finds(make_sandbox: Any) -> None:
    sandbox = held_off(make_sandbox(MaxConcurrentWorkflows="2"))
    target = FaultTarget.of_sandbox(sandbox)
    put(sandbox, "first.txt")
    eventually(lambda: (r := run_of(sandbox, "first.txt")) and r.status is JobStatus.COMPLETE, "a first run completed")
    assert sandbox.wait_until_idle(120)
    assert findings() == []

    faults.inject(target, "counter-at-max-no-holder")
    assert semaphore_item(sandbox) == {"active_count": 2, "holders": {}}
    assert [kind for kind, _ in findings()] == ["count_mismatch"]
    faults.inject(target, "counter-negative")
    assert semaphore_item(sandbox)["active_count"] == -1
    assert [kind for kind, _ in findings()] == ["count_mismatch"]

    faults.inject(target, "ghost-holder")
    assert GHOST_HOLDER in semaphore_item(sandbox)["holders"]
    assert ("slot_without_execution", GHOST_HOLDER) in findings()

    [stale] = faults.inject(target, "stale-run")
    assert "IN_PROGRESS" in stale["written"]
    assert "stuck_run" in [kind for kind, _ in findings()]

    [by_hand] = faults.inject(target, "execution-by-hand")
    name = by_hand["written"].split()[1]
    assert name.startswith("by-hand-") and "first.txt" in by_hand["written"]
    sfn = sandbox.client("stepfunctions")
    assert sfn.describe_execution(executionArn=f"{sandbox.outputs['StateMachineArn'].replace(':stateMachine:', ':execution:')}:{name}")
    assert name not in semaphore_item(sandbox)["holders"], "started outside the router: it holds no slot"

    [poison] = faults.inject(target, "poison-messages", share=0.34)  # 1 message of the 3 a full share sends
    assert poison["written"].startswith("1 malformed message")
    router = sandbox.outputs["RouterFunctionName"]
    eventually(
        lambda: any(
            "malformed_message" in line for r in sandbox.runtime.invocations if r.function_name == router for line in r.log_lines
        ),
        "the router refused the poison message (its redeliveries then reach the DLQ)",
    )
    assert faults.clear(target, "poison-messages") == [], "data stays: nothing is in force to clear"
