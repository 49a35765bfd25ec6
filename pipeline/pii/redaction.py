"""Applying detections to text: blackout labels or synthetic substitutes.

Pure functions. Every replacement is placed by rebuilding the text from left to right, so the
offsets of later entities are never disturbed by earlier replacements of a different length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pipeline.pii.exceptions import InvalidEntitiesError, MissingReplacementError
from pipeline.pii.types import PiiEntity


def redaction_label(entity_type: str) -> str:
    """The placeholder that replaces a value in blackout mode."""
    return f"[REDACTED:{entity_type}]"


def _ordered(text: str, entities: Iterable[PiiEntity]) -> list[PiiEntity]:
    """Entities sorted by start, after checking they fit the text and do not overlap."""
    ordered = sorted(entities, key=lambda entity: (entity.start, entity.end))
    previous_end = 0
    for entity in ordered:
        if entity.end > len(text):
            raise InvalidEntitiesError(
                f"{entity.type} entity at offset {entity.start} ends beyond the text ({len(text)} characters)"
            )
        if entity.start < previous_end:
            raise InvalidEntitiesError(f"{entity.type} entity at offset {entity.start} overlaps another")
        previous_end = entity.end
    return ordered


def _rebuild(text: str, entities: Iterable[PiiEntity], replace: Callable[[PiiEntity], str]) -> str:
    pieces: list[str] = []
    cursor = 0
    for entity in _ordered(text, entities):
        pieces.append(text[cursor : entity.start])
        pieces.append(replace(entity))
        cursor = entity.end
    pieces.append(text[cursor:])
    return "".join(pieces)


def blackout(text: str, entities: Iterable[PiiEntity]) -> str:
    """Replace each entity with `[REDACTED:<TYPE>]`."""
    return _rebuild(text, entities, lambda entity: redaction_label(entity.type))


def substitute(text: str, entities: Iterable[PiiEntity], mapping: Mapping[str, str]) -> str:
    """Replace each entity's value with `mapping[value]`.

    A value without a replacement raises :class:`MissingReplacementError` rather than leaving
    PII in the output; the error names the type and offset only.
    """

    def replace(entity: PiiEntity) -> str:
        fake = mapping.get(text[entity.start : entity.end])
        if fake is None:
            raise MissingReplacementError(entity.type, entity.start)
        return fake

    return _rebuild(text, entities, replace)


def values_by_type(text: str, entities: Iterable[PiiEntity]) -> dict[str, list[str]]:
    """The distinct values of each type, in order of first appearance (input to build_mapping)."""
    found: dict[str, dict[str, None]] = {}
    for entity in _ordered(text, entities):
        found.setdefault(str(entity.type), {})[text[entity.start : entity.end]] = None
    return {entity_type: list(values) for entity_type, values in found.items()}
