"""An offline detector: precise regular expressions, then the checks the issuers apply.

Each rule finds candidates with a regex whose look-arounds keep it from starting or ending
inside a longer token, then a validator rejects look-alikes (bad Luhn, wrong IBAN checksum or
structure, never-issued SSNs, out-of-range octets, phone numbers libphonenumber does not know).
Precision matters as much as recall: a false positive silently destroys data (an order number
redacted as a card), so formats that are ambiguous alone (nine or ten bare digits, a lower-case
IBAN run together) count only when a label says what they are (see `pipeline.pii.context`).
Phone numbers are read with libphonenumber, imported on the first detection (not on import).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property

from pipeline.pii.checksums import IBAN_LENGTHS, card_brand, is_valid_card, is_valid_iban, is_valid_ssn
from pipeline.pii.context import WINDOW, ContextIndex, Topic, may_mention, mentions
from pipeline.pii.types import DEFAULT_PHONE_REGIONS, EntityType, PiiEntity, resolve_overlaps

Span = tuple[int, int]


class _Scan:
    """One detection pass over one text: the text, the regions, and its context index (built lazily)."""

    def __init__(self, text: str, phone_regions: tuple[str, ...]) -> None:
        self.text = text
        self.phone_regions = phone_regions

    @cached_property
    def context(self) -> ContextIndex:
        return ContextIndex(self.text)

    def labelled(self, start: int, topic: Topic) -> bool:
        return self.context.labelled(start, topic)

    def an_identifier(self, start: int, own: Topic) -> bool:
        """Whether a label calls the value at `start` an order, ticket, part ... number (and not `own`)."""
        if not may_mention(self.text[max(0, start - WINDOW) : start], Topic.REFERENCE) and not mentions(
            self.context.column_header(start), Topic.REFERENCE
        ):
            return False  # no identifier word just before nor in its column's header: most values
        return self.labelled(start, Topic.REFERENCE) and not self.labelled(start, own)

    def sibling_of_non_pii(
        self, match: re.Match[str], not_pii: Callable[[int], bool], label: re.Pattern[str], hint: Callable[[str], bool]
    ) -> bool:
        """Whether the value is one of a pair joined by "to", "and", "replaces" ... whose other value
        is labelled as no PII: "from 2.5.6.18 to version 2.5.7.0", "part no. 075-78-1549 replaces
        453-44-1827" name two of a kind. `label` is that label, cut from between the two; `hint`
        a cheap necessary condition for it (a word of the label)."""
        start, end = match.span("pii")
        low, high = max(0, start - _PAIR_REACH), min(len(self.text), end + _PAIR_REACH)
        if not hint(self.text[low:high]):
            return False  # no such label near: the common case, decided by one search
        for other in match.re.finditer(self.text, low, high):
            other_start, other_end = other.span("pii")
            if other_start == start:
                continue
            between = self.text[end:other_start] if other_start > start else self.text[other_end:start]
            if other_start > start:
                between = label.sub("", between)
            if _PAIR_JOIN.fullmatch(between) and not_pii(other_start):
                return True
        return False

    def fragment(self, start: int, end: int, *, of_cards: bool = True) -> bool:
        """Whether [start, end) is part of a longer account-number-like run (or a card-like one).

        Such a run is one token to a reader: a phone, card or SSN found among its digit groups
        is a fragment of it, never a number of its own (see `_ACCOUNT_RUN`). Cards are checked
        against account-like runs only: a card-like run is what a card is printed as.
        """
        text = self.text
        if not (_GROUP_BEFORE.search(text, max(0, start - 8), start) or _GROUP_AFTER.match(text, end)):
            return False  # no digit-bearing group next to it: the common case, decided cheaply
        low, high = max(0, start - _RUN_REACH), min(len(text), end + _RUN_REACH)
        patterns = (_ACCOUNT_RUN, _CARD_RUN) if of_cards else (_ACCOUNT_RUN,)
        return any(
            _part_of(start, end, run.span()) for pattern in patterns for run in pattern.finditer(text, low, high)
        )


_PAIR_REACH = 64
# What joins two of a kind: a list or range mark or a word of succession, after at most a short
# remark in parentheses without digits ("075-78-1549 (rev B) replaces 453-44-1827").
_PAIR_JOIN = re.compile(
    r"(?i)\s*(?:\([^()0-9]{1,12}\)\s*)?"
    r"(?:,|;|/|&|->|\u2192|\u2013|and|or|to|then|vs\.?|replaces|replaced by|superseded by)?\s*"
)
# An identifier's label ending the text between a pair ("... replaces part no. "), cut before joining.
_REFERENCE_TAIL = re.compile(
    r"(?i)(?:\b(?:part|model|ticket|case|order|ref|reference|serial|no|number)\b[\s.:#]*)+$"
)


def _part_of(start: int, end: int, run: Span) -> bool:
    return run[0] < end and start < run[1] and run != (start, end)


_GROUP_BEFORE = re.compile(r"[0-9][A-Za-z0-9]{0,3}[ -]\Z")
_GROUP_AFTER = re.compile(r"[ -][A-Za-z0-9]{0,3}[0-9]")
_RUN_REACH = 48  # the longest IBAN (34 characters) printed in groups, and then some

# Account-number-like: country letters and check digits, then at least two groups of exactly four
# letters or digits ("CR05 0152 0200 1026 2840 6"), whether or not it is a valid IBAN. A valid one
# is reported by the IBAN rule; an invalid or truncated one is left alone (docs/PII.md), but
# never as a phone, card or SSN made of its groups.
_ACCOUNT_RUN = re.compile(
    r"(?<![\w-])[A-Za-z]{2}[0-9]{2}(?:[ -][A-Za-z0-9]{4}(?![A-Za-z0-9])){2,}+(?:[ -][A-Za-z0-9]{1,3}(?![\w-]))?"
)
# Card-like: four or more groups of exactly four digits (a card printed, valid or not); its
# first three groups are no phone number ("0800 0000 1920 0014").
_CARD_RUN = re.compile(r"(?<![\w-])[0-9]{4}(?:[ -][0-9]{4}(?![0-9])){3,}+(?:[ -][0-9]{1,4}(?![\w-]))?")


Extractor = Callable[[re.Match[str], _Scan], Span | None]

_CARD_SEPARATORS = re.compile(r"[ -]")


_NON_DIGITS = re.compile(r"[^0-9]+")


def _digits(value: str) -> str:
    return _NON_DIGITS.sub("", value)


# --- email -------------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"""
    (?<![\w.%+'\u2019-])
    (?P<pii>
        [\w.%+'\u2019-]{1,64}                            # \w: non-ASCII letters too (RFC 6531)
        @
        (?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+
        (?:[^\W\d_]{2,63}|xn--[A-Za-z0-9-]{1,59})   # a letter TLD, or a punycode one
    )
    (?![\w-]|\.[^\W_])
    """,
    re.VERBOSE,
)
_QUOTES = "'\u2019"
# "logo@2x.png": an image at a pixel density, not a mailbox (no top-level domain is an image type).
_FILE_SUFFIXES = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "tif", "tiff", "avif"})


def _email(match: re.Match[str], scan: _Scan) -> Span | None:
    start, end = match.span("pii")
    local = match["pii"].split("@", 1)[0]
    stripped = local.lstrip(_QUOTES)  # an opening quote ('dana@...') is not part of the address
    start += len(local) - len(stripped)
    if not stripped or stripped.startswith(".") or stripped.endswith(".") or ".." in stripped:
        return None
    if match["pii"].rsplit(".", 1)[-1].lower() in _FILE_SUFFIXES:
        return None
    return start, end


# --- phone -------------------------------------------------------------------------------------

# Digit groups with single separators, optional "+", "(area)" and "+44 (0)20" groups. Groups are
# possessive so a failed candidate is never re-split into a different grouping.
_PHONE = re.compile(
    r"""
    (?<![\w+./-])
    (?P<pii>
        (?:\+[ ]?)?
        (?:\([0-9]{1,5}\)|[0-9]{1,15}+)
        (?:
            [ ]?\(0\)
          | [ .-]?\([0-9]{1,5}\)
          | [ ./-][0-9]{1,15}+                      # "/": German "030/12345678"
          | (?<=\))[ .-]?[0-9]{1,15}+
        ){0,7}
    )
    (?![\w+]|[./-][0-9])
    """,
    re.VERBOSE,
)
_GROUPS = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)\.[0-9]+$")  # "0.1380000000": a price (a price has no leading 0: "030.129027" is dialled)
_RANGE = re.compile(r"[0-9]+-[0-9]+$")
# "(area)" follows a country code or a "1" trunk prefix, never a longer group: "056103 (2005)".
_PARENS_LATE = re.compile(r"[0-9]{3}[ .-]?\((?!0\))")
_PHONE_CUT = re.compile(r"[ ./(-][^ ./(-]*$")


# A calendar date, "12/01/2025", "2025-10-24", "15.06.2026": never a number to dial, labels or not
# ("our call on 12/01/2025").
_DATE = re.compile(
    r"(?:(?:0?[1-9]|[12][0-9]|3[01])(?P<a>[./-])(?:0?[1-9]|[12][0-9]|3[01])(?P=a)(?:19|20)[0-9]{2}"
    r"|(?:19|20)[0-9]{2}(?P<b>[./-])(?:0?[1-9]|1[0-2])(?P=b)(?:0?[1-9]|[12][0-9]|3[01]))$"
)


def _phone_reading(value: str, scan: _Scan, start: int) -> bool:
    if _DECIMAL.match(value) or _PARENS_LATE.search(value) or _DATE.match(value):
        return False
    if _unlabelled_phone(value, scan.phone_regions):
        # "case 612 761 2516": a national number after an identifier's label is that identifier
        # ("+" and "00" numbers are written only for phones: no label asked, no cost paid).
        return value.startswith(("+", "00")) or not scan.an_identifier(start, Topic.PHONE)
    # A label says what the value is: read it for every region, printed any way (still valid).
    from pipeline.pii.phones import read_labelled_phone

    return scan.labelled(start, Topic.PHONE) and read_labelled_phone(value, scan.phone_regions) is not None


def _unlabelled_phone(value: str, regions: tuple[str, ...]) -> bool:
    """A phone without a label: a national format of `regions` (trunk prefix and the region's
    grouping kept) or a "+"/"00" number, valid as libphonenumber knows the assigned ranges."""
    from pipeline.pii.phones import plausible, read_phone  # libphonenumber on first use only

    if not plausible(value, regions) or _RANGE.match(value):
        return False  # "12345-67890" is a range or a reference more often than a phone
    if len(_GROUPS.findall(value)) == 1 and not value.startswith("+"):
        return False  # ten bare digits are an order number as often as a phone
    if read_phone(value, regions) is not None:
        return True
    # Outside the assigned ranges but of a possible length: a phone where an "(0x)"
    # trunk-and-area group (written only for phones) says so.
    return value.startswith("(0") and read_phone(value, regions, lenient=True) is not None


def _phone(match: re.Match[str], scan: _Scan) -> Span | None:
    """The longest prefix of the candidate (whole digit groups) that reads as a phone number."""
    start, value = match.start("pii"), match["pii"]
    while len(_digits(value)) >= 8:
        if _phone_reading(value, scan, start):
            end = start + len(value)
            return None if scan.fragment(start, end) else (start, end)
        # Too long or not a number: the greedy groups may have run on into a following number.
        cut = _PHONE_CUT.search(value)
        if cut is None:
            return None
        value = value[: cut.start()].rstrip(" ./-(")
    return None


# --- SSN ---------------------------------------------------------------------------------------

# 078-05-1120, 078 05 1120, 078.05.1120: the same separator twice.
_SSN = re.compile(r"(?<![\w.-])(?P<pii>[0-9]{3}(?P<sep>[-. ])[0-9]{2}(?P=sep)[0-9]{4})(?![\w-]|\.[0-9])")
_SPACED_AFTER = re.compile(r"[ .][0-9]")
_SPACED_BEFORE = re.compile(r"[0-9][ .]$")
# Nine digits not grouped 3-2-4 are an SSN only when labelled: bare ("my ssn is 123456789",
# {"ssn": "123456789"}) or typed carelessly ("SSN 078-051120", "07805-1120"; unlabelled, a
# reference or a ZIP+4 code).
_SSN_LABELLED = re.compile(
    r"(?<![\w.+-])(?P<pii>[0-9]{9}|[0-9]{3}-[0-9]{6}|[0-9]{5}-[0-9]{4})(?![\w-]|\.[0-9])"
)


def _ssn(match: re.Match[str], scan: _Scan) -> Span | None:
    start, end = match.span("pii")
    if match["sep"] in (" ", ".") and (
        _SPACED_AFTER.match(scan.text, end) or _SPACED_BEFORE.match(scan.text, max(0, start - 2), start)
    ):
        return None  # part of a longer run of spaced or dotted digit groups
    if not is_valid_ssn(_digits(match["pii"])) or scan.fragment(start, end):
        return None
    if scan.an_identifier(start, Topic.SSN) or (
        not scan.labelled(start, Topic.SSN)
        and scan.sibling_of_non_pii(
            match, lambda other: scan.an_identifier(other, Topic.SSN), _REFERENCE_TAIL, _reference_hint
        )
    ):
        return None  # "Part no. 075-78-1549", "Ticket 697-30-8372": the label says what it is
    return start, end


def _reference_hint(text: str) -> bool:
    return may_mention(text, Topic.REFERENCE)


def _labelled_ssn(match: re.Match[str], scan: _Scan) -> Span | None:
    start, end = match.span("pii")
    if not is_valid_ssn(_digits(match["pii"])) or not scan.labelled(start, Topic.SSN):
        return None
    return start, end


# --- credit / debit card -----------------------------------------------------------------------

_CARD = re.compile(r"(?<![\w+.-])(?P<pii>[0-9](?:[ -]?[0-9]){12,18})(?!\w|-[0-9])")


def _card_grouping_ok(value: str) -> bool:
    """Unseparated, or printed groups: 4-4-4-...(last 1-4), Amex/Diners 4-6-4/4-6-5, UATP 4-5-6."""
    separators = set(_CARD_SEPARATORS.findall(value))
    if not separators:
        return True
    if len(separators) > 1:
        return False
    sizes = [len(group) for group in value.split(separators.pop())]
    if sizes[:2] == [4, 6] and len(sizes) == 3 and sizes[2] in (4, 5):
        return True
    if sizes == [4, 5, 6]:
        return True
    return all(size == 4 for size in sizes[:-1]) and 1 <= sizes[-1] <= 4


def _card_ok(value: str, scan: _Scan, start: int) -> bool:
    digits = _digits(value)
    if not (_card_grouping_ok(value) and is_valid_card(digits)):
        return False
    brand = card_brand(digits)
    if brand is not None and brand.name == "uatp" and not _CARD_SEPARATORS.search(value):
        # Fifteen digits starting with 1: as often an order number; UATP printed 4-5-6 or labelled.
        return scan.labelled(start, Topic.CARD)
    return True


def _card(match: re.Match[str], scan: _Scan) -> Span | None:
    start, value = match.start("pii"), match["pii"]
    while not _card_ok(value, scan, start):
        # The greedy candidate may have run on into a following number ("... 1111 12 units").
        cut = max(value.rfind(" "), value.rfind("-"))
        if cut <= 0 or len(_digits(value[:cut])) < 13:
            return None
        value = value[:cut]
    end = start + len(value)
    if scan.fragment(start, end, of_cards=False):
        return None
    if not _CARD_SEPARATORS.search(value) and scan.an_identifier(start, Topic.CARD):
        return None  # "EAN 4005532390908": an identifier that passes Luhn (a card printed in groups is one)
    return start, end


# --- IP addresses ------------------------------------------------------------------------------

_IPV4 = re.compile(r"(?<![\w.])(?P<pii>(?:[0-9]{1,3}\.){3}[0-9]{1,3})(?![\w]|\.[0-9])")
# "app version 4.2.1.0", "build 10.0.19041.1": four dotted numbers after a version word.
_VERSION_LABEL = re.compile(
    r"(?i)(?:\bv|\bversion|\bver\.?|\bbuild|\brelease|\brev(?:ision)?|\bfirmware|\bfw)\s*[:=#]?\s*v?$"
)

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


def _ipv4(match: re.Match[str], scan: _Scan) -> Span | None:
    try:
        ipaddress.IPv4Address(match["pii"])  # rejects octets > 255 and leading zeros
    except ValueError:
        return None
    start = match.start("pii")
    if _versioned(scan, start) or scan.sibling_of_non_pii(
        match, lambda other: _versioned(scan, other), _VERSION_TAIL, _version_hint
    ):
        return None
    return match.span("pii")


_VERSION_TAIL = re.compile(_VERSION_LABEL.pattern)
# The words of _VERSION_LABEL but "v", matched in lower case (a case-insensitive regex is slower).
_VERSION_WORDS = re.compile(r"\b(?:version|ver|build|release|rev|revision|firmware|fw)\b")


def _version_hint(text: str) -> bool:
    return _VERSION_WORDS.search(text.lower()) is not None


def _versioned(scan: _Scan, start: int) -> bool:
    return _VERSION_LABEL.search(scan.text[max(0, start - 24) : start]) is not None


_IPV6_GROUP_SPLIT = re.compile(r"[:.]")


def _ipv6(match: re.Match[str], scan: _Scan) -> Span | None:
    value = match["pii"]
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return None
    # "::" and "::1" are not anybody's address; two real groups rules them (and "a::") out.
    groups = [group for group in _IPV6_GROUP_SPLIT.split(value) if group]
    return match.span("pii") if len(groups) >= 2 else None


# --- IBAN --------------------------------------------------------------------------------------

# Zero-width, so that a candidate which runs on into the next token cannot swallow a following
# IBAN; the extractor then trims the candidate to the country's registered length.
_IBAN = re.compile(r"(?<![\w-])(?=(?P<pii>[A-Za-z]{2}[0-9]{2}(?:[ -]?[A-Za-z0-9]){11,30}))")


def _iban(match: re.Match[str], scan: _Scan) -> Span | None:
    text, start, candidate = scan.text, match.start("pii"), match["pii"]
    length = IBAN_LENGTHS.get(candidate[:2].upper())
    if length is None:
        return None
    end, seen = start, 0
    for offset, char in enumerate(candidate):
        seen += char.isalnum()
        if seen == length:
            end = start + offset + 1
            break
    else:
        return None
    if end < len(text) and (text[end].isalnum() or text[end] == "_"):
        return None  # the registered length ends inside a longer token
    written = text[start:end]
    compact = "".join(char for char in written if char.isalnum())
    separators = set(written) - set(compact)
    if len(separators) > 1:
        return None
    if separators:
        separator = separators.pop()
        if written != separator.join(compact[i : i + 4] for i in range(0, length, 4)):
            return None  # irregular grouping: not how IBANs are written
    elif compact != compact.upper() and not scan.labelled(start, Topic.IBAN):
        return None  # lower case run together: only where a label says it is an IBAN
    return (start, end) if is_valid_iban(compact.upper()) else None


# --- the detector ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rule:
    type: EntityType
    pattern: re.Pattern[str]
    extract: Extractor


_RULES: tuple[_Rule, ...] = (
    _Rule(EntityType.EMAIL, _EMAIL, _email),
    _Rule(EntityType.PHONE, _PHONE, _phone),
    _Rule(EntityType.SSN, _SSN, _ssn),
    _Rule(EntityType.SSN, _SSN_LABELLED, _labelled_ssn),
    _Rule(EntityType.CREDIT_DEBIT_NUMBER, _CARD, _card),
    _Rule(EntityType.IP_ADDRESS, _IPV4, _ipv4),
    _Rule(EntityType.IP_ADDRESS, _IPV6, _ipv6),
    _Rule(EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER, _IBAN, _iban),
)


@dataclass(frozen=True, slots=True)
class OfflineDetector:
    """Regex, checksum and libphonenumber PII detection with no network calls; scores are 1.0.

    `phone_regions`: the countries whose national formats (no "+" or "00") are read, in order.
    """

    types: frozenset[str] = field(default_factory=lambda: frozenset(EntityType))
    phone_regions: tuple[str, ...] = DEFAULT_PHONE_REGIONS

    def detect(self, text: str) -> list[PiiEntity]:
        return resolve_overlaps(self._candidates(text))

    def _candidates(self, text: str) -> Iterable[PiiEntity]:
        scan = _Scan(text, self.phone_regions)
        for rule in _RULES:
            if rule.type not in self.types:
                continue
            yield from _scan_rule(rule, scan, 0, len(text))


def _scan_rule(rule: _Rule, scan: _Scan, start: int, end: int) -> Iterable[PiiEntity]:
    """The rule's entities in text[start:end]. Where a candidate is only partly taken, the rest of
    it is scanned again: it may be the next, adjacent number ("020 7946 0958 0412 345 678")."""
    for match in rule.pattern.finditer(scan.text, start, end):
        span = rule.extract(match, scan)
        if span is None:
            continue
        yield PiiEntity(rule.type, span[0], span[1])
        if span[1] < match.end():  # the look-ahead held at match.end(), so it holds at the new end
            yield from _scan_rule(rule, scan, span[1], match.end())
