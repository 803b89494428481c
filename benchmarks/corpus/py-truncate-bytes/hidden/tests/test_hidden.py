import pytest

from fields.text import pad_field, shorten, truncate_utf8

SAMPLES = ["na\u00efve caf\u00e9", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "ok \U0001f44d\U0001f3fd done", "\u0416\u0443\u043a"]


@pytest.mark.parametrize("text", SAMPLES)
def test_every_limit_gives_the_longest_fitting_prefix(text):
    for limit in range(len(text.encode("utf-8")) + 2):
        cut = truncate_utf8(text, limit)
        assert text.startswith(cut)
        assert len(cut.encode("utf-8")) <= limit
        longer = text[: len(cut) + 1]
        assert longer == cut or len(longer.encode("utf-8")) > limit


def test_emoji_is_never_split():
    assert truncate_utf8("\U0001f600x", 3) == ""
    assert truncate_utf8("a\U0001f600", 4) == "a"


def test_pad_field_with_multibyte_text_is_exact_width():
    field = pad_field("\u00fc\u00fc\u00fc", 5)
    assert field == "\u00fc\u00fc".encode() + b" "


def test_shorten_multibyte():
    out = shorten("\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", 10)
    assert out == "\u65e5\u672c\u2026"
