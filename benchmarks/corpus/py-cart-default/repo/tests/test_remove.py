import pytest

from shop.cart import Cart, Line


def test_remove_line():
    cart = Cart("ada", [Line("pen", 150, 1), Line("ink", 300, 2)])
    cart.remove("pen")
    assert cart.total_cents == 600


def test_quantity_must_be_positive():
    with pytest.raises(ValueError):
        Cart("ada", []).add("pen", 150, 0)
