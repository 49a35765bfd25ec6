"""Synthetic values for the blind PII set (bench.pii_blind_set): phones, IBANs, cards, SSNs, IPs, e-mails.

Every value is made from a seeded `random.Random`, so the set is reproducible. Phones are valid for
their region by libphonenumber's numbering plans (from the US/CA 555-01xx, UK and Australian
fictional ranges where those exist, otherwise a region's example number with its last digits
varied); IBANs by mod-97 and python-stdnum's national checks; cards by Luhn on issuers' test
prefixes; SSNs by the area/group/serial rules. Nothing here reads the detector.
"""

from __future__ import annotations

import ipaddress
import random
import string

import phonenumbers
from phonenumbers import PhoneNumberFormat, PhoneNumberType
from stdnum import iban as stdnum_iban
from stdnum import luhn

# Fictional ranges ('x' = a random digit): national significant numbers.
_RESERVED: dict[str, tuple[str, ...]] = {
    "US": ("201555010x", "212555014x", "312555017x", "415555012x", "617555019x", "206555011x"),
    "CA": ("416555013x", "604555015x", "514555016x"),
    "GB": ("20794600xx", "11349604xx", "16149609xx"),
    "AU": ("25550xxxx", "370100xxx", "491570xxx"),
}

# Language of the labels and prose per region.
REGION_LANGUAGE: dict[str, str] = {
    "US": "en", "CA": "en", "GB": "en", "IE": "en", "AU": "en", "NZ": "en", "IN": "en", "ZA": "en",
    "SG": "en", "DE": "de", "AT": "de", "CH": "de", "FR": "fr", "BE": "fr", "LU": "fr", "NL": "nl",
    "ES": "es", "MX": "es", "PT": "pt", "BR": "pt", "IT": "it", "SE": "sv", "NO": "no", "DK": "da",
    "FI": "fi", "PL": "pl", "CZ": "cs", "GR": "el", "JP": "ja",
}  # fmt: skip
PHONE_REGIONS = tuple(REGION_LANGUAGE)

# BBAN structure per country: (count, kind) with kind n = digit, a = capital letter, c = either.
_BBAN: dict[str, str] = {
    "AD": "4n4n12c", "AT": "5n11n", "BE": "3n7n2n", "BG": "4a4n2n8c", "CH": "5n12c", "CY": "3n5n16c",
    "CZ": "4n6n10n", "DE": "8n10n", "DK": "4n9n1n", "EE": "2n2n11n1n", "ES": "4n4n1n1n10n",
    "FI": "3n11n", "FR": "5n5n11c2n", "GB": "4a6n8n", "GR": "3n4n16c", "HR": "7n10n", "HU": "3n4n1n15n1n",
    "IE": "4a6n8n", "IS": "4n2n6n10n", "IT": "1a5n5n12c", "LT": "5n11n", "LU": "3n13c", "LV": "4a13c",
    "MT": "4a5n18c", "NL": "4a10n", "NO": "4n6n1n", "PL": "8n16n", "PT": "4n4n11n2n", "RO": "4a16c",
    "SE": "3n16n1n", "SI": "5n8n2n", "SK": "4n6n10n",
}  # fmt: skip
IBAN_COUNTRIES = tuple(_BBAN)

# Issuers' test prefixes, card lengths and print groupings.
CARD_ISSUERS: dict[str, tuple[tuple[str, ...], int, tuple[int, ...]]] = {
    "visa": (("400000", "424242", "411111", "401288"), 16, (4, 4, 4, 4)),
    "mastercard": (("555555", "510510", "520082"), 16, (4, 4, 4, 4)),
    "mastercard-2": (("222300", "222100", "271000"), 16, (4, 4, 4, 4)),
    "amex": (("378282", "371449", "340000"), 15, (4, 6, 5)),
    "discover": (("601111", "601100", "650000"), 16, (4, 4, 4, 4)),
    "jcb": (("353011", "356600"), 16, (4, 4, 4, 4)),
    "diners": (("305693", "385200", "360000"), 14, (4, 6, 4)),
    "unionpay": (("620000", "621234"), 16, (4, 4, 4, 4)),
}

