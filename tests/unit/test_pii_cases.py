"""Table-driven, per type: every case of the project's PII test set (tests/unit/pii_cases/*.json).

Positives (running text, CSV and JSON) must yield exactly their listed values of their type and
nothing else; negatives (near misses) must yield nothing at all. The formats the detector promises are
spelled out below as well, so that a case file edit cannot silently drop one of them.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pipeline.pii import EntityType, OfflineDetector

CASES_DIR = Path(__file__).parent / "pii_cases"
DETECTOR = OfflineDetector()


def _load(kind: str) -> list[pytest.ParameterSet]:
    params = []
    for path in sorted(CASES_DIR.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        for case in document[kind]:
            values = tuple(case.get("values", ()))
            params.append(
                pytest.param(document["type"], case["text"], values, id=f"{path.stem}:{case['id']}")
            )
    return params


def found(text: str) -> Counter[tuple[str, str]]:
    return Counter((str(entity.type), text[entity.start : entity.end]) for entity in DETECTOR.detect(text))


@pytest.mark.parametrize(("entity_type", "text", "values"), _load("positives"))
def test_positive_case_yields_exactly_its_values(
    entity_type: str, text: str, values: tuple[str, ...]
) -> None:
    assert found(text) == Counter((entity_type, value) for value in values)


@pytest.mark.parametrize(("entity_type", "text", "values"), _load("negatives"))
def test_negative_case_yields_nothing(entity_type: str, text: str, values: tuple[str, ...]) -> None:
    assert found(text) == Counter()


def test_every_type_has_a_case_file_with_positives_and_negatives() -> None:
    documents = [json.loads(path.read_text(encoding="utf-8")) for path in CASES_DIR.glob("*.json")]
    assert {document["type"] for document in documents} == set(EntityType)
    assert all(document["positives"] and document["negatives"] for document in documents)


ISSUE_FORMATS = [
    (EntityType.PHONE, "020 7946 0958"),
    (EntityType.PHONE, "0412 345 678"),
    (EntityType.PHONE, "(09) 123 4567"),
    (EntityType.PHONE, "030 12345678"),
    (EntityType.PHONE, "01 23 45 67 89"),
    (EntityType.PHONE, "415 555 2671"),
    (EntityType.PHONE, "0044 20 7946 0958"),
    (EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER, "GB82-WEST-1234-5698-7654-32"),
    (EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER, "gb82 west 1234 5698 7654 32"),
    (EntityType.SSN, "078 05 1123"),
    (EntityType.SSN, "078.05.1123"),
    (EntityType.CREDIT_DEBIT_NUMBER, "1354 12345 612340"),  # UATP
    (EntityType.CREDIT_DEBIT_NUMBER, "5019717010103742"),  # Dankort
    (EntityType.CREDIT_DEBIT_NUMBER, "6304000000000000"),  # Maestro 6304
    (EntityType.CREDIT_DEBIT_NUMBER, "5018000000000009"),  # Maestro 5018
    (EntityType.CREDIT_DEBIT_NUMBER, "6362970000457013"),  # Elo
    (EntityType.CREDIT_DEBIT_NUMBER, "6062826786276634"),  # Hipercard
    (EntityType.CREDIT_DEBIT_NUMBER, "5061000000000000007"),  # Verve
    (EntityType.CREDIT_DEBIT_NUMBER, "9792030000000000"),  # Troy
    (EntityType.EMAIL, "o'neil.dana@example.com"),
    (EntityType.EMAIL, "user@xn--mnchen-3ya.de"),
    (EntityType.EMAIL, "josé.garcía@example.es"),
]
CONTAINERS = [
    pytest.param("Details: {v}, see above.", id="running-text"),
    pytest.param("id,name,value\n7,Dana Lee,{v}\n", id="csv"),
    pytest.param('{{"id": 7, "name": "Dana Lee", "value": "{v}"}}', id="json"),
]


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize(("entity_type", "value"), ISSUE_FORMATS, ids=lambda item: str(item))
def test_the_formats_the_issue_names_are_found_unlabelled_in_text_csv_and_json(
    entity_type: EntityType, value: str, container: str
) -> None:
    text = container.format(v=value)
    assert found(text) == Counter({(str(entity_type), value): 1})


LABELLED = [
    (EntityType.SSN, "my ssn is 123456789", "123456789"),
    (EntityType.SSN, "SSN no. 123456789", "123456789"),
    (EntityType.SSN, '{"ssn": "123456789"}', "123456789"),
    (EntityType.SSN, "customer_ssn=123456789", "123456789"),
    (EntityType.SSN, "name,ssn\nDana,123456789\n", "123456789"),
    (EntityType.PHONE, "phone: 4155552671", "4155552671"),
    (EntityType.PHONE, '{"tel": "4155552671"}', "4155552671"),
    (EntityType.PHONE, "name,mobile\nDana,4155552671\n", "4155552671"),
    (EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER, "iban: gb82west12345698765432", "gb82west12345698765432"),
    (EntityType.CREDIT_DEBIT_NUMBER, "UATP card 135412345612340", "135412345612340"),
]


@pytest.mark.parametrize(("entity_type", "text", "value"), LABELLED, ids=lambda item: str(item))
def test_ambiguous_formats_count_where_labelled(entity_type: EntityType, text: str, value: str) -> None:
    assert found(text) == Counter({(str(entity_type), value): 1})


@pytest.mark.parametrize(
    "text",
    [
        "id 4155552671", "ref 123456789", "pay gb82west12345698765432", "ref 135412345612340",
        "name,order\nDana,123456789\n", '{"order_id": "4155552671"}', "SSN on file; order 123456789",
    ],
)  # fmt: skip
def test_without_a_label_ambiguous_formats_are_not_reported(text: str) -> None:
    assert found(text) == Counter()


@pytest.mark.parametrize("text", ["app version 4.2.1.0", "+10 20 30 40"])
def test_the_false_positives_the_issue_names_are_gone(text: str) -> None:
    assert found(text) == Counter()
