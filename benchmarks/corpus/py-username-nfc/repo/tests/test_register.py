import pytest

from accounts.registry import Registry, UsernameTaken


def test_same_name_in_another_case_is_taken():
    reg = Registry()
    reg.register("Ada")
    with pytest.raises(UsernameTaken):
        reg.register("ADA")


def test_composed_and_decomposed_accents_are_one_name():
    reg = Registry()
    reg.register("Jos\u00e9")  # é as one code point
    with pytest.raises(UsernameTaken):
        reg.register("Jose\u0301")  # e + combining acute accent
