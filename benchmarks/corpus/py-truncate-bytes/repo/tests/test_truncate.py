from fields.text import truncate_utf8


def test_ascii():
    assert truncate_utf8("hello world", 5) == "hello"


def test_limit_inside_a_character_drops_it():
    # "é" is two bytes; a limit of 4 cuts it in half.
    assert truncate_utf8("caf\u00e9s", 4) == "caf"
