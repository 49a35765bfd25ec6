"""Phone numbers: how printed numbers are read, and fakes that provably belong to nobody."""

from __future__ import annotations

import string
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.pii import EntityType, build_mapping, synthesize
from pipeline.pii.phones import (
    FICTION_RANGES,
    NANP_COUNTRY_CODE,
    is_fictional,
    is_nanp_fiction,
    is_unassigned,
    read_labelled_phone,
    read_phone,
)
from pipeline.pii.types import DEFAULT_PHONE_REGIONS

SECRET = b"a-job-secret-of-32-bytes-for-tst"
PROPERTY = settings(max_examples=150, deadline=None, database=None)
PHONE = EntityType.PHONE
REGIONS = DEFAULT_PHONE_REGIONS


@pytest.mark.parametrize(
    ("value", "country_code", "national"),
    [
        ("020 7946 0958", 44, "2079460958"),
        ("+44 (0)20 7946 0958", 44, "2079460958"),
        ("0044 20 7946 0958", 44, "2079460958"),
        ("0412 345 678", 61, "412345678"),
        ("030 12345678", 49, "3012345678"),
        ("01 23 45 67 89", 33, "123456789"),
        ("(415) 555-2671", 1, "4155552671"),
        ("1-800-555-0199", 1, "8005550199"),
        ("+81 3-1234-5678", 81, "312345678"),
    ],
)
def test_reads_national_and_international_numbers(value: str, country_code: int, national: str) -> None:
    reading = read_phone(value, REGIONS)
    assert reading is not None
    assert (reading.country_code, reading.national_number) == (country_code, national)


@pytest.mark.parametrize(
    "value",
    [
        "+10 20 30 40",  # +1 then a national number no NANP area can start
        "20 7946 0958",  # a British number without its trunk 0
        "2024-01-15",  # a German number without its trunk 0, and a date
        "0123 4567 84",  # valid in France, but nobody groups a French number like that
        "123-456-7890",  # NANP area codes start with 2-9
        "+1234567890123456",  # more than E.164's 15 digits
    ],
)
def test_rejects_what_is_not_a_phone_number(value: str) -> None:
    assert read_phone(value, REGIONS) is None


def test_lenient_reading_accepts_possible_but_unassigned_numbers() -> None:
    assert read_phone("+64 9 123 4567", REGIONS) is None
    reading = read_phone("+64 9 123 4567", REGIONS, lenient=True)
    assert reading is not None and reading.country_code == 64 and not reading.valid


def test_a_number_printed_as_its_region_prints_it_is_read_as_that_region() -> None:
    # Both an Australian mobile and an Irish (Drogheda) number: the grouping says which.
    australian, irish = read_phone("0412 345 678", REGIONS), read_phone("041 234 5678", REGIONS)
    assert australian is not None and australian.country_code == 61
    assert irish is not None and irish.country_code == 353


# --- fakes -------------------------------------------------------------------------------------

# Templates of real-world formats: N is 2-9, X any digit, M a non-zero digit.
_TEMPLATES = [
    "(NXX) NXX-XXXX", "NXX-NXX-XXXX", "NXX.NXX.XXXX", "NXX NXX XXXX", "+1 NXX NXX XXXX", "1-800-NXX-XXXX",
    "020 7XXX XXXX", "+44 20 7XXX XXXX", "+44 (0)20 8XXX XXXX", "07700 XXXXXX", "+44 7911 XXXXXX", "0161 XXX XXXX",
    "0412 XXX XXX", "+61 4XX XXX XXX", "(02) 9XXX XXXX", "+61 3 9XXX XXXX",
    "09 3XX XXXX", "+64 21 XXX XXXX", "030 MXXXXXXX", "+49 151 XXXXXXXX", "0049 89 MXXXXXX",
    "01 XX XX XX XX", "+33 6 XX XX XX XX", "+353 1 XXX XXXX", "+31 20 XXX XXXX", "+91 98XXX XXXXX",
]  # fmt: skip


@st.composite
def phones(draw: st.DrawFn) -> str:
    template = draw(st.sampled_from(_TEMPLATES))
    alphabet = {"N": "23456789", "X": string.digits, "M": "123456789"}
    return "".join(draw(st.sampled_from(alphabet[c])) if c in alphabet else c for c in template)


def shape(value: str) -> str:
    return "".join("9" if c.isdigit() else c for c in value)


def digits(value: str) -> str:
    return "".join(c for c in value if c.isdigit())


