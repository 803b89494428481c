from shop.cart import Cart


def test_carts_are_independent_in_any_order():
    carts = [Cart(name) for name in ("a", "b", "c")]
    carts[1].add("mug", 800, 2)
    assert [c.item_count for c in carts] == [0, 2, 0]
    carts[2].add("tea", 450)
    assert carts[1].total_cents == 1600
    assert carts[2].total_cents == 450
    assert Cart("d").total_cents == 0


def test_merging_in_one_cart_does_not_touch_another():
    a = Cart("a")
    b = Cart("b")
    a.add("pen", 100)
    b.add("pen", 100)
    a.add("pen", 100)
    assert (a.item_count, b.item_count) == (2, 1)
