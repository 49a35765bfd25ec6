"""Patches of moto internals that make it behave as AWS does where the sandbox relies on it.

Pinned to moto 5.2 (pyproject allows >=5.2.5,<5.3): each seam names the moto function it wraps,
and tests/sandbox/test_moto_seams.py fails when one moves.

DynamoDB item writes are atomic. AWS applies each item write (a conditional update included) as
one atomic step; moto's `DynamoDBBackend.update_item` reads, checks the condition and mutates the
item with no lock, and the sandbox runs handlers on many threads (a served moto also answers on
many). Measured without this seam: 8 threads doing 300 conditional acquire/release pairs each on
one semaphore item left `active_count` at -1 with no holder. One re-entrant lock around the
backend's item reads and writes makes every item operation (and a whole transaction) atomic,
as on AWS, so the sandbox never manufactures drift that the reconciler would then "find".

Three more seams make moto's ASL interpreter cheaper without changing what it does (measured by
bench/sandbox_ratio.py: together they were about 45% of the sandbox's CPU):
- The parsed definition is cached per state machine version. moto parses the whole ASL with an
  ANTLR parser at every `start_execution` (`ExecutionWorker._get_evaluation_entrypoint`), although
  a version's definition never changes. The parsed program is a tree of evaluation components that
  keep no per-execution state (the execution's state, its ARN and its machine's ARN live in its
  `Environment`), so executions share it. The key is the definition text itself, which is what
  identifies a version's program: an update or a new version with another definition is parsed
  again; the parse moto does to validate a definition at create/update
  (`StepFunctionsParserBackend._validate_definition`) is the one its executions then use.
- One boto3 client per (region, service, endpoint) for the interpreter's service integrations.
  moto builds a new client (~4 ms) for every Task state (`boto_client_for`, imported by name into
  each task module); boto3 clients are thread-safe. moto's function ignores the task's credentials
  (every client it builds signs as "ak"), so the reused client is the one it would have built.
- One parse per JSONPath. jsonpath-ng's `parse` builds a new PLY parser for every path the
  interpreter evaluates (~0.7 ms each, about 12% of the sandbox's CPU); a parsed path is
  immutable, so executions share it (0.008 ms).
The parsed programs and paths outlive an uninstall (the next sandbox in the process starts
executions of the same definitions); the clients do not.

And one for a race: moto lists a new execution before it sets its status, so a ListExecutions
during a StartExecution raised AttributeError; an execution without a status reads RUNNING, as an
execution that exists always is on AWS.

And one for start-up: moto's CloudFormation reads every template body with PyYAML's pure-Python
loader first (`Stack.parse_template`), JSON included -- about 2.5 s for this project's transformed
template, the biggest part of a sandbox's start. A body that is JSON is read as JSON (as AWS does;
YAML 1.1 would even read some JSON numbers as strings); anything else goes to moto's reader.

And one for the Lambda tasks: the interpreter invokes a task's function in-process, not through a
boto3 client round trip into the same process (`sandbox.lambda_tasks`; IAM still decides it).

And one for reads of CloudWatch metrics: moto walked every datapoint it ever kept, for every query
and every period (`sandbox.cloudwatch_reads`: indexed per metric, the window bisected).

And one for DynamoDB responses: a scalar attribute value is written in the wire form moto keeps it
in, not walked member by member through moto's generic serializer (85% of a 50-item Query).

And one for size: a TransactWriteItems backs up the items it names, not its whole tables
(`sandbox.dynamodb_transactions`, inside the DynamoDB lock): moto's deep copy of every table a
transaction touches made each ingest and router transaction cost as much as the tables were large.
"""

from __future__ import annotations

import collections
import functools
import json
import threading
from collections.abc import Callable
from typing import Any

from sandbox import dynamodb_transactions, lambda_tasks
from sandbox.patches import CountedPatches, Patch

# The item reads and writes of moto.dynamodb.models.DynamoDBBackend (batch and PartiQL
# operations go through these per item; transact_write_items holds the lock for the whole set).
DYNAMODB_ITEM_OPERATIONS = (
    "put_item",
    "get_item",
    "update_item",
    "delete_item",
    "query",
    "scan",
    "transact_write_items",
)

# The same operations as moto answers a request (moto.dynamodb.responses.DynamoHandler): the handler
# reads the item before the backend call (a deepcopy, for ReturnValues) and serializes it after, both
# outside the backend's methods, so a concurrent write to the same item could change it mid-copy
# ("dictionary changed size during iteration"). The lock is re-entrant: the backend calls inside nest.
DYNAMODB_REQUEST_OPERATIONS = (
    *DYNAMODB_ITEM_OPERATIONS,
    "batch_get_item",
    "batch_write_item",
    "transact_get_items",
    "execute_statement",
)

# Modules that import moto's `boto_client_for` by name (the interpreter's service integrations).
_CLIENT_MODULE_PREFIX = "moto.stepfunctions.parser."
PARSED_CACHE_SIZE = 64

