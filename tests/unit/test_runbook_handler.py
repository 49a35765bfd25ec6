"""The runbook Lambda's event and environment, parsed without AWS (runbooks.automation.handler)."""

from __future__ import annotations

from dataclasses import MISSING, fields

import pytest

from runbooks.automation.handler import BadEventError, handler, parse_event, resources_from_env
from runbooks.catalog import Runbook
from stack.resources import StackResources


def test_a_dry_run_with_its_selection() -> None:
    event = parse_event({"RunbookId": "dlq-messages", "DryRun": True, "Groups": ["g1", " g2 "], "Holders": "a,b", "Runs": []})
    assert event.runbook is Runbook.DLQ_MESSAGES
    assert event.dry_run is True
    assert event.groups == ("g1", "g2")
    assert event.options == {"holders": ["a", "b"]}


@pytest.mark.parametrize(("value", "dry_run"), [(False, False), ("false", False), ("True", True)])
def test_dry_run_is_a_boolean_or_its_text(value: object, dry_run: bool) -> None:
    assert parse_event({"RunbookId": "counter-drift", "DryRun": value}).dry_run is dry_run


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"DryRun": True}, "RunbookId is required"),
        ({"RunbookId": "no-such-runbook", "DryRun": True}, "no-such-runbook"),
        ({"RunbookId": "dlq-messages"}, "DryRun must be true or false"),
        ({"RunbookId": "dlq-messages", "DryRun": "yes"}, "DryRun must be true or false"),
        ({"RunbookId": "dlq-messages", "DryRun": True, "Groups": [1]}, "Groups must be a list of strings"),
    ],
)
def test_a_bad_event_is_refused_with_a_reason(event: dict[str, object], message: str) -> None:
    with pytest.raises(BadEventError, match=message):
        parse_event(event)


def test_a_bad_event_answers_an_error_result_without_calling_aws() -> None:
    answer = handler({"RunbookId": "dlq-messages"}, None)
    assert answer["verdict"] == "error" and answer["exit_code"] == 2
    assert "DryRun" in answer["error"]


def test_the_stack_comes_from_the_environment() -> None:
    required = {f.name: f"value-{f.name}" for f in fields(StackResources) if f.name != "stack_name" and f.default is MISSING}
    resources = resources_from_env(required | {"STACK_NAME": "pipeops", "QuarantineQueueUrl": "q", "UNRELATED": "x"})
    assert resources.stack_name == "pipeops"
    assert resources.MainQueueUrl == "value-MainQueueUrl"
    assert resources.QuarantineQueueUrl == "q"
    assert resources.IngestDeadLetterQueueUrl == ""
    with pytest.raises(KeyError):
        resources_from_env({"STACK_NAME": "pipeops"})


def test_a_document_parameters_arrive_typed_and_an_empty_selection_is_none() -> None:
    """What InputPayload hands over: StringLists as lists (empty by default), GraceSeconds as text."""
    event = parse_event({"RunbookId": "backlog-stalled", "DryRun": False, "GraceSeconds": "30", "Groups": [], "Runs": []})
    assert event.dry_run is False and event.groups is None and event.options == {"grace_seconds": 30}
    assert parse_event({"RunbookId": "counter-drift", "DryRun": True, "GraceSeconds": ""}).options == {}
    with pytest.raises(BadEventError, match="GraceSeconds"):
        parse_event({"RunbookId": "counter-drift", "DryRun": True, "GraceSeconds": "-1"})
