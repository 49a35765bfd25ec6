"""The offline detector finds real identifiers at exact offsets and ignores their look-alikes."""

from __future__ import annotations

import pytest

from pipeline.pii import EntityType, OfflineDetector, PiiEntity

DETECTOR = OfflineDetector()

EMAIL = EntityType.EMAIL
PHONE = EntityType.PHONE
SSN = EntityType.SSN
CARD = EntityType.CREDIT_DEBIT_NUMBER
IP = EntityType.IP_ADDRESS
IBAN = EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER


def found(text: str) -> list[tuple[str, str]]:
    return [(entity.type, text[entity.start : entity.end]) for entity in DETECTOR.detect(text)]


TRUE_POSITIVES = [
    # (type, text, the value the detector must report)
    pytest.param(EMAIL, "Contact jane.doe@example.com today", "jane.doe@example.com", id="email"),
    pytest.param(EMAIL, "mail JOHN_SMITH+tag@mail.co.uk.", "JOHN_SMITH+tag@mail.co.uk", id="email-sentence-end"),
    pytest.param(EMAIL, "<a.b-c@sub.my-domain.org>", "a.b-c@sub.my-domain.org", id="email-in-brackets"),
    pytest.param(PHONE, "tel:+14155552671", "+14155552671", id="phone-e164-compact"),
    pytest.param(PHONE, "call +44 20 7946 0958 now", "+44 20 7946 0958", id="phone-e164-spaces"),
    pytest.param(PHONE, "call +1-415-555-2671", "+1-415-555-2671", id="phone-e164-dashes"),
    pytest.param(PHONE, "call +1 (415) 555-2671", "+1 (415) 555-2671", id="phone-e164-area-parens"),
    pytest.param(PHONE, "+44 20 7946 0958 2024", "+44 20 7946 0958", id="phone-e164-then-a-number"),
    pytest.param(PHONE, "call (415) 555-2671", "(415) 555-2671", id="phone-us-parens"),
    pytest.param(PHONE, "call 415-555-2671.", "415-555-2671", id="phone-us-dashes"),
    pytest.param(PHONE, "call 415.555.2671", "415.555.2671", id="phone-us-dots"),
    pytest.param(PHONE, "call 1-800-555-0199", "1-800-555-0199", id="phone-us-trunk-prefix"),
    pytest.param(SSN, "SSN 123-45-6789 on file", "123-45-6789", id="ssn-formatted"),
    pytest.param(SSN, "SSN: 123456789", "123456789", id="ssn-labelled-bare-digits"),
    pytest.param(SSN, "Social Security No. 123456789", "123456789", id="ssn-long-label"),
    pytest.param(CARD, "card 4111 1111 1111 1111 exp", "4111 1111 1111 1111", id="visa-spaces"),
    pytest.param(CARD, "card 4111-1111-1111-1111", "4111-1111-1111-1111", id="visa-dashes"),
    pytest.param(CARD, "card 4111111111111111", "4111111111111111", id="visa-compact"),
    pytest.param(CARD, "card 4111 1111 1111 1111 003", "4111 1111 1111 1111 003", id="visa-19-digits"),
    pytest.param(CARD, "4111 1111 1111 1111 12 units", "4111 1111 1111 1111", id="visa-then-a-number"),
    pytest.param(CARD, "amex 3782 822463 10005", "3782 822463 10005", id="amex-4-6-5"),
    pytest.param(CARD, "amex 378282246310005", "378282246310005", id="amex-compact"),
    pytest.param(CARD, "mc 5555555555554444", "5555555555554444", id="mastercard-51-55"),
    pytest.param(CARD, "mc 2223003122003222", "2223003122003222", id="mastercard-2-series"),
    pytest.param(CARD, "discover 6011111111111117", "6011111111111117", id="discover"),
    pytest.param(CARD, "jcb 3530111333300000", "3530111333300000", id="jcb"),
    pytest.param(CARD, "diners 30569309025904", "30569309025904", id="diners-14-digits"),
    pytest.param(IP, "from 192.168.1.1 at", "192.168.1.1", id="ipv4"),
    pytest.param(IP, "host 10.0.0.1.", "10.0.0.1", id="ipv4-sentence-end"),
    pytest.param(IP, "mask 255.255.255.255", "255.255.255.255", id="ipv4-max-octets"),
    pytest.param(IP, "url [2001:db8::1]:443", "2001:db8::1", id="ipv6-compressed"),
    pytest.param(IP, "peer fe80::1ff:fe23:4567:890a", "fe80::1ff:fe23:4567:890a", id="ipv6-link-local"),
    pytest.param(
        IP, "a 2001:0db8:85a3:0000:0000:8a2e:0370:7334 b", "2001:0db8:85a3:0000:0000:8a2e:0370:7334", id="ipv6-full"
    ),
    pytest.param(IP, "mapped ::ffff:192.0.2.128 here", "::ffff:192.0.2.128", id="ipv6-ipv4-mapped"),
    pytest.param(IBAN, "pay GB82 WEST 1234 5698 7654 32 now", "GB82 WEST 1234 5698 7654 32", id="iban-gb-printed"),
    pytest.param(IBAN, "IBAN: GB82WEST12345698765432, thanks", "GB82WEST12345698765432", id="iban-gb-compact"),
    pytest.param(IBAN, "to DE89370400440532013000", "DE89370400440532013000", id="iban-de"),
    pytest.param(IBAN, "to FR1420041010050500013M02606", "FR1420041010050500013M02606", id="iban-fr-letter-in-bban"),
    pytest.param(IBAN, "to NL91ABNA0417164300", "NL91ABNA0417164300", id="iban-nl"),
    pytest.param(IBAN, "to NO9386011117947", "NO9386011117947", id="iban-no-shortest"),
    pytest.param(
        IBAN, "GB82 WEST 1234 5698 7654 32 ABCD EFGH", "GB82 WEST 1234 5698 7654 32", id="iban-then-capitals"
    ),
]


