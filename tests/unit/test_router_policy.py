"""The router's IAM grants are exactly what its admission, fenced release and ARN repair call."""

from __future__ import annotations

from typing import Any

from pipeline.config import SEMAPHORE_KEY
from stack.template import load_template


def router_statements() -> list[dict[str, Any]]:
    policies = load_template()["Resources"]["RouterFunction"]["Properties"]["Policies"]
    return [s for policy in policies if "Statement" in policy for s in policy["Statement"]]


def actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return set(action if isinstance(action, list) else [action])


def grants_on(logical_id: str) -> list[dict[str, Any]]:
    return [s for s in router_statements() if s["Resource"] == {"Fn::GetAtt": [logical_id, "Arn"]}]


def test_runs_are_batch_read_updated_and_condition_checked_in_transactions() -> None:
    """A run is read together with the semaphore item (BatchGetItem), never on its own."""
    [tracking] = grants_on("TrackingTable")
    assert actions(tracking) == {"dynamodb:BatchGetItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}


def test_the_coordination_table_is_read_and_updated_only_at_the_semaphore_item() -> None:
    """Read with the run (BatchGetItem), alone by a fenced release whose count moved (GetItem), and
    checked by a waiting message (ConditionCheckItem)."""
    [coordination] = grants_on("CoordinationTable")
    assert actions(coordination) == {
        "dynamodb:BatchGetItem",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",
    }
    assert coordination["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [SEMAPHORE_KEY]}}


def test_executions_are_described_by_their_deterministic_arn() -> None:
    [describe] = [s for s in router_statements() if "states:DescribeExecution" in actions(s)]
    assert actions(describe) == {"states:DescribeExecution"}
    assert ":execution:${PipelineStateMachine.Name}:*" in describe["Resource"]["Fn::Sub"]
