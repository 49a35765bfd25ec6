"""The blind PII set (tests/unit/pii_blind/): its labels are right by their own rules, and its section is current.

The set is scored, never tuned to (docs/PII.md, "The blind set"); these tests guard only what a
label can get objectively wrong (a checksum, a numbering plan, a span that is not in the text);
tests/unit/test_bench_pii_eval.py checks that docs/PII.md reports today's scores of it.
"""

from __future__ import annotations

import ipaddress
import json
import re

import phonenumbers
import pytest
from stdnum import iban, luhn

from bench.pii_blind_set import FILES, build
from bench.pii_eval import BLIND_DIR, load_cases
from pipeline.pii import EntityType

CASES = load_cases(BLIND_DIR)
LABELS = [(case.id, entity_type, value) for case in CASES for entity_type, value in case.expected]


def _valid_ssn(value: str) -> bool:
    digits = re.sub(r"[ -]", "", value)
    area, group, serial = int(digits[:3]), int(digits[3:5]), int(digits[5:])
    return len(digits) == 9 and 0 < area < 900 and area != 666 and group > 0 and serial > 0


def _valid_phone(value: str) -> bool:
    """Valid by libphonenumber for the region it was written for (any region, for a national form)."""
    text = "+" + value[2:] if value.startswith("00") else value
    if text.startswith("+"):
        return phonenumbers.is_valid_number(phonenumbers.parse(text, None))
    regions = phonenumbers.SUPPORTED_REGIONS
    return any(phonenumbers.is_valid_number(phonenumbers.parse(text, region)) for region in regions)


def _valid(entity_type: str, value: str) -> bool:
    if entity_type == "INTERNATIONAL_BANK_ACCOUNT_NUMBER":
        return iban.is_valid(value)
    if entity_type == "CREDIT_DEBIT_NUMBER":
        return luhn.is_valid(re.sub(r"[ -]", "", value)) and 14 <= len(re.sub(r"[ -]", "", value)) <= 16
    if entity_type == "SSN":
        return _valid_ssn(value)
    if entity_type == "IP_ADDRESS":
        return bool(ipaddress.ip_address(value))
    if entity_type == "EMAIL":
        return re.fullmatch(r"[A-Za-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]+", value) is not None
    return _valid_phone(value)


@pytest.mark.parametrize(("case_id", "entity_type", "value"), LABELS, ids=[f"{c}:{v}" for c, _, v in LABELS])
def test_every_label_is_valid_by_its_own_rules(case_id: str, entity_type: str, value: str) -> None:
    assert _valid(entity_type, value), (case_id, entity_type, value)


def test_every_value_is_in_its_document_as_often_as_listed() -> None:
    for case in CASES:
        for _, value in case.expected:
            listed = sum(1 for _, other in case.expected if other == value)
            assert case.text.count(value) >= listed, (case.id, value)


def test_the_set_covers_every_type_and_at_least_20_phone_countries() -> None:
    assert {entity_type for _, entity_type, _ in LABELS} == set(map(str, EntityType)) == set(FILES)
    international = [v for _, t, v in LABELS if t == "PHONE" and v.startswith("+")]
    countries = {phonenumbers.parse(value, None).country_code for value in international}
    assert len(countries) >= 20


def test_the_set_is_what_its_script_writes() -> None:
    """Same seed, same documents: nobody edited a case by hand (`python -m bench.pii_blind_set`)."""
    for name, document in build().items():
        assert json.loads((BLIND_DIR / name).read_text(encoding="utf-8")) == document, name
