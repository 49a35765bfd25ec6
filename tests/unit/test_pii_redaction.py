"""Redaction replaces exactly the detected spans and nothing else, and never leaks a value."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.pii import (
    EntityType,
    InvalidEntitiesError,
    MissingReplacementError,
    PiiEntity,
    blackout,
    substitute,
    values_by_type,
)

TEXT = "Mail jane@example.com or call 415-555-2671; jane@example.com again."
ENTITIES = [
    PiiEntity(EntityType.EMAIL, 5, 21),
    PiiEntity(EntityType.PHONE, 30, 42),
    PiiEntity(EntityType.EMAIL, 44, 60),
]
MAPPING = {"jane@example.com": "qmzp@example.org", "415-555-2671": "818-574-4750"}


def test_blackout_labels_each_entity_with_its_type() -> None:
    assert blackout(TEXT, ENTITIES) == (
        "Mail [REDACTED:EMAIL] or call [REDACTED:PHONE]; [REDACTED:EMAIL] again."
    )


def test_substitute_uses_the_same_fake_for_every_occurrence() -> None:
    assert substitute(TEXT, ENTITIES, MAPPING) == (
        "Mail qmzp@example.org or call 818-574-4750; qmzp@example.org again."
    )


def test_entities_may_arrive_in_any_order() -> None:
    assert blackout(TEXT, reversed(ENTITIES)) == blackout(TEXT, ENTITIES)


def test_values_by_type_lists_distinct_values_in_order_of_appearance() -> None:
    assert values_by_type(TEXT, ENTITIES) == {"EMAIL": ["jane@example.com"], "PHONE": ["415-555-2671"]}


def test_a_missing_replacement_fails_without_revealing_the_value() -> None:
    with pytest.raises(MissingReplacementError) as caught:
        substitute(TEXT, ENTITIES, {"jane@example.com": "qmzp@example.org"})
    error = caught.value
    assert (error.entity_type, error.start) == (EntityType.PHONE, 30)
    assert "PHONE" in str(error) and "30" in str(error)
    assert "415" not in str(error) and "2671" not in repr(error)
    assert error.__cause__ is None and error.__context__ is None  # no chained KeyError(value)


def test_overlapping_entities_are_refused_rather_than_half_applied() -> None:
    overlapping = [PiiEntity(EntityType.PHONE, 30, 42), PiiEntity(EntityType.SSN, 35, 45)]
    with pytest.raises(InvalidEntitiesError, match="SSN entity at offset 35 overlaps"):
        blackout(TEXT, overlapping)


def test_an_entity_beyond_the_text_is_refused() -> None:
    with pytest.raises(InvalidEntitiesError, match="ends beyond the text"):
        blackout("short", [PiiEntity(EntityType.SSN, 2, 11)])


def test_no_entities_leave_the_text_unchanged() -> None:
    assert blackout(TEXT, []) == TEXT
    assert substitute(TEXT, [], {}) == TEXT


# A document is alternating plain text and PII values; the entities are built alongside, so the
# property holds for any text, including text that merely looks like PII.
_plain = st.text(max_size=12)
_value = st.text(min_size=1, max_size=8)
_types = st.sampled_from(list(EntityType))


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[PiiEntity], list[str], list[str]]:
    pieces = draw(st.lists(st.tuples(_plain, _types, _value), max_size=6))
    tail = draw(_plain)
    text, entities, plains, values = "", [], [], []
    for plain, entity_type, value in pieces:
        text += plain
        entities.append(PiiEntity(entity_type, len(text), len(text) + len(value)))
        text += value
        plains.append(plain)
        values.append(value)
    plains.append(tail)
    return text + tail, entities, plains, values


@settings(max_examples=60, deadline=None, database=None)
@given(documents())
def test_blackout_leaves_everything_but_the_entities_untouched(
    document: tuple[str, list[PiiEntity], list[str], list[str]],
) -> None:
    text, entities, plains, _ = document
    labels = [f"[REDACTED:{entity.type}]" for entity in entities] + [""]
    assert blackout(text, entities) == "".join(p + label for p, label in zip(plains, labels, strict=True))


@settings(max_examples=60, deadline=None, database=None)
@given(documents())
def test_substitute_leaves_everything_but_the_entities_untouched(
    document: tuple[str, list[PiiEntity], list[str], list[str]],
) -> None:
    text, entities, plains, values = document
    mapping = {value: f"<{len(value)}:{index}>" for index, value in enumerate(dict.fromkeys(values))}
    fakes = [mapping[value] for value in values] + [""]
    assert substitute(text, entities, mapping) == "".join(p + f for p, f in zip(plains, fakes, strict=True))
