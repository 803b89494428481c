import pytest

from loopwright.config import ConfigError, Settings, warm_pool_size
from loopwright.repo_config import parse_repo_config


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
        ({"LOOPWRIGHT_WARM_POOL": "-1"}, "LOOPWRIGHT_WARM_POOL"),
        ({"LOOPWRIGHT_WARM_POOL": "two"}, "LOOPWRIGHT_WARM_POOL"),
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


def test_repo_config_keys_set_to_null_mean_the_defaults():
    config = parse_repo_config(
        "test_cmd:\nprotected_paths:\nauto_fix:\ntiers:\n", ".loopwright.yml"
    )
    assert config == parse_repo_config("{}\n", ".loopwright.yml")
    assert config.protected_paths is None and config.auto_fix is False


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
        ("tset_cmd: pytest\n", "tset_cmd (did you mean `test_cmd`?)"),
        ("tiers: ['']\n", "`tiers` must be a list of non-empty strings"),
        ("network: 1\n", "`network` has the wrong type (int)"),
        ("auto_fix: 'yes'\n", "`auto_fix` must be true or false (got str)"),
        ("app: {start: npm start, prot: 3000}\n", "prot (did you mean `port`?)"),
        ("app: npm start\n", "`app` has the wrong type (str)"),
        ("app: {start: npm start, port: true}\n", "`app.port` must be a whole number (got bool)"),
        ("max_cost_usd: yes\n", "`max_cost_usd` must be a number (got bool)"),
    ],
    ids=[
        "yaml",
        "not-mapping",
        "typo",
        "type",
        "items",
        "network",
        "app",
        "did-you-mean",
        "empty-item",
        "network-type",
        "bool",
        "app-typo",
        "app-type",
        "app-field-type",
        "number-type",
    ],
)
def test_invalid_repo_config_says_what_is_wrong(text, fragment):
    with pytest.raises(ConfigError) as err:
        parse_repo_config(text, ".loopwright.yml")
    assert fragment in str(err.value)
    assert ".loopwright.yml" in str(err.value)


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        (
            {"LOOPWRIGHT_GITHUB_APP_ID": "my-app"},
            "LOOPWRIGHT_GITHUB_APP_ID='my-app' is not a number",
        ),
        ({"LOOPWRIGHT_GITHUB_PRIVATE_KEY": "hunter2"}, "is not a PEM private key"),
        (
            {"LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH": "/nonexistent/app.pem"},
            "LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH='/nonexistent/app.pem' cannot be read",
        ),
        ({"LOOPWRIGHT_GITHUB_API_URL": "github.example.com"}, "LOOPWRIGHT_GITHUB_API_URL"),
        ({"LOOPWRIGHT_PUBLIC_URL": "loopwright.example.com"}, "LOOPWRIGHT_PUBLIC_URL"),
    ],
    ids=["app-id", "key", "key-path", "api-url", "public-url"],
)
def test_bad_github_app_settings_name_what_to_fix(env, fragment):
    with pytest.raises(ConfigError) as err:
        Settings.from_env(env)
    assert fragment in str(err.value)


def test_github_app_settings_and_their_secrets(tmp_path):
    pem = "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n"
    key = tmp_path / "app.pem"
    key.write_text(pem)
    settings = Settings.from_env(
        {
            "LOOPWRIGHT_GITHUB_APP_ID": "1234",
            "LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH": str(key),
            "LOOPWRIGHT_WEBHOOK_SECRET": "whsec-value",
            "LOOPWRIGHT_GITHUB_API_URL": "http://127.0.0.1:9999/",
            "LOOPWRIGHT_ALLOWED_BOTS": "dependabot[bot], renovate[bot]",
        }
    )
    assert settings.github.app_id == "1234"
    assert settings.github.private_key == pem
    assert settings.github.api_url == "http://127.0.0.1:9999"
    assert settings.github.allowed_bots == ("dependabot[bot]", "renovate[bot]")
    assert settings.github.missing() == []
    assert {pem, "whsec-value"} <= set(settings.secrets())
    assert Settings.from_env({}).github.missing() == [
        "LOOPWRIGHT_GITHUB_APP_ID",
        "LOOPWRIGHT_GITHUB_PRIVATE_KEY (or LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH)",
        "LOOPWRIGHT_WEBHOOK_SECRET",
    ]


@pytest.mark.parametrize(
    ("api_url", "raw", "expected"),
    [
        (None, None, 1.0),
        (None, "2.5", 2.5),
        ("https://ghes.example.com/api/v3", "0.05", 0.05),
        ("http://127.0.0.1:9999", "0.01", 0.01),
    ],
    ids=["default", "slower", "enterprise-server", "test-github"],
)
def test_github_writes_are_a_second_apart_unless_set(api_url, raw, expected):
    env = {"LOOPWRIGHT_GITHUB_API_URL": api_url, "LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S": raw}
    settings = Settings.from_env({k: v for k, v in env.items() if v is not None})
    assert settings.github.write_interval_s == expected


