import pytest

from loopwright.config import ConfigError, Settings, parse_repo_config


def test_defaults_are_three_nemotron_tiers_cheapest_first():
    settings = Settings.from_env({})
    assert settings.tier_names == ["nano", "super", "ultra"]
    assert all("Nemotron" in t.model for t in settings.tiers)
    assert settings.escalate_after == 3
    assert settings.max_steps == 40
    assert settings.model_base_url.startswith("https://api.tokenfactory.nebius.com")


def test_tiers_prices_and_limits_from_environment():
    settings = Settings.from_env(
        {
            "LOOPWRIGHT_MODEL_TIERS": "small=m-1, big=m-2",
            "LOOPWRIGHT_MODEL_PRICES": "small=1/2,big=10/20",
            "LOOPWRIGHT_ESCALATE_AFTER": "2",
            "LOOPWRIGHT_MAX_STEPS": "7",
            "LOOPWRIGHT_MAX_COST_USD": "0.5",
            "LOOPWRIGHT_COMMAND_TIMEOUT_S": "12.5",
            "LOOPWRIGHT_SANDBOX": "local",
        }
    )
    assert [(t.name, t.model) for t in settings.tiers] == [("small", "m-1"), ("big", "m-2")]
    assert settings.tier("big").cost(1_000_000, 500_000) == pytest.approx(20.0)
    assert (settings.escalate_after, settings.max_steps) == (2, 7)
    assert settings.max_cost_usd == 0.5
    assert settings.command_timeout_s == 12.5
    assert settings.sandbox == "local"


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"LOOPWRIGHT_MODEL_TIERS": "nano"}, "LOOPWRIGHT_MODEL_TIERS"),
        ({"LOOPWRIGHT_MODEL_TIERS": "a=x,a=y"}, "LOOPWRIGHT_MODEL_TIERS"),
        ({"LOOPWRIGHT_MODEL_TIERS": " , "}, "LOOPWRIGHT_MODEL_TIERS"),
        ({"LOOPWRIGHT_MODEL_PRICES": "nano=cheap"}, "LOOPWRIGHT_MODEL_PRICES"),
        ({"LOOPWRIGHT_ESCALATE_AFTER": "three"}, "LOOPWRIGHT_ESCALATE_AFTER"),
        ({"LOOPWRIGHT_ESCALATE_AFTER": "0"}, "LOOPWRIGHT_ESCALATE_AFTER"),
        ({"LOOPWRIGHT_MAX_STEPS": "-1"}, "LOOPWRIGHT_MAX_STEPS"),
        ({"LOOPWRIGHT_MAX_COST_USD": "lots"}, "LOOPWRIGHT_MAX_COST_USD"),
        ({"LOOPWRIGHT_COMMAND_TIMEOUT_S": "0"}, "LOOPWRIGHT_COMMAND_TIMEOUT_S"),
        ({"LOOPWRIGHT_MODEL_BASE_URL": "api.example.com"}, "LOOPWRIGHT_MODEL_BASE_URL"),
        ({"LOOPWRIGHT_SANDBOX": "vm"}, "LOOPWRIGHT_SANDBOX"),
        ({"LOOPWRIGHT_NETWORK": "sometimes"}, "LOOPWRIGHT_NETWORK"),
    ],
    ids=lambda v: next(iter(v.items()))[1] if isinstance(v, dict) else v,
)
def test_malformed_settings_name_the_variable_in_one_line(env, names):
    with pytest.raises(ConfigError) as err:
        Settings.from_env(env)
    message = str(err.value)
    assert names in message
    assert "\n" not in message


def test_secrets_lists_the_model_key():
    settings = Settings.from_env({"LOOPWRIGHT_MODEL_API_KEY": "sk-live-123456"})
    assert settings.secrets() == ["sk-live-123456"]


def test_repo_config_round_trip():
    config = parse_repo_config(
        "test_cmd: pytest -q\nprotected_paths: ['deploy/**']\nallow_test_edits: [tests/snap/**]\n"
        "network: none\napp: {start: npm start, port: 3000}\n",
        ".loopwright.yml",
    )
    assert config.test_cmd == "pytest -q"
    assert config.protected_paths == ("deploy/**",)
    assert config.allow_test_edits == ("tests/snap/**",)
    assert config.network == "none"
    assert config.app is not None and config.app.port == 3000


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("test_cmd: [unclosed", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("tset_cmd: pytest\n", "unknown key(s) tset_cmd"),
        ("protected_paths: deploy\n", "`protected_paths` has the wrong type"),
        ("protected_paths: [1, 2]\n", "list of non-empty strings"),
        ("network: open\n", "`network` must be one of"),
        ("app: {start: npm start}\n", "`app` needs"),
    ],
    ids=["yaml", "not-mapping", "typo", "type", "items", "network", "app"],
)
def test_invalid_repo_config_says_what_is_wrong(text, fragment):
    with pytest.raises(ConfigError) as err:
        parse_repo_config(text, ".loopwright.yml")
    assert fragment in str(err.value)
    assert ".loopwright.yml" in str(err.value)
