"""Positive documents of the blind PII set, one builder per document shape (see bench.pii_blind_docs)."""

from __future__ import annotations

from bench.pii_blind_docs import Builder, Doc, _csv, _json_lines
from bench.pii_blind_values import REGION_LANGUAGE, person

# Support-ticket prose per language: (late order, call me back, refund to account, sign-off).
_TICKET = {
    "en": ("Hi, my order {order} placed on {date} still has not arrived.", "Please call me back, {label}: {phone}, or reply to {email}.", "If it is lost, refund {amount} EUR to my account, IBAN {iban}.", "Thanks, {name}"),
    "de": ("Hallo, meine Bestellung {order} vom {date} ist noch nicht angekommen.", "Bitte rufen Sie mich zurück, {label}: {phone}, oder schreiben Sie an {email}.", "Falls sie verloren ist, erstatten Sie bitte {amount} EUR auf mein Konto, IBAN {iban}.", "Viele Grüße, {name}"),
    "fr": ("Bonjour, ma commande {order} du {date} n'est toujours pas arrivée.", "Merci de me rappeler, {label} : {phone}, ou de répondre à {email}.", "Si elle est perdue, remboursez {amount} EUR sur mon compte, IBAN {iban}.", "Cordialement, {name}"),
    "es": ("Hola, mi pedido {order} del {date} todavía no ha llegado.", "Por favor, llámenme, {label}: {phone}, o escriban a {email}.", "Si se ha perdido, devuelvan {amount} EUR a mi cuenta, IBAN {iban}.", "Saludos, {name}"),
    "it": ("Buongiorno, il mio ordine {order} del {date} non è ancora arrivato.", "Potete richiamarmi, {label}: {phone}, oppure scrivere a {email}.", "Se è andato perso, rimborsate {amount} EUR sul mio conto, IBAN {iban}.", "Grazie, {name}"),
    "nl": ("Hallo, mijn bestelling {order} van {date} is nog steeds niet aangekomen.", "Bel mij alstublieft terug, {label}: {phone}, of mail naar {email}.", "Als het pakket kwijt is, stort dan {amount} EUR terug op mijn rekening, IBAN {iban}.", "Met vriendelijke groet, {name}"),
    "pt": ("Olá, a minha encomenda {order} de {date} ainda não chegou.", "Por favor liguem-me, {label}: {phone}, ou escrevam para {email}.", "Se se perdeu, devolvam {amount} EUR para a minha conta, IBAN {iban}.", "Obrigado, {name}"),
    "sv": ("Hej, min beställning {order} från {date} har fortfarande inte kommit.", "Ring mig gärna, {label}: {phone}, eller mejla {email}.", "Om paketet har försvunnit, betala tillbaka {amount} EUR till mitt konto, IBAN {iban}.", "Hälsningar, {name}"),
    "pl": ("Dzień dobry, moje zamówienie {order} z {date} wciąż nie dotarło.", "Proszę o kontakt, {label}: {phone}, lub e-mail {email}.", "Jeśli paczka zaginęła, proszę zwrócić {amount} EUR na moje konto, IBAN {iban}.", "Pozdrawiam, {name}"),
}  # fmt: skip
_TICKET_REGIONS = {"en": ("GB", "IE", "US", "AU"), "de": ("DE", "AT", "CH"), "fr": ("FR", "BE", "LU"), "es": ("ES", "MX"),
                   "it": ("IT",), "nl": ("NL",), "pt": ("PT", "BR"), "sv": ("SE",), "pl": ("PL",)}  # fmt: skip
_IBAN_OF = {"GB": "GB", "IE": "IE", "DE": "DE", "AT": "AT", "CH": "CH", "FR": "FR", "BE": "BE", "LU": "LU",
            "ES": "ES", "IT": "IT", "NL": "NL", "PT": "PT", "SE": "SE", "PL": "PL"}  # fmt: skip


def ticket_late_order(doc: Doc) -> str:
    language = doc.rng.choice(sorted(_TICKET))
    region = doc.rng.choice(_TICKET_REGIONS[language])
    first, last = person(doc.rng)
    late, call, refund, bye = _TICKET[language]
    lines = [f"Ticket {doc.order()} · {doc.date()}", late.format(order=doc.order(), date=doc.date())]
    phone, mail = doc.phone(region), doc.email(first, last)
    lines.append(call.format(label=doc.label(region), phone=phone, email=mail))
    if region in _IBAN_OF and doc.rng.random() < 0.6:
        lines.append(refund.format(amount=doc.amount(), iban=doc.iban(_IBAN_OF[region])))
    lines.append(bye.format(name=f"{first} {last}"))
    return "\n".join(lines)


