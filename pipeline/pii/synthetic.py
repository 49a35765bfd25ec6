"""Consistent, format-preserving fake values for synthetic redaction.

Every fake is derived from HMAC-SHA256(secret, type, original, attempt), so a retried task given
the same secret and the same values rebuilds the same mapping, while without the secret a fake
reveals nothing about its original. Fakes keep the shape of what they replace (digits stay
digits, letters keep their case, separators stay put) and are chosen so they cannot be real:
SSNs use area 000 or 666 (never issued, and unlike 9xx never an ITIN either), phones come from
the ranges regulators reserve for fiction (or, for countries without such ranges, ranges
libphonenumber knows as unassigned), IPs from the documentation ranges, emails from reserved
domains; cards and IBANs still pass their checksums so downstream parsers accept them.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import string
from collections.abc import Callable, Iterable, Mapping

from pipeline.pii.checksums import card_brand, iban_check_digits, luhn_check_digit
from pipeline.pii.exceptions import InvalidSecretError, SyntheticGenerationError
from pipeline.pii.types import DEFAULT_PHONE_REGIONS, EntityType

MIN_SECRET_BYTES = 16
MAX_ATTEMPTS = 1000

FAKE_EMAIL_DOMAINS = ("example.com", "example.org", "example.net")  # RFC 2606
FAKE_IPV4_NETWORKS = tuple(
    ipaddress.IPv4Network(net) for net in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
)  # RFC 5737
FAKE_IPV6_NETWORK = ipaddress.IPv6Network("2001:db8::/32")  # RFC 3849

# SSN areas the SSA never issues and the IRS never uses for ITINs (those are 9xx): a fake with
# one of them cannot be anybody's number, yet keeps the 3-2-4 shape.
FAKE_SSN_AREAS = ("000", "666")


class _Draws:
    """Deterministic uniform draws from HMAC-SHA256(secret, label || block) in counter mode."""

    def __init__(self, secret: bytes, label: bytes) -> None:
        self._secret, self._label = secret, label
        self._block, self._buffer = 0, b""

    def _take(self, count: int) -> bytes:
        while len(self._buffer) < count:
            block = self._block.to_bytes(8, "big")
            self._buffer += hmac.new(self._secret, self._label + block, hashlib.sha256).digest()
            self._block += 1
        taken, self._buffer = self._buffer[:count], self._buffer[count:]
        return taken

    def below(self, bound: int) -> int:
        """Uniform in [0, bound), by rejection sampling so no value is favoured."""
        bits = max((bound - 1).bit_length(), 1)
        while True:
            value = int.from_bytes(self._take((bits + 7) // 8), "big") & ((1 << bits) - 1)
            if value < bound:
                return value

    def digit(self, low: int = 0) -> str:
        return str(low + self.below(10 - low))

    def digits(self, count: int) -> str:
        return "".join(self.digit() for _ in range(count))

    def letter(self, upper: bool) -> str:
        alphabet = string.ascii_uppercase if upper else string.ascii_lowercase
        return alphabet[self.below(26)]

    def choice(self, options: tuple[str, ...]) -> str:
        return options[self.below(len(options))]


def _is_digit(char: str) -> bool:
    return "0" <= char <= "9"


def _scramble(value: str, draws: _Draws) -> str:
    """Digits become random digits, letters random letters of the same case, the rest stays."""
    return "".join(
        draws.digit() if _is_digit(char) else draws.letter(char.isupper()) if char.isalpha() else char
        for char in value
    )


def _refill(template: str, replacement: str, is_slot: Callable[[str], bool] = _is_digit) -> str:
    """Put the characters of `replacement`, in order, into the slots of `template`."""
    chars = iter(replacement)
    return "".join(next(chars) if is_slot(char) else char for char in template)


def _digits_of(value: str) -> str:
    return "".join(char for char in value if _is_digit(char))


def _fake_ssn(value: str, draws: _Draws) -> str:
    if len(_digits_of(value)) != 9:
        return _scramble(value, draws)
    group = f"{1 + draws.below(99):02d}"
    serial = f"{1 + draws.below(9999):04d}"
    return _refill(value, draws.choice(FAKE_SSN_AREAS) + group + serial)


def _fake_card(value: str, draws: _Draws) -> str:
    digits = _digits_of(value)
    if len(digits) < 2:
        return _scramble(value, draws)
    brand = card_brand(digits)
    # Same brand (so the same length rules), but not the original issuer prefix.
    prefix = str(brand.low + draws.below(brand.high - brand.low + 1)) if brand else digits[0]
    payload = prefix + draws.digits(len(digits) - len(prefix) - 1)
    return _refill(value, payload + luhn_check_digit(payload))


def _fake_iban(value: str, draws: _Draws) -> str:
    compact = value.replace(" ", "")
    country, bban = compact[:2], compact[4:]
    if len(compact) < 5 or not country.isalpha() or not bban.isalnum():
        return _scramble(value, draws)
    fake_bban = _scramble(bban, draws)
    fake = country + iban_check_digits(country.upper(), fake_bban.upper()) + fake_bban
    return _refill(value, fake, lambda char: char != " ")


def _fake_email(value: str, draws: _Draws) -> str:
    local, at, _domain = value.rpartition("@")
    if not at or not local:
        return _scramble(value, draws)
    return f"{_scramble(local, draws)}@{draws.choice(FAKE_EMAIL_DOMAINS)}"


def _fake_ipv6(value: str, draws: _Draws) -> str:
    """An address in 2001:db8::/32 written the way the original is: compressed ("::") with the
    same number of written groups, or in full; IPv4-mapped keeps its ::ffff: prefix."""
    if "." in value:
        prefix = value[: value.rfind(":") + 1]
        return prefix + _fake_ipv4(draws) if prefix.lower() == "::ffff:" else _fake_ipv6("2001:db8::1", draws)
    upper = any(char in "ABCDEF" for char in value)
    head, double, tail = value.partition("::")
    written = len([g for g in head.split(":") if g]) + len([g for g in tail.split(":") if g])

    def random_group() -> str:
        return f"{1 + draws.below(0xFFFF):x}"

    if double:
        heads = max(2, len([g for g in head.split(":") if g]))
        tails = max(1, written - heads)
        groups_head = ["2001", "db8", *(random_group() for _ in range(heads - 2))]
        fake = ":".join(groups_head) + "::" + ":".join(random_group() for _ in range(tails))
    else:
        groups = ["2001", "db8", *(random_group() for _ in range(6))]
        full = all(len(group) == 4 for group in value.split(":"))
        fake = ":".join(group.zfill(4) if full else group for group in groups)
    return fake.upper() if upper else fake


def _fake_ipv4(draws: _Draws) -> str:
    network = FAKE_IPV4_NETWORKS[draws.below(len(FAKE_IPV4_NETWORKS))]
    return str(network.network_address + 1 + draws.below(254))  # .1 to .254: no network/broadcast


def _fake_ip(value: str, draws: _Draws) -> str:
    return _fake_ipv6(value, draws) if ":" in value else _fake_ipv4(draws)


def _fake_unplaced_phone(value: str, digits: str, draws: _Draws) -> str:
    """A value libphonenumber cannot place: same country code if it has one, and national digits
    that no country code or default region accepts (or North American fiction if it fits)."""
    from pipeline.pii import phones

    code = phones.country_code_of(value)
    if code is None and len(digits) == 10:
        return _refill(value, str(phones.fictional_national_number(phones.nanp_reading(digits), draws.below)))
    kept = str(code) if code is not None else ""
    for _ in range(64):
        fake = _refill(value, kept + draws.digit(1) + draws.digits(max(len(digits) - len(kept) - 1, 0)))
        if phones.read_phone(fake, DEFAULT_PHONE_REGIONS, lenient=True) is None:
            return fake
    raise SyntheticGenerationError("no unassigned fake PHONE value of this length")


def _fake_phone(value: str, draws: _Draws) -> str:
    """The original's country and printed format, a number from a range that cannot be anyone's."""
    from pipeline.pii import phones  # libphonenumber only when a phone is faked

    digits = _digits_of(value)
    reading = phones.read_phone(value, DEFAULT_PHONE_REGIONS, lenient=True)
    if reading is None or not digits.endswith(reading.national_number):
        return _fake_unplaced_phone(value, digits, draws)
    national = phones.fictional_national_number(reading, draws.below) or phones.unassigned_national_number(
        reading, draws.below
    )
    if national is None:
        raise SyntheticGenerationError("no unassigned fake PHONE value of this length")
    return _refill(value, digits[: len(digits) - len(national)] + national)


_GENERATORS: Mapping[str, Callable[[str, _Draws], str]] = {
    EntityType.EMAIL: _fake_email,
    EntityType.PHONE: _fake_phone,
    EntityType.SSN: _fake_ssn,
    EntityType.CREDIT_DEBIT_NUMBER: _fake_card,
    EntityType.IP_ADDRESS: _fake_ip,
    EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER: _fake_iban,
}


def _check_secret(secret: bytes) -> None:
    if len(secret) < MIN_SECRET_BYTES:
        raise InvalidSecretError(f"the mapping secret must be at least {MIN_SECRET_BYTES} bytes")


def synthesize(entity_type: str, original: str, secret: bytes, attempt: int = 0) -> str:
    """The fake for one value: a pure function of (secret, type, original, attempt).

    The derivation ignores separators and case, so one card number printed two ways gets the
    same fake digits in each of its two formats. Types without a dedicated generator get the generic shape-preserving scramble.
    """
    _check_secret(secret)
    label = json.dumps([str(entity_type), _canonical(original), attempt]).encode("utf-8")
    return _GENERATORS.get(str(entity_type), _scramble)(original, _Draws(secret, label))


def _canonical(value: str) -> str:
    """The same identifier however it is printed: '4111 1111...' and '4111-1111...' compare equal."""
    return "".join(char for char in value if char.isalnum()).casefold()


def build_mapping(values_by_type: Mapping[str, Iterable[str]], secret: bytes) -> dict[str, str]:
    """Map every original value to its fake, for one job.

    The result depends only on the secret and the set of (type, value) pairs, not on their
    order, so a retried task rebuilds it exactly. No fake equals (even modulo separators and
    case) any original, and distinct originals get distinct fakes: a candidate that collides
    is re-derived with the next attempt counter. A value listed under several types is faked
    once, by the first type in sorted order.
    """
    _check_secret(secret)
    pairs = sorted({(str(entity_type), value) for entity_type, values in values_by_type.items() for value in values})
    originals = {value for _, value in pairs}
    canonical_originals = {_canonical(value) for value in originals}
    owners: dict[str, str] = {}  # canonical fake -> canonical original it stands for
    mapping: dict[str, str] = {}
    used: set[str] = set()
    for entity_type, original in pairs:
        if original in mapping:
            continue
        owner = _canonical(original)
        for attempt in range(MAX_ATTEMPTS):
            fake = synthesize(entity_type, original, secret, attempt)
            key = _canonical(fake)
            if key in canonical_originals or owners.get(key, owner) != owner or fake in used:
                continue
            break
        else:
            raise SyntheticGenerationError(
                f"no unused fake {entity_type} value after {MAX_ATTEMPTS} attempts (fake pool exhausted)"
            )
        owners[key] = owner
        used.add(fake)
        mapping[original] = fake
    return mapping
