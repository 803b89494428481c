from shop.cart import Cart


def test_add_merges_same_sku():
    cart = Cart("ada")
    cart.add("pen", 150)
    cart.add("pen", 150, 2)
    assert cart.item_count == 3
    assert cart.total_cents == 450


def test_new_cart_starts_empty():
    first = Cart("ada")
    first.add("book", 1200)
    second = Cart("grace")
    assert second.item_count == 0
    assert second.lines == []
