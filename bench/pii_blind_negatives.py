"""Negative documents of the blind PII set: nothing to redact, numbers shaped like PII (see BRIEF.md).

Each builder returns a document and the type it imitates (the file it is scored under).
"""

from __future__ import annotations

from collections.abc import Callable

from bench import pii_blind_values as values
from bench.pii_blind_docs import CARD, EMAIL, IBAN, IP, PHONE, SSN, Doc, _csv, _json_lines


def _digits(doc: Doc, count: int) -> str:
    return "".join(str(doc.rng.randint(0, 9)) for _ in range(count))


def _ean13(doc: Doc) -> str:
    body = "40" + _digits(doc, 10)
    total = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(body))
    return body + str((10 - total % 10) % 10)


def phone_order_mail(doc: Doc) -> str:
    return (
        f"Your order {doc.order()} has shipped!\nTracking number: 1Z {_digits(doc, 3)} A{_digits(doc, 2)} "
        f"{_digits(doc, 2)} {_digits(doc, 4)} {_digits(doc, 3)}{_digits(doc, 1)}\n"
        f"DHL Express waybill {_digits(doc, 10)}, expected {doc.date()} between 09:00 and 13:00.\n"
        f"Items: 2 x EAN {_ean13(doc)}, 1 x EAN {_ean13(doc)}. Total {doc.amount()} EUR."
    )


def phone_build_log(doc: Doc) -> str:
    records = [
        {"ts": doc.timestamp(), "build": f"{doc.rng.randint(2025, 2026)}{_digits(doc, 4)}.{doc.rng.randint(1, 9)}",
         "commit": _digits(doc, 7), "duration_ms": doc.rng.randint(10**5, 10**7), "epoch": doc.rng.randint(1_700_000_000, 1_800_000_000),
         "version": doc.version(), "artifact_size": doc.rng.randint(10**6, 10**9)}
        for _ in range(doc.rng.randint(2, 4))
    ]
    return _json_lines(records)


def phone_sales_csv(doc: Doc) -> str:
    header = ("order_id", "sku", "qty", "unit_price", "total", "ordered_at", "postcode")
    rows = [
        (doc.order(), f"SKU-{_digits(doc, 3)}-{_digits(doc, 4)}", str(doc.rng.randint(1, 40)), doc.amount(plain=True),
         doc.amount(plain=True), doc.timestamp(), doc.rng.choice((f"{_digits(doc, 5)}", f"{_digits(doc, 2)}-{_digits(doc, 3)}", f"{_digits(doc, 4)}")))
        for _ in range(doc.rng.randint(3, 6))
    ]
    return _csv(header, rows)


def phone_ticket_refs(doc: Doc) -> str:
    return doc.rng.choice(
        (
            f"Re: case {_digits(doc, 3)} {_digits(doc, 3)} {_digits(doc, 4)} - the patch {doc.version()} fixed it, closing. Reopened {doc.date()} 14:{doc.rng.randint(10, 59)}.",
            f"Meeting moved to {doc.date()} 10:30-11:15 (room 4.{_digits(doc, 2)}). Budget line {_digits(doc, 4)}-{_digits(doc, 6)}, cost centre {_digits(doc, 8)}.",
            f"ISBN 978-{doc.rng.randint(0, 9)}-{_digits(doc, 3)}-{_digits(doc, 5)}-{doc.rng.randint(0, 9)} is out of stock; reorder {doc.rng.randint(10, 90)} copies by {doc.date()}.",
            f"Coordinates of the depot: {doc.rng.uniform(40, 60):.6f}, {doc.rng.uniform(-5, 20):.6f}. Gate code {_digits(doc, 4)}, dock {doc.rng.randint(1, 30)}.",
            f"Serial number {_digits(doc, 4)} {_digits(doc, 4)} {_digits(doc, 3)} failed the self-test at {doc.timestamp()}, firmware {doc.version()}.",
            f"Invoice {doc.invoice_no()} of {doc.date()}: {doc.amount()} EUR paid, your customer number is {_digits(doc, 10)}.",
        )
    )


def card_lookalikes(doc: Doc) -> str:
    issuer = next(doc.pools["card"])
    failing = values.card_text(doc.rng, issuer, doc.rng.choice(("spaces", "none")), fail_luhn=True)
    last4 = _digits(doc, 4)
    return doc.rng.choice(
        (
            f"Order reference {failing} confirmed on {doc.date()}.",
            f"Paid with Visa **** **** **** {last4}. Receipt {doc.invoice_no()}.",
            f"Gift card code {_digits(doc, 4)}-{_digits(doc, 4)}-{_digits(doc, 4)}-{_digits(doc, 4)}, PIN ****. Balance {doc.amount()} EUR.",
            f"Device IMEI {_digits(doc, 2)} {_digits(doc, 6)} {_digits(doc, 6)} {_digits(doc, 1)} registered to ticket {doc.order()}.",
            f"USPS tracking 9400 {_digits(doc, 4)} {_digits(doc, 4)} {_digits(doc, 4)} {_digits(doc, 4)} {_digits(doc, 2)}, shipped {doc.date()}.",
            f"Batch {failing} of {doc.date()} settled: {doc.rng.randint(10, 900)} transactions, card ending {last4}.",
            f'{{"txn": "{_digits(doc, 16)}", "masked_pan": "{_digits(doc, 6)}******{last4}", "amount": "{doc.amount()}"}}',
        )
    )


