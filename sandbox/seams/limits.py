"""BEHAVIOUR seam: AWS's size limits, enforced in moto, so that a test of size means something.

Pinned to moto 5.2 (pyproject allows >=5.2.5,<5.3), like every module of `sandbox.seams`: each patch names
the moto function it wraps, and tests/sandbox/test_limits.py fails when one moves. Measured on
moto 5.2.5 before this module (docs/ARCHITECTURE.md#what-moto-does-not-do):

Step Functions (AWS: 256 KiB, 262,144 bytes of UTF-8, for the execution input and for every
state's input and output; `States.DataLimitExceeded` is terminal: `States.ALL` does not catch it)
- moto already checks each state's output and a Lambda task's result, but with `<` (a payload of
  exactly 262,144 bytes fails), and the error is caught by `States.ALL` like any other: a
  workflow whose Catch-all swallows it looks healthy in moto and dies on AWS. Here the check is
  `<=`, and `States.ALL` (in a Catch or a Retry) no longer matches States.DataLimitExceeded; an
  explicit `"ErrorEquals": ["States.DataLimitExceeded"]` still does where moto consults the
  state's catchers at all (a Lambda task's oversized result: moto checks a state's own output
  after its catchers, so nothing catches that one).
- StartExecution accepted any input (the execution then failed in its first state). Here an input
  over the limit is refused by the API call itself (ValidationException, the length constraint of
  StartExecution's `input`), as AWS does.
- A state's input is checked when the state is entered (a Map item's input included), before any
  catcher of that state can see it. A Map item that fails with a `States.*` error passes that
  error on to the Map (moto turned it into States.Runtime: "Custom Error Names MUST NOT begin
  with the prefix 'States.'"), so the Map fails with States.DataLimitExceeded too.

DynamoDB (AWS: 400 KB an item, 409,600 bytes, counted as AWS documents it: attribute names and
values in UTF-8, numbers by significant digits, 3 bytes per list or map plus 1 per element)
- moto checked only top-level attributes as they were assigned (405,000 bytes by its own count,
  below AWS's bound): an item that grew through UpdateItem (ADD to a set, SET inside a map)
  passed any size, and an item AWS accepts could be refused. Here moto's check is replaced: a
  PutItem over the limit fails with ValidationException "Item size has exceeded the maximum
  allowed size"; an UpdateItem whose result is over it fails with ValidationException "Item size
  to update has exceeded the maximum allowed size" and leaves the item as it was; inside
  TransactWriteItems either cancels the transaction (TransactionCanceledException, reason code
  ValidationError) and writes nothing, as on AWS.

Counted installs (`sandbox.seams.patching`: one uninstall per install, originals restored by the last). Install after `seams.install()` and uninstall before
`seams.uninstall()` (patches stack: the last one on must be the first one off). A wrapper
left in place by a patch stacked on top of it does nothing once uninstalled.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import threading
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from sandbox.seams.patching import CountedPatches, Patch

KIND = "BEHAVIOUR"

# AWS's numbers.
MAX_PAYLOAD_BYTES = 256 * 1024  # Step Functions: execution input, state input and output
MAX_ITEM_BYTES = 400 * 1024  # DynamoDB: one item
DATA_LIMIT_EXCEEDED = "States.DataLimitExceeded"
PUT_TOO_LARGE = "Item size has exceeded the maximum allowed size"
UPDATE_TOO_LARGE = "Item size to update has exceeded the maximum allowed size"

_in_transaction = threading.local()


# --------------------------------------------------------------------------- sizes (pure)


def payload_size(value: Any) -> int:
    """Bytes of a Step Functions payload: its JSON text (a string as is) in UTF-8."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return len(text.encode("utf-8"))


def _number_size(text: str) -> int:
    """About 1 byte per two significant digits, plus 1 (leading and trailing zeros trimmed)."""
    try:
        digits = format(Decimal(text).normalize(), "f").lstrip("-").replace(".", "").strip("0") or "0"
    except ArithmeticError:
        digits = text.lstrip("-").replace(".", "")
    return (len(digits) + 1) // 2 + 1


def _binary_size(value: Any) -> int:
    if isinstance(value, bytes | bytearray):
        return len(value)
    try:
        return len(base64.b64decode(value, validate=True))
    except (ValueError, TypeError):
        return len(str(value).encode("utf-8"))


