"""Made-up archive documents of four kinds, for training the head and for sample requests.

Each kind has a few templates whose slots are filled from short word lists,
so two documents of a kind share their vocabulary and structure but not
their wording. Seeded by the caller's ``random.Random``.
"""

from __future__ import annotations

import random

LABELS = ("invoice", "contract", "letter", "report")

_COMPANIES = ("Northwind Traders", "Acme Logistics", "Blue River Bakery", "Kestrel Software", "Harbor Print Shop",
              "Greenfield Farms", "Orion Consulting", "Maple Street Dental")
_NAMES = ("Ms Alvarez", "Mr Okafor", "Dr Lindqvist", "Mrs Chen", "Mr Dubois", "Ms Novak", "Professor Hale")
_ITEMS = ("office chairs", "printer toner", "consulting hours", "software licences", "delivery services",
          "cleaning services", "laptop repairs", "catering for the annual meeting")
_MONTHS = ("January", "March", "May", "July", "September", "November")
_EVENTS = ("our office will move to a new address next month", "your application has been received",
           "the meeting has been postponed", "we were delighted by your visit", "your membership has been renewed",
           "the parcel you asked about was returned to us")
_FINDINGS = ("revenue grew", "costs fell", "customer complaints dropped", "delivery times improved",
             "staff turnover increased", "energy use went down")
_TEAMS = ("finance", "operations", "sales", "research", "customer service")

_TEMPLATES: dict[str, tuple[str, ...]] = {
    "invoice": (
        "Invoice no. {number}. Bill to: {company}. {quantity} x {item} at {price} EUR each. Total amount due: "
        "{total} EUR. Payment is due within {days} days of the invoice date.",
        "INVOICE {number} from {company2}. Description: {item}. Subtotal {total} EUR, VAT included. Please pay "
        "by bank transfer quoting the invoice number within {days} days.",
        "Tax invoice {number}, issued {month}. Customer: {company}. Charges for {item}: {total} EUR. Amount "
        "outstanding: {total} EUR. Late payments incur interest.",
    ),
    "contract": (
        "This agreement is made between {company} and {company2}. The supplier shall provide {item} for a term "
        "of {months} months. Either party may terminate this agreement with {days} days written notice.",
        "Service contract. {company2} (the Provider) agrees to deliver {item} to {company} (the Client). This "
        "contract is governed by the laws of the state and is binding on both parties once signed.",
        "Terms and conditions of supply between {company} and {company2}, effective from {month}. Clause 1: "
        "obligations of the parties. Clause 2: liability. Clause 3: termination after {months} months.",
    ),
    "letter": (
        "Dear {name}, thank you for your letter of {month}. I am writing to let you know that {event}. Please do "
        "not hesitate to contact me. Kind regards, {name2}.",
        "Dear {name}, I hope this finds you well. I wanted to tell you personally that {event}. With best "
        "wishes, {name2}, {company}.",
        "Dear {name}, following our conversation in {month}, {event}. Thank you again for your patience. "
        "Yours sincerely, {name2}.",
    ),
    "report": (
        "Quarterly report, {month}. Summary: {finding} by {percent} percent compared with the previous quarter. "
        "The {team} team recommends further analysis. Key figures are shown in the tables below.",
        "Annual report of the {team} department. Findings: {finding}, and {finding2}. Section 2 presents the "
        "methodology and section 3 the results of the review.",
        "Status report for {company}. Over the period, {finding} by {percent} percent while {finding2}. "
        "Recommendations for the next quarter are listed in the appendix.",
    ),
}


def document(kind: str, rng: random.Random) -> str:
    """One made-up document of ``kind`` (one of LABELS)."""
    companies = rng.sample(_COMPANIES, 2)
    names = rng.sample(_NAMES, 2)
    findings = rng.sample(_FINDINGS, 2)
    quantity, price = rng.randint(1, 40), rng.randint(5, 400)
    slots = {
        "number": f"{rng.randint(1000, 9999)}-{rng.randint(10, 99)}", "company": companies[0],
        "company2": companies[1], "name": names[0], "name2": names[1], "item": rng.choice(_ITEMS),
        "quantity": quantity, "price": price, "total": quantity * price, "days": rng.choice((14, 30, 60, 90)),
        "months": rng.choice((6, 12, 24, 36)), "month": rng.choice(_MONTHS), "event": rng.choice(_EVENTS),
        "finding": findings[0], "finding2": findings[1], "percent": rng.randint(2, 30), "team": rng.choice(_TEAMS),
    }
    return rng.choice(_TEMPLATES[kind]).format(**slots)


def labelled_documents(per_label: int, rng: random.Random) -> list[tuple[str, str]]:
    """``per_label`` documents of each kind, as ``(text, label)``, kinds interleaved."""
    return [(document(label, rng), label) for _ in range(per_label) for label in LABELS]
