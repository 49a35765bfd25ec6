"""A number inside a longer token is that token's: no phone, card or SSN made of an account number's
digit groups, whether the account number is a valid IBAN, fails its checksum, or is cut short.

The IBANs are every country's from the project's own case file (tests/unit/pii_cases/iban.json),
varied here mechanically: printed in groups of four or with dashes, a check digit pair that fails
mod-97, and the last one to six characters cut off. Invalid and truncated account numbers are left
alone (the decision recorded in docs/PII.md), so they must yield nothing at all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.pii import EntityType, OfflineDetector
from pipeline.pii.checksums import is_valid_iban

DETECTOR = OfflineDetector()
IBAN = EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER
CASES = Path(__file__).parent / "pii_cases" / "iban.json"


def _one_iban_per_country() -> dict[str, str]:
    document = json.loads(CASES.read_text(encoding="utf-8"))
    compact = sorted(
        {re.sub(r"[ -]", "", value).upper() for case in document["positives"] for value in case["values"]}
    )
    first: dict[str, str] = {}
    for value in compact:
        first.setdefault(value[:2], value)
    return first


IBANS = _one_iban_per_country()


def printed(compact: str, separator: str = " ") -> str:
    return separator.join(compact[index : index + 4] for index in range(0, len(compact), 4))


def broken_checksum(compact: str) -> str:
    wrong = next(f"{n:02d}" for n in range(2, 99) if f"{n:02d}" != compact[2:4])
    return compact[:2] + wrong + compact[4:]


def found(text: str) -> list[tuple[str, str]]:
    return [(str(entity.type), text[entity.start : entity.end]) for entity in DETECTOR.detect(text)]


def test_the_case_file_covers_many_countries() -> None:
    assert len(IBANS) >= 80
    assert all(is_valid_iban(value) for value in IBANS.values())


@pytest.mark.parametrize("country", sorted(IBANS))
@pytest.mark.parametrize("separator", [" ", "-"])
def test_a_valid_printed_iban_is_one_iban_and_nothing_else(country: str, separator: str) -> None:
    value = printed(IBANS[country], separator)
    assert found(f"Transfer to {value} today.") == [(IBAN, value)]


@pytest.mark.parametrize("country", sorted(IBANS))
def test_an_iban_failing_its_checksum_yields_nothing(country: str) -> None:
    broken = broken_checksum(IBANS[country])
    assert not is_valid_iban(broken)
    assert found(f"Transfer to {printed(broken)} today.") == []
    assert found(f"IBAN: {printed(broken, '-')}") == []


@pytest.mark.parametrize("country", sorted(IBANS))
def test_a_truncated_iban_yields_nothing(country: str) -> None:
    compact = IBANS[country]
    for cut in range(1, 7):
        short = compact[:-cut]
        assert found(f"account {printed(short)} (partial)") == [], cut
        assert found(f"IBAN: {printed(short, '-')}") == [], cut


@pytest.mark.parametrize(
    "text",
    [
        "Voucher 0800 0000 1920 0014 is void.",  # a card-like run of groups of four: no phone in it
        "serial 0412-3456-7890-1234 returned",
        "token 0161 4960 0000 2024 5",
        "ref 2079 4609 5812 0412 345",
    ],
)
def test_no_phone_or_ssn_inside_a_card_like_run(text: str) -> None:
    assert [entity_type for entity_type, _ in found(text)] == []


def test_a_phone_next_to_an_account_number_is_still_a_phone() -> None:
    iban = printed(IBANS["GB"])
    text = f"IBAN {iban} tel 020 7946 0321"
    assert found(text) == [(IBAN, iban), (EntityType.PHONE, "020 7946 0321")]


def test_adjacent_numbers_are_separate_spans() -> None:
    text = "on file: 020 7946 0321 0412 345 678 and +44 20 7946 0123 +1 312 746 1033"
    assert found(text) == [
        (EntityType.PHONE, "020 7946 0321"),
        (EntityType.PHONE, "0412 345 678"),
        (EntityType.PHONE, "+44 20 7946 0123"),
        (EntityType.PHONE, "+1 312 746 1033"),
    ]
