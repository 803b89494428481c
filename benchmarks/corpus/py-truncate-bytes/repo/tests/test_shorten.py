from fields.text import pad_field, shorten


def test_shorten_fits_with_ellipsis():
    assert shorten("hello world", 8) == "hello\u2026"
    assert shorten("short", 10) == "short"


def test_pad_field_ascii():
    assert pad_field("ab", 4) == b"ab  "