def ticket_card_charge(doc: Doc) -> str:
    first, last = person(doc.rng)
    card = doc.card()
    opener = doc.rng.choice(
        (
            f"I was charged twice for order {doc.order()}. The card is {card}, expiry 0{doc.rng.randint(1, 9)}/2{doc.rng.randint(7, 9)}.",
            f"My credit card number {card} was declined at checkout although it works elsewhere.",
            f"Please remove the card {card} from my account, I reported it stolen on {doc.date()}.",
            f"Payment failed with error E{doc.rng.randint(100, 999)} using {card} (order {doc.order()}).",
        )
    )
    agent = f"Agent note: customer verified by e-mail {doc.email(first, last)}; last login from {doc.ip()}."
    return f"Subject: payment problem\n{opener}\n{first} {last}\n---\n{agent}"


def ticket_us_tax(doc: Doc) -> str:
    first, last = person(doc.rng)
    labelled = doc.rng.choice(
        (
            lambda: f"my SSN is {doc.ssn()}",
            lambda: f"Social Security Number: {doc.ssn(doc.rng.choice(('dashes', 'spaces', 'none')))}",
            lambda: f"SSN {doc.ssn(doc.rng.choice(('dashes', 'none')))}",
            lambda: f"I typed {doc.ssn()} into the tax ID field",
        )
    )()
    return (
        f"Hello, I cannot download my 1099 for tax year {doc.rng.randint(2023, 2025)}. For verification, {labelled}. "
        f"You can reach me at {doc.phone('US', doc.rng.choice(('national', 'dashed', 'international')))} "
        f"or {doc.email(first, last)}.\n{first} {last}"
    )


def ticket_account_lockout(doc: Doc) -> str:
    first, last = person(doc.rng)
    region = doc.region()
    return (
        f"[{doc.timestamp()}] Account locked for {doc.email(first, last)} after 5 failed logins "
        f"from {doc.ip()} and {doc.ip()}.\nCustomer called from {doc.phone(region, 'international')} "
        f"to unlock it. Case {doc.order()} closed, app version {doc.version()}."
    )


def csv_customers(doc: Doc) -> str:
    header = ("customer_id", "name", "email", "phone", "country", "created")
    rows = []
    for _ in range(doc.rng.randint(3, 6)):
        first, last = person(doc.rng)
        region = doc.region()
        rows.append((str(doc.rng.randint(100000, 999999)), f"{first} {last}", doc.email(first, last),
                     doc.phone(region), region, doc.date()))  # fmt: skip
    return _csv(header, rows)


def csv_payouts(doc: Doc) -> str:
    header = ("payout_id", "beneficiary", "iban", "amount", "currency", "reference")
    rows = []
    for _ in range(doc.rng.randint(2, 5)):
        first, last = person(doc.rng)
        rows.append((f"po_{doc.rng.randint(10**9, 10**10 - 1)}", f"{first} {last}", doc.iban(grouped=doc.rng.random() < 0.3),
                     doc.amount(plain=True), "EUR", doc.invoice_no()))  # fmt: skip
    return _csv(header, rows)


def csv_refunds(doc: Doc) -> str:
    header = ("refund_id", "order_id", "card_number", "amount", "requested_by", "date")
    rows = []
    for _ in range(doc.rng.randint(2, 5)):
        rows.append((str(doc.rng.randint(10**7, 10**8 - 1)), doc.order(), doc.card(doc.rng.choice(("none", "spaces"))),
                     doc.amount(plain=True), doc.email(), doc.date()))  # fmt: skip
    return _csv(header, rows)


def csv_employees(doc: Doc) -> str:
    header = ("employee_no", "full_name", "ssn", "work_phone", "hire_date")
    rows = []
    for _ in range(doc.rng.randint(2, 5)):
        first, last = person(doc.rng)
        rows.append((f"E{doc.rng.randint(10000, 99999)}", f"{first} {last}", doc.ssn(doc.rng.choice(("dashes", "none"))),
                     doc.phone("US", doc.rng.choice(("national", "dashed", "compact"))), doc.date()))  # fmt: skip
    return _csv(header, rows)


def csv_access_log(doc: Doc) -> str:
    header = ("time", "client_ip", "method", "path", "status", "bytes", "user")
    rows = []
    for _ in range(doc.rng.randint(3, 6)):
        user = doc.email() if doc.rng.random() < 0.5 else "-"
        rows.append((doc.timestamp(), doc.ip(private=doc.rng.random() < 0.15), doc.rng.choice(("GET", "POST")),
                     f"/api/v{doc.rng.randint(1, 3)}/orders/{doc.rng.randint(10**5, 10**6)}", str(doc.rng.choice((200, 201, 404, 500))),
                     str(doc.rng.randint(200, 90000)), user))  # fmt: skip
    return _csv(header, rows)


