"""Labels make ambiguous numbers PII: just before the value, in a JSON key, in a CSV column header."""

from __future__ import annotations

import random
import unicodedata

import pytest

from pipeline.pii.context import ContextIndex, Topic, _last_digit_end, fold, mentions, words


def test_identifiers_are_split_into_words() -> None:
    assert words("customer_SSN") == ["customer", "ssn"]
    assert words("phoneNumber") == ["phone", "number"]
    assert words("Social Security No.") == ["social", "security", "no"]
    assert words("Móvil / Téléphone") == ["movil", "telephone"]  # other scripts' words whole, accents folded


@pytest.mark.parametrize(
    ("label", "topic", "expected"),
    [
        ("my ssn is ", Topic.SSN, True),
        ('{"customer_ssn": "', Topic.SSN, True),
        ("Social Security No. ", Topic.SSN, True),
        ("security deposit ", Topic.SSN, False),
        ("Tel. ", Topic.PHONE, True),
        ('"mobilePhone": ', Topic.PHONE, True),
        ("hotel ", Topic.PHONE, False),  # a word containing "tel" is not the word "tel"
        ("IBAN: ", Topic.IBAN, True),
        ("Order ", Topic.SSN, False),
        ("Tél. : ", Topic.PHONE, True),  # accents folded: "Tél." is "tel", "Teléfono" is "telefono"
        ("Teléfono ", Topic.PHONE, True),
        ("Τηλέφωνο ", Topic.PHONE, True),
        ("Festnetz ", Topic.PHONE, True),
        ("call_id", Topic.PHONE, False),  # the id of a call, not a number to call
        ('"contact_id": "', Topic.PHONE, False),
        ("Call reference ", Topic.PHONE, False),
        ("Call reference ", Topic.REFERENCE, True),
        ("Part no. ", Topic.REFERENCE, True),
        ("order_id", Topic.REFERENCE, True),
        ("my ssn is ", Topic.REFERENCE, False),
        ("My Japanese number is ", Topic.PHONE, True),  # "my ... number": one word between at most
        ("my number: ", Topic.PHONE, True),
        ("order number ", Topic.PHONE, False),
        ("Celular: ", Topic.PHONE, True),
        ("Телефон: ", Topic.PHONE, True),
        ("電話 ", Topic.PHONE, True),
        ("bank savings account ", Topic.IBAN, True),
    ],
)
def test_mentions_matches_whole_words_and_phrases(label: str, topic: Topic, expected: bool) -> None:
    assert mentions(label, topic) is expected


def _labelled(text: str, value: str, topic: Topic) -> bool:
    return ContextIndex(text).labelled(text.index(value), topic)


def test_a_label_just_before_the_value_counts() -> None:
    assert _labelled("my ssn is 123456789", "123456789", Topic.SSN)


def test_a_label_before_another_number_or_field_does_not_carry_over() -> None:
    assert not _labelled("SSN 078-05-1120, ref 123456789", "123456789", Topic.SSN)
    assert not _labelled("SSN on file; order 123456789", "123456789", Topic.SSN)
    assert not _labelled("the ssn field is blank but the order id here is 123456789", "123456789", Topic.SSN)


def test_the_csv_column_header_labels_every_row() -> None:
    text = "name,ssn,order\nDana,123456789,555666777\nSam,234567890,111222333\n"
    assert _labelled(text, "234567890", Topic.SSN)
    assert not _labelled(text, "111222333", Topic.SSN)


def test_a_table_after_prose_takes_its_own_header() -> None:
    text = "SSN report, see below\nname;phone\nDana;4155552671\n"
    index = ContextIndex(text)
    assert index.column_header(text.index("4155552671")) == "phone"
    assert not index.labelled(text.index("4155552671"), Topic.SSN)


def test_outside_a_table_there_is_no_column_header() -> None:
    text = "just prose 4155552671 here"
    assert ContextIndex(text).column_header(text.index("4155552671")) == ""


@pytest.mark.parametrize("text", ["ref 4155552671", "Ticket id 4155552671", "hotel 4155552671"])
def test_the_cheap_first_test_never_hides_a_label_and_finds_none_here(text: str) -> None:
    assert not _labelled(text, "4155552671", Topic.PHONE)
    assert _labelled("Tel.: 4155552671", "4155552671", Topic.PHONE)


def _fold_reference(text: str) -> str:
    """NFKD of the whole lower-cased text, combining marks dropped: what fold() must equal."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def test_fold_by_character_table_equals_decomposing_the_whole_text() -> None:
    # Accents precomposed and combining (out of canonical order too), Hangul, ligatures, full width.
    samples = ["Tél. Teléfono", "Mu\u0308ller", "a\u0323\u0301b", "a\u0301\u0323b", "전화 \ufb01le \uff34\uff25\uff2c", "ΤΗΛΈΦΩΝΟ", "İstanbul"]
    rng = random.Random(25)
    pool = [chr(cp) for cp in (*range(0x20, 0x7F), *range(0xC0, 0x250), *range(0x300, 0x370), *range(0xAC00, 0xAC40))]
    samples += ["".join(rng.choice(pool) for _ in range(rng.randrange(1, 24))) for _ in range(2000)]
    for sample in samples:
        assert fold(sample) == _fold_reference(sample), sample


@pytest.mark.parametrize(
    ("label", "expected"), [("call 0800 or ", 9), ("no digits here", 0), ("7", 1), ("a1b2c ", 4), ("٣ Arabic-Indic", 0)]
)
def test_a_label_starts_after_the_last_ascii_digit(label: str, expected: int) -> None:
    assert _last_digit_end(label) == expected
