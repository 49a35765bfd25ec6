"""Context words around a candidate: what makes an ambiguous number (nine or ten bare digits) PII.

Bare digit runs are order numbers and counters far more often than SSNs or phones, so the detector
reports them only when the text labels them: a label just before the value on the same line
("my ssn is", "Tel.", `"phone": `, `customer_ssn=`), or the header of the CSV column the value
sits in. Labels are matched as words, after splitting identifiers (`customer_ssn`, `phoneNumber`).
Pure: text in, answers out; one :class:`ContextIndex` per document caches its line structure.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from enum import StrEnum
from functools import lru_cache

# How far before a value its label may start: "Social Security No. " and `"customer_ssn": "` fit.
WINDOW = 40
_DELIMITERS = (",", ";", "\t", "|")
_NOT_A_HEADER = re.compile(r"[{}\[\]:=]")
_FIELD_MARKS = (",", ";", "|", "\t")
LABEL_WORDS = 4  # "Social Security No." / "my ssn is": the label sits within the last few words
_LETTERS = re.compile(r"[^\W\d_]+")  # a run of letters of any script
_ASCII_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")  # camelCase and SHOUTING split


class Topic(StrEnum):
    """What a label says the value next to it is."""

    PHONE = "PHONE"
    SSN = "SSN"
    IBAN = "IBAN"
    CARD = "CARD"
    # An identifier label: "order", "ticket", "part no.", `call_id`: the number after it is that
    # identifier, not a phone, SSN or card that happens to have the same digits (an own-type label wins).
    REFERENCE = "REFERENCE"


# Single words, or two-word phrases written "first second" (matched with at most one word between
# them: "my mobile number", "bank savings account"). One source of truth for all labels.
CONTEXT_WORDS: dict[Topic, frozenset[str]] = {
    Topic.PHONE: frozenset(
        {"phone", "phones", "tel", "telephone", "telefon", "telefono", "téléphone", "mobile", "mob", "cell",
         "cellphone", "fax", "call", "ring", "dial", "text", "whatsapp", "contact", "msisdn", "landline",
         "portable", "handy", "ph", "my number", "cel", "celular", "telefone", "movil", "móvil",
         "cellulare", "mobiel", "mobil", "gsm", "tlf", "tfn", "telf", "telefonnummer", "telefoonnummer",
         "handynummer", "mobilnummer", "rufnummer", "puhelin", "telefonszám", "mobilszám", "телефон", "тел", "電話", "電話番号", "携帯",
         "电话", "手机", "전화", "휴대폰", "טלפון", "נייד", "هاتف", "جوال", "telefoon", "festnetz", "mobiltelefon",
         "telemóvel", "telemovel", "puh", "matkapuhelin", "mobilnr", "komórka", "τηλ", "τηλέφωνο", "κινητό",
         "fixe", "mobilní", "telefonní"}
    ),
    Topic.SSN: frozenset({"ssn", "ssns", "social security", "socialsecurity", "socsec"}),
    Topic.IBAN: frozenset({"iban", "ibans", "bank account", "account number"}),
    Topic.CARD: frozenset({"card", "cards", "credit", "debit", "cc", "pan", "uatp", "visa", "mastercard",
                           "maestro", "amex", "cardnumber"}),
    Topic.REFERENCE: frozenset({"order", "invoice", "ticket", "case", "ref", "reference", "part", "model", "serial",
                                "tracking", "waybill", "sku", "ean", "gtin", "isbn", "imei", "batch", "lot",
                                "receipt", "txn", "transaction", "confirmation", "booking", "reservation"}),
}  # fmt: skip
# The last word of a label that names something about the thing, not the thing: `call_id`,
# "contact ref", `phone_count` label an identifier or a quantity, not a phone number.
_NOT_THE_VALUE = frozenset({"id", "ids", "uuid", "guid", "ref", "reference", "key", "sid", "count", "duration", "hash"})


def fold(text: str) -> str:
    """Lower case without accents: "Tél." and "tel", "Teléfono" and "telefono" are the same label."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered
    decomposed = unicodedata.normalize("NFKD", lowered)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def _stems(vocabulary: frozenset[str]) -> tuple[str, ...]:
    """Substrings one of which every label of the vocabulary holds (a phrase: its last word),
    none holding another ("tel" stands for "telephone" too): a necessary condition for a label,
    tested with `in` far faster than splitting the words."""
    lasts = {fold(entry.split()[-1]) for entry in vocabulary}
    return tuple(sorted(stem for stem in lasts if not any(other != stem and other in stem for other in lasts)))


_STEMS: dict[Topic, tuple[str, ...]] = {topic: _stems(words) for topic, words in CONTEXT_WORDS.items()}
# One alternation per topic: a single C-level scan, faster than testing the stems one by one.
_STEM_SEARCH = {topic: re.compile("|".join(map(re.escape, stems))).search for topic, stems in _STEMS.items()}
_FOLDED: dict[Topic, frozenset[str]] = {
    topic: frozenset(fold(entry) for entry in vocabulary) for topic, vocabulary in CONTEXT_WORDS.items()
}


