import json
import random
import re

import pytest

from loopwright.events import Event, EventBus, EventList, NdjsonWriter
from loopwright.missions.result import MissionResult
from loopwright.redaction import MASK, TOKEN_PATTERN, Redactor, encoded_forms, redacted_result


@pytest.mark.parametrize(
    "token",
    [
        "ghs_CANARYabcdefghijklmnop",
        "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "github_pat_11ABCDEFG_abcdefghijklmnop",
        "sk-CANARY-abcdefghijklmnop",
        "gho_abcdefghijklmnop",
    ],
)
def test_token_shaped_strings_are_masked(token):
    assert Redactor().text(f"token={token} end") == f"token={MASK} end"


def test_configured_secrets_are_masked_anywhere_in_nested_data():
    redactor = Redactor(["hunter2-secret"])
    data = {"a": ["x hunter2-secret y", {"b": "hunter2-secret"}], "n": 3}
    assert redactor.data(data) == {"a": [f"x {MASK} y", {"b": MASK}], "n": 3}


@pytest.mark.parametrize("token", ["sk-abcdefgh", "ghp_abcdefgh", "github_pat_abcdefgh"])
def test_the_shortest_token_shapes_are_masked_whole_and_inside_text(token):
    assert Redactor().text(token) == MASK
    assert Redactor().text(f"a{token}") == f"a{MASK}"


def test_a_value_that_is_exactly_a_secret_or_its_shortest_form_is_masked():
    secret = "pw-7"  # the shortest secret kept; its encodings are all longer
    shortest = min(encoded_forms(secret), key=len)
    assert Redactor([secret]).text(shortest) == MASK
    assert Redactor([secret, "a-much-longer-secret-value"]).text(secret) == MASK


def test_masking_matches_both_patterns_applied_to_every_string():
    """The length and substring checks that let most strings skip the patterns never let
    one through that the patterns would have masked."""
    secrets = ["pw-7", "hunter2-secret", "x" * 40 + "/+=?&"]
    forms = sorted({f for s in secrets for f in encoded_forms(s)}, key=len, reverse=True)
    every_form = re.compile("|".join(map(re.escape, forms)))

    def reference(value: str) -> str:
        return TOKEN_PATTERN.sub(MASK, every_form.sub(MASK, value))

    tokens = ["sk-abcdefgh", "ghs_abcdefgh", "github_pat_abcdefgh", "gho_abcdefghijk"]
    pieces = [*forms, *tokens, *(t[:-1] for t in tokens), *(f[:-1] for f in forms)]
    pieces += ["_", "sk-", "a", " ", "-", "ghp", "%2F", "=="]
    chooser = random.Random(17)
    redactor = Redactor(secrets)
    masked = 0
    for _ in range(4000):
        value = "".join(chooser.choice(pieces) for _ in range(chooser.randint(1, 4)))
        value = value[chooser.randint(0, 2) :]
        expected = reference(value)
        assert redactor.text(value) == expected, value
        masked += expected != value
    assert masked > 1000  # the strings really held secrets and tokens to mask


def test_ordinary_text_is_untouched():
    text = "skip this test; ghost_town; task-1"
    assert Redactor().text(text) == text


def test_bus_numbers_redacts_and_writes_ndjson(tmp_path):
    sink = EventList()
    path = tmp_path / "events.ndjson"
    writer = NdjsonWriter(path)
    bus = EventBus("m1", [sink, writer], Redactor(["s3cr3t-value"]), clock=lambda: 100.0)
    bus.enter("prepare")
    bus.emit(
        "tool_result",
        id="c1",
        tool="run_command",
        output="leaked s3cr3t-value and ghs_abcdefghijklmnop",
        status="ok",
    )
    writer.close()
    assert [e.seq for e in sink.events] == [1, 2]
    assert sink.events[0].stage == "prepare" and sink.events[1].stage == "prepare"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[1]["output"] == f"leaked {MASK} and {MASK}"
    assert set(lines[1]) >= {"seq", "ts", "mission", "type", "stage", "status"}
    assert Event.from_dict(lines[1]) == sink.events[1]


# -- encoded forms of configured secrets (SECURITY 44) ---------------------------------------

CANARY = "CANARY-model-key/0123+456789?&="