def has_fiction_of_length(country_code: int, length: int) -> bool:
    if country_code == NANP_COUNTRY_CODE:
        return length == 10
    return any(fiction.length == length for fiction in FICTION_RANGES.get(country_code, ()))


@PROPERTY
@given(phones())
def test_fake_phones_are_from_fiction_ranges_or_unassigned_and_keep_country_and_format(original: str) -> None:
    reading = read_phone(original, REGIONS, lenient=True)
    if reading is None:
        return  # a template drew a number of an impossible length: nothing to fake from
    fake = synthesize(PHONE, original, SECRET)
    assert shape(fake) == shape(original)
    national_length = len(reading.national_number)
    prefix = digits(original)[:-national_length]  # country code, "00", trunk "0", NANP "1"
    assert digits(fake)[:-national_length] == prefix
    fake_national = digits(fake)[-national_length:]
    if has_fiction_of_length(reading.country_code, national_length):
        assert is_fictional(reading.country_code, fake_national)
    else:
        assert is_unassigned(reading.country_code, fake_national)


@PROPERTY
@given(st.text("23456789", min_size=1, max_size=1), st.text(string.digits, min_size=9, max_size=9))
def test_north_american_fakes_are_555_01xx(first: str, rest: str) -> None:
    original = f"({first}{rest[:2]}) {rest[2:5]}-{rest[5:]}"
    fake = synthesize(PHONE, original, SECRET)
    assert is_nanp_fiction(digits(fake)) and fake[6:11] == "555-0"


def test_a_job_with_many_british_mobiles_still_gets_distinct_fiction_numbers() -> None:
    originals = [f"07911 {number:06d}" for number in range(0, 3000, 3)]
    mapping = build_mapping({PHONE: originals}, SECRET)
    fakes = set(mapping.values())
    assert len(fakes) == len(originals)
    assert all(is_fictional(44, digits(fake)[1:]) for fake in fakes)


def test_a_value_no_region_can_place_gets_a_fake_no_region_accepts() -> None:
    fake = synthesize(PHONE, "+999 1234 5678", SECRET)
    assert shape(fake) == shape("+999 1234 5678")
    assert read_phone(fake, REGIONS, lenient=True) is None


# --- import cost -------------------------------------------------------------------------------


def test_importing_the_package_loads_neither_libphonenumber_nor_stdnum() -> None:
    """Detect is a Lambda: the libraries are imported by the first detection, not by the import."""
    code = (
        "import sys, pipeline.pii, pipeline.pii.offline, pipeline.pii.synthetic;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('phonenumbers', 'stdnum')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# National formats of countries outside the default regions, as their people write them.
OTHER_COUNTRIES = [
    ("02-623-4567", 972), ("0532 481 22 09", 90), ("044 668 18 00", 41), ("0664 2841737", 43),
    ("0470 12 34 56", 32), ("612 34 98 70", 34), ("347 112 2233", 39), ("912 845 301", 351),
    ("(11) 96123-4090", 55), ("55 1234 5678", 52), ("090-4412-7788", 81), ("13912345678", 86),
    ("98123 45670", 91), ("082 555 1234", 27), ("070-123 45 67", 46), ("412 34 567", 47),
    ("20 12 34 56", 45), ("040 1234567", 358), ("512 345 678", 48), ("601 123 456", 420),
    ("010-2345-6789", 82), ("8 (912) 345-67-89", 7), ("06 30 123 4567", 36), ("697 123 4567", 30),
]  # fmt: skip


@pytest.mark.parametrize(("value", "country_code"), OTHER_COUNTRIES)
def test_a_labelled_number_is_read_for_any_region(value: str, country_code: int) -> None:
    import phonenumbers

    region = phonenumbers.region_code_for_country_code(country_code)
    assert phonenumbers.is_valid_number(phonenumbers.parse(value, region))  # the case is a real format
    assert read_labelled_phone(value, REGIONS) is not None


def test_the_other_countries_are_outside_the_default_regions() -> None:
    import phonenumbers

    defaults = {phonenumbers.country_code_for_region(region) for region in REGIONS}
    assert len({code for _, code in OTHER_COUNTRIES} - defaults) >= 20


@pytest.mark.parametrize("value", ["13912345678", "98123 45670", "412 34 567"])
def test_without_a_label_other_countries_national_formats_are_not_read(value: str) -> None:
    assert read_phone(value, REGIONS) is None


@pytest.mark.parametrize("value", ["123", "12345678901234567890", "+10 20 30 40", "+999 1234 5678"])
def test_a_label_does_not_make_an_invalid_number_a_phone(value: str) -> None:
    assert read_labelled_phone(value, REGIONS) is None