def ssn_lookalikes(doc: Doc) -> str:
    return doc.rng.choice(
        (
            f"Part no. {_digits(doc, 3)}-{_digits(doc, 2)}-{_digits(doc, 4)} (rev B) replaces {_digits(doc, 3)}-{_digits(doc, 2)}-{_digits(doc, 4)}.",
            f"SSN on file: ***-**-{_digits(doc, 4)}. Please verify the last four digits only.",
            "Form W-4 test data: SSN 000-00-0000 is a placeholder; do not submit.",
            f"Ticket {_digits(doc, 3)}-{_digits(doc, 2)}-{_digits(doc, 4)} was merged into {doc.order()}.",
            f"Model {_digits(doc, 3)}-{_digits(doc, 2)}-{_digits(doc, 4)}, lot {_digits(doc, 6)}, expires {doc.date()}.",
            f"Call reference {_digits(doc, 3)}-{_digits(doc, 2)}-{_digits(doc, 4)} logged at {doc.timestamp()}.",
        )
    )


def iban_lookalikes(doc: Doc) -> str:
    country = next(doc.pools["iban"])
    return doc.rng.choice(
        (
            f"Format example: {country}00 0000 0000 0000 0000 00 (enter your own IBAN).",
            f"Creditor reference RF{doc.rng.randint(10, 99)} {_digits(doc, 4)} {_digits(doc, 4)} {_digits(doc, 4)} on invoice {doc.invoice_no()}.",
            f"VAT number {country}{_digits(doc, 9)}, EORI {country}{_digits(doc, 12)}, BIC DEUTDEFFXXX.",
            f"Container MSKU{_digits(doc, 7)} and TGHU{_digits(doc, 7)} loaded on {doc.date()}.",
            f"License key {doc.rng.choice(('AB', 'GB', 'DE'))}{_digits(doc, 2)}-{''.join(doc.rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ0123456789') for _ in range(16))} activated.",
            f"Template: IBAN {country}kk BBBB CCCC CCCC CCCC where kk is the check number.",
            f"Session token {''.join(doc.rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789') for _ in range(24))} expired at {doc.timestamp()}.",
        )
    )


def email_lookalikes(doc: Doc) -> str:
    return doc.rng.choice(
        (
            f"Follow us @example_shop and @{doc.rng.choice(('helpdesk', 'news'))} for updates on release {doc.version()}.",
            f"npm install @example/ui-kit@{doc.version()} @types/node@{doc.rng.randint(18, 22)}.{doc.rng.randint(0, 9)}.0",
            f"Upload logo@2x.png and banner@3x.jpg to the assets folder before {doc.date()}.",
            "git clone git@github.com:example/pipeline.git && cd pipeline",
            f"@dataclass(frozen=True)\nclass Order:\n    id: str  # e.g. {doc.order()}",
            f"docker pull registry.example.com/app@sha256:{''.join(doc.rng.choice('0123456789abcdef') for _ in range(16))}",
        )
    )


def ip_lookalikes(doc: Doc) -> str:
    return doc.rng.choice(
        (
            f"Upgraded the agent from {doc.rng.randint(1, 9)}.{doc.rng.randint(0, 20)}.{doc.rng.randint(0, 9)}.{doc.rng.randint(0, 99)} to version {doc.rng.randint(1, 9)}.{doc.rng.randint(0, 20)}.{doc.rng.randint(0, 9)}.{doc.rng.randint(0, 99)}.",
            f"See section {doc.rng.randint(1, 12)}.{doc.rng.randint(1, 9)}.{doc.rng.randint(1, 9)}.{doc.rng.randint(1, 9)} of the contract.",
            f"OID 1.3.6.1.4.1.{doc.rng.randint(1000, 60000)}.{doc.rng.randint(1, 9)} reported value {doc.rng.randint(0, 100)}.",
            f"Office build 16.0.{doc.rng.randint(10000, 19999)}.{doc.rng.randint(20000, 29999)} installed on {doc.date()}.",
            f"MAC 00:1A:{doc.rng.randint(10, 99)}:3C:4D:{doc.rng.randint(10, 99)} joined VLAN {doc.rng.randint(2, 400)} at {doc.rng.randint(10, 23)}:{doc.rng.randint(10, 59)}:{doc.rng.randint(10, 59)}.",
            f"Call Billing::Invoice::render() then std::vector<int>::size(); see docs {doc.version()}.",
            f"Lap times: 1:02:33.4, 1:01:58.9 and 1:03:07.2 on {doc.date()}.",
        )
    )


NEGATIVES: dict[str, tuple[Callable[[Doc], str], str, int]] = {
    "shipping": (phone_order_mail, PHONE, 8),
    "build-log": (phone_build_log, PHONE, 6),
    "sales-csv": (phone_sales_csv, PHONE, 6),
    "references": (phone_ticket_refs, PHONE, 12),
    "card-like": (card_lookalikes, CARD, 12),
    "ssn-like": (ssn_lookalikes, SSN, 10),
    "iban-like": (iban_lookalikes, IBAN, 10),
    "email-like": (email_lookalikes, EMAIL, 6),
    "ip-like": (ip_lookalikes, IP, 8),
}