def csv_call_log(doc: Doc) -> str:
    header = ("call_id", "started", "duration_s", "caller", "callee", "queue")
    rows = []
    for _ in range(doc.rng.randint(3, 5)):
        rows.append((str(doc.rng.randint(10**9, 10**10 - 1)), doc.timestamp(), str(doc.rng.randint(5, 3600)),
                     doc.phone(doc.region(), doc.rng.choice(("e164", "international"))), doc.phone(doc.region(), "e164"),
                     doc.rng.choice(("billing", "support", "sales"))))  # fmt: skip
    return _csv(header, rows)


def json_gateway(doc: Doc) -> str:
    records = []
    for _ in range(doc.rng.randint(2, 4)):
        records.append({"ts": doc.timestamp(), "level": "INFO", "requestId": doc.request_id(), "sourceIp": doc.ip(),
                        "path": f"/v1/accounts/{doc.rng.randint(10**5, 10**6)}", "status": doc.rng.choice((200, 403)),
                        "latencyMs": doc.rng.randint(3, 900), "userAgent": f"app/{doc.version()} (iOS 17.{doc.rng.randint(0, 6)})"})  # fmt: skip
    return _json_lines(records)


def json_payment(doc: Doc) -> str:
    first, last = person(doc.rng)
    record = {"ts": doc.timestamp(), "level": "ERROR", "service": "payments", "event": "charge_failed",
              "order": doc.order(), "amount": doc.amount(), "customer": {"email": doc.email(first, last),
              "phone": doc.phone(doc.region()), "card": doc.card()}, "attempt": doc.rng.randint(1, 3),
              "ip": doc.ip()}  # fmt: skip
    return _json_lines([record])


def json_login_audit(doc: Doc) -> str:
    records = []
    for _ in range(doc.rng.randint(2, 3)):
        records.append({"time": doc.timestamp(), "event": doc.rng.choice(("login", "mfa_challenge", "password_reset")),
                        "user": doc.email(), "remote_addr": doc.ip(), "mfa_phone": doc.phone(doc.region(), "e164"),
                        "session": doc.request_id()})  # fmt: skip
    return _json_lines(records)


def json_kyc(doc: Doc) -> str:
    first, last = person(doc.rng)
    record = {"ts": doc.timestamp(), "msg": "kyc submitted", "applicant": {"name": f"{first} {last}",
              "ssn": doc.ssn(doc.rng.choice(("dashes", "none"))), "mobile": doc.phone("US"),
              "bank_account": {"iban": doc.iban(grouped=False)}}, "doc_id": doc.invoice_no()}  # fmt: skip
    return _json_lines([record])


def email_signature(doc: Doc) -> str:
    region = doc.region()
    first, last = person(doc.rng)
    sender = doc.email(first, last)
    to = doc.email()
    label_a, label_b = doc.label(region), doc.label(region)
    body = doc.rng.choice(
        (
            f"Please find attached invoice {doc.invoice_no()} for order {doc.order()}.",
            f"Following up on our call on {doc.date()}: the new release {doc.version()} is scheduled.",
            f"Could you confirm the delivery date for PO {doc.order()}?",
        )
    )
    signature = f"{first} {last}\n{label_a} {doc.phone(region, 'international')}"
    if doc.rng.random() < 0.6:
        signature += f"\n{label_b} {doc.phone(region, doc.rng.choice(('national', 'dotted', 'dashed', 'trunk', '00')))}"
    return f"From: {first} {last} <{sender}>\nTo: {to}\nDate: {doc.date()}\nSubject: Re: {doc.order()}\n\n{body}\n\n--\n{signature}"


def email_bank_change(doc: Doc) -> str:
    first, last = person(doc.rng)
    country = doc.rng.choice(("DE", "FR", "NL", "BE", "ES", "IT", "AT", "CH", "PL", "PT", "SE", "DK", "FI", "NO", "IE",
                              "GB", "LU", "CZ", "SK", "SI", "HR", "HU", "RO", "BG", "GR", "CY", "MT", "EE", "LV", "LT",
                              "IS", "AD"))  # fmt: skip
    label = doc.rng.choice(("IBAN", "IBAN:", "new IBAN", "account (IBAN)"))
    return (
        f"From: {doc.email(first, last)}\nTo: {doc.email()}\nSubject: Updated bank details\n\n"
        f"Dear accounts team,\nfrom invoice {doc.invoice_no()} on, please pay to our new account.\n"
        f"{label} {doc.iban(country)}\nBIC: {doc.rng.choice(('DEUTDEFFXXX', 'BNPAFRPP', 'INGBNL2A', 'CAIXESBB'))}\n"
        f"Our old account will close on {doc.date()}.\nKind regards,\n{first} {last}"
    )


