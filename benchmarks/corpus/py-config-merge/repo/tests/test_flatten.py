from settings.merge import flatten, merge


def test_flatten():
    assert flatten({"a": 1, "b": {"c": 2, "d": {"e": 3}}}) == {"a": 1, "b.c": 2, "b.d.e": 3}


def test_scalar_replaces_dict():
    assert merge({"a": {"b": 1}}, {"a": 5}) == {"a": 5}