def attribute_size(value: Mapping[str, Any]) -> int:
    """Bytes of one DynamoDB AttributeValue (wire form: {"S": ...}, {"M": {...}}, ...), as AWS
    documents item size: strings and binaries by length, numbers by significant digits, 1 byte
    for null and boolean, sets by their elements, 3 bytes per list or map plus 1 per element."""
    (kind, inner), *rest = value.items()
    if rest:
        raise ValueError(f"not one AttributeValue: {sorted(value)}")
    if kind == "S":
        return len(str(inner).encode("utf-8"))
    if kind == "N":
        return _number_size(str(inner))
    if kind == "B":
        return _binary_size(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(v).encode("utf-8")) for v in inner)
    if kind == "NS":
        return sum(_number_size(str(v)) for v in inner)
    if kind == "BS":
        return sum(_binary_size(v) for v in inner)
    if kind == "L":
        return 3 + sum(attribute_size(v) + 1 for v in inner)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + attribute_size(v) + 1 for k, v in inner.items())
    raise ValueError(f"unknown AttributeValue type {kind!r}")


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """Bytes of a DynamoDB item in wire form: every attribute's name and value."""
    return sum(len(name.encode("utf-8")) + attribute_size(value) for name, value in item.items())


def _moto_item_size(item: Any) -> int:
    """Size of a moto `Item` (its attributes as DynamoTypes)."""
    return sum(len(name.encode("utf-8")) + attribute_size(_wire(value)) for name, value in item.attrs.items())


def _wire(value: Any) -> dict[str, Any]:
    """A moto DynamoType as a wire-form AttributeValue."""
    kind, inner = value.type, value.value
    if kind == "M":
        return {"M": {k: _wire(v) if hasattr(v, "type") else v for k, v in inner.items()}}
    if kind == "L":
        return {"L": [_wire(v) if hasattr(v, "type") else v for v in inner]}
    return {kind: inner}


# --------------------------------------------------------------------------- Step Functions


def _data_limit_exceeded(state: Any, env: Any, what: str) -> Exception:
    """The failure moto raises for an oversized state payload (terminal: see _error_equals)."""
    from moto.stepfunctions.parser.api import ExecutionFailedEventDetails, HistoryEventType
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    error_type = StatesErrorNameType.StatesStatesDataLimitExceeded
    return FailureEventException(
        failure_event=FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=error_type),
            event_type=HistoryEventType.ExecutionFailed,
            event_details=EventDetails(  # type: ignore[typeddict-item]  # moto's TypedDict is total; AWS sends one key
                executionFailedEventDetails=ExecutionFailedEventDetails(
                    error=error_type.to_name(),
                    cause=f"The state '{state.name}' {what} a payload with a size exceeding the maximum number of "
                    f"bytes service limit ({MAX_PAYLOAD_BYTES} bytes).",
                )
            ),
        )
    )


def is_within_size_quota(value: Any) -> bool:
    """moto's quota check with AWS's bound: up to and including 256 KiB."""
    return payload_size(value) <= MAX_PAYLOAD_BYTES


def _iteration_error_name(error_name: str) -> Any:
    """The error a failed Map item hands to its Map: a `States.*` name keeps its kind."""
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )

    if _PATCHES.count and str(error_name).startswith("States."):
        try:
            return StatesErrorName(typ=StatesErrorNameType.from_name(error_name))
        except ValueError:
            pass
    return CustomErrorName(error_name=error_name)