_DYNAMODB_LOCK = threading.RLock()


def _atomic(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _DYNAMODB_LOCK:
            return method(*args, **kwargs)

    locked.__pipeops_seam__ = True  # type: ignore[attr-defined]
    return locked


# --------------------------------------------------------------------------- parsed definitions


class ParsedDefinitions:
    """Parsed ASL programs by definition text (an LRU); counts the parses it did."""

    def __init__(self, size: int = PARSED_CACHE_SIZE) -> None:
        self._size = size
        self._programs: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.parses = 0

    def program(self, definition: str, parse: Callable[[str], Any]) -> Any:
        with self._lock:
            program = self._programs.get(definition)
            if program is not None:
                self._programs.move_to_end(definition)
                return program
        program = parse(definition)  # outside the lock: two first starts may both parse, once each
        with self._lock:
            self.parses += 1
            self._programs[definition] = program
            while len(self._programs) > self._size:
                self._programs.popitem(last=False)
        return program

    def __contains__(self, definition: object) -> bool:
        with self._lock:
            return definition in self._programs

    def clear(self) -> None:
        with self._lock:
            self._programs.clear()


PARSED = ParsedDefinitions()


def _parse(definition: str) -> Any:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    return AmazonStateLanguageParser.parse(definition)[0]


def _cached_entrypoint(worker: Any) -> Any:
    return PARSED.program(str(worker._evaluation_details.state_machine_details.definition), _parse)


def _validated_once(original: Callable[[str], Any]) -> Callable[[str], Any]:
    @functools.wraps(original)
    def _validate_definition(definition: str) -> None:
        try:
            PARSED.program(definition, _parse)  # valid: parsed, and kept for the executions
        except Exception:
            original(definition)  # raises moto's InvalidDefinition, worded as moto words it
            raise

    _validate_definition.__pipeops_seam__ = True  # type: ignore[attr-defined]
    return _validate_definition


_cached_entrypoint.__pipeops_seam__ = True  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- interpreter clients

_CLIENTS: dict[tuple[str, str, str | None], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _reused_client(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        from moto.core.models import botocore_stubber
        from moto.settings import moto_server_port

        key = (region, service, None if botocore_stubber.enabled else moto_server_port())
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = _CLIENTS[key] = original(region, service, state_credentials)
            return client

    boto_client_for.__pipeops_seam__ = True  # type: ignore[attr-defined]
    return boto_client_for


def _client_modules() -> list[Any]:
    """Every interpreter module that imports moto's `boto_client_for` by name, imported now (the
    service integrations load lazily, at their first Task state)."""
    import importlib
    from pathlib import Path

    import moto.stepfunctions.parser as parser_package
    from moto.stepfunctions.parser.asl.utils import boto_client

    original = boto_client.boto_client_for  # the module's own: patches replace only the importers'
    root = Path(parser_package.__file__).parent
    modules = []
    for path in sorted(root.rglob("*.py")):
        if "import boto_client_for" not in path.read_text(encoding="utf-8"):
            continue
        name = _CLIENT_MODULE_PREFIX + ".".join(path.relative_to(root).with_suffix("").parts)
        module = importlib.import_module(name)
        if getattr(module, "boto_client_for", None) is original:
            modules.append(module)
    return modules


def _json_first(original: Callable[[str], Any]) -> Callable[[str], Any]:
    @functools.wraps(original)
    def parse_template(template: str) -> Any:
        if isinstance(template, str) and template.lstrip().startswith("{"):
            try:
                return json.loads(template)
            except ValueError:
                pass
        return original(template)

    parse_template.__pipeops_seam__ = True  # type: ignore[attr-defined]
    return parse_template


JSONPATH_CACHE_SIZE = 1024


def _parsed_once(original: Callable[[str], Any]) -> Callable[[str], Any]:
    """jsonpath-ng's `parse` builds a new PLY parser for every path moto's interpreter evaluates
    (each InputPath, Parameters `.$` field, ResultSelector, ResultPath: about 12% of the sandbox's
    CPU). A workflow has a fixed set of paths, and a parsed path is an immutable tree that `find`
    and `update_or_create` only read, so executions share one parse per path."""
    cached = functools.lru_cache(maxsize=JSONPATH_CACHE_SIZE)(original)

    @functools.wraps(original)
    def parse(path: str) -> Any:
        return cached(path)

    return parse


def _running_while_starting(original: property) -> property:
    """moto appends a new execution to its machine's list before `start()` sets its status, so a
    ListExecutions in that window raised AttributeError ('NoneType' has no 'value'); on AWS an
    execution that exists is RUNNING (StartExecution is one step)."""
    from moto.stepfunctions.parser.api import ExecutionStatus

    def status(execution: Any) -> Any:
        if execution.exec_status is None:
            return ExecutionStatus.RUNNING.value
        return original.fget(execution)  # type: ignore[misc]

    status.__pipeops_seam__ = True  # type: ignore[attr-defined]
    return property(status)


# AttributeValue members whose wire form (JSON) is the value moto keeps: a string, a number as a
# string, a boolean, or a list of strings; M and L are made of such values. B and BS (base64) take
# moto's way.
_WIRE_READY = frozenset({"S", "N", "BOOL", "NULL", "SS", "NS"})


def _attribute_values_as_kept(original: Callable[..., Any]) -> Callable[..., Any]:
    """moto serializes a DynamoDB item attribute by attribute through its generic, shape-driven
    serializer: every AttributeValue is a structure of ten members, each looked up by a chain of
    attribute pickers (85% of a 50-item Query's time, issue 19). moto keeps an AttributeValue in its
    wire form already (`{"S": "..."}`, maps and lists of them): it is written as it is, the very
    output moto's own walk of its members gives; one with a binary value anywhere takes moto's way."""

    @functools.wraps(original)
    def _serialize_type_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and shape.name == "AttributeValue":
            wire = _wire_form(value)
            if wire is not None:
                self._default_serialize(serialized, wire, shape, key)
                return
        original(self, serialized, value, shape, key)

    _serialize_type_structure.__pipeops_seam__ = True  # type: ignore[attr-defined]
    return _serialize_type_structure


def _wire_form(value: Any) -> dict[str, Any] | None:
    """An AttributeValue as moto's serializer writes it, or None where moto's way is needed (a
    binary value anywhere in it, or a shape that is not one member)."""
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ((kind, inner),) = value.items()
    if inner is None:
        return None
    if kind in _WIRE_READY:
        return {kind: _as_moto_writes(kind, inner)}
    if kind == "M" and isinstance(inner, dict):
        members = {name: _wire_form(member) for name, member in inner.items()}
        return None if any(member is None for member in members.values()) else {"M": members}
    if kind == "L" and isinstance(inner, list):
        elements = [_wire_form(element) for element in inner]
        return None if any(element is None for element in elements) else {"L": elements}
    return None


def _as_moto_writes(kind: str, inner: Any) -> Any:
    """What moto's serializer makes of a member: strings (S, N and the sets' elements) via `str`,
    booleans (BOOL, NULL) as they are."""
    if kind in ("S", "N"):
        return inner if isinstance(inner, str) else str(inner)
    if kind in ("SS", "NS"):
        return [element if isinstance(element, str) else str(element) for element in inner]
    return inner


def _patches() -> list[Patch]:
    """Every seam of this module; the owners are moto's own."""
    from moto.cloudformation.models import Stack
    from moto.core.serialize import BaseJSONSerializer
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.utils import boto_client, json_path
    from moto.stepfunctions.parser.backend.execution import Execution
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    reused = _reused_client(boto_client.boto_client_for)
    return [
        Patch(Stack, "parse_template", lambda original: staticmethod(_json_first(original.__func__))),
        *dynamodb_transactions.patches(),  # before the lock's patches: the lock wraps them
        *(Patch(DynamoDBBackend, name, _atomic) for name in DYNAMODB_ITEM_OPERATIONS),
        *(Patch(DynamoHandler, name, _atomic) for name in DYNAMODB_REQUEST_OPERATIONS),
        Patch(ExecutionWorker, "_get_evaluation_entrypoint", lambda _original: _cached_entrypoint),
        Patch(Execution, "status", _running_while_starting),
        Patch(json_path, "parse", _parsed_once),
        Patch(result_path, "parse", _parsed_once),
        Patch(
            StepFunctionsParserBackend,
            "_validate_definition",
            lambda original: staticmethod(_validated_once(original.__func__)),
        ),
        *(Patch(module, "boto_client_for", lambda _original: reused) for module in _client_modules()),
        Patch(lambda_eval_utils, "_invoke_lambda_function", lambda_tasks.direct),
        Patch(BaseJSONSerializer, "_serialize_type_structure", _attribute_values_as_kept),
    ]


def _install_query_seam() -> None:
    # reads that cost what they ask for: last on, first off
    from sandbox import cloudwatch_reads, dynamodb_query

    dynamodb_query.install()
    cloudwatch_reads.install()


def _uninstall_query_seam() -> None:
    from sandbox import cloudwatch_reads, dynamodb_query

    cloudwatch_reads.uninstall()
    dynamodb_query.uninstall()


def _drop_clients() -> None:
    with _CLIENTS_LOCK:
        _CLIENTS.clear()


_PATCHES = CountedPatches(
    _patches,
    marker="__pipeops_seam__",
    after_install=_install_query_seam,
    before_uninstall=_uninstall_query_seam,
    after_uninstall=_drop_clients,
)


# The module's API: counted, one uninstall per install (`sandbox.patches`).
install, uninstall, installed = _PATCHES.install, _PATCHES.uninstall, _PATCHES.installed
