"""Running the server: one JSON log format for every library, and App credentials checked
against GitHub at start-up, with errors that name the setting to fix."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from loopwright.config import ConfigError, Settings
from loopwright.github.identity import check_app_credentials
from tests.conftest import SUITE_PATH, VENV_BIN
from tests.fakes.github import FakeGitHub, generate_app_key
from tests.integration.app_harness import APP_ID, ServeProcess, free_port, sign

KEYS = {"event", "level", "logger", "timestamp"}


@pytest.fixture(scope="module")
def app_key() -> str:
    return generate_app_key()


def serve_env(tmp_path: Path, github: FakeGitHub, key_path: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": f"{SUITE_PATH}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LOOPWRIGHT_GITHUB_APP_ID": str(APP_ID),
        "LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH": str(key_path),
        "LOOPWRIGHT_WEBHOOK_SECRET": "whsec-test",
        "LOOPWRIGHT_GITHUB_API_URL": github.url,
        "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
        "LOOPWRIGHT_SANDBOX": "local",
        **extra,
    }


def test_serve_authenticates_and_every_line_is_one_json_object(tmp_path, app_key):
    key_path = tmp_path / "app.pem"
    key_path.write_text(app_key)
    with FakeGitHub(APP_ID, app_key, app_slug="loopwright-acme") as github:
        log = tmp_path / "serve.log"
        server = ServeProcess(serve_env(tmp_path, github, key_path), log).start()
        try:
            assert httpx.get(f"{server.url}/no-such-page", timeout=10).status_code == 404
            ping = json.dumps({"zen": "Design for failure.", "hook_id": 1}).encode()
            for delivery, secret, status in (
                ("d-ping-1", "whsec-test", 200),
                ("d-forged-1", "not-the-secret", 401),
            ):
                answered = httpx.post(
                    f"{server.url}/webhooks/github",
                    content=ping,
                    headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": delivery,
                             "X-Hub-Signature-256": sign(ping, secret)},
                    timeout=10,
                )  # fmt: skip
                assert answered.status_code == status, answered.text
        finally:
            server.stop()
        assert [r.operation_id for r in github.requests] == ["apps/get-authenticated"]
        github.assert_no_rejections()

    lines = [json.loads(line) for line in log.read_text().splitlines()]  # each one JSON
    assert all(line.keys() >= KEYS for line in lines), [x for x in lines if KEYS - x.keys()]
    by_logger = {line["logger"].split(".")[0] for line in lines}
    assert {"loopwright", "uvicorn", "alembic", "httpx"} <= by_logger, by_logger
    said = [line["event"] for line in lines if line["logger"] == "loopwright.serve"]
    assert f"authenticated as loopwright-acme (App {APP_ID})" in said
    # The configured slug (the default) is not the App's: the operator is told which to set.
    assert any("LOOPWRIGHT_GITHUB_APP_SLUG" in s and "'loopwright-acme'" in s for s in said)
    access = next(line for line in lines if line.get("path") == "/no-such-page")
    assert (access["logger"], access["method"], access["status"]) == ("uvicorn.access", "GET", 404)
    assert any(line["logger"].startswith("alembic") for line in lines)
    # An answered delivery is one line, the handler's, with its id and what was decided;
    # uvicorn's access line would repeat it with less. A refused one keeps its access line.
    webhook_access = [
        (line["status"], line["method"])
        for line in lines
        if line["logger"] == "uvicorn.access" and line.get("path") == "/webhooks/github"
    ]
    assert webhook_access == [(401, "POST")], webhook_access
    delivered = [line for line in lines if line.get("delivery") == "d-ping-1"]
    assert [(d["logger"], d["event"], d["github_event"]) for d in delivered] == [
        ("loopwright.webhooks", "ignored", "ping")
    ], delivered
    assert delivered[0]["reason"] == "event ping is not handled"
    assert delivered[0]["client"] == "127.0.0.1"  # what the dropped access line carried


def run_serve(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [f"{VENV_BIN}/loopwright", "serve", "--port", str(free_port())],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_serve_with_a_key_of_another_app_exits_naming_the_key_setting(tmp_path, app_key):
    other = tmp_path / "other.pem"
    other.write_text(generate_app_key())
    with FakeGitHub(APP_ID, app_key) as github:
        done = run_serve(serve_env(tmp_path, github, other))
    assert done.returncode == 2, done.stderr
    assert f"LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH='{other}' does not match App {APP_ID}" in (
        done.stderr
    )
    assert "authenticated as" not in done.stderr


def app_settings(github_url: str, key: str, **extra: str) -> Settings:
    return Settings.from_env(
        {
            "LOOPWRIGHT_GITHUB_APP_ID": str(APP_ID),
            "LOOPWRIGHT_GITHUB_PRIVATE_KEY": key,
            "LOOPWRIGHT_GITHUB_API_URL": github_url,
            **extra,
        }
    )


def test_wrong_app_id_and_unreachable_api_name_their_settings(app_key):
    with FakeGitHub(APP_ID, app_key) as github:
        good = check_app_credentials(app_settings(github.url, app_key).github)
        assert (good.id, good.slug) == (APP_ID, "loopwright")
        wrong_id = app_settings(github.url, app_key, LOOPWRIGHT_GITHUB_APP_ID="4040")
        with pytest.raises(ConfigError, match="no App with LOOPWRIGHT_GITHUB_APP_ID=4040"):
            check_app_credentials(wrong_id.github)
    closed = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError, match=f"could not reach GitHub at {closed}.*API_URL"):
        check_app_credentials(app_settings(closed, app_key).github)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "cannot be read (No such file or directory)"),
        ("dir", "cannot be read (Is a directory)"),
        (b"\x89PNG\r\n\x1a\n\xff\xfe", "is not a PEM private key (the file is not text)"),
        ("ssh-rsa AAAAB3Nza me@host\n", "is not a PEM private key"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n",
            "is not a usable PEM private key",
        ),
    ],
    ids=["missing", "directory", "binary", "public-key", "garbled-pem"],
)
def test_a_bad_key_path_is_reported_under_its_name(tmp_path, content, fragment):
    path = tmp_path / "app.pem"
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    env = {
        "LOOPWRIGHT_GITHUB_APP_ID": str(APP_ID),
        "LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH": str(path),
        "LOOPWRIGHT_GITHUB_API_URL": f"http://127.0.0.1:{free_port()}",
    }
    with pytest.raises(ConfigError) as err:
        check_app_credentials(Settings.from_env(env).github)
    assert str(err.value).startswith(f"LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH='{path}' ")
    assert fragment in str(err.value)