FIRST = ("Anna", "Jonas", "Maria", "Lukas", "Sofia", "Mateo", "Emma", "Noah", "Chloé", "Léa", "Pieter",
         "Ingrid", "Sven", "Aino", "Zofia", "Tomás", "Giulia", "Yuki", "Priya", "Thabo", "Wei", "Olivia",
         "Liam", "Elif", "Marek", "Eleni", "Kasper", "Nora", "Diego", "Hannah")  # fmt: skip
LAST = ("Novak", "Schmidt", "Dubois", "García", "Rossi", "Jansen", "Lindqvist", "Virtanen", "Kowalski",
        "Silva", "Murphy", "Tanaka", "Sharma", "Nkosi", "Tan", "Brown", "Olsen", "Papadopoulos",
        "Müller", "Martin", "Keller", "Moreau", "Costa", "Berg", "Walsh", "Haas")  # fmt: skip
DOMAINS = ("example.com", "example.org", "example.net", "mail.example.com", "support.example.org",
           "eu.example.net", "shop.example", "kunde.example", "acme.test", "billing.example.com")  # fmt: skip


def _ascii(name: str) -> str:
    table = str.maketrans("éíüöäáóç", "eiuoaaoc")
    return name.translate(table)


def person(rng: random.Random) -> tuple[str, str]:
    return rng.choice(FIRST), rng.choice(LAST)


def email(rng: random.Random, first: str | None = None, last: str | None = None) -> str:
    """A mailbox in a reserved domain, shaped the ways people's addresses are."""
    first = _ascii(first or rng.choice(FIRST))
    last = _ascii(last or rng.choice(LAST))
    shapes = (
        f"{first}.{last}".lower(),
        f"{first[0]}{last}".lower(),
        f"{first}_{last}{rng.randint(1, 99)}".lower(),
        f"{first}.{last}+{rng.choice(['orders', 'news', 'tickets', 'bank'])}".lower(),
        f"{first}.{last}",
        f"{last}-{first}".lower(),
        f"{first.lower()}{rng.randint(1970, 2005)}",
        rng.choice(["support", "billing", "no-reply", "accounts.payable", "helpdesk"]),
    )
    return f"{rng.choice(shapes)}@{rng.choice(DOMAINS)}"


def _fill(pattern: str, rng: random.Random) -> str:
    return "".join(str(rng.randint(0, 9)) if ch == "x" else ch for ch in pattern)


def phone(rng: random.Random, region: str, mobile: bool | None = None) -> phonenumbers.PhoneNumber:
    """A number valid for `region` by libphonenumber's plan (fixed line or mobile)."""
    if region in _RESERVED and mobile is None:
        number = phonenumbers.parse(_fill(rng.choice(_RESERVED[region]), rng), region)
        if phonenumbers.is_valid_number(number):
            return number
    kind = PhoneNumberType.MOBILE if (mobile if mobile is not None else rng.random() < 0.5) else PhoneNumberType.FIXED_LINE
    example = phonenumbers.example_number_for_type(region, kind)
    assert example is not None, region
    national = phonenumbers.national_significant_number(example)
    for _ in range(500):
        tail = "".join(str(rng.randint(0, 9)) for _ in range(4))
        candidate = phonenumbers.parse(national[:-4] + tail, region)
        if phonenumbers.is_valid_number(candidate) and candidate != example:
            return candidate
    raise AssertionError(f"no valid number for {region}")


def phone_text(rng: random.Random, number: phonenumbers.PhoneNumber, style: str) -> str:
    """`number` printed as people print it: national, international, 00-prefixed, compact, dotted ..."""
    national = phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL)
    international = phonenumbers.format_number(number, PhoneNumberFormat.INTERNATIONAL)
    region = phonenumbers.region_code_for_number(number)
    if style == "international":
        return international
    if style == "e164":
        return phonenumbers.format_number(number, PhoneNumberFormat.E164)
    if style == "00":
        return "00" + international[1:]
    if style == "compact":
        return "".join(ch for ch in national if ch.isdigit())
    if style == "trunk" and national.startswith("0") and region in {"GB", "DE", "AT", "CH", "NL", "BE"}:
        return f"+{number.country_code} (0){national[1:]}"
    if style == "dotted" and region in {"FR", "BE", "LU", "CH", "ES", "PT", "IT", "DE"} and " " in national:
        return national.replace(" ", ".")
    if style == "dashed" and region in {"US", "CA", "DE", "AT", "ES", "MX", "PL", "CZ"} and " " in national:
        return national.replace(" ", "-")
    if style in {"dotted", "dashed"} and region in {"US", "CA"}:
        digits = str(number.national_number)
        separator = "." if style == "dotted" else "-"
        return separator.join((digits[:3], digits[3:6], digits[6:]))
    return national


