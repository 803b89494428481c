import pytest

from accounts.registry import InvalidUsername, Registry


def test_lookup_is_case_insensitive():
    reg = Registry()
    reg.register("Grace")
    assert reg.lookup(" grace ") == "Grace"
    assert reg.lookup("nobody") is None


@pytest.mark.parametrize("bad", ["ab", "has space", "x" * 33])
def test_invalid_names(bad):
    with pytest.raises(InvalidUsername):
        Registry().register(bad)
