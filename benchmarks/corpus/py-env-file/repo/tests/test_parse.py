import pytest

from envfile import EnvSyntaxError, parse


def test_simple_pairs():
    assert parse("A=1\nB = two\n") == {"A": "1", "B": "two"}


def test_value_with_equals_sign():
    assert parse("TOKEN=abc==\n") == {"TOKEN": "abc=="}


def test_missing_equals_is_an_error():
    with pytest.raises(EnvSyntaxError) as info:
        parse("A=1\nJUSTAKEY\n")
    assert info.value.line_number == 2
