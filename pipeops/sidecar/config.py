"""`pipeops.toml`: the description of a counter-capped pipeline someone else built, for the sidecar.

Pure parsing: TOML text (or the table tomllib made of it) in, a frozen `SidecarConfig` out, or a
`ConfigError` naming every field that is wrong with what was found, what is expected and an
example. Nothing here calls AWS: whether the named resources exist is the first reconciler run's
question (a wrong name is an error there, never a healthy stack watching nothing).

Every resource may be written as its name or its ARN. A name is resolved in the sidecar's own
account and region when the template is deployed (`AwsRef.arn_expression`); an ARN is kept as is.

    [pipeline]
    name = "document-processing"            # optional: in descriptions

    [queue]
    main = "document-queue"
    dead_letter = ["document-queue-dlq"]    # one or more

    [counter]
    table = "document-concurrency"
    key_name = "counter_id"
    key_value = "workflow_counter"
    count_attribute = "active_count"
    holders = false                         # false: a plain counter (legacy mode)
    max = 5                                 # or { function = "queue-processor", variable = "MAX_CONCURRENT" }

    [workflow]
    state_machines = ["document-workflow"]  # whose RUNNING executions the counter counts

    [alarms]                                # optional; with its timeout, a function's duration too
    functions = ["queue-sender", { name = "queue-processor", timeout = 900 }]

    [tracking]                              # optional
    table = "document-tracking"
    status_attribute = "status"
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

T = TypeVar("T")


class Kind(StrEnum):
    """The kinds of resource a description names, by the service in their ARN."""

    QUEUE = "sqs"
    FUNCTION = "lambda"
    TABLE = "dynamodb"
    STATE_MACHINE = "states"


@dataclass(frozen=True)
class _KindRule:
    noun: str
    name: re.Pattern[str]
    arn_resource: str  # the ARN's resource part before the name: "", "function:", "table/", "stateMachine:"
    example: str


_RULES: dict[Kind, _KindRule] = {
    Kind.QUEUE: _KindRule("an SQS queue name or ARN", re.compile(r"[A-Za-z0-9_-]{1,75}(\.fifo)?|[A-Za-z0-9_-]{1,80}"), "", "document-queue"),
    Kind.FUNCTION: _KindRule("a Lambda function name or ARN", re.compile(r"[A-Za-z0-9_-]{1,64}"), "function:", "queue-processor"),
    Kind.TABLE: _KindRule("a DynamoDB table name or ARN", re.compile(r"[A-Za-z0-9_.-]{3,255}"), "table/", "document-concurrency"),
    Kind.STATE_MACHINE: _KindRule(
        "a Step Functions state machine name or ARN", re.compile(r"[A-Za-z0-9_-]{1,80}"), "stateMachine:", "document-workflow"
    ),
}
_ARN = re.compile(r"arn:(?P<partition>aws[a-z-]*):(?P<service>[a-z0-9-]+):(?P<region>[a-z0-9-]+):(?P<account>\d{12}):(?P<resource>.+)")
_ATTRIBUTE = re.compile(r"[^\x00]{1,255}")
_VARIABLE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")


@dataclass(frozen=True)
class AwsRef:
    """A resource of the watched pipeline, by name, with its ARN when the description gave one."""

    kind: Kind
    name: str
    arn: str | None = None

    def arn_expression(self) -> Any:
        """Its ARN for a template: the literal ARN given, else built in the stack's account and region."""
        if self.arn is not None:
            return self.arn
        resource = _RULES[self.kind].arn_resource
        return {"Fn::Sub": f"arn:${{AWS::Partition}}:{self.kind.value}:${{AWS::Region}}:${{AWS::AccountId}}:{resource}{self.name}"}


@dataclass(frozen=True)
class FixedMax:
    value: int


@dataclass(frozen=True)
class MaxFromFunction:
    """The max is read from one function's environment variable (the pipeline's own setting)."""

    function: AwsRef
    variable: str


Max = FixedMax | MaxFromFunction


@dataclass(frozen=True)
class Counter:
    table: AwsRef
    key_name: str
    key_value: str
    count_attribute: str
    holders: bool
    max: Max


@dataclass(frozen=True)
class Tracking:
    table: AwsRef
    status_attribute: str


@dataclass(frozen=True)
class WatchedFunction:
    """A function to alarm on: errors and throttles; with its timeout, also its p99 duration near it."""

    ref: AwsRef
    timeout_seconds: int | None = None


@dataclass(frozen=True)
class SidecarConfig:
    name: str
    main_queue: AwsRef
    dead_letter_queues: tuple[AwsRef, ...]
    counter: Counter
    state_machines: tuple[AwsRef, ...]
    functions: tuple[WatchedFunction, ...]
    tracking: Tracking | None


@dataclass(frozen=True)
class FieldProblem:
    path: str  # "counter.max.variable"
    found: str
    expected: str
    example: str

    def __str__(self) -> str:
        return f"{self.path}: found {self.found}; expected {self.expected}, e.g. {self.example}"


