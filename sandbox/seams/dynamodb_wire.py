"""SPEED seam: DynamoDB attribute values are written in the wire form moto keeps them in.

What moto does: it serializes a DynamoDB item attribute by attribute through its generic,
shape-driven serializer (`BaseJSONSerializer._serialize_type_structure`): every AttributeValue is a
structure of ten members, each looked up by a chain of attribute pickers (85% of a 50-item Query's
time).

What it changes (no behaviour): moto keeps an AttributeValue in its wire form already
(`{"S": "..."}`, maps and lists of them): it is written as it is, the very output moto's own walk
of its members gives; one with a binary value anywhere takes moto's way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from sandbox.seams.patching import Patch

KIND = "SPEED"

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


def patches() -> list[Patch]:
    from moto.core.serialize import BaseJSONSerializer

    return [Patch(BaseJSONSerializer, "_serialize_type_structure", _attribute_values_as_kept)]
