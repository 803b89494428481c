"""Checks for what clients put in URLs and headers: cursors, ids, filters, webhook content.

Whatever arrives here is untrusted text. Each check answers a 4xx with a reason or clamps
a value into the range the store can hold, so no request can reach the database with a
value it rejects (a number past 64 bits, a NUL, a lone surrogate) and turn into a 500.
"""

from __future__ import annotations

import json
import re
from typing import Any

from litestar.exceptions import NotFoundException, ValidationException

from loopwright.store.models import MISSION_STATUSES

MAX_CURSOR = 2**63 - 1
"""The largest event sequence number the store can hold (a signed 64-bit integer)."""

MAX_JSON_DEPTH = 64
"""Webhook payloads GitHub sends nest about ten levels; anything deeper is not GitHub's."""

_MISSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_REPO = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_INT_RANGE = (-(2**63), 2**63 - 1)
_TOO_BIG = "a number in the JSON does not fit in 64 bits"
_NUL_OR_SURROGATE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
"""Where a strictly parsed UTF-8 JSON document can get a NUL or a surrogate from: the
parser refuses raw control characters in strings, and UTF-8 decoding refuses encoded
surrogates. (An escaped backslash before `u0000` matches too: the walk then reads the
strings, and finds nothing.)"""
_ESCAPES_ARE_HEX = getattr(json.decoder, "c_scanstring", None) is not None
"""The C string scanner reads a `\\u` escape's four characters as ASCII hex only; the
pure-Python one (used without the C module) takes them through `int(..., 16)`, which
also reads `\\u0_00` or non-ASCII digits as a NUL: then every string is read."""


def clamp_cursor(value: int) -> int:
    """An event cursor (`after`, `Last-Event-ID`) in 0..MAX_CURSOR: negative means from the
    start, past the largest storable sequence number means nothing newer."""
    return min(max(value, 0), MAX_CURSOR)


def parse_cursor(text: str | None) -> int | None:
    """The cursor a header carries, or None when it is absent or not a decimal number."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*([+-]?)0*([0-9]+)\s*", text)
    if match is None:
        return None
    sign, digits = match.groups()
    if len(digits) > 19:  # past 64 bits, whatever the digits (and int() refuses 4300+)
        return 0 if sign == "-" else MAX_CURSOR
    return clamp_cursor(int(sign + digits))


def valid_mission_id(mission_id: str) -> bool:
    """Whether `mission_id` can be a mission id (letters, digits, '_' and '-')."""
    return bool(_MISSION_ID.fullmatch(mission_id))


def check_mission_id(mission_id: str) -> str:
    """The id, or 404 when it cannot be a mission id (so it never reaches the store)."""
    if not _MISSION_ID.fullmatch(mission_id):
        raise NotFoundException("no such mission: mission ids are letters, digits, '_' and '-'")
    return mission_id


def check_status_filter(status: str | None) -> str | None:
    """A `status` query parameter: None for no filter, 400 for a status that does not exist."""
    if not status:
        return None
    if status not in MISSION_STATUSES:
        raise ValidationException(
            f"status must be one of {', '.join(sorted(MISSION_STATUSES))} (or left out)"
        )
    return status


def check_repo_filter(repo: str | None) -> str | None:
    """A `repo` query parameter: None for no filter, 400 unless it reads `owner/name`."""
    if not repo:
        return None
    if not valid_repo(repo):
        raise ValidationException(
            "repo must be a repository's full name, owner/name (letters, digits, '.', '_', '-')"
        )
    return repo


def valid_repo(repo: str) -> bool:
    """Whether `repo` reads like a repository's full name, `owner/name`."""
    return bool(_REPO.fullmatch(repo))


def header_token(value: str, *, limit: int = 200) -> bool:
    """Whether a header value is the printable ASCII a GitHub event name or GUID is."""
    return 0 < len(value) <= limit and value.isascii() and value.isprintable() and " " not in value


def json_problem(payload: Any, document: bytes | None = None) -> str | None:
    """Why a parsed webhook payload cannot be stored as it is, or None when it can.

    Walks the document without recursion: nesting deeper than MAX_JSON_DEPTH, strings with
    a lone surrogate (from a `\\ud800` escape) or a NUL, and integers beyond 64 bits are
    problems; text stores and databases reject each of them.

    `document`, the UTF-8 bytes `payload` was parsed from by a strict parser (`json.loads`
    or msgspec: neither takes a raw control character in a string or bytes that are not
    UTF-8), spares reading every string when it has no escape that could make a NUL or a
    surrogate: a red check's payload is then checked in a fifth of the time. Both ways
    refuse the same documents; one with two problems may be refused for the other one.
    """
    if document is not None and _ESCAPES_ARE_HEX and not _NUL_OR_SURROGATE_ESCAPE.search(document):
        return _structure_problem(payload)
    stack: list[tuple[Any, int]] = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_JSON_DEPTH:
                return f"the JSON nests more than {MAX_JSON_DEPTH} levels deep"
            for key, item in value.items():
                problem = _string_problem(key)
                if problem:
                    return problem
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            if depth > MAX_JSON_DEPTH:
                return f"the JSON nests more than {MAX_JSON_DEPTH} levels deep"
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            problem = _string_problem(value)
            if problem:
                return problem
        elif isinstance(value, int) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            return _TOO_BIG
    return None


def _structure_problem(payload: Any) -> str | None:
    """`json_problem` for a document whose strings are known to be text: only the nesting
    and the integers are read."""
    low, high = _INT_RANGE
    stack: list[tuple[Any, int]] = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        # `type() is`, not isinstance: json.loads makes only these types, and a bool (an
        # int subclass) is always in range.
        kind = type(value)
        if kind is dict or kind is list:
            if depth > MAX_JSON_DEPTH:
                return f"the JSON nests more than {MAX_JSON_DEPTH} levels deep"
            for item in value.values() if kind is dict else value:
                item_kind = type(item)
                if item_kind is dict or item_kind is list:
                    stack.append((item, depth + 1))
                elif item_kind is int and not low <= item <= high:
                    return _TOO_BIG
        elif kind is int and not low <= value <= high:
            return _TOO_BIG
    return None


def _string_problem(text: str) -> str | None:
    if "\x00" in text:
        return "a string in the JSON contains a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "a string in the JSON contains a lone surrogate (e.g. \\ud800), which is not text"
    return None
