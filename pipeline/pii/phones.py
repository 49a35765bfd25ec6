"""Phone numbers through libphonenumber (phonenumberslite): reading printed numbers, fictional fakes.

Imported on first use by the offline detector and the fake generator, never by `import pipeline.pii`,
so the detect Lambda's cold import does not pay for it (libphonenumber loads each region's metadata
lazily as well). libphonenumber decides what is a number of which region; this module adds what a
detector scanning free text needs on top: a national number must be written with its trunk prefix
(a "0" number without its "0" is as often a date or an order number), and the printed grouping must
be one a person would use for that number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import phonenumbers
from phonenumbers import NumberParseException, PhoneMetadata, PhoneNumber, PhoneNumberFormat, PhoneNumberType
from phonenumbers import ValidationResult as _Validation

MIN_INTERNATIONAL_DIGITS = 8  # country code included; E.164 allows at most 15
MAX_INTERNATIONAL_DIGITS = 15
MIN_NATIONAL_DIGITS = 9  # trunk prefix included: New Zealand's "09 373 4567" is the shortest kept
MAX_NATIONAL_DIGITS = 13
NANP_COUNTRY_CODE = 1
_GROUP = re.compile(r"[0-9]+")

Below = Callable[[int], int]  # a uniform draw in [0, bound): the fake generator's randomness


@dataclass(frozen=True, slots=True)
class PhoneReading:
    """How libphonenumber reads one printed number. `valid`: in an assigned range of its region."""

    country_code: int
    national_number: str
    valid: bool

    @property
    def mobile(self) -> bool:
        """A mobile number (only the fake generator asks: the detector need not pay for it)."""
        number = PhoneNumber(country_code=self.country_code, national_number=int(self.national_number))
        return phonenumbers.number_type(number) == PhoneNumberType.MOBILE


def _boundaries(groups: Sequence[str], national_length: int) -> set[int]:
    """Where groups end inside the national number, counted in digits from its end."""
    found: set[int] = set()
    position = 0
    for group in reversed(groups[1:]):
        position += len(group)
        if position < national_length:
            found.add(position)
    return found


EXACT, LOOSE, NOT_A_GROUPING = 2, 1, 0


def _grouping(groups: Sequence[str], number: PhoneNumber, national: str, international: bool) -> int:
    """How well the printed groups fit the number. EXACT: split where its national or international
    format splits it (or not split at all). LOOSE: a few groups of 3+ digits after a trunk-and-area
    group ("0207 946 0958") or after the country and area codes. Merely compatible groupings are
    not enough: French pairs would fit "0123 4567 84"; "20 7946 0958" is no American number."""
    written = _boundaries(groups, len(national))
    if not written:
        return EXACT
    for style in (PhoneNumberFormat.NATIONAL, PhoneNumberFormat.INTERNATIONAL):
        formatted = _GROUP.findall(phonenumbers.format_number(number, style))
        if written == _boundaries(formatted, len(national)):
            return EXACT
    if international:  # country code, area code of any length, then groups of 3+
        loose = len(groups) <= 5 and all(len(group) >= 3 for group in groups[2:])
    elif number.country_code == NANP_COUNTRY_CODE:
        loose = False  # North American numbers are written 3-3-4; "51678-51680" is a port range
    else:  # "0207 946 0958", "09 123 4567": a trunk-and-area group, then groups of 3+
        head = groups[0]
        loose = len(groups) <= 4 and (len(head) >= 3 or head.startswith("0")) and len(head) >= 2
        loose = loose and all(len(group) >= 3 for group in groups[1:])
    return LOOSE if loose else NOT_A_GROUPING


def _reading(
    number: PhoneNumber, groups: Sequence[str], *, lenient: bool, grouping: int, international: bool
) -> PhoneReading | None:
    valid = phonenumbers.is_valid_number(number)
    if not valid and not (
        lenient and phonenumbers.is_possible_number_with_reason(number) == _Validation.IS_POSSIBLE
    ):
        return None
    national = phonenumbers.national_significant_number(number)
    if (
        number.country_code is None
        or not "".join(groups).endswith(national)
        or _grouping(groups, number, national, international) < grouping
    ):
        return None
    return PhoneReading(number.country_code, national, valid)


def _parse(value: str, region: str | None) -> PhoneNumber | None:
    try:
        return phonenumbers.parse(value, region)
    except NumberParseException:
        return None


@lru_cache(maxsize=64)
def _trunk_prefixes(regions: tuple[str, ...]) -> tuple[tuple[str, bool, str | None], ...]:
    """Each region's (name, North American?, national trunk prefix), looked up once per region
    list rather than once per candidate; regions libphonenumber has no metadata for are left out."""
    found: list[tuple[str, bool, str | None]] = []
    for region in regions:
        metadata = PhoneMetadata.metadata_for_region(region)
        if metadata is not None:
            found.append((region, metadata.country_code == NANP_COUNTRY_CODE, metadata.national_prefix))
    return tuple(found)


def _national_regions(digits: str, regions: tuple[str, ...]) -> list[str]:
    """The regions whose national format these digits can be: trunk prefix written where one is used."""
    kept: list[str] = []
    for region, nanp, prefix in _trunk_prefixes(regions):
        if nanp:
            if digits[0] in "01" and not (digits[0] == "1" and len(digits) == 11):
                continue  # NANP area codes start with 2-9; "1" is the optional trunk prefix
        elif prefix and not digits.startswith(prefix):
            continue
        kept.append(region)
    return kept


def plausible(value: str, regions: tuple[str, ...]) -> bool:
    """A cheap filter before libphonenumber: a digit count and a start some reading could accept."""
    digits = "".join(_GROUP.findall(value))
    if value.lstrip().startswith("+"):
        return MIN_INTERNATIONAL_DIGITS <= len(digits) <= MAX_INTERNATIONAL_DIGITS
    if digits.startswith("00") and not digits.startswith("000"):
        return MIN_INTERNATIONAL_DIGITS <= len(digits) - 2 <= MAX_INTERNATIONAL_DIGITS
    return MIN_NATIONAL_DIGITS <= len(digits) <= MAX_NATIONAL_DIGITS and bool(
        _national_regions(digits, regions)
    )


@lru_cache(maxsize=8192)
def read_phone(value: str, regions: tuple[str, ...], *, lenient: bool = False) -> PhoneReading | None:
    """The phone number `value` is, or None (cached: documents repeat their numbers).

    `+` or `00` starts an international number; anything else is read as a national number of the
    first of `regions` where it is valid. Lenient (for labelled values and for making fakes) also
    accepts numbers of a possible length outside the ranges libphonenumber knows as assigned.
    """
    cleaned = value.replace("(0)", " ")  # "+44 (0)20 ...": the trunk prefix printed for locals
    groups = _GROUP.findall(cleaned)
    digits = "".join(groups)
    if not digits:
        return None
    international: str | None = None
    if cleaned.lstrip().startswith("+"):
        international = digits
    elif digits.startswith("00") and not digits.startswith("000"):
        international = digits[2:]
        groups = groups[1:] if groups[0] == "00" else [groups[0][2:], *groups[1:]]
    if international is not None:
        if not MIN_INTERNATIONAL_DIGITS <= len(international) <= MAX_INTERNATIONAL_DIGITS:
            return None
        number = _parse("+" + international, None)
        if number is None:
            return None
        return _reading(number, groups, lenient=lenient, grouping=LOOSE, international=True)
    if not MIN_NATIONAL_DIGITS <= len(digits) <= MAX_NATIONAL_DIGITS:
        return None
    # The same digits can be a number of several regions ("0412 345 678": Australia and Ireland):
    # a valid number printed exactly as its region prints it wins over looser readings.
    passes = [(False, EXACT), (False, LOOSE)] + ([(True, EXACT), (True, LOOSE)] if lenient else [])
    parsed: dict[str, PhoneNumber | None] = {}  # parsed on demand: the first region usually decides
    for loose_validity, grouping in passes:
        for region in _national_regions(digits, regions):
            if region not in parsed:
                parsed[region] = _parse(digits, region)
            number = parsed[region]
            if number is None:
                continue
            reading = _reading(number, groups, lenient=loose_validity, grouping=grouping, international=False)
            if reading is not None:
                return reading
    return None


MAX_TRUNK_DIGITS = 2  # what may precede the national number when read for any region: "0", "06", "8"


@lru_cache(maxsize=1)
def _every_region() -> tuple[str, ...]:
    return tuple(sorted(phonenumbers.SUPPORTED_REGIONS))


def _valid_reading(number: PhoneNumber | None, digits: str, *, trunk_allowed: bool) -> PhoneReading | None:
    if number is None or number.country_code is None or not phonenumbers.is_valid_number(number):
        return None
    national = phonenumbers.national_significant_number(number)
    left = len(digits) - len(national)
    if not digits.endswith(national) or left > (MAX_TRUNK_DIGITS if trunk_allowed else 0):
        return None
    return PhoneReading(number.country_code, national, valid=True)


@lru_cache(maxsize=4096)
def read_labelled_phone(value: str, regions: tuple[str, ...]) -> PhoneReading | None:
    """The phone number a value labelled as one ("Tel.", "mobile:", a `phone` column) is, or None.

    A label is evidence enough to read the value as a number of any region libphonenumber knows,
    printed any way, with or without its trunk prefix: "09-7625400", "0212 345 67 89",
    "13812345678", "425 8829090". It must still be a valid number (in an assigned range) of some
    region; `regions` are tried first, leniently, as for unlabelled text.
    """
    reading = read_phone(value, regions, lenient=True)
    if reading is not None:
        return reading
    cleaned = value.replace("(0)", " ")
    digits = "".join(_GROUP.findall(cleaned))
    if not MIN_INTERNATIONAL_DIGITS <= len(digits) <= MAX_INTERNATIONAL_DIGITS + 2:
        return None
    if cleaned.lstrip().startswith("+") or (digits.startswith("00") and not digits.startswith("000")):
        international = digits if cleaned.lstrip().startswith("+") else digits[2:]
        return _valid_reading(_parse("+" + international, None), international, trunk_allowed=False)
    for region in (*regions, *_every_region()):
        reading = _valid_reading(_parse(digits, region), digits, trunk_allowed=True)
        if reading is not None:
            return reading
    return None


def country_code_of(value: str) -> int | None:
    """The country code of a value written with "+", even when the rest is no valid number."""
    if not value.lstrip().startswith("+"):
        return None
    number = _parse("+" + "".join(_GROUP.findall(value)), None)
    return None if number is None else number.country_code


def nanp_reading(digits: str) -> PhoneReading:
    """Ten digits taken as a North American number (for fakes of values nothing else can place)."""
    return PhoneReading(NANP_COUNTRY_CODE, digits[-10:], valid=False)


# --- fictional numbers -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FictionRange:
    """National numbers `prefix` + `free` digits, reserved by the regulator for fiction."""

    prefix: str
    free: int
    mobile: bool = False

    @property
    def length(self) -> int:
        return len(self.prefix) + self.free

    def holds(self, national: str) -> bool:
        return len(national) == self.length and national.startswith(self.prefix)


# Ofcom's numbers for TV and radio drama (UK) and ACMA's fictitious numbers (Australia), as national
# significant numbers (no trunk "0"). North America's 555-0100..0199 is by pattern: see below.
FICTION_RANGES: dict[int, tuple[FictionRange, ...]] = {
    44: (
        FictionRange("2079460", 3), FictionRange("1614960", 3), FictionRange("1214960", 3),
        FictionRange("1134960", 3), FictionRange("1414960", 3), FictionRange("1314960", 3),
        FictionRange("1174960", 3), FictionRange("1632960", 3), FictionRange("3069990", 3),
        FictionRange("7700900", 3, mobile=True),
    ),
    61: (
        FictionRange("25550", 4), FictionRange("35550", 4), FictionRange("75550", 4), FictionRange("85550", 4),
        FictionRange("27010", 4), FictionRange("37010", 4), FictionRange("77010", 4), FictionRange("87010", 4),
    ),
}  # fmt: skip
NANP_FICTION_EXCHANGE = "55501"  # NXX-555-0100 to NXX-555-0199, reserved for fiction


def is_nanp_fiction(national: str) -> bool:
    return len(national) == 10 and national[3:8] == NANP_FICTION_EXCHANGE and national[0] in "23456789"


def is_fictional(country_code: int, national: str) -> bool:
    """In a range reserved for fiction by the number's regulator."""
    if country_code == NANP_COUNTRY_CODE:
        return is_nanp_fiction(national)
    return any(fiction.holds(national) for fiction in FICTION_RANGES.get(country_code, ()))


