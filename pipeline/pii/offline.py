"""A dependency-free detector: precise regular expressions plus checksum validation.

Each rule finds candidates with a regex whose look-arounds keep it from starting or ending
inside a longer token, then a validator rejects look-alikes (bad Luhn, wrong IBAN checksum,
never-issued SSNs, out-of-range octets). Precision matters as much as recall: a false positive
silently destroys data (an order number redacted as a card), so candidates must pass the checks
their issuers apply.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pipeline.pii.checksums import IBAN_LENGTHS, is_valid_card, is_valid_iban, is_valid_ssn
from pipeline.pii.types import EntityType, PiiEntity, resolve_overlaps

Span = tuple[int, int]
Extractor = Callable[[re.Match[str], str], Span | None]

_CARD_SEPARATORS = re.compile(r"[ -]")


def _digits(value: str) -> str:
    return "".join(char for char in value if "0" <= char <= "9")


# --- email -------------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"""
    (?<![\w.%+-])
    (?P<pii>
        [A-Za-z0-9._%+-]{1,64}
        @
        (?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+
        [A-Za-z]{2,63}
    )
    (?![\w-]|\.[A-Za-z0-9])
    """,
    re.VERBOSE,
)


def _email(match: re.Match[str], text: str) -> Span | None:
    local = match["pii"].split("@", 1)[0]
    if local.startswith(".") or local.endswith(".") or ".." in local:
        return None
    return match.span("pii")


# --- phone -------------------------------------------------------------------------------------

_PHONE_INTERNATIONAL = re.compile(
    r"""
    (?<![\w+])
    (?P<pii>
        \+[1-9][0-9]{0,14}                          # country code, or the whole E.164 number
        (?:[ .-]?\([0-9]{1,4}\)[ .-]?[0-9]{1,14})?  # an optional "(area)" group
        (?:[ .-][0-9]{1,14}){0,6}                   # further groups, each after one separator
    )
    (?![\w+]|[.-][0-9])
    """,
    re.VERBOSE,
)

# North American numbers without a country code. Area code and exchange start with 2-9 (NANP),
# which also rules out most order numbers and counters.
_PHONE_NATIONAL = re.compile(
    r"""
    (?<![\w.+(-])
    (?P<pii>
        (?:1[ .-])?
        (?:
            \([2-9][0-9]{2}\)[ ]?[2-9][0-9]{2}[.-][0-9]{4}
          | [2-9][0-9]{2}(?P<sep>[.-])[2-9][0-9]{2}(?P=sep)[0-9]{4}
        )
    )
    (?![\w@]|[.-][0-9])
    """,
    re.VERBOSE,
)


def _international_phone(match: re.Match[str], text: str) -> Span | None:
    """E.164 allows at most 15 digits; fewer than 8 is a short code or a stray "+N"."""
    start, value = match.start("pii"), match["pii"]
    # Too many digits: the greedy groups ran on into a following number ("... 0958 2024").
    while len(_digits(value)) > 15 and (cut := max(value.rfind(" "), value.rfind("-"), value.rfind("."))) > 0:
        value = value[:cut]
    return (start, start + len(value)) if 8 <= len(_digits(value)) <= 15 else None


def _whole(match: re.Match[str], text: str) -> Span | None:
    return match.span("pii")


# --- SSN ---------------------------------------------------------------------------------------

_SSN = re.compile(r"(?<![\w.-])(?P<pii>[0-9]{3}-[0-9]{2}-[0-9]{4})(?![\w-]|\.[0-9])")

# Nine bare digits are an SSN only right after an SSN label ("SSN: 123456789").
_SSN_LABELLED = re.compile(
    r"\b(?i:ssn|social[ ]security(?:[ ](?:number|no\.?))?)\W{0,3}(?P<pii>[0-9]{9})(?![\w-])"
)


def _ssn(match: re.Match[str], text: str) -> Span | None:
    return match.span("pii") if is_valid_ssn(_digits(match["pii"])) else None


# --- credit / debit card -----------------------------------------------------------------------

_CARD = re.compile(r"(?<![\w+.-])(?P<pii>[0-9](?:[ -]?[0-9]){12,18})(?!\w|-[0-9])")


def _card_grouping_ok(value: str) -> bool:
    """Unseparated, or printed groups: 4-4-4-...(last 1-4), or Amex/Diners 4-6-4/4-6-5."""
    separators = set(_CARD_SEPARATORS.findall(value))
    if not separators:
        return True
    if len(separators) > 1:
        return False
    sizes = [len(group) for group in value.split(separators.pop())]
    if sizes[:2] == [4, 6] and len(sizes) == 3 and sizes[2] in (4, 5):
        return True
    return all(size == 4 for size in sizes[:-1]) and 1 <= sizes[-1] <= 4


def _card(match: re.Match[str], text: str) -> Span | None:
    start, value = match.start("pii"), match["pii"]
    while not (_card_grouping_ok(value) and is_valid_card(_digits(value))):
        # The greedy candidate may have run on into a following number ("... 1111 12 units").
        cut = max(value.rfind(" "), value.rfind("-"))
        if cut <= 0 or len(_digits(value[:cut])) < 13:
            return None
        value = value[:cut]
    return start, start + len(value)


# --- IP addresses ------------------------------------------------------------------------------

_IPV4 = re.compile(r"(?<![\w.])(?P<pii>(?:[0-9]{1,3}\.){3}[0-9]{1,3})(?![\w]|\.[0-9])")

_IPV6 = re.compile(
    r"""
    (?<![\w:.])
    (?P<pii>
        (?=[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:)      # cheap pre-filter: two colons up front
        [0-9A-Fa-f:]{2,39}
        (?:(?<=:)(?:[0-9]{1,3}\.){3}[0-9]{1,3})?    # IPv4-embedded tail (::ffff:192.0.2.1)
    )
    (?![\w:]|\.[0-9])
    """,
    re.VERBOSE,
)


def _ipv4(match: re.Match[str], text: str) -> Span | None:
    try:
        ipaddress.IPv4Address(match["pii"])  # rejects octets > 255 and leading zeros
    except ValueError:
        return None
    return match.span("pii")


def _ipv6(match: re.Match[str], text: str) -> Span | None:
    value = match["pii"]
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return None
    # "::" and "::1" are not anybody's address; two real groups rules them (and "a::") out.
    groups = [group for group in re.split(r"[:.]", value) if group]
    return match.span("pii") if len(groups) >= 2 else None


# --- IBAN --------------------------------------------------------------------------------------

# Zero-width, so that a candidate which runs on into the next token cannot swallow a following
# IBAN; the extractor then trims the candidate to the country's registered length.
_IBAN = re.compile(r"(?<!\w)(?=(?P<pii>[A-Z]{2}[0-9]{2}(?:[ ]?[A-Z0-9]){11,30}))")


def _iban(match: re.Match[str], text: str) -> Span | None:
    start, candidate = match.start("pii"), match["pii"]
    length = IBAN_LENGTHS.get(candidate[:2])
    if length is None:
        return None
    end, seen = start, 0
    for offset, char in enumerate(candidate):
        seen += char != " "
        if seen == length:
            end = start + offset + 1
            break
    else:
        return None
    if end < len(text) and (text[end].isalnum() or text[end] == "_"):
        return None  # the registered length ends inside a longer token
    iban = text[start:end].replace(" ", "")
    printed = " ".join(iban[i : i + 4] for i in range(0, length, 4))
    if text[start:end] not in (iban, printed):
        return None  # irregular spacing: not how IBANs are written
    return (start, end) if is_valid_iban(iban) else None


# --- the detector ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rule:
    type: EntityType
    pattern: re.Pattern[str]
    extract: Extractor


_RULES: tuple[_Rule, ...] = (
    _Rule(EntityType.EMAIL, _EMAIL, _email),
    _Rule(EntityType.PHONE, _PHONE_INTERNATIONAL, _international_phone),
    _Rule(EntityType.PHONE, _PHONE_NATIONAL, _whole),
    _Rule(EntityType.SSN, _SSN, _ssn),
    _Rule(EntityType.SSN, _SSN_LABELLED, _ssn),
    _Rule(EntityType.CREDIT_DEBIT_NUMBER, _CARD, _card),
    _Rule(EntityType.IP_ADDRESS, _IPV4, _ipv4),
    _Rule(EntityType.IP_ADDRESS, _IPV6, _ipv6),
    _Rule(EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER, _IBAN, _iban),
)


@dataclass(frozen=True, slots=True)
class OfflineDetector:
    """Regex-and-checksum PII detection with no network calls; scores are always 1.0."""

    types: frozenset[str] = field(default_factory=lambda: frozenset(EntityType))

    def detect(self, text: str) -> list[PiiEntity]:
        return resolve_overlaps(self._candidates(text))

    def _candidates(self, text: str) -> Iterable[PiiEntity]:
        for rule in _RULES:
            if rule.type not in self.types:
                continue
            for match in rule.pattern.finditer(text):
                span = rule.extract(match, text)
                if span is not None:
                    yield PiiEntity(rule.type, span[0], span[1])
