"""A repository's .loopwright.yml can only narrow the operator's settings, never widen them."""

import pytest

from loopwright.config import Settings, Tier
from loopwright.repo_config import parse_repo_config

TIERS = (Tier("nano", "small"), Tier("mini", "medium"), Tier("super", "large"))


def settings(max_cost_usd: float | None) -> Settings:
    return Settings.from_env({}).with_overrides(tiers=TIERS, max_cost_usd=max_cost_usd)


@pytest.mark.parametrize(
    ("operator", "repository", "expected"),
    [
        (2.0, 0.5, 0.5),  # lower: taken
        (0.5, 2.0, 0.5),  # higher: the operator's cap stays
        (None, 0.75, 0.75),  # no operator cap: the repository sets one
    ],
)
def test_the_cost_cap_is_the_lower_of_the_two(operator, repository, expected):
    config = parse_repo_config(f"max_cost_usd: {repository}\n", ".loopwright.yml")
    assert config.narrow(settings(operator)).max_cost_usd == expected


def test_tiers_are_the_configured_ones_the_repository_names_in_their_order():
    config = parse_repo_config("tiers: [super, nano, unknown]\n", ".loopwright.yml")
    narrowed = config.narrow(settings(None))
    assert [t.name for t in narrowed.tiers] == ["nano", "super"]


def test_tiers_with_none_in_common_keep_the_operators_list():
    config = parse_repo_config("tiers: [unknown]\n", ".loopwright.yml")
    assert config.narrow(settings(None)).tiers == TIERS


def test_an_empty_config_changes_nothing():
    base = settings(1.0)
    assert parse_repo_config("{}\n", ".loopwright.yml").narrow(base) == base
