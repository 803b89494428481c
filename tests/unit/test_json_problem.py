"""`json_problem` with the raw document, which lets it skip reading the strings when no
escape in it can make a NUL or a surrogate, refuses what the full walk refuses, and for
the same reason when a document has one problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwright.app.params import MAX_JSON_DEPTH, json_problem

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures/webhooks").glob("*.json"))


def _nested(depth: int) -> str:
    return '{"x": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


DOCUMENTS = {
    "nul-escape": '{"a": "comp\\u0000leted"}',
    "nul-escape-in-a-key": '{"x\\u0000": 1}',
    "lone-high-surrogate": '{"a": "\\ud800"}',
    "lone-low-surrogate-upper-case": '{"a": ["\\uDFFF"]}',
    "surrogate-key": '{"\\udbff": 1}',
    "surrogate-pair-is-text": '{"a": "\\ud83d\\ude00"}',
    "escaped-backslash-then-u0000": '{"a": "\\\\u0000"}',
    "escaped-backslash-then-ud800": '{"a": "\\\\ud800"}',
    "other-escapes": '{"a": "\\u00e9\\u4e2d\\n\\"", "b": "\\u0001"}',
    "int64-max": '{"a": 9223372036854775807}',
    "int64-max-plus-one": '{"a": 9223372036854775808}',
    "int64-min": "[-9223372036854775808]",
    "int64-min-minus-one": "[-9223372036854775809]",
    "beyond-64-bits-at-the-top": "123456789012345678901234567890",
    "beyond-64-bits-deep": '{"a": [{"b": [1, 2, 100000000000000000000000]}]}',
    "bools-and-floats": '{"a": [true, false, 1e400, -0.5, null]}',
    f"{MAX_JSON_DEPTH}-levels": _nested(MAX_JSON_DEPTH),
    f"{MAX_JSON_DEPTH + 1}-levels": _nested(MAX_JSON_DEPTH + 1),
    "deep-list-at-the-top": "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
    "a-string-is-the-document": '"\\u0000"',
    "text-is-fine": '{"a": "plain", "b": ["é", "中"]}',
}


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_the_document_gives_the_same_answer_as_the_full_walk(name: str) -> None:
    text = DOCUMENTS[name]
    payload = json.loads(text)
    assert json_problem(payload, text.encode()) == json_problem(payload)


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("nul-escape", "NUL"),
        ("nul-escape-in-a-key", "NUL"),
        ("lone-high-surrogate", "lone surrogate"),
        ("lone-low-surrogate-upper-case", "lone surrogate"),
        ("surrogate-key", "lone surrogate"),
        ("int64-max-plus-one", "64 bits"),
        ("int64-min-minus-one", "64 bits"),
        ("beyond-64-bits-at-the-top", "64 bits"),
        ("beyond-64-bits-deep", "64 bits"),
        (f"{MAX_JSON_DEPTH + 1}-levels", f"more than {MAX_JSON_DEPTH} levels"),
        ("deep-list-at-the-top", f"more than {MAX_JSON_DEPTH} levels"),
        ("a-string-is-the-document", "NUL"),
    ],
)
def test_each_problem_is_found_from_the_document(name: str, found: str) -> None:
    text = DOCUMENTS[name]
    problem = json_problem(json.loads(text), text.encode())
    assert problem is not None and found in problem


@pytest.mark.parametrize(
    "name",
    [
        "surrogate-pair-is-text",
        "escaped-backslash-then-u0000",
        "escaped-backslash-then-ud800",
        "other-escapes",
        "int64-max",
        "int64-min",
        "bools-and-floats",
        f"{MAX_JSON_DEPTH}-levels",
        "text-is-fine",
    ],
)
def test_what_can_be_stored_is_not_refused(name: str) -> None:
    text = DOCUMENTS[name]
    assert json_problem(json.loads(text), text.encode()) is None


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_every_recorded_payload_passes_both_ways(path: Path) -> None:
    raw = path.read_bytes()
    payload = json.loads(raw)
    assert json_problem(payload, raw) is None
    assert json_problem(payload) is None


def test_the_strings_are_not_read_when_the_document_has_no_such_escape() -> None:
    """What makes the check cheap: given a document without the escapes, the strings are
    trusted (here the payload is not what the document parses to, which no caller does)."""
    payload = {"a": "x\x00", "b": ["\ud800"]}
    assert json_problem(payload, b'{"a": "x", "b": ["y"]}') is None
    assert json_problem(payload, b'{"a": "x\\u0000"}') is not None
    assert json_problem(payload) is not None


@pytest.mark.parametrize(
    "text",
    [
        '"\\u0_00"',
        '"\\u 000"',
        '"\\u\u0660\u0660\u0660\u0660"',
        '"\\U0000"',
        '"\\uD\u066800"',
        '{"a\x00": 1}',
        '"a\x00"',
    ],
    ids=[
        "underscore",
        "space",
        "arabic-digits",
        "upper-u",
        "mixed-digits",
        "raw-nul-key",
        "raw-nul",
    ],
)
def test_the_parser_refuses_every_other_way_to_a_nul_or_a_surrogate(text: str) -> None:
    """The premise of skipping the strings, attacked: escapes the regex does not match and
    raw control characters are refused by the parser the webhook uses, and an encoded
    surrogate by the UTF-8 decoder."""
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(UnicodeDecodeError):
        b'"\xed\xa0\x80"'.decode("utf-8")
