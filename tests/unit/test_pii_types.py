"""Entities are spans, and overlapping detections collapse to the most complete reading."""

from __future__ import annotations

import pytest

from pipeline.pii import EntityType, PiiEntity, resolve_overlaps


def test_entity_types_are_comprehends_names() -> None:
    assert {member.value for member in EntityType} == {
        "EMAIL",
        "PHONE",
        "SSN",
        "CREDIT_DEBIT_NUMBER",
        "IP_ADDRESS",
        "INTERNATIONAL_BANK_ACCOUNT_NUMBER",
    }


@pytest.mark.parametrize(("start", "end"), [(-1, 3), (4, 4), (5, 2)], ids=["negative", "empty", "reversed"])
def test_an_entity_must_cover_at_least_one_character(start: int, end: int) -> None:
    with pytest.raises(ValueError, match="invalid span"):
        PiiEntity(EntityType.SSN, start, end)


def test_the_longer_of_two_overlapping_entities_wins() -> None:
    short = PiiEntity(EntityType.IP_ADDRESS, 7, 16)
    long = PiiEntity(EntityType.IP_ADDRESS, 0, 16)
    assert resolve_overlaps([short, long]) == [long]


def test_equal_lengths_fall_back_to_type_priority() -> None:
    phone = PiiEntity(EntityType.PHONE, 0, 16, score=0.99)
    card = PiiEntity(EntityType.CREDIT_DEBIT_NUMBER, 2, 18, score=0.6)
    assert resolve_overlaps([phone, card]) == [card]


def test_equal_length_and_type_fall_back_to_score() -> None:
    weak = PiiEntity(EntityType.PHONE, 0, 10, score=0.6)
    strong = PiiEntity(EntityType.PHONE, 5, 15, score=0.9)
    assert resolve_overlaps([weak, strong]) == [strong]


def test_disjoint_and_touching_entities_are_all_kept_in_order() -> None:
    entities = [PiiEntity("SSN", 20, 31), PiiEntity("EMAIL", 0, 10), PiiEntity("PHONE", 10, 20)]
    assert [entity.start for entity in resolve_overlaps(entities)] == [0, 10, 20]


def test_a_long_entity_removes_every_short_one_it_covers() -> None:
    covering = PiiEntity(EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER, 0, 30)
    inside = [PiiEntity(EntityType.PHONE, start, start + 5) for start in range(0, 30, 6)]
    after = PiiEntity(EntityType.EMAIL, 30, 40)
    assert resolve_overlaps([*inside, after, covering]) == [covering, after]
