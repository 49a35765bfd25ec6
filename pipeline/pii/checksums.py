"""Validators for the structured identifiers: shared by the detector and the fake generator.

The detector uses them to reject look-alikes; the generator uses them to make fakes that pass
the same checks, so redacted output still parses as well-formed data downstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


def luhn_valid(digits: str) -> bool:
    """True when an ASCII digit string passes the Luhn (mod 10) check."""
    if not digits.isascii() or not digits.isdigit():
        return False
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def luhn_check_digit(payload: str) -> str:
    """The digit that, appended to `payload`, makes the whole string Luhn-valid."""
    for candidate in "0123456789":
        if luhn_valid(payload + candidate):
            return candidate
    raise ValueError("payload must be ASCII digits")  # unreachable for digit payloads


@dataclass(frozen=True, slots=True)
class CardBrand:
    """An issuer identification number (IIN) range and the lengths that brand issues."""

    name: str
    low: int
    high: int
    lengths: frozenset[int]

    @property
    def prefix_length(self) -> int:
        return len(str(self.low))

    def matches(self, digits: str) -> bool:
        return len(digits) in self.lengths and self.low <= int(digits[: self.prefix_length]) <= self.high


def _lengths(low: int, high: int) -> frozenset[int]:
    return frozenset(range(low, high + 1))


CARD_BRANDS: tuple[CardBrand, ...] = (
    CardBrand("visa", 4, 4, frozenset({13, 16, 19})),
    CardBrand("mastercard", 51, 55, frozenset({16})),
    CardBrand("mastercard", 2221, 2720, frozenset({16})),
    CardBrand("amex", 34, 34, frozenset({15})),
    CardBrand("amex", 37, 37, frozenset({15})),
    CardBrand("discover", 6011, 6011, _lengths(16, 19)),
    CardBrand("discover", 644, 649, _lengths(16, 19)),
    CardBrand("discover", 65, 65, _lengths(16, 19)),
    CardBrand("diners", 300, 305, _lengths(14, 19)),
    CardBrand("diners", 36, 36, _lengths(14, 19)),
    CardBrand("diners", 38, 39, _lengths(16, 19)),
    CardBrand("jcb", 3528, 3589, _lengths(16, 19)),
    CardBrand("unionpay", 62, 62, _lengths(16, 19)),
    CardBrand("mir", 2200, 2204, _lengths(16, 19)),
    CardBrand("maestro", 6759, 6759, _lengths(13, 19)),
    CardBrand("maestro", 6761, 6763, _lengths(13, 19)),
)


def card_brand(digits: str) -> CardBrand | None:
    """The brand whose IIN range and lengths fit these digits, if any."""
    if not digits.isascii() or not digits.isdigit():
        return None
    return next((brand for brand in CARD_BRANDS if brand.matches(digits)), None)


def is_valid_card(digits: str) -> bool:
    """13-19 digits with a known IIN prefix and a valid Luhn check digit."""
    return 13 <= len(digits) <= 19 and card_brand(digits) is not None and luhn_valid(digits)


# IBAN lengths per country (ISO 13616 registry): every SEPA country plus a few common others.
IBAN_LENGTHS: Mapping[str, int] = MappingProxyType(
    {
        "AD": 24, "AE": 23, "AL": 28, "AT": 20, "BE": 16, "BG": 22, "BR": 29, "CH": 21, "CY": 28,
        "CZ": 24, "DE": 22, "DK": 18, "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GI": 23,
        "GR": 27, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "LI": 21, "LT": 20,
        "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MT": 31, "NL": 18, "NO": 15, "PL": 28,
        "PT": 25, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TR": 26,
        "VA": 22,
    }
)  # fmt: skip


def _iban_remainder(country: str, check: str, bban: str) -> int:
    rearranged = bban + country + check
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97


def iban_check_digits(country: str, bban: str) -> str:
    """The two check digits (02-98) that make `country + digits + bban` pass mod-97."""
    return f"{98 - _iban_remainder(country, '00', bban):02d}"


def is_valid_iban(compact: str) -> bool:
    """Uppercase, no spaces, a known country with its exact length, and mod-97 == 1."""
    if not compact.isascii() or not compact.isalnum() or compact != compact.upper():
        return False
    country, check, bban = compact[:2], compact[2:4], compact[4:]
    if IBAN_LENGTHS.get(country) != len(compact) or not country.isalpha() or not check.isdigit():
        return False
    # Check digits 00, 01 and 99 are never issued even when they happen to satisfy mod-97.
    return 2 <= int(check) <= 98 and _iban_remainder(country, check, bban) == 1


def is_valid_ssn(digits: str) -> bool:
    """Nine digits obeying SSA issuance: area not 000/666/9xx, group not 00, serial not 0000."""
    if len(digits) != 9 or not digits.isascii() or not digits.isdigit():
        return False
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in {"000", "666"} and area[0] != "9" and group != "00" and serial != "0000"
