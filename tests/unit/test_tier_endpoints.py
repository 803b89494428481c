"""Per-tier endpoints: `name=model@URL` in LOOPWRIGHT_MODEL_TIERS, local tiers priced 0, and
the shared endpoint's key never sent to a tier's own endpoint."""

from __future__ import annotations

from typing import Any

import pytest

from loopwright.agent.model import OpenAIModel
from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.scripted_steps import parse_steps
from loopwright.config import ConfigError, Settings

MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]


def test_old_syntax_keeps_the_shared_endpoint_and_prices() -> None:
    settings = Settings.from_env({"LOOPWRIGHT_MODEL_TIERS": "nano=a/b,super=c"})
    nano, sup = settings.tiers
    assert (nano.model, nano.base_url, nano.tool_format) == ("a/b", None, "native")
    assert (nano.price_in, sup.price_out) == (0.07, 1.20)
    assert settings.endpoint(nano) == settings.model_base_url
    assert settings.uses_shared_endpoint


def test_a_local_tier_in_front_of_hosted_ones() -> None:
    settings = Settings.from_env(
        {
            "LOOPWRIGHT_MODEL_TIERS": "nano=qwen2.5-coder-1.5b@http://127.0.0.1:8080/v1;"
            "tool_format=json,super=vendor/super-49b",
        }
    )
    local, hosted = settings.tiers
    assert local.model == "qwen2.5-coder-1.5b"
    assert local.base_url == "http://127.0.0.1:8080/v1"
    assert local.tool_format == "json"
    # "nano" has a default hosted price, but this nano runs on this machine.
    assert local.cost(1_000_000, 1_000_000) == 0.0
    assert hosted.base_url is None and hosted.price_in == 0.40
    assert settings.endpoint(local) == "http://127.0.0.1:8080/v1"


def test_a_priced_local_tier_keeps_its_price() -> None:
    settings = Settings.from_env(
        {
            "LOOPWRIGHT_MODEL_TIERS": "local=q@http://localhost:8080/v1",
            "LOOPWRIGHT_MODEL_PRICES": "local=0.01/0.02",
        }
    )
    assert (settings.tiers[0].price_in, settings.tiers[0].price_out) == (0.01, 0.02)
    assert not settings.uses_shared_endpoint


def test_a_remote_tier_endpoint_keeps_default_prices() -> None:
    settings = Settings.from_env({"LOOPWRIGHT_MODEL_TIERS": "super=m@https://gpu.example/v1"})
    assert settings.tiers[0].price_in == 0.40


@pytest.mark.parametrize(
    ("tiers", "fragment"),
    [
        ("local=@http://127.0.0.1:8080/v1", "names no model"),
        ("local=q@http:///v1", "names no host"),
        ("local=q;tool_format=xml", "tool_format=native or tool_format=json"),
        ("local=q;temperature=0", "tool_format=native or tool_format=json"),
    ],
    ids=["no-model", "no-host", "bad-format", "unknown-option"],
)
def test_bad_tier_settings_say_what_to_write(tiers: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"LOOPWRIGHT_MODEL_TIERS": tiers})
    assert fragment in str(err.value)
    assert "LOOPWRIGHT_MODEL_TIERS" in str(err.value)


def test_each_endpoint_gets_its_own_client_and_only_the_shared_one_the_key() -> None:
    reply = [{"content": "done"}]
    # Each server refuses (401) a request without exactly its bearer token: the local one
    # would refuse the hosted key, so its answer proves the key stayed away from it.
    with (
        ScriptedModelServer(parse_steps(reply), api_key="sk-hosted-secret-123456") as hosted,
        ScriptedModelServer(parse_steps(reply), api_key="unused") as local,
    ):
        settings = Settings.from_env(
            {
                "LOOPWRIGHT_MODEL_BASE_URL": hosted.base_url,
                "LOOPWRIGHT_MODEL_API_KEY": "sk-hosted-secret-123456",
                "LOOPWRIGHT_MODEL_TIERS": f"local=qwen@{local.base_url},super=big",
                "LOOPWRIGHT_MODEL_RETRIES": "0",
            }
        )
        with OpenAIModel(settings) as model:
            first = model.complete(settings.tiers[0], MESSAGES, [])
            second = model.complete(settings.tiers[1], MESSAGES, [])
        assert first.content == second.content == "done"
        assert [r["model"] for r in local.requests] == ["qwen"]
        assert [r["model"] for r in hosted.requests] == ["big"]


def test_replay_points_every_tier_at_the_one_server() -> None:
    settings = Settings.from_env(
        {"LOOPWRIGHT_MODEL_TIERS": "local=q@http://127.0.0.1:9/v1;tool_format=json,super=m"}
    )
    replayed = settings.with_shared_endpoint("http://127.0.0.1:5555/v1", "replay")
    assert {replayed.endpoint(t) for t in replayed.tiers} == {"http://127.0.0.1:5555/v1"}
    assert replayed.tiers[0].tool_format == "json"
