import copy

from settings.loader import DEFAULTS, load
from settings.merge import merge


def test_merge_changes_neither_argument():
    base = {"a": {"b": {"c": 1, "d": 2}}, "x": 1}
    override = {"a": {"b": {"c": 9}}, "y": {"z": 1}}
    base_before, override_before = copy.deepcopy(base), copy.deepcopy(override)
    result = merge(base, override)
    assert result == {"a": {"b": {"c": 9, "d": 2}}, "x": 1, "y": {"z": 1}}
    assert base == base_before
    assert override == override_before


def test_every_environment_sees_pristine_defaults():
    snapshot = copy.deepcopy(DEFAULTS)
    for env in ("test", "production", "development", "test"):
        load(env, {"cache": {"backend": "redis"}})
    assert DEFAULTS == snapshot
    assert load("development")["cache"] == {"backend": "memory", "ttl": 300}


def test_changing_a_loaded_result_does_not_leak():
    first = load("production")
    first["database"]["pool"]["max"] = 1
    assert load("production")["database"]["pool"]["max"] == 50
