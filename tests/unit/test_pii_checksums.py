"""Checksum helpers agree with published test numbers."""

from __future__ import annotations

import pytest

from pipeline.pii.checksums import (
    card_brand,
    iban_check_digits,
    is_valid_card,
    is_valid_iban,
    is_valid_ssn,
    luhn_check_digit,
    luhn_valid,
)


@pytest.mark.parametrize(
    ("digits", "brand"),
    [
        ("4111111111111111", "visa"),
        ("4222222222222", "visa"),
        ("5105105105105100", "mastercard"),
        ("2720990000000007", "mastercard"),
        ("371449635398431", "amex"),
        ("6011000990139424", "discover"),
        ("3566002020360505", "jcb"),
        ("36227206271667", "diners"),
    ],
)
def test_published_test_cards_are_valid(digits: str, brand: str) -> None:
    assert is_valid_card(digits)
    assert card_brand(digits) is not None and card_brand(digits).name == brand


@pytest.mark.parametrize(
    "digits",
    ["4111111111111112", "411111111111", "5605105105105100", "37144963539843", "٤١١١١١١١١١١١١١١١"],
    ids=["bad-luhn", "too-short", "unknown-iin", "amex-wrong-length", "non-ascii-digits"],
)
def test_card_look_alikes_are_invalid(digits: str) -> None:
    assert not is_valid_card(digits)


def test_luhn_check_digit_completes_a_payload() -> None:
    assert luhn_check_digit("411111111111111") == "1"
    assert luhn_valid("79927398713") and not luhn_valid("79927398710")


def test_iban_check_digits_reproduce_a_published_iban() -> None:
    assert iban_check_digits("GB", "WEST12345698765432") == "82"
    assert is_valid_iban("GB82WEST12345698765432")


@pytest.mark.parametrize(
    "iban",
    ["GB82WEST1234569876543", "GB00WEST12345698765432", "GB82 WEST 1234 5698 7654 32", "ZZ82WEST12345698765432"],
    ids=["wrong-length", "check-digits-00", "spaces-not-compact", "unknown-country"],
)
def test_iban_look_alikes_are_invalid(iban: str) -> None:
    assert not is_valid_iban(iban)


@pytest.mark.parametrize(
    ("digits", "valid"),
    [("123456789", True), ("000123456", False), ("666123456", False), ("900123456", False),
     ("123006789", False), ("123450000", False), ("12345678", False)],
)  # fmt: skip
def test_ssn_issuance_rules(digits: str, valid: bool) -> None:
    assert is_valid_ssn(digits) is valid
