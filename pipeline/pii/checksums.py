"""Validators for the structured identifiers: shared by the detector and the fake generator.

The detector uses them to reject look-alikes; the generator uses them to make fakes that pass
the same checks, so redacted output still parses as well-formed data downstream.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass


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
    CardBrand("diners", 38, 39, _lengths(14, 19)),  # 14 digits printed 4-6-4, like the 36 range
    CardBrand("jcb", 3528, 3589, _lengths(16, 19)),
    CardBrand("unionpay", 62, 62, _lengths(16, 19)),
    CardBrand("mir", 2200, 2204, _lengths(16, 19)),
    CardBrand("maestro", 6759, 6759, _lengths(13, 19)),
    CardBrand("maestro", 6761, 6763, _lengths(13, 19)),
    CardBrand("maestro", 5018, 5018, _lengths(13, 19)),
    CardBrand("maestro", 5020, 5020, _lengths(13, 19)),
    CardBrand("maestro", 5038, 5038, _lengths(13, 19)),
    CardBrand("maestro", 5893, 5893, _lengths(13, 19)),
    CardBrand("maestro", 6304, 6304, _lengths(13, 19)),
    CardBrand("dankort", 5019, 5019, frozenset({16})),
    CardBrand("uatp", 1, 1, frozenset({15})),
    CardBrand("elo", 504175, 504175, frozenset({16})),
    CardBrand("elo", 506699, 506778, frozenset({16})),
    CardBrand("elo", 509000, 509999, frozenset({16})),
    CardBrand("elo", 627780, 627780, frozenset({16})),
    CardBrand("elo", 636297, 636297, frozenset({16})),
    CardBrand("elo", 636368, 636368, frozenset({16})),
    CardBrand("elo", 650031, 650051, frozenset({16})),
    CardBrand("elo", 650405, 650439, frozenset({16})),
    CardBrand("elo", 650485, 650538, frozenset({16})),
    CardBrand("elo", 650541, 650598, frozenset({16})),
    CardBrand("elo", 650700, 650727, frozenset({16})),
    CardBrand("elo", 650901, 650978, frozenset({16})),
    CardBrand("elo", 651652, 651679, frozenset({16})),
    CardBrand("elo", 655000, 655058, frozenset({16})),
    CardBrand("hipercard", 606282, 606282, frozenset({16, 19})),
    CardBrand("hipercard", 384100, 384100, frozenset({16, 19})),
    CardBrand("hipercard", 384140, 384140, frozenset({16, 19})),
    CardBrand("hipercard", 384160, 384160, frozenset({16, 19})),
    CardBrand("verve", 506099, 506198, frozenset({16, 18, 19})),
    CardBrand("verve", 650002, 650027, frozenset({16, 18, 19})),
    CardBrand("troy", 9792, 9792, frozenset({16})),
)


def card_brand(digits: str) -> CardBrand | None:
    """The brand whose IIN range and lengths fit these digits, if any."""
    if not digits.isascii() or not digits.isdigit():
        return None
    return next((brand for brand in CARD_BRANDS if brand.matches(digits)), None)


def is_valid_card(digits: str) -> bool:
    """13-19 digits with a known IIN prefix and a valid Luhn check digit."""
    return 13 <= len(digits) <= 19 and card_brand(digits) is not None and luhn_valid(digits)


class _IbanLengths(Mapping[str, int]):
    """IBAN length per country, from python-stdnum's copy of the SWIFT IBAN registry.

    Read on first use, so that importing this module (the detect Lambda's cold start) does not
    load the registry: the detector only needs it once a candidate looks like an IBAN.
    """

    _table: dict[str, int] | None = None

    def _lengths(self) -> dict[str, int]:
        if self._table is None:
            from stdnum import numdb  # deferred: see the class docstring

            table: dict[str, int] = {}
            for _, low, _high, props, _children in numdb.get("iban").prefixes:
                sizes = re.findall(r"(\d+)!?[nac]", props.get("bban", ""))
                if sizes and len(low) == 2:
                    table[low] = 4 + sum(int(size) for size in sizes)
            type(self)._table = table
            return table
        return self._table

    def __getitem__(self, country: str) -> int:
        return self._lengths()[country]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lengths())

    def __len__(self) -> int:
        return len(self._lengths())


# Every country of the registry (python-stdnum keeps it up to date), not a hand-kept table.
IBAN_LENGTHS: Mapping[str, int] = _IbanLengths()


def _iban_remainder(country: str, check: str, bban: str) -> int:
    rearranged = bban + country + check
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97


def iban_check_digits(country: str, bban: str) -> str:
    """The two check digits (02-98) that make `country + digits + bban` pass mod-97."""
    return f"{98 - _iban_remainder(country, '00', bban):02d}"


def is_valid_iban(compact: str) -> bool:
    """Uppercase, no spaces, a registered country with its length and BBAN structure, mod-97 == 1."""
    if not compact.isascii() or not compact.isalnum() or compact != compact.upper():
        return False
    country, check, bban = compact[:2], compact[2:4], compact[4:]
    if IBAN_LENGTHS.get(country) != len(compact) or not country.isalpha() or not check.isdigit():
        return False
    # Check digits 00, 01 and 99 are never issued even when they happen to satisfy mod-97.
    if not 2 <= int(check) <= 98 or _iban_remainder(country, check, bban) != 1:
        return False
    from stdnum import iban  # deferred like the registry

    # The registry's BBAN structure (digits where digits belong); national check digits are not
    # required (check_country=False): a fake keeps the structure but not a bank's internal check.
    try:
        iban.validate(compact, check_country=False)
    except ValueError:  # stdnum's ValidationError subclasses ValueError
        return False
    return True


def is_valid_ssn(digits: str) -> bool:
    """Nine digits obeying SSA issuance: area not 000/666/9xx, group not 00, serial not 0000."""
    if len(digits) != 9 or not digits.isascii() or not digits.isdigit():
        return False
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in {"000", "666"} and area[0] != "9" and group != "00" and serial != "0000"
