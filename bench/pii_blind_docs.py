"""Documents of the blind PII set (bench.pii_blind_set): tickets, CSV, JSON logs, e-mails, chats, invoices.

Each builder writes one document the way such documents look, and records every value a person
redacting it would remove (`Doc.put`), with its exact text and type. Numbers that only look like
PII (order ids, dates, versions, amounts) are written with `Doc` helpers that record nothing.
Written from tests/unit/pii_blind/BRIEF.md, not from the detector.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence

from bench import pii_blind_values as values

EMAIL, PHONE, CARD, SSN, IP, IBAN = (
    "EMAIL",
    "PHONE",
    "CREDIT_DEBIT_NUMBER",
    "SSN",
    "IP_ADDRESS",
    "INTERNATIONAL_BANK_ACCOUNT_NUMBER",
)

PHONE_LABELS: dict[str, tuple[str, ...]] = {
    "en": ("Phone", "Tel", "Tel.", "Mobile", "Cell", "Mob.", "Direct line", "T", "M", "Office"),
    "de": ("Tel.", "Telefon", "Handy", "Mobil", "Festnetz", "Rufnummer", "Mobilnummer"),
    "fr": ("Tél.", "Téléphone", "Portable", "Mobile", "Tél", "Fixe"),
    "es": ("Tel.", "Teléfono", "Móvil", "Celular", "Tlf."),
    "pt": ("Tel.", "Telefone", "Telemóvel", "Celular"),
    "it": ("Tel.", "Telefono", "Cellulare", "Cell."),
    "nl": ("Tel.", "Telefoon", "Mobiel", "Telefoonnummer"),
    "sv": ("Tel.", "Telefon", "Mobil", "Mobilnr"),
    "no": ("Tlf.", "Telefon", "Mobil"),
    "da": ("Tlf.", "Telefon", "Mobil"),
    "fi": ("Puh.", "Puhelin", "Matkapuhelin", "GSM"),
    "pl": ("Tel.", "Telefon", "Tel. kom.", "Komórka"),
    "cs": ("Tel.", "Telefon", "Mobil"),
    "el": ("Τηλ.", "Τηλέφωνο", "Κινητό"),
    "ja": ("電話", "TEL", "携帯"),
}
IBAN_LABELS = ("IBAN", "IBAN:", "Konto (IBAN)", "RIB / IBAN", "Bankverbindung IBAN", "Cuenta IBAN", "IBAN no.")


class Cycle:
    """Hands out items in shuffled rounds, so every item is used about equally often."""

    def __init__(self, rng: random.Random, items: Sequence[str]) -> None:
        self._rng, self._items, self._queue = rng, list(items), list[str]()

    def __next__(self) -> str:
        if not self._queue:
            self._queue = self._items[:]
            self._rng.shuffle(self._queue)
        return self._queue.pop()

    def __iter__(self) -> Iterator[str]:
        return self


class Doc:
    """One document under construction: the values to redact, in order of appearance."""

    def __init__(self, rng: random.Random, pools: dict[str, Cycle]) -> None:
        self.rng, self.pools = rng, pools
        self.values: list[tuple[str, str]] = []

    def put(self, entity_type: str, text: str) -> str:
        self.values.append((entity_type, text))
        return text

    # values to redact
    def email(self, first: str | None = None, last: str | None = None) -> str:
        return self.put(EMAIL, values.email(self.rng, first, last))

    def region(self) -> str:
        return next(self.pools["region"])

    def phone(self, region: str, style: str | None = None, mobile: bool | None = None) -> str:
        number = values.phone(self.rng, region, mobile)
        return self.put(PHONE, values.phone_text(self.rng, number, style or next(self.pools["phone_style"])))

    def label(self, region: str) -> str:
        return self.rng.choice(PHONE_LABELS[values.REGION_LANGUAGE[region]])

    def iban(self, country: str | None = None, grouped: bool | None = None) -> str:
        value = values.iban(self.rng, country or next(self.pools["iban"]))
        grouped = self.rng.random() < 0.6 if grouped is None else grouped
        return self.put(IBAN, values.printed(value) if grouped else value)

    def card(self, style: str | None = None) -> str:
        issuer = next(self.pools["card"])
        style = style or self.rng.choice(("spaces", "spaces", "dashes", "none"))
        return self.put(CARD, values.card_text(self.rng, issuer, style))

    def ssn(self, style: str = "dashes") -> str:
        return self.put(SSN, values.ssn(self.rng, style))

    def ip(self, version: int | None = None, private: bool = False) -> str:
        if (version or self.rng.choice((4, 4, 6))) == 6:
            return self.put(IP, values.ipv6(self.rng, full=self.rng.random() < 0.25))
        return self.put(IP, values.ipv4(self.rng, private))

    # look-alikes, recorded as nothing
    def order(self) -> str:
        return self.rng.choice(
            (
                f"ORD-{self.rng.randint(2024, 2026)}-{self.rng.randint(100000, 999999)}",
                f"#{self.rng.randint(1000000, 9999999)}",
                f"{self.rng.randint(100, 999)}-{self.rng.randint(1000000, 9999999)}-{self.rng.randint(1000000, 9999999)}",
                f"A{self.rng.randint(10000000, 99999999)}",
            )
        )

    def invoice_no(self) -> str:
        return self.rng.choice(
            (
                f"INV-{self.rng.randint(2025, 2026)}-{self.rng.randint(1, 99999):05d}",
                f"RE {self.rng.randint(2025, 2026)} {self.rng.randint(100, 999)} {self.rng.randint(1000, 9999)}",
                f"F{self.rng.randint(2025, 2026)}{self.rng.randint(1, 999999):06d}",
            )
        )

    def date(self) -> str:
        y, m, d = self.rng.randint(2024, 2026), self.rng.randint(1, 12), self.rng.randint(1, 28)
        return self.rng.choice((f"{y}-{m:02d}-{d:02d}", f"{d:02d}.{m:02d}.{y}", f"{d:02d}/{m:02d}/{y}"))

    def timestamp(self) -> str:
        y, m, d = self.rng.randint(2025, 2026), self.rng.randint(1, 12), self.rng.randint(1, 28)
        h, mi, s = self.rng.randint(0, 23), self.rng.randint(0, 59), self.rng.randint(0, 59)
        return f"{y}-{m:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{self.rng.randint(0, 999):03d}Z"

    def amount(self, plain: bool = False) -> str:
        whole, cents = self.rng.randint(5, 98000), self.rng.randint(0, 99)
        if plain:
            return f"{whole}.{cents:02d}"
        return self.rng.choice((f"{whole:,}.{cents:02d}", f"{whole:,}.{cents:02d}".replace(",", " ").replace(".", ",")))

    def version(self) -> str:
        return f"{self.rng.randint(1, 9)}.{self.rng.randint(0, 30)}.{self.rng.randint(0, 99)}"

    def request_id(self) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(8)) + "-" + "".join(
            self.rng.choice("0123456789abcdef") for _ in range(4)
        )


Builder = Callable[[Doc], str]


def _csv(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return f'"{text}"' if "," in text else text

    return "\n".join([",".join(header)] + [",".join(cell(c) for c in row) for row in rows])


def _json_lines(records: Sequence[Mapping[str, object]]) -> str:
    return "\n".join(json.dumps(record, ensure_ascii=False) for record in records)
