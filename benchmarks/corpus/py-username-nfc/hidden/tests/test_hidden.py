import pytest

from accounts.registry import Registry, UsernameTaken


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Zo\u00eb", "Zoe\u0308"),
        ("\u00c5sa", "A\u030asa"),
        ("Fran\u00e7ois", "Franc\u0327ois"),
        ("Ren\u00c9e", "rene\u0301e"),
    ],
)
def test_equivalent_spellings_collide(first, second):
    reg = Registry()
    reg.register(first)
    with pytest.raises(UsernameTaken):
        reg.register(second)
    assert len(reg) == 1


def test_lookup_finds_the_other_spelling():
    reg = Registry()
    reg.register("Mu\u0308ller")
    assert reg.lookup("M\u00fcller") == "Mu\u0308ller"


def test_different_letters_stay_different():
    reg = Registry()
    reg.register("Jose")
    reg.register("Jos\u00e9")
    assert len(reg) == 2