def may_mention(text: str, topic: Topic) -> bool:
    """A cheap necessary condition for `text` to hold one of the topic's labels (substrings only)."""
    return _STEM_SEARCH[topic](fold(text)) is not None


def words(label: str) -> list[str]:
    """Lower-case words of a label, identifiers split: `customer_SSN` -> customer, ssn."""
    found: list[str] = []
    for token in _LETTERS.findall(label):
        # ASCII identifiers split at case changes ("phoneNumber"); other scripts' words whole ("Móvil")
        found.extend(_ASCII_WORD.findall(token) if token.isascii() else (token,))
    return [fold(word) for word in found]


@lru_cache(maxsize=4096)
def mentions(label: str, topic: Topic) -> bool:
    """Whether `label` holds one of the topic's context words (or two-word phrases)."""
    found = words(label)
    if not found or (found[-1] in _NOT_THE_VALUE and topic is not Topic.REFERENCE):
        return False
    vocabulary = _FOLDED[topic]
    pairs = itertools.chain(
        (f"{first} {second}" for first, second in itertools.pairwise(found)),
        (f"{first} {second}" for first, second in zip(found, found[2:], strict=False)),
    )
    return any(word in vocabulary for word in found) or any(pair in vocabulary for pair in pairs)


class ContextIndex:
    """Line structure of one document, computed on first use and cached for later candidates."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._line_starts: list[int] | None = None
        self._header: dict[int, int] = {}
        self._tables: dict[int, tuple[str, list[str]] | None] = {}

    def _starts(self) -> list[int]:
        if self._line_starts is None:
            self._line_starts = [0, *(match.end() for match in re.finditer("\n", self._text))]
        return self._line_starts

    def _line(self, number: int) -> str:
        starts = self._starts()
        end = starts[number + 1] - 1 if number + 1 < len(starts) else len(self._text)
        return self._text[starts[number] : end]

    def _delimiter(self, line: str) -> str | None:
        counts = [(line.count(delimiter), delimiter) for delimiter in _DELIMITERS]
        count, delimiter = max(counts)
        return delimiter if count else None

    def _header_line(self, number: int, delimiter: str, fields: int) -> int:
        """The first line of the run of lines with the same delimiter and field count: the header."""
        walked: list[int] = []
        current = number
        while current not in self._header:
            if current == 0:
                self._header[0] = 0
                break
            previous = self._line(current - 1)
            if previous.count(delimiter) + 1 != fields:
                self._header[current] = current
                break
            walked.append(current)
            current -= 1
        header = self._header[current]
        for line in walked:
            self._header[line] = header
        return header

    def _columns(self, number: int) -> tuple[str, list[str]] | None:
        """The delimiter of line `number` and its table's header fields; None outside a table."""
        if number not in self._tables:
            self._tables[number] = self._find_columns(number)
        return self._tables[number]

    def _find_columns(self, number: int) -> tuple[str, list[str]] | None:
        line = self._line(number)
        delimiter = self._delimiter(line)
        if delimiter is None:
            return None
        header_number = self._header_line(number, delimiter, line.count(delimiter) + 1)
        if header_number == number:
            return None  # the value is in the header itself, or the line stands alone
        header = self._line(header_number)
        if _NOT_A_HEADER.search(header):
            return None  # lines of JSON or code that happen to hold commas are no table
        return delimiter, header.split(delimiter)

    def column_header(self, start: int) -> str:
        """The header of the CSV column holding offset `start`, or '' outside a table."""
        starts = self._starts()
        number = bisect.bisect_right(starts, start) - 1
        columns = self._columns(number)  # cached per line: a line holds several candidates
        if columns is None:
            return ""
        delimiter, header = columns
        column = self._text.count(delimiter, starts[number], start)
        return header[column] if column < len(header) else ""

    def labelled(self, start: int, topic: Topic) -> bool:
        """Whether the value at `start` is labelled as `topic`: just before it, or by its column."""
        line_start = self._text.rfind("\n", 0, start) + 1
        before = self._text[max(line_start, start - WINDOW) : start]
        if not may_mention(before, topic):  # most candidates: no label near
            return mentions(self.column_header(start), topic)
        # A label belongs to the value right after it: not across another number, a field or
        # clause separator, or more than a few words ("SSN on file; order 123456789").
        before = before[_last_digit_end(before) :]
        before = before[max(before.rfind(mark) for mark in _FIELD_MARKS) + 1 :]
        before = " ".join(before.split()[-LABEL_WORDS:])
        return mentions(before, topic) or mentions(self.column_header(start), topic)


def _last_digit_end(text: str) -> int:
    for index in range(len(text) - 1, -1, -1):
        if "0" <= text[index] <= "9":
            return index + 1
    return 0
