"""Pair mode's `ask` outcome in the command policy: which commands wait for a person."""

from __future__ import annotations

import pytest

from loopwright.agent.policy import AskRules, check_ask, check_command
from loopwright.config import ConfigError
from loopwright.repo_config import parse_repo_config

RULES = AskRules(ask_paths=("migrations/**", "db/schema.sql"))

ASKS = [
    ("pip install requests", "network"),
    ("pip3 install -r requirements.txt", "network"),
    ("python -m pip install left-pad", "network"),
    ("timeout 60 npm install left-pad", "network"),
    ("npm ci", "network"),
    ("yarn", "network"),
    ("yarn add lodash", "network"),
    ("uv pip install x", "network"),
    ("poetry add httpx", "network"),
    ("apt-get install -y jq", "network"),
    ("cargo fetch", "network"),
    ("go mod download", "network"),
    ("git fetch origin", "network"),
    ("curl -fsS https://example.com", "network"),
    ('bash -c "wget -q https://example.com/x"', "network"),
    ("ls $(curl -s https://example.com)", "network"),
    ("cd sub && env A=1 pip install .", "network"),
    ("rm a.py b.py c.py d.py", "removals"),
    ("rm -rf build", "removals"),
    ("rm src/*.py", "removals"),
    ("git rm a b c d", "removals"),
    ("mv a b c d dir/", "removals"),
    ("echo x > migrations/0002.sql", "ask_path"),
    ("sed -i s/a/b/ db/schema.sql", "ask_path"),
]

RUNS = [
    "pytest -q",
    "npm test",
    "pip install --no-index --find-links wheels x",
    "pip list",
    "npm run build",
    "go test ./...",
    "git status",
    "uv pip list",
    "rm a.py b.py c.py",
    "mv old.py new.py",
    "git rm --cached a",
    "echo x > src/app.py",
    "cat migrations/0001.sql",
]


@pytest.mark.parametrize(("command", "rule"), ASKS, ids=[c for c, _ in ASKS])
def test_a_risky_command_asks(command, rule):
    assert check_command(command) is None  # allowed today: pair mode only adds the question
    ask = check_ask(command, RULES)
    assert ask is not None
    assert ask.rule == rule
    assert ask.network == (rule == "network")


@pytest.mark.parametrize("command", RUNS)
def test_an_ordinary_command_runs_without_asking(command):
    assert check_ask(command, RULES) is None


def test_network_commands_do_not_ask_when_the_sandbox_keeps_its_network():
    assert check_ask("pip install requests", RULES, network_on=True) is None


def test_without_network_isolation_a_network_command_asks_but_attaches_nothing():
    ask = check_ask("pip install requests", AskRules(network_isolated=False))
    assert ask is not None and (ask.rule, ask.network) == ("network", False)
    assert ask.reason == (
        "`pip install requests` reaches the network; the local sandbox has no network "
        "isolation, so it runs on the host's network"
    )


def test_each_class_can_be_turned_off():
    assert check_ask("pip install x", AskRules(network=False)) is None
    assert check_ask("rm a b c d e", AskRules(max_removals=10)) is None
    assert check_ask("echo x > migrations/1.sql", AskRules()) is None


def test_the_repository_config_sets_pair_mode_and_its_classes():
    repo = parse_repo_config(
        "pair: true\nask_paths: [migrations/**]\nask_network: false\nask_removals: 0\n"
        "ask_outside_scope: false\n",
        ".loopwright.yml",
    )
    assert (
        repo.pair,
        repo.ask_paths,
        repo.ask_network,
        repo.ask_removals,
        repo.ask_outside_scope,
    ) == (True, ("migrations/**",), False, 0, False)
    default = parse_repo_config("test_cmd: pytest\n", ".loopwright.yml")
    assert (
        default.pair,
        default.ask_network,
        default.ask_removals,
        default.ask_outside_scope,
    ) == (False, True, 3, True)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("pair: yes please\n", "`pair` must be true or false"),
        ("ask_paths: [migrations, '']\n", "`ask_paths` must be a list of non-empty strings"),
        ("ask_removals: -1\n", "`ask_removals` must be a whole number of 0 or more"),
        ("pairs: true\n", "did you mean `pair`?"),
        ("ask_outside_scope: sometimes\n", "`ask_outside_scope` must be true or false"),
    ],
)
def test_bad_pair_settings_name_the_key(text, says):
    with pytest.raises(ConfigError, match=says.replace("[", r"\[")):
        parse_repo_config(text, ".loopwright.yml")