def _check_state_input(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def eval_body(self: Any, env: Any) -> Any:
        if _PATCHES.count and not is_within_size_quota(env.states.get_input()):
            raise _data_limit_exceeded(self, env, "received")
        return original(self, env)

    return eval_body


def _error_equals(original: Callable[..., Any]) -> Callable[..., Any]:
    """`States.ALL` does not match States.DataLimitExceeded (AWS: a terminal error)."""

    @functools.wraps(original)
    def eval_body(self: Any, env: Any) -> Any:
        error_name = env.stack[-1] if env.stack else None
        original(self, env)
        if not _PATCHES.count or getattr(error_name, "error_name", None) != DATA_LIMIT_EXCEEDED:
            return None
        listed = {getattr(name, "error_name", None) for name in self.error_names}
        if DATA_LIMIT_EXCEEDED not in listed:
            env.stack[-1] = False
        return None

    return eval_body


def _start_execution(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def start_execution(self: Any, state_machine_arn: str, *args: Any, **kwargs: Any) -> Any:
        execution_input = kwargs.get("execution_input", args[1] if len(args) > 1 else None)
        if _PATCHES.count and execution_input is not None and payload_size(execution_input) > MAX_PAYLOAD_BYTES:
            from moto.stepfunctions.exceptions import ValidationException

            raise ValidationException(
                "1 validation error detected: Value at 'input' failed to satisfy constraint: "
                f"Member must have length less than or equal to {MAX_PAYLOAD_BYTES}"
            )
        return original(self, state_machine_arn, *args, **kwargs)

    return start_execution


# --------------------------------------------------------------------------- DynamoDB


class ValidationError(Exception):
    """An item over the limit inside TransactWriteItems: moto files it as the reason code
    `ValidationError` (its class name) and cancels the transaction, as AWS does."""


def _too_large(message: str) -> Exception:
    if getattr(_in_transaction, "depth", 0):
        return ValidationError(message)
    from moto.dynamodb.exceptions import ItemSizeTooLarge

    return ItemSizeTooLarge()


def _put_item(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def put_item(self: Any, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if _PATCHES.count and item_size(item_attrs) > MAX_ITEM_BYTES:
            raise _too_large(PUT_TOO_LARGE)
        return original(self, item_attrs, *args, **kwargs)

    return put_item


def _execute_update(original: Callable[..., Any]) -> Callable[..., Any]:
    """The whole update expression applied (the top-level call), then the item's size checked;
    over the limit, the item gets its attributes back and the update fails."""

    @functools.wraps(original)
    def execute(self: Any, node: Any = None) -> Any:
        if node is not None or not _PATCHES.count:
            return original(self, node)
        from moto.dynamodb.exceptions import ItemSizeTooLarge

        before = copy.deepcopy(self.item)
        try:
            original(self)
        except ItemSizeTooLarge:
            self.item.attrs = before.attrs
            raise
        if _moto_item_size(self.item) > MAX_ITEM_BYTES:
            self.item.attrs = before.attrs
            if getattr(_in_transaction, "depth", 0):
                raise ValidationError(UPDATE_TOO_LARGE)
            raise ItemSizeTooLarge  # moto's update_item answers UPDATE_TOO_LARGE for it
        return None

    return execute


def _attribute_set(original: Callable[..., Any]) -> Callable[..., Any]:
    """moto's own check (405,000 bytes by its count, top-level assignments only) is replaced by
    the checks above, at AWS's bound: an item AWS accepts is accepted."""

    @functools.wraps(original)
    def setitem(self: Any, key: str, value: Any) -> None:
        if _PATCHES.count:
            dict.__setitem__(self, key, value)
        else:
            original(self, key, value)

    return setitem


def _transact_write_items(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def transact_write_items(self: Any, *args: Any, **kwargs: Any) -> Any:
        _in_transaction.depth = getattr(_in_transaction, "depth", 0) + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _in_transaction.depth -= 1

    return transact_write_items


# --------------------------------------------------------------------------- install


def _class_patches() -> list[Patch]:
    """Every wrapper of a moto method; the owners are moto's own."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
    from moto.stepfunctions.models import StepFunctionBackend
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
    from moto.stepfunctions.parser.asl.component.state.state import CommonStateField
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    return [
        Patch(StepFunctionBackend, "start_execution", _start_execution),
        Patch(StepFunctionsParserBackend, "start_execution", _start_execution),
        Patch(CommonStateField, "_eval_body", _check_state_input),
        Patch(ErrorEqualsDecl, "_eval_body", _error_equals),
        Patch(Table, "put_item", _put_item),
        Patch(UpdateExpressionExecutor, "execute", _execute_update),
        Patch(LimitedSizeDict, "__setitem__", _attribute_set),
        Patch(DynamoDBBackend, "transact_write_items", _transact_write_items),
    ]


def _module_patches() -> list[Patch]:
    """Module globals replaced: the modules that imported moto's `is_within_size_quota`
    by name (each gets AWS's bound), and the Map item worker's error naming."""
    from moto.stepfunctions.parser.asl.component.state import state
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import iteration_worker
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task_lambda
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service

    return [
        Patch(state, "is_within_size_quota", _replaced_by(is_within_size_quota)),
        Patch(state_task_lambda, "is_within_size_quota", _replaced_by(is_within_size_quota)),
        Patch(state_task_service, "is_within_size_quota", _replaced_by(is_within_size_quota)),
        Patch(iteration_worker, "CustomErrorName", _replaced_by(_iteration_error_name)),
    ]


def _replaced_by(replacement: Any) -> Callable[[Any], Any]:
    return lambda _original: replacement


def _patches() -> list[Patch]:
    return [*_class_patches(), *_module_patches()]


_PATCHES = CountedPatches(_patches, marker="__pipeops_limit__")


# The module's API: counted, one uninstall per install (`sandbox.seams.patching`).
install, uninstall, installed = _PATCHES.install, _PATCHES.uninstall, _PATCHES.installed