def email_thread_ips(doc: Doc) -> str:
    first, last = person(doc.rng)
    return (
        f"From: {first} {last} <{doc.email(first, last)}>\nCc: {doc.email()}, {doc.email()}\n\n"
        f"The firewall blocked {doc.ip(4)} and {doc.ip(6)} last night (rule {doc.rng.randint(100, 999)}). "
        f"The allowed list now has {doc.ip(4)}:{doc.rng.choice((443, 8443, 22))} and [{doc.ip(6)}]:443.\n"
        f"Ticket {doc.order()} tracks it."
    )


def chat_support(doc: Doc) -> str:
    region = doc.region()
    first, last = person(doc.rng)
    hh, mm = doc.rng.randint(8, 20), doc.rng.randint(0, 50)
    lines = [
        f"[{hh:02d}:{mm:02d}] Agent: Hi {first}, how can I help?",
        f"[{hh:02d}:{mm + 1:02d}] {first}: my parcel {doc.order()} never came",
        f"[{hh:02d}:{mm + 2:02d}] Agent: Sorry! Can you confirm the e-mail on the account?",
        f"[{hh:02d}:{mm + 3:02d}] {first}: {doc.email(first, last)}",
        f"[{hh:02d}:{mm + 5:02d}] Agent: And a number for the courier?",
        f"[{hh:02d}:{mm + 6:02d}] {first}: {doc.rng.choice(('its ', 'sure ', '', 'call me on '))}{doc.phone(region)}",
    ]
    return "\n".join(lines)


def chat_refund(doc: Doc) -> str:
    first, _ = person(doc.rng)
    card = doc.card(doc.rng.choice(("none", "spaces")))
    what = doc.rng.choice(
        (f"the refund should go to the card {card}", f"i paid with {card}", f"card no {card} pls refund there")
    )
    return (
        f"{first} ({doc.timestamp()}): hi, order {doc.order()} arrived broken\n"
        f"Bot: I can start a refund of {doc.amount()} EUR.\n{first}: ok {what}\n"
        f"Bot: Done. Reference {doc.invoice_no()}."
    )


def chat_bank(doc: Doc) -> str:
    first, _ = person(doc.rng)
    return (
        f"{first}: can you send the money by transfer instead?\nAgent: Sure, what is your IBAN?\n"
        f"{first}: {doc.iban()}\nAgent: Thanks, it will arrive within 3 working days (ref {doc.invoice_no()})."
    )


def invoice(doc: Doc) -> str:
    seller_region = doc.rng.choice(("DE", "FR", "NL", "IT", "ES", "AT", "BE", "PL", "PT", "SE", "DK", "FI", "IE", "GB"))
    language = REGION_LANGUAGE[seller_region]
    first, last = person(doc.rng)
    lines = [
        f"INVOICE {doc.invoice_no()}        Date: {doc.date()}",
        f"Seller: Example Trading Ltd., {doc.label(seller_region)} {doc.phone(seller_region)}, {doc.email()}",
        f"Buyer: {first} {last}, {doc.email(first, last)}",
        f"Order {doc.order()} · customer no. {doc.rng.randint(10000, 99999)}",
        f"Total due: {doc.amount()} EUR, within 14 days",
        f"{doc.rng.choice(('Bank', 'Bankverbindung', 'Banque', 'Bank details'))}: IBAN {doc.iban(seller_region)} · BIC "
        f"{doc.rng.choice(('COBADEFFXXX', 'ABNANL2A', 'BCITITMM', 'BSCHESMM'))}",
    ]
    if language != "en" and doc.rng.random() < 0.5:
        lines.append(f"VAT ID {seller_region}{doc.rng.randint(10**8, 10**9 - 1)}")
    return "\n".join(lines)


POSITIVES: dict[str, tuple[Builder, int]] = {
    "ticket-order": (ticket_late_order, 24),
    "ticket-card": (ticket_card_charge, 12),
    "ticket-tax": (ticket_us_tax, 12),
    "ticket-lockout": (ticket_account_lockout, 8),
    "csv-customers": (csv_customers, 8),
    "csv-payouts": (csv_payouts, 6),
    "csv-refunds": (csv_refunds, 5),
    "csv-employees": (csv_employees, 5),
    "csv-access": (csv_access_log, 5),
    "csv-calls": (csv_call_log, 6),
    "json-gateway": (json_gateway, 8),
    "json-payment": (json_payment, 12),
    "json-login": (json_login_audit, 8),
    "json-kyc": (json_kyc, 8),
    "email-signature": (email_signature, 22),
    "email-bank": (email_bank_change, 12),
    "email-ips": (email_thread_ips, 8),
    "chat-support": (chat_support, 14),
    "chat-refund": (chat_refund, 8),
    "chat-bank": (chat_bank, 8),
    "invoice": (invoice, 25),
}