@pytest.mark.parametrize(("entity_type", "text", "value"), TRUE_POSITIVES)
def test_detects_the_value_at_its_exact_offsets(entity_type: EntityType, text: str, value: str) -> None:
    start = text.index(value)
    assert DETECTOR.detect(text) == [PiiEntity(entity_type, start, start + len(value))]


NEAR_MISSES = [
    pytest.param("reach me at user@localhost", id="email-without-tld"),
    pytest.param("user@example.c0m", id="email-digit-in-tld"),
    pytest.param("user@example.com_backup", id="email-inside-identifier"),
    pytest.param(".jane@example.com", id="email-leading-dot"),
    pytest.param("jane..doe@example.com", id="email-double-dot"),
    pytest.param("@example.com", id="email-no-local-part"),
    pytest.param("ext 555-2671", id="phone-7-digit-run"),
    pytest.param("ref 5552671", id="phone-7-digits-bare"),
    pytest.param("id 4155552671", id="phone-10-digit-run-without-separators"),
    pytest.param("code 123-456-7890", id="phone-invalid-nanp-area"),
    pytest.param("score +123", id="phone-plus-short-number"),
    pytest.param("id +1234567890123456", id="phone-e164-too-long"),
    pytest.param("on 2024-01-15 at 10:30:00", id="date-and-time"),
    pytest.param("on 2024.01.15", id="date-dotted"),
    pytest.param("release 1.2.3.4.5", id="version-five-parts"),
    pytest.param("build v1.2.3.4", id="version-prefixed"),
    pytest.param("seq 12345678901234567890", id="long-digit-run"),
    pytest.param("Order number 100200300400500", id="order-number"),
    pytest.param("SSN 000-12-3456", id="ssn-area-000"),
    pytest.param("SSN 666-12-3456", id="ssn-area-666"),
    pytest.param("SSN 900-12-3456", id="ssn-area-9xx"),
    pytest.param("SSN 123-00-4567", id="ssn-group-00"),
    pytest.param("SSN 123-45-0000", id="ssn-serial-0000"),
    pytest.param("ref 123456789", id="ssn-bare-digits-without-label"),
    pytest.param("ID 123-45-67890", id="ssn-inside-longer-number"),
    pytest.param("card 4111 1111 1111 1112", id="card-bad-luhn"),
    pytest.param("card 4111 11111 1111 111", id="card-irregular-grouping"),
    pytest.param("card 4111 1111-1111 1111", id="card-mixed-separators"),
    pytest.param("card 9111111111111113", id="card-unknown-iin"),
    pytest.param("card 41111111111111111", id="card-visa-17-digits"),
    pytest.param("key abc4111111111111111", id="card-inside-token"),
    pytest.param("ip 256.1.1.1", id="ipv4-octet-256"),
    pytest.param("ip 192.168.001.001", id="ipv4-leading-zeros"),
    pytest.param("ip 1.2.3", id="ipv4-three-octets"),
    pytest.param("mac 00:1A:2B:3C:4D:5E", id="mac-address"),
    pytest.param("loopback ::1 and ::", id="ipv6-loopback-and-unspecified"),
    pytest.param("use std::vector", id="cpp-scope"),
    pytest.param("pay GB83 WEST 1234 5698 7654 32", id="iban-wrong-checksum"),
    pytest.param("pay GB82 WEST 1234 5698 7654", id="iban-too-short-for-country"),
    pytest.param("pay GB82WEST123456987654321", id="iban-runs-into-longer-token"),
    pytest.param("pay XX82WEST12345698765432", id="iban-unknown-country"),
    pytest.param("pay gb82west12345698765432", id="iban-lowercase"),
    pytest.param("pay GB82 WE ST12 3456 9876 5432", id="iban-irregular-spacing"),
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_ignores_look_alikes(text: str) -> None:
    assert found(text) == []


def test_reports_every_entity_in_a_document_sorted_by_start() -> None:
    text = "Email jane@example.com,\ncall 415-555-2671 or charge 4111 1111 1111 1111 10.0.0.1."
    assert found(text) == [
        (EMAIL, "jane@example.com"),
        (PHONE, "415-555-2671"),
        (CARD, "4111 1111 1111 1111"),
        (IP, "10.0.0.1"),
    ]


def test_a_longer_match_wins_over_the_shorter_one_inside_it() -> None:
    # The IPv4 rule also matches the embedded 192.0.2.1; only the whole IPv6 address is kept.
    assert found("peer ::ffff:192.0.2.1 up") == [(IP, "::ffff:192.0.2.1")]


def test_adjacent_identifiers_are_reported_separately() -> None:
    text = "GB82WEST12345698765432 DE89370400440532013000"
    assert found(text) == [(IBAN, "GB82WEST12345698765432"), (IBAN, "DE89370400440532013000")]


def test_offsets_are_character_offsets_in_non_ascii_text() -> None:
    text = "Zoë\u2019s e-mail: zoe@example.com — 🙂"
    [entity] = DETECTOR.detect(text)
    assert text[entity.start : entity.end] == "zoe@example.com"


def test_can_be_restricted_to_some_types() -> None:
    detector = OfflineDetector(types=frozenset({EntityType.EMAIL}))
    text = "jane@example.com 415-555-2671"
    assert [entity.type for entity in detector.detect(text)] == [EMAIL]


def test_empty_text_has_no_entities() -> None:
    assert DETECTOR.detect("") == []