def is_unassigned(country_code: int, national: str) -> bool:
    """Outside every range libphonenumber knows as assigned for this country code."""
    number = PhoneNumber(country_code=country_code, national_number=int(national))
    return not phonenumbers.is_valid_number(number)


def _digits(below: Below, count: int) -> str:
    return "".join(str(below(10)) for _ in range(count))


def fictional_national_number(reading: PhoneReading, below: Below) -> str | None:
    """A national number of the same length from the fiction ranges of the reading's country."""
    length = len(reading.national_number)
    if reading.country_code == NANP_COUNTRY_CODE:
        if length != 10:
            return None
        area = str(2 + below(8)) + _digits(below, 2)
        if area[1:] == "11":  # N11 codes (911, 411) are service codes, not area codes
            area = area[0] + "2" + area[2]
        return area + NANP_FICTION_EXCHANGE + _digits(below, 2)
    fitting = [
        fiction for fiction in FICTION_RANGES.get(reading.country_code, ()) if fiction.length == length
    ]
    if not fitting:
        return None
    # Mostly the same kind (mobile for a mobile), now and then any range: the pool stays large.
    mobile = reading.mobile
    same_kind = [fiction for fiction in fitting if fiction.mobile == mobile]
    pool = same_kind if same_kind and below(8) else fitting
    fiction = pool[below(len(pool))]
    return fiction.prefix + _digits(below, fiction.free)


def unassigned_national_number(reading: PhoneReading, below: Below, tries: int = 64) -> str | None:
    """A national number of the same length that libphonenumber knows as unassigned: for countries
    without published fiction ranges, a number nobody can hold as of the metadata."""
    length = len(reading.national_number)
    for _ in range(tries):
        candidate = str(1 + below(9)) + _digits(below, length - 1)
        if is_unassigned(reading.country_code, candidate):
            return candidate
    if length <= 3:
        return None
    # A dense numbering plan (France: about one 9-digit number in a hundred is unassigned) can defeat
    # random draws: walk the 3-digit prefixes from a drawn one, so a free range is always found.
    start = below(900)
    for step in range(900):
        candidate = str(100 + (start + step) % 900) + _digits(below, length - 3)
        if is_unassigned(reading.country_code, candidate):
            return candidate
    return None
