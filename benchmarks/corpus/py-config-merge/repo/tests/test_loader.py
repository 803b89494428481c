from settings.loader import DEFAULTS, load


def test_test_environment_overrides_nested_values():
    settings = load("test")
    assert settings["database"]["host"] == "db-test"
    assert settings["database"]["port"] == 5432
    assert settings["database"]["pool"] == {"min": 1, "max": 2}


def test_loading_one_environment_leaves_the_next_alone():
    load("production")
    development = load("development")
    assert development["database"]["host"] == "localhost"
    assert DEFAULTS["database"]["pool"] == {"min": 1, "max": 10}
