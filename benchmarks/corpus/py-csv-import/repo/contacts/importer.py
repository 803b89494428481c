"""Import contacts from a CSV export with a header row: name, email, phone (any order)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from contacts.rows import split_rows

REQUIRED = ("name", "email")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


@dataclass(frozen=True)
class Contact:
    name: str
    email: str
    phone: str = ""


@dataclass
class ImportResult:
    contacts: list[Contact] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def import_contacts(lines: Iterable[str]) -> ImportResult:
    rows = split_rows(lines)
    header = [h.lower() for h in next(rows, [])]
    missing = [column for column in REQUIRED if column not in header]
    if missing:
        raise ValueError(f"the header lacks column(s): {', '.join(missing)}")
    result = ImportResult()
    seen: set[str] = set()
    for number, row in enumerate(rows, start=2):
        if len(row) != len(header):
            result.errors.append(f"row {number}: expected {len(header)} fields, got {len(row)}")
            continue
        record = dict(zip(header, row))
        email = record["email"].lower()
        if not _EMAIL.match(email):
            result.errors.append(f"row {number}: {record['email']!r} is not an email address")
        elif email in seen:
            result.errors.append(f"row {number}: {email} appears twice")
        else:
            seen.add(email)
            result.contacts.append(Contact(record["name"], email, record.get("phone", "")))
    return result
