"""deploy/compose.yaml and deploy/loopwright.env.example hold the invariants of a scale-out
deployment: only workers get the Docker socket, servers only enqueue, no secret is written
in the file, and the images are the ones `loopwright image build` tags."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from loopwright.config import Settings
from loopwright.server_image import SERVER_IMAGE

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CONFIG_SOURCES = Path(__file__).resolve().parents[2] / "loopwright" / "config"
SOCKET = "/var/run/docker.sock"
SECRET_NAME = re.compile(r"(PASSWORD|SECRET|TOKEN|API_KEY|PRIVATE_KEY)$")
INTERPOLATION = re.compile(r"\$\{([A-Z0-9_]+)(?::?[?-][^}]*)?\}")
LOOPWRIGHT = ("server", "worker")
MARKER = "interpolated"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


@pytest.fixture(scope="module")
def example() -> dict[str, str]:
    return env_file(DEPLOY / "loopwright.env.example")


def env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, sep, value = line.partition("=")
            assert sep, f"{path.name}: {line!r} is not NAME=value"
            values[name.strip()] = value
    return values


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    assert isinstance(env, dict), "environment as a mapping, so values can be checked by name"
    return {str(k): str(v) for k, v in env.items()}


def resolved(value: str) -> str:
    """`value` with each `${...}` as a marker, so a URL parses as compose will give it."""
    return INTERPOLATION.sub(MARKER, value)


def mounts(service: dict[str, Any]) -> list[str]:
    return [str(v).split(":")[0] for v in service.get("volumes") or []]


def test_the_services_and_their_replicas(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"server", "worker", "postgres", "redis"}
    assert services["server"]["deploy"]["replicas"] == 2
    assert services["worker"]["deploy"]["replicas"] == 2
    assert services["server"]["command"][0] == "serve"
    assert services["worker"]["command"][0] == "worker"


def test_only_workers_get_the_docker_socket(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        has_socket = any(source == SOCKET for source in mounts(service))
        assert has_socket == (name == "worker"), name
        assert not service.get("privileged"), name
        assert service.get("network_mode") != "host", name
    # The workers' uid 10001 reaches the socket through its group, not as root.
    [group] = compose["services"]["worker"]["group_add"]
    assert INTERPOLATION.fullmatch(group) and "DOCKER_GID" in group
    assert "user" not in compose["services"]["worker"]


def test_servers_and_workers_share_the_store_and_the_queue(compose: dict[str, Any]) -> None:
    for name in LOOPWRIGHT:
        service = compose["services"][name]
        env = environment(service)
        assert env["LOOPWRIGHT_QUEUE_URL"] == "redis://redis:6379/0", name
        assert env["LOOPWRIGHT_DATABASE_URL"].startswith("postgresql+psycopg://"), name
        assert urlsplit(resolved(env["LOOPWRIGHT_DATABASE_URL"])).hostname == "postgres"
        assert service["env_file"] == "loopwright.env", name
        assert "loopwright-data" in mounts(service), name
        assert set(service["depends_on"]) == {"postgres", "redis"}


def test_the_images_are_those_image_build_tags(compose: dict[str, Any]) -> None:
    for name in LOOPWRIGHT:
        assert compose["services"][name]["image"] == SERVER_IMAGE


def test_servers_are_checked_on_readyz_at_their_own_port(compose: dict[str, Any]) -> None:
    server = compose["services"]["server"]
    port = server["command"][server["command"].index("--port") + 1]
    probe = " ".join(server["healthcheck"]["test"])
    assert f"http://127.0.0.1:{port}/readyz" in probe
    published = server["ports"]
    assert published == [f"127.0.0.1:8000-8001:{port}"]  # one loopback port per replica
    for name in ("postgres", "redis"):
        assert "healthcheck" in compose["services"][name]
        assert "ports" not in compose["services"][name], "the store and queue stay internal"


def test_no_secret_is_written_in_the_compose_file(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for key, value in environment(service).items():
            if SECRET_NAME.search(key):
                assert INTERPOLATION.fullmatch(value), f"{name}: {key} must come from the env file"
            password = urlsplit(resolved(value)).password if "://" in value else None
            if password is not None:
                assert password == MARKER, f"{name}: {key} has a password inline"
    # The App's key is a file secret, never an environment value.
    assert "LOOPWRIGHT_GITHUB_PRIVATE_KEY" not in environment(compose["services"]["server"])


def test_the_env_example_documents_every_variable_and_holds_no_real_secret(
    compose: dict[str, Any], example: dict[str, str]
) -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    assert set(INTERPOLATION.findall(text)) <= set(example), "compose needs them"
    known = "".join(p.read_text() for p in CONFIG_SOURCES.glob("*.py"))
    lines = (DEPLOY / "loopwright.env.example").read_text().splitlines()
    for index, line in enumerate(lines):
        name = line.lstrip("# ").partition("=")[0]
        if "=" not in line or not re.fullmatch(r"[A-Z][A-Z0-9_]+", name):
            continue
        if name.startswith("LOOPWRIGHT_"):
            assert f'"{name}"' in known, f"{name} is not a setting Loopwright reads"
        assert lines[index - 1].startswith("#"), f"{name} has no comment above it"
    for name, value in example.items():
        if SECRET_NAME.search(name):
            assert value.startswith("change-me"), f"{name} holds something other than a placeholder"
    # What compose sets itself is not left to the env file to contradict.
    for name in environment(compose["services"]["server"]):
        assert name not in example, name


def test_the_settings_of_a_worker_parse(compose: dict[str, Any], example: dict[str, str]) -> None:
    env = {**example, **environment(compose["services"]["worker"])}
    env = {k: INTERPOLATION.sub(lambda m: example[m.group(1)], v) for k, v in env.items()}
    env.pop("LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH")  # the secret's file exists only in a container
    settings = Settings.from_env(env)
    assert settings.queue_url == "redis://redis:6379/0"
    assert settings.network == "none"
    assert settings.max_missions_per_installation == 2
    assert settings.queue_heartbeat_s == 30


def test_docker_compose_reads_the_file(tmp_path: Path, example: dict[str, str]) -> None:
    """Debian's docker-compose (installed by scripts/test.sh) validates it against the
    Compose schema and resolves the interpolations."""
    binary = shutil.which("docker-compose")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("CI=true but docker-compose is missing; scripts/test.sh installs it")
        pytest.skip("docker-compose is not installed (apt-get install docker-compose)")
    shutil.copy2(DEPLOY / "compose.yaml", tmp_path / "compose.yaml")
    shutil.copy2(DEPLOY / "loopwright.env.example", tmp_path / "loopwright.env")
    (tmp_path / "github-app.pem").write_text("")
    done = subprocess.run(
        [binary, "--env-file", "loopwright.env", "-p", "loopwright", "config"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    worker = resolved["services"]["worker"]
    assert worker["group_add"] == [example["DOCKER_GID"]]
    assert example["POSTGRES_PASSWORD"] in worker["environment"]["LOOPWRIGHT_DATABASE_URL"]