PHONE_STYLES = ("national", "international", "e164", "00", "compact", "trunk", "dotted", "dashed")


def _bban(rng: random.Random, spec: str) -> str:
    out = []
    count = ""
    for ch in spec:
        if ch.isdigit():
            count += ch
            continue
        for _ in range(int(count)):
            letter = ch == "a" or (ch == "c" and rng.random() < 0.3)
            out.append(rng.choice(string.ascii_uppercase if letter else string.digits))
        count = ""
    return "".join(out)


def _mod97(text: str) -> int:
    return int("".join(str(int(ch, 36)) for ch in text)) % 97


def iban(rng: random.Random, country: str) -> str:
    """An electronic-format IBAN valid by mod-97 and by stdnum's national checks for `country`."""
    for _ in range(20000):
        bban = _bban(rng, _BBAN[country])
        check = 98 - _mod97(bban + country + "00")
        candidate = f"{country}{check:02d}{bban}"
        if stdnum_iban.is_valid(candidate):
            return candidate
    raise AssertionError(f"no valid IBAN for {country}")


def iban_invalid(rng: random.Random, country: str) -> str:
    """An IBAN-shaped string that fails mod-97 (one digit of a valid one changed)."""
    valid = iban(rng, country)
    position = rng.randrange(4, len(valid))
    while not valid[position].isdigit():
        position = rng.randrange(4, len(valid))
    digit = str((int(valid[position]) + rng.randint(1, 9)) % 10)
    changed = valid[:position] + digit + valid[position + 1 :]
    assert _mod97(changed[4:] + changed[:4]) != 1
    return changed


def printed(value: str) -> str:
    """An IBAN in its printed form: groups of four."""
    return " ".join(value[i : i + 4] for i in range(0, len(value), 4))


def card(rng: random.Random, issuer: str, fail_luhn: bool = False) -> str:
    """Digits only: a Luhn-valid number on one of the issuer's test prefixes (or one failing Luhn)."""
    prefixes, length, _ = CARD_ISSUERS[issuer]
    body = rng.choice(prefixes) + "".join(str(rng.randint(0, 9)) for _ in range(length - 7))
    check = int(luhn.calc_check_digit(body))
    return body + str((check + rng.randint(1, 9)) % 10 if fail_luhn else check)


def group(digits: str, sizes: tuple[int, ...], separator: str) -> str:
    parts, at = [], 0
    for size in sizes:
        parts.append(digits[at : at + size])
        at += size
    return separator.join(parts)


def card_text(rng: random.Random, issuer: str, style: str, fail_luhn: bool = False) -> str:
    digits = card(rng, issuer, fail_luhn)
    sizes = CARD_ISSUERS[issuer][2]
    return {"spaces": group(digits, sizes, " "), "dashes": group(digits, sizes, "-")}.get(style, digits)


def ssn(rng: random.Random, style: str = "dashes") -> str:
    """Area 001-899 but 666, group 01-99, serial 0001-9999."""
    area = rng.choice([a for a in range(1, 900) if a != 666])
    parts = (f"{area:03d}", f"{rng.randint(1, 99):02d}", f"{rng.randint(1, 9999):04d}")
    return {"dashes": "-".join(parts), "spaces": " ".join(parts)}.get(style, "".join(parts))


def ipv4(rng: random.Random, private: bool = False) -> str:
    if private:
        net = rng.choice(("10.{}.{}", "172.{}.{}", "192.168.{}"))
        head = net.format(rng.randint(16, 31) if net.startswith("172") else rng.randint(0, 255), rng.randint(0, 255))
        return f"{head}.{rng.randint(1, 254)}"
    return f"{rng.choice(('192.0.2', '198.51.100', '203.0.113'))}.{rng.randint(1, 254)}"


def ipv6(rng: random.Random, full: bool = False) -> str:
    groups = [0x2001, 0xDB8] + [rng.choice((0, rng.randint(1, 0xFFFF))) for _ in range(5)] + [rng.randint(1, 0xFFFF)]
    address = ipaddress.IPv6Address(":".join(f"{g:x}" for g in groups))
    return address.exploded if full else str(address)
