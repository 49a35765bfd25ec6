"""Writes the blind PII set, tests/unit/pii_blind/*.json, from its brief (tests/unit/pii_blind/BRIEF.md).

    .venv/bin/python -m bench.pii_blind_set           # (re)write the set; seeded, so byte-identical
    .venv/bin/python -m bench.pii_eval --cases tests/unit/pii_blind --section pii-blind-set

A second, independent check of the offline detector: real-looking documents (support tickets,
CSV exports, JSON log lines, e-mails, chats, invoices) holding several types at once, and
negatives that only look like PII. Written from the brief without reading the detector, scored
before the detector was tuned and only re-scored since. Same file format as
tests/unit/pii_cases/ (bench.pii_eval), one file per type: a document is filed under the type of
its first value and lists the values of the other types it holds under `also`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from bench import pii_blind_values as values
from bench.pii_blind_docs import Cycle, Doc
from bench.pii_blind_kinds import POSITIVES
from bench.pii_blind_negatives import NEGATIVES
from bench.pii_eval import BLIND_DIR as SET_DIR

SEED = 20261203
FILES = {
    "EMAIL": "email.json",
    "PHONE": "phone.json",
    "CREDIT_DEBIT_NUMBER": "card.json",
    "SSN": "ssn.json",
    "IP_ADDRESS": "ip.json",
    "INTERNATIONAL_BANK_ACCOUNT_NUMBER": "iban.json",
}


def build(seed: int = SEED) -> dict[str, dict[str, Any]]:
    """The set as {file name: document}: deterministic for a seed."""
    rng = random.Random(seed)
    pools = {
        "region": Cycle(rng, values.PHONE_REGIONS),
        "phone_style": Cycle(rng, values.PHONE_STYLES),
        "iban": Cycle(rng, values.IBAN_COUNTRIES),
        "card": Cycle(rng, tuple(values.CARD_ISSUERS)),
    }
    files: dict[str, dict[str, Any]] = {
        name: {"type": entity_type, "positives": [], "negatives": []} for entity_type, name in FILES.items()
    }
    for kind, (builder, count) in POSITIVES.items():
        for index in range(1, count + 1):
            doc = Doc(rng, pools)
            text = builder(doc)
            _check_spans(text, doc.values, f"{kind}-{index}")
            primary = doc.values[0][0]
            item: dict[str, Any] = {"id": f"{kind}-{index}", "text": text}
            item["values"] = [value for entity_type, value in doc.values if entity_type == primary]
            also: dict[str, list[str]] = {}
            for entity_type, value in doc.values:
                if entity_type != primary:
                    also.setdefault(entity_type, []).append(value)
            if also:
                item["also"] = also
            files[FILES[primary]]["positives"].append(item)
    for kind, (negative, imitated, count) in NEGATIVES.items():
        for index in range(1, count + 1):
            doc = Doc(rng, pools)
            text = negative(doc)
            assert not doc.values, kind
            files[FILES[imitated]]["negatives"].append({"id": f"{kind}-{index}", "text": text})
    return files


def _check_spans(text: str, found: list[tuple[str, str]], case_id: str) -> None:
    """Every recorded value occurs in the text as often as it was recorded."""
    for _, value in found:
        expected = sum(1 for _, other in found if other == value)
        assert text.count(value) >= expected, (case_id, value)


def write(directory: Path = SET_DIR, seed: int = SEED) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, document in build(seed).items():
        (directory / name).write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write()