# These addresses are only parsed: the settings are refused before any client exists, and
# no request is made to any of them.
@pytest.mark.parametrize(
    "api_url",
    [
        None,
        "https://api.github.com",
        "https://API.GitHub.com/",
        "https://api.github.com.:443",
        "https://api。github。com",  # the client's IDNA encoding makes these full stops dots
        "https://x@api.github.com",
        "https://api.acme.ghe.com",
    ],
)
def test_writes_closer_than_a_second_are_refused_against_github(api_url):
    env = {"LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S": "0.5"}
    if api_url is not None:
        env["LOOPWRIGHT_GITHUB_API_URL"] = api_url
    with pytest.raises(ConfigError, match=r"WRITE_INTERVAL_S='0.5' is below GitHub's guidance"):
        Settings.from_env(env)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("0", "greater than 0"),
        ("soon", "not a number"),
        ("nan", "not a finite number"),  # passes every comparison: spacing would be off
        ("inf", "not a finite number"),
    ],
)
def test_a_write_interval_that_is_no_duration_says_so(raw, fragment):
    env = {
        "LOOPWRIGHT_GITHUB_API_URL": "http://127.0.0.1:9",
        "LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S": raw,
    }
    with pytest.raises(ConfigError, match=fragment):
        Settings.from_env(env)


def test_database_password_is_a_secret():
    settings = Settings.from_env(
        {"LOOPWRIGHT_DATABASE_URL": "postgresql+psycopg://lw:s3cr3t-db-pw@db:5432/loopwright"}
    )
    assert "s3cr3t-db-pw" in settings.secrets()


@pytest.mark.parametrize(
    ("raw", "server", "size"),
    [
        (None, True, 2),
        (None, False, 0),
        ("", True, 2),
        (" ", False, 0),
        ("0", True, 0),
        ("0", False, 0),
        ("3", True, 3),
        ("1", False, 1),
    ],
    ids=lambda v: repr(v),
)
def test_warm_pool_defaults_to_two_for_servers_none_for_one_shot_runs_and_env_wins(
    raw, server, size
):
    env = {} if raw is None else {"LOOPWRIGHT_WARM_POOL": raw}
    settings = Settings.from_env(env)
    assert settings.warm_pool == (None if raw is None or not raw.strip() else int(raw))
    assert warm_pool_size(settings, server=server) == size


def test_queue_url_takes_redis_and_postgresql_and_its_password_is_a_secret() -> None:
    s = Settings.from_env({"LOOPWRIGHT_QUEUE_URL": " redis://:hunter2@redis:6379/0 "})
    assert s.queue_url == "redis://:hunter2@redis:6379/0"
    assert "hunter2" in s.secrets()
    pg = Settings.from_env({"LOOPWRIGHT_QUEUE_URL": "postgresql+psycopg://lw@db/lw"})
    assert pg.queue_url == "postgresql+psycopg://lw@db/lw"
    assert Settings.from_env({"LOOPWRIGHT_QUEUE_URL": ""}).queue_url is None


@pytest.mark.parametrize("url", ["amqp://rabbit/", "redis://", "sqlite:///q.db", "redis-host:6379"])
def test_queue_url_that_is_not_redis_or_postgresql_says_what_to_give(url: str) -> None:
    with pytest.raises(ConfigError, match="LOOPWRIGHT_QUEUE_URL must be a Redis or PostgreSQL"):
        Settings.from_env({"LOOPWRIGHT_QUEUE_URL": url})


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://:hunter2@redis:notaport/0", "port that is not a number"),
        ("redis://:hunter2@redis:99999/0", "port that is not a number"),
        ("postgresql://lw:hunter2%zz@db/lw", "percent-encode"),
    ],
)
def test_queue_url_with_a_bad_port_or_escape_says_what_to_fix_without_its_password(
    url: str, says: str
) -> None:
    """Found at start with a message, not as a ValueError from a webhook's submit or a
    30-second pool timeout; the message never quotes the password."""
    with pytest.raises(ConfigError, match=says) as caught:
        Settings.from_env({"LOOPWRIGHT_QUEUE_URL": url})
    assert "hunter2" not in str(caught.value)


def test_per_installation_cap_is_unset_by_default_and_at_least_one() -> None:
    assert Settings.from_env({}).max_missions_per_installation is None
    env = {"LOOPWRIGHT_MAX_MISSIONS_PER_INSTALLATION": "2"}
    assert Settings.from_env(env).max_missions_per_installation == 2
    with pytest.raises(ConfigError, match="LOOPWRIGHT_MAX_MISSIONS_PER_INSTALLATION"):
        Settings.from_env({"LOOPWRIGHT_MAX_MISSIONS_PER_INSTALLATION": "0"})
