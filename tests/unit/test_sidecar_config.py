"""pipeops.toml: the description of a pipeline we did not build, parsed into typed data or refused
with one line per wrong field (its path, what was found, what is expected, an example)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeops.sidecar.config import (
    AwsRef,
    ConfigError,
    FixedMax,
    Kind,
    MaxFromFunction,
    SidecarConfig,
    Tracking,
    WatchedFunction,
    loads,
    parse,
)
from stack.template import PROJECT_ROOT

EXAMPLE = PROJECT_ROOT / "examples" / "counter-pipeline" / "pipeops.toml"

VALID: dict[str, Any] = {
    "pipeline": {"name": "documents"},
    "queue": {"main": "doc-queue", "dead_letter": ["doc-dlq"]},
    "counter": {
        "table": "concurrency",
        "key_name": "counter_id",
        "key_value": "workflow_counter",
        "count_attribute": "active_count",
        "holders": False,
        "max": 5,
    },
    "workflow": {"state_machines": ["doc-workflow"]},
    "alarms": {"functions": ["sender", {"name": "processor", "timeout": 60}]},
    "tracking": {"table": "tracking", "status_attribute": "status"},
}


def with_(path: str, value: Any) -> dict[str, Any]:
    """VALID with one field replaced (`_MISSING` removes it)."""
    data = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    if value is REMOVE:
        del node[last]
    else:
        node[last] = value
    return data


REMOVE = object()


def problem_paths(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        parse(data)
    return [problem.path for problem in raised.value.problems]


def test_a_complete_description_parses_into_typed_frozen_data() -> None:
    config = parse(VALID)
    assert config.name == "documents"
    assert config.main_queue == AwsRef(Kind.QUEUE, "doc-queue")
    assert config.dead_letter_queues == (AwsRef(Kind.QUEUE, "doc-dlq"),)
    assert config.counter.table == AwsRef(Kind.TABLE, "concurrency")
    assert (config.counter.key_name, config.counter.key_value, config.counter.count_attribute) == (
        "counter_id", "workflow_counter", "active_count",
    )
    assert config.counter.holders is False and config.counter.max == FixedMax(5)
    assert config.state_machines == (AwsRef(Kind.STATE_MACHINE, "doc-workflow"),)
    assert config.functions == (WatchedFunction(AwsRef(Kind.FUNCTION, "sender")), WatchedFunction(AwsRef(Kind.FUNCTION, "processor"), 60))
    assert config.tracking == Tracking(AwsRef(Kind.TABLE, "tracking"), "status")
    with pytest.raises(AttributeError):
        config.name = "x"  # type: ignore[misc]


def test_the_optional_sections_may_be_left_out() -> None:
    data = copy.deepcopy(VALID)
    for key in ("pipeline", "alarms", "tracking"):
        del data[key]
    del data["counter"]["count_attribute"], data["counter"]["holders"]
    config = parse(data)
    assert (config.name, config.functions, config.tracking) == ("pipeline", (), None)
    assert (config.counter.count_attribute, config.counter.holders) == ("active_count", False)


def test_arns_are_kept_and_give_the_name() -> None:
    arns = {
        "queue.main": ("arn:aws:sqs:eu-west-1:123456789012:doc-queue", "doc-queue"),
        "counter.table": ("arn:aws:dynamodb:eu-west-1:123456789012:table/concurrency", "concurrency"),
    }
    data = copy.deepcopy(VALID)
    data["queue"]["main"] = arns["queue.main"][0]
    data["counter"]["table"] = arns["counter.table"][0]
    data["workflow"]["state_machines"] = ["arn:aws:states:eu-west-1:123456789012:stateMachine:doc-workflow"]
    data["alarms"]["functions"] = ["arn:aws:lambda:eu-west-1:123456789012:function:processor:live"]
    config = parse(data)
    assert config.main_queue == AwsRef(Kind.QUEUE, "doc-queue", arns["queue.main"][0])
    assert config.counter.table.name == "concurrency"
    assert config.state_machines[0].name == "doc-workflow"
    assert config.functions[0].ref.name == "processor"
    assert config.main_queue.arn_expression() == arns["queue.main"][0]


def test_a_name_becomes_an_arn_in_the_stacks_account_and_region() -> None:
    assert AwsRef(Kind.TABLE, "concurrency").arn_expression() == {
        "Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/concurrency"
    }
    assert AwsRef(Kind.STATE_MACHINE, "wf").arn_expression() == {
        "Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:wf"
    }


def test_the_max_may_be_read_from_a_functions_environment() -> None:
    config = parse(with_("counter.max", {"function": "processor", "variable": "MAX_CONCURRENT"}))
    assert config.counter.max == MaxFromFunction(AwsRef(Kind.FUNCTION, "processor"), "MAX_CONCURRENT")


@pytest.mark.parametrize(
    ("path", "value", "expected_path"),
    [
        ("queue.main", 42, "queue.main"),
        ("queue.main", "has space", "queue.main"),
        ("queue.main", REMOVE, "queue.main"),
        ("queue.main", "arn:aws:sns:us-east-1:123456789012:topic", "queue.main"),
        ("queue.dead_letter", [], "queue.dead_letter"),
        ("queue.dead_letter", ["a", "a"], "queue.dead_letter"),
        ("queue.dead_letter", ["ok", 3], "queue.dead_letter[1]"),
        ("counter.table", "ab", "counter.table"),
        ("counter.table", "arn:aws:dynamodb:us-east-1:123456789012:stream/x", "counter.table"),
        ("counter.key_name", REMOVE, "counter.key_name"),
        ("counter.key_value", 7, "counter.key_value"),
        ("counter.count_attribute", "", "counter.count_attribute"),
        ("counter.holders", "no", "counter.holders"),
        ("counter.max", 0, "counter.max"),
        ("counter.max", True, "counter.max"),
        ("counter.max", 2.5, "counter.max"),
        ("counter.max", {"function": "processor"}, "counter.max.variable"),
        ("counter.max", {"function": "bad name", "variable": "X"}, "counter.max.function"),
        ("counter.max", {"function": "p", "variable": "X", "extra": 1}, "counter.max.extra"),
        ("counter.colour", "blue", "counter.colour"),
        ("workflow.state_machines", "wf one", "workflow.state_machines[0]"),
        ("workflow.state_machines", REMOVE, "workflow.state_machines"),
        ("alarms.functions", [{}], "alarms.functions[0].name"),
        ("alarms.functions", [{"name": "x", "timeout": 901}], "alarms.functions[0].timeout"),
        ("alarms.functions", [3], "alarms.functions[0]"),
        ("alarms.functions", ["a", {"name": "a"}], "alarms.functions"),
        ("alarms.functions", "a", "alarms.functions"),
        ("tracking.status_attribute", REMOVE, "tracking.status_attribute"),
        ("tracking", "tracking-table", "tracking"),
        ("pipeline.name", "x" * 65, "pipeline.name"),
        ("counter", REMOVE, "counter"),
        ("workflow", [], "workflow"),
        ("extra", {}, "extra"),
    ],
)
def test_each_wrong_field_is_named_with_what_was_found_expected_and_an_example(path: str, value: Any, expected_path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(with_(path, value))
    [problem] = raised.value.problems
    assert problem.path == expected_path
    assert problem.found and problem.expected and problem.example
    line = str(raised.value)
    assert line.startswith(f"{expected_path}: found ") and "; expected " in line and ", e.g. " in line


def test_every_wrong_field_is_reported_at_once() -> None:
    data = with_("queue.main", 1)
    data["counter"]["max"] = -1
    data["workflow"]["state_machines"] = [None]
    assert problem_paths(data) == ["queue.main", "counter.max", "workflow.state_machines[0]"]


def test_the_found_value_says_its_type() -> None:
    with pytest.raises(ConfigError, match=r"counter\.max: found 'five' \(a string\)"):
        parse(with_("counter.max", "five"))


def test_invalid_toml_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^\(file\): found invalid TOML"):
        loads("[counter\ntable = ")


def test_the_example_pipelines_description_parses() -> None:
    config = loads(EXAMPLE.read_text(encoding="utf-8"))
    assert isinstance(config, SidecarConfig)
    assert config.counter.holders is False
    assert isinstance(config.counter.max, MaxFromFunction)


_SCALARS = st.one_of(st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
_KEYS = st.sampled_from(
    ["pipeline", "queue", "counter", "workflow", "alarms", "tracking", "main", "dead_letter", "table", "key_name",
     "key_value", "count_attribute", "holders", "max", "function", "variable", "state_machines", "functions",
     "status_attribute", "name", "other"]
)
_TOML_VALUES = st.recursive(
    _SCALARS, lambda children: st.lists(children, max_size=3) | st.dictionaries(_KEYS, children, max_size=6), max_leaves=25
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _TOML_VALUES, max_size=7))
def test_arbitrary_input_parses_or_is_a_typed_error_never_a_crash(data: dict[str, Any]) -> None:
    try:
        config = parse(data)
    except ConfigError as error:
        assert error.problems and all(str(problem).count(": found ") == 1 for problem in error.problems)
    else:
        assert isinstance(config, SidecarConfig)


_FIELDS = ["queue.main", "counter.table", "counter.key_name", "counter.max", "workflow.state_machines", "tracking.table", "alarms.functions"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(_FIELDS), _TOML_VALUES)
def test_any_value_in_any_field_of_a_valid_description_parses_or_names_that_field(path: str, value: Any) -> None:
    try:
        parse(with_(path, value))
    except ConfigError as error:
        assert all(problem.path.startswith(path) for problem in error.problems)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_loads_or_is_a_typed_error(text: str) -> None:
    try:
        loads(text)
    except ConfigError as error:
        assert error.problems