def _encodings(secret: str) -> dict[str, str]:
    import base64
    import urllib.parse

    data = secret.encode()
    forms = {
        "hex": data.hex(),
        "HEX": data.hex().upper(),
        "url": urllib.parse.quote(secret, safe=""),
        "url-lower": re.sub(
            r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), urllib.parse.quote(secret, safe="")
        ),
        "url-plus": urllib.parse.quote_plus(secret),
    }
    for name, encode in (("b64", base64.b64encode), ("b64url", base64.urlsafe_b64encode)):
        forms[name] = encode(data).decode()
        forms[f"{name}-nopad"] = encode(data).decode().rstrip("=")
    return forms


@pytest.mark.parametrize("form", sorted(_encodings(CANARY)))
def test_each_encoding_of_a_configured_secret_is_masked(form):
    encoded = _encodings(CANARY)[form]
    assert encoded != CANARY
    masked = Redactor([CANARY]).text(f"out: {encoded} :end")
    assert masked == f"out: {MASK} :end", (form, masked)


def _decodes_to(piece: str, needle: bytes, *, urlsafe: bool) -> bool:
    """Whether any 4-aligned stretch of `piece` decodes to bytes containing `needle`."""
    import base64

    for start in range(4):
        chunk = piece[start:]
        chunk = chunk[: len(chunk) - len(chunk) % 4]
        try:
            raw = base64.b64decode(chunk, altchars=b"-_" if urlsafe else None)
        except ValueError:
            continue
        if needle in raw:
            return True
    return False


@pytest.mark.parametrize("offset", [0, 1, 2])
@pytest.mark.parametrize("urlsafe", [False, True], ids=["standard", "urlsafe"])
def test_base64_of_a_secret_inside_a_longer_stream_is_masked_at_every_alignment(offset, urlsafe):
    import base64

    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    secret = "k3y//CANARY>>value?"
    stream = encode(b"x" * offset + secret.encode() + b" and some more bytes").decode()
    assert _decodes_to(stream, b"CANARY", urlsafe=urlsafe)  # the probe finds it unmasked
    masked = Redactor([secret]).text(stream)
    assert MASK in masked
    for piece in masked.split(MASK):
        assert not _decodes_to(piece, b"CANARY", urlsafe=urlsafe), masked


def test_short_secrets_do_not_mask_ordinary_text_through_their_encodings():
    # Four characters is the shortest secret kept; its short encodings are ignored.
    redactor = Redactor(["abcd"])
    text = "YWJj is not enough; 61626364 is hex; plain abcd"
    assert redactor.text(text) == f"YWJj is not enough; {MASK} is hex; plain {MASK}"


def test_events_mask_encoded_secrets_before_any_sink_sees_them(tmp_path):
    import base64

    sink = EventList()
    bus = EventBus("m1", [sink], Redactor([CANARY]), clock=lambda: 1.0)
    b64 = base64.b64encode(CANARY.encode()).decode()
    bus.emit(
        "tool_result",
        id="c1",
        tool="run_command",
        output=f"{b64}\n{CANARY.encode().hex()}\n",
        status="ok",
    )
    output = sink.events[0].to_dict()["output"]
    assert output == f"{MASK}\n{MASK}\n"


def test_events_carry_a_lone_surrogate_as_u_fffd_and_write_as_utf8(tmp_path):
    """Half of a surrogate pair (a model's `\\ud800`, a file name's undecodable byte under
    surrogateescape) is no character: every sink writes UTF-8, so the bus replaces it."""
    writer = NdjsonWriter(tmp_path / "events.ndjson")
    bus = EventBus("m1", [writer], Redactor())
    bus.emit("error", message="caf\udce9 and \ud800", kind="X")
    writer.close()
    line = (tmp_path / "events.ndjson").read_text(encoding="utf-8")
    assert json.loads(line)["message"] == "caf\ufffd and \ufffd"
    assert bus.scrub({"a": ["\udfff"]}) == {"a": ["\ufffd"]}


def test_a_stored_result_keeps_a_patch_with_bytes_that_are_not_utf8_exact():
    """A patch read with surrogateescape carries a Latin-1 byte as a lone surrogate; the
    stored result (what the API serves for `git apply`) must keep it, unlike an event."""
    patch = "--- a/latin1.txt\n+++ b/latin1.txt\n@@ -1 +1 @@\n-caf\udce9\n+caf\udce9 au lait\n"
    stored = redacted_result(
        MissionResult(mission="m1", status="verified", patch=patch), Redactor()
    )
    assert stored.patch == patch
    assert stored.patch.encode("utf-8", "surrogateescape").count(b"\xe9") == 2