class ConfigError(ValueError):
    """Every field of the description that is wrong, one line each."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in problems))


def _shown(value: Any) -> str:
    """What was found, short and typed: `42 (an integer)`, `'x' (a string)`, `nothing`."""
    if value is _MISSING:
        return "nothing"
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array", dict: "a table"}
    kind = kinds.get(type(value), type(value).__name__)
    if isinstance(value, dict):
        text = "{" + ", ".join(sorted(str(key) for key in value))[:50] + "}"
    elif isinstance(value, list):
        text = f"[{len(value)} items]"
    else:
        text = repr(value)[:60]
    return f"{text} ({kind})"


_MISSING = object()


class _Reader:
    """Walks the TOML table, records each problem with its path, and never raises on bad input."""

    def __init__(self) -> None:
        self.problems: list[FieldProblem] = []

    def problem(self, path: str, found: Any, expected: str, example: str) -> None:
        self.problems.append(FieldProblem(path, _shown(found), expected, example))

    def table(self, data: Mapping[str, Any], path: str, key: str, *, optional: bool = False) -> dict[str, Any] | None:
        value = data.get(key, _MISSING)
        where = f"{path}{key}"
        if value is _MISSING and optional:
            return None
        if not isinstance(value, dict):
            self.problem(where, value, f"a table [{where}]", f"[{where}] on its own line")
            return None
        return value

    def unknown(self, data: Mapping[str, Any], path: str, known: set[str]) -> None:
        for key in sorted(set(data) - known, key=str):
            self.problem(f"{path}{key}", data[key], f"one of the keys {', '.join(sorted(known))} (a typo?)", f"{sorted(known)[0]} = …")

    def text(self, data: Mapping[str, Any], path: str, key: str, pattern: re.Pattern[str], expected: str, example: str, default: str | None = None) -> str | None:
        value = data.get(key, _MISSING)
        if value is _MISSING and default is not None:
            return default
        if isinstance(value, str) and pattern.fullmatch(value):
            return value
        self.problem(f"{path}{key}", value, expected, f'{key} = "{example}"')
        return None

    def ref(self, value: Any, path: str, kind: Kind) -> AwsRef | None:
        rule = _RULES[kind]
        expected, example = rule.noun, f'"{rule.example}"'
        if not isinstance(value, str):
            self.problem(path, value, expected, example)
            return None
        found = _ARN.fullmatch(value)
        if found is None:
            if rule.name.fullmatch(value):
                return AwsRef(kind, value)
            self.problem(path, value, expected, example)
            return None
        resource = found["resource"]
        name = resource.removeprefix(rule.arn_resource) if resource.startswith(rule.arn_resource) else None
        if kind is Kind.FUNCTION and name is not None:
            name = name.split(":", 1)[0]  # a qualified function ARN: the function's name
        if found["service"] != kind.value or name is None or not rule.name.fullmatch(name):
            arn = f"arn:aws:{kind.value}:us-east-1:123456789012:{rule.arn_resource}{rule.example}"
            self.problem(path, value, f"{expected} (an ARN of service {kind.value})", f'"{arn}"')
            return None
        return AwsRef(kind, name, value)

    def refs(self, data: Mapping[str, Any], path: str, key: str, kind: Kind, *, optional: bool = False) -> tuple[AwsRef, ...]:
        value = data.get(key, _MISSING)
        where = f"{path}{key}"
        if value is _MISSING and optional:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value:
            self.problem(where, value, f"a non-empty array of {_RULES[kind].noun}s", f'{key} = ["{_RULES[kind].example}"]')
            return ()
        refs = [self.ref(item, f"{where}[{index}]", kind) for index, item in enumerate(value)]
        found = tuple(ref for ref in refs if ref is not None)
        names = [ref.name for ref in found]
        if len(set(names)) != len(names):
            self.problem(where, value, "each resource named once", f'{key} = ["{_RULES[kind].example}"]')
        return found


_KEY = re.compile(r"[^\x00]{1,255}")
_PIPELINE_NAME = re.compile(r"[A-Za-z0-9 ._-]{1,64}")


def _counter_max(reader: _Reader, counter: Mapping[str, Any]) -> Max | None:
    value = counter.get("max", _MISSING)
    if type(value) is int and 1 <= value <= 10_000:
        return FixedMax(value)
    if isinstance(value, dict):
        reader.unknown(value, "counter.max.", {"function", "variable"})
        function = reader.ref(value.get("function", _MISSING), "counter.max.function", Kind.FUNCTION)
        variable = reader.text(value, "counter.max.", "variable", _VARIABLE, "an environment variable name", "MAX_CONCURRENT")
        return MaxFromFunction(function, variable) if function and variable else None
    reader.problem(
        "counter.max", value, "a whole number from 1 to 10000, or a table naming a function and its environment variable",
        'max = 5, or max = { function = "queue-processor", variable = "MAX_CONCURRENT" }',
    )
    return None


def _counter(reader: _Reader, data: Mapping[str, Any]) -> Counter | None:
    counter = reader.table(data, "", "counter")
    if counter is None:
        return None
    reader.unknown(counter, "counter.", {"table", "key_name", "key_value", "count_attribute", "holders", "max"})
    table = reader.ref(counter.get("table", _MISSING), "counter.table", Kind.TABLE)
    key_name = reader.text(counter, "counter.", "key_name", _ATTRIBUTE, "the counter item's partition key attribute", "counter_id")
    key_value = reader.text(counter, "counter.", "key_value", _KEY, "the counter item's key value (a string)", "workflow_counter")
    count = reader.text(counter, "counter.", "count_attribute", _ATTRIBUTE, "the attribute holding the count", "active_count", default="active_count")
    holders = counter.get("holders", False)
    if not isinstance(holders, bool):
        reader.problem("counter.holders", holders, "true (the item records its holders) or false (a plain counter)", "holders = false")
    maximum = _counter_max(reader, counter)
    if table and key_name and key_value and count and isinstance(holders, bool) and maximum:
        return Counter(table, key_name, key_value, count, holders, maximum)
    return None


def _function(reader: _Reader, value: Any, path: str) -> WatchedFunction | None:
    if not isinstance(value, dict):
        ref = reader.ref(value, path, Kind.FUNCTION)
        return WatchedFunction(ref) if ref else None
    reader.unknown(value, f"{path}.", {"name", "timeout"})
    ref = reader.ref(value.get("name", _MISSING), f"{path}.name", Kind.FUNCTION)
    timeout = value.get("timeout")
    if timeout is not None and not (type(timeout) is int and 1 <= timeout <= 900):
        reader.problem(f"{path}.timeout", timeout, "the function's timeout in seconds, 1 to 900", "timeout = 60")
        return None
    return WatchedFunction(ref, timeout) if ref else None


def _functions(reader: _Reader, section: Mapping[str, Any]) -> tuple[WatchedFunction, ...]:
    value = section.get("functions", _MISSING)
    if value is _MISSING:
        return ()
    if not isinstance(value, list):
        example = 'functions = ["queue-sender", { name = "queue-processor", timeout = 900 }]'
        reader.problem("alarms.functions", value, "an array of function names or ARNs, or { name, timeout } tables", example)
        return ()
    found = [_function(reader, item, f"alarms.functions[{index}]") for index, item in enumerate(value)]
    watched = tuple(function for function in found if function is not None)
    names = [function.ref.name for function in watched]
    if len(set(names)) != len(names):
        reader.problem("alarms.functions", value, "each function named once", 'functions = ["queue-sender"]')
    return watched


def _tracking(reader: _Reader, data: Mapping[str, Any]) -> Tracking | None:
    tracking = reader.table(data, "", "tracking", optional=True)
    if tracking is None:
        return None
    reader.unknown(tracking, "tracking.", {"table", "status_attribute"})
    table = reader.ref(tracking.get("table", _MISSING), "tracking.table", Kind.TABLE)
    status = reader.text(tracking, "tracking.", "status_attribute", _ATTRIBUTE, "the attribute holding a document's status", "status")
    return Tracking(table, status) if table and status else None


def _section(reader: _Reader, data: Mapping[str, Any], key: str, known: set[str], read: Callable[[dict[str, Any]], T], *, optional: bool = False) -> T | None:
    section = reader.table(data, "", key, optional=optional)
    if section is None:
        return None
    reader.unknown(section, f"{key}.", known)
    return read(section)


def parse(data: Mapping[str, Any]) -> SidecarConfig:
    """The description from a TOML table; ConfigError lists every wrong field."""
    reader = _Reader()
    reader.unknown(data, "", {"pipeline", "queue", "counter", "workflow", "alarms", "tracking"})
    name = _section(
        reader, data, "pipeline", {"name"},
        lambda section: reader.text(section, "pipeline.", "name", _PIPELINE_NAME, "a short name (letters, digits, space . _ -)", "document-processing", default="pipeline"),
        optional=True,
    ) or "pipeline"
    queues = _section(
        reader, data, "queue", {"main", "dead_letter"},
        lambda section: (reader.ref(section.get("main", _MISSING), "queue.main", Kind.QUEUE), reader.refs(section, "queue.", "dead_letter", Kind.QUEUE)),
    )
    counter = _counter(reader, data)
    machines = _section(reader, data, "workflow", {"state_machines"}, lambda section: reader.refs(section, "workflow.", "state_machines", Kind.STATE_MACHINE))
    functions = _section(reader, data, "alarms", {"functions"}, lambda section: _functions(reader, section), optional=True)
    tracking = _tracking(reader, data)
    if reader.problems or queues is None or queues[0] is None or counter is None or not machines:
        if not reader.problems:  # pragma: no cover - every None above recorded its problem
            reader.problem("(file)", data, "a complete description", "see pipeops/sidecar/config.py")
        raise ConfigError(reader.problems)
    return SidecarConfig(name, queues[0], queues[1], counter, machines, functions or (), tracking)


def loads(text: str) -> SidecarConfig:
    """The description from TOML text; invalid TOML is a ConfigError too."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([FieldProblem("(file)", f"invalid TOML ({exc})", "a TOML document", "[counter]\ntable = \"…\"")]) from None
    return parse(data)
