from invoice import Line, invoice_total, line_total


def test_line_without_discount():
    assert line_total(Line("pen", 250, quantity=4)) == 1000


def test_line_with_percentage_discount():
    # 10% off 4 x 2.50 is 9.00
    assert line_total(Line("pen", 250, quantity=4, discount_percent=10)) == 900


def test_invoice_adds_vat_on_discounted_lines():
    lines = [Line("pen", 250, quantity=4, discount_percent=10), Line("pad", 300)]
    assert invoice_total(lines, vat_percent=20) == 1440


def test_empty_invoice_is_zero():
    assert invoice_total([], vat_percent=20) == 0
