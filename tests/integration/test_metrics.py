"""`/metrics`: Prometheus text exposition after a real App mission and webhook deliveries."""

from __future__ import annotations

import os
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import SUITE_PATH
from tests.integration.app_harness import app_world
from tests.scenarios import CORRECT


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_missions_tokens_sandboxes_and_deliveries(tmp_path):
    with app_world(tmp_path, CORRECT) as world:
        answer = world.deliver("check_run", world.check_run_payload())
        assert answer.status_code == 202, answer.text
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "verified"
        assert world.deliver("check_run", {}, signature="sha256=" + "0" * 64).status_code == 401
        again = world.deliver("check_run", world.check_run_payload())
        assert again.json()["status"] == "duplicate"

        scraped = world.client.get("/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    samples = _samples(scraped.text)
    assert samples[("loopwright_missions", (("status", "verified"),))] == 1
    assert samples[("loopwright_missions", (("status", "error"),))] == 0
    assert samples[("loopwright_queue_depth", ())] == 0
    usage = mission["result"]["usage"]["nano"]
    prompt = ("loopwright_model_tokens_total", (("kind", "prompt"), ("tier", "nano")))
    assert samples[prompt] == usage["prompt_tokens"] > 0
    completion = ("loopwright_model_tokens_total", (("kind", "completion"), ("tier", "nano")))
    assert samples[completion] == usage["completion_tokens"]
    cost = samples[("loopwright_model_cost_usd_total", (("tier", "nano"),))]
    assert cost == pytest.approx(mission["cost_usd"]) and cost > 0
    assert samples[("loopwright_model_calls_total", (("tier", "nano"),))] == 5
    # The mission ran, then verification opened a fresh sandbox for the patch.
    assert samples[("loopwright_sandbox_starts_total", (("backend", "local"),))] >= 2
    deliveries = {
        dict(labels)["outcome"]: value
        for (name, labels), value in samples.items()
        if name == "loopwright_webhook_deliveries_total"
    }
    assert deliveries == {"queued": 1, "unauthorized": 1, "duplicate": 1}


def test_metrics_need_the_dashboard_token_when_one_is_set(tmp_path):
    with app_world(
        tmp_path, CORRECT, env={"LOOPWRIGHT_DASHBOARD_TOKEN": "metrics-token-1234567890"}
    ) as world:
        refused = world.client.get("/metrics")
        allowed = world.client.get(
            "/metrics", headers={"Authorization": "Bearer metrics-token-1234567890"}
        )
    assert refused.status_code == 401
    assert allowed.status_code == 200
    assert "loopwright_missions" in allowed.text


@pytest.mark.docker
def test_metrics_show_the_warm_pool_the_app_keeps_and_the_claims_its_missions_made(
    tmp_path, docker_ready
):
    with app_world(tmp_path, CORRECT, env={"LOOPWRIGHT_SANDBOX": "docker"}) as world:

        def pool() -> dict[str, float]:
            samples = _samples(world.client.get("/metrics").text)
            return {
                "idle": samples[("loopwright_sandbox_pool_idle", ())],
                "claims": samples[("loopwright_sandbox_pool_claims_total", ())],
            }

        deadline = time.monotonic() + 60
        while pool()["idle"] < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pool() == {"idle": 2, "claims": 0}  # the App's default pool, filled
        answer = world.deliver("check_run", world.check_run_payload())
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "verified", mission
        claimed = pool()["claims"]
        # The loop's sandbox came from the pool; verification's did too, unless the refill
        # had not finished by then.
        assert 1 <= claimed <= 2
        recorded = world.db("SELECT mission_id FROM sandbox_claims")
        assert recorded == [(mission["id"],)] * int(claimed)
        deadline = time.monotonic() + 60
        while pool()["idle"] < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pool()["idle"] == 2  # refilled after the claims
