"""The server image, built for real by `loopwright image build` (offline where no registry
answers): it runs `loopwright` as uid 10001, holds Loopwright's dependencies for its own
Python, and carries nothing of the host that built it beyond its CA certificates.

Runs in CI (which starts the engine); on a machine without Docker it skips, never in CI.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from loopwright import __version__
from loopwright.sandbox.image import HOST_CA_DIR
from loopwright.server_image import IMAGE_PYTHON, VERSION_LABEL, build_server_image

docker = pytest.importorskip("docker")

from loopwright.sandbox.docker.engine import OWNER_LABEL  # noqa: E402

# One worker runs the whole module, so the image is built once, not once per xdist worker.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.xdist_group("server_image")]

SOCKET = "/var/run/docker.sock"
LABEL_FORMAT = f'{{{{index .Config.Labels "{OWNER_LABEL}"}}}}'
KEY_CANARY = "SERVER-IMAGE-CANARY-KEY-7f3a"
ENV_CANARY = "SERVER-IMAGE-CANARY-ENV-91c2"
# A CA's private key kept beside its certificate, as a CA directory often has it: only the
# certificate may reach the image.
CA_KEY = f"-----BEGIN PRIVATE KEY-----\n{KEY_CANARY}\n-----END PRIVATE KEY-----\n"


REMOVE_TIMEOUT_S = 600


@dataclass(frozen=True)
class Built:
    tag: str
    ca_names: list[str]
    log: list[str]


@pytest.fixture(scope="module")
def built(docker_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    ca_dir = tmp_path_factory.mktemp("ca")
    for cert in sorted(HOST_CA_DIR.glob("*.crt")):
        shutil.copy2(cert, ca_dir / cert.name)
    (ca_dir / "loopwright-test-ca.key").write_text(CA_KEY)
    tag = f"loopwright-server:test-{uuid.uuid4().hex[:8]}"
    # The engine serves the whole suite's containers meanwhile: removing a large image can
    # outlast docker-py's default 60 s read timeout when it is busy.
    client = docker.from_env(version="auto", timeout=REMOVE_TIMEOUT_S)
    log: list[str] = []
    # Secrets in the builder's environment must not reach the image either.
    mp = pytest.MonkeyPatch()
    mp.setenv("LOOPWRIGHT_MODEL_API_KEY", ENV_CANARY)
    try:
        assert build_server_image(client, log.append, tag=tag, ca_dir=ca_dir) == tag
        yield Built(tag, sorted(p.name for p in ca_dir.glob("*.crt")), log)
    finally:
        mp.undo()
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(tag)
        client.close()


def run_in(image: str, script: str) -> subprocess.CompletedProcess[str]:
    """`script` in bash in a throwaway container of `image`, as uid 10001, with no network."""
    return subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--user", "10001:10001",
         "--entrypoint", "bash", image, "-c", script],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_image_runs_loopwright_as_uid_10001(built: Built) -> None:
    inspect = json.loads(
        subprocess.run(
            ["docker", "image", "inspect", built.tag], capture_output=True, text=True, check=True
        ).stdout
    )[0]
    config = inspect["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["loopwright"]
    assert config["Labels"][VERSION_LABEL] == __version__
    # With no --user: the image's own user, and the entrypoint answers.
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", built.tag, "--version"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"loopwright {__version__}"
    help_ = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", built.tag, "serve", "--help"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert help_.returncode == 0 and "--port" in help_.stdout, help_.stderr
    who = run_in(built.tag, "id -u; id -g; test -w /var/lib/loopwright && echo writable")
    assert who.stdout.split() == ["10001", "10001", "writable"], who.stderr


def test_the_dependencies_are_those_of_the_images_own_python(built: Built) -> None:
    # async-timeout is needed below Python 3.11.3 only: the host's newer Python skips it.
    done = run_in(
        built.tag,
        "python3 -c 'import platform; print(platform.python_version())'; "
        "/opt/loopwright/bin/python -c 'import async_timeout, saq, psycopg, litestar; print(1)'",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [IMAGE_PYTHON, "1"]


def test_no_build_tools_and_no_pip_are_left(built: Built) -> None:
    done = run_in(
        built.tag,
        "for t in cc gcc g++ make node npm pip pip3; do command -v $t; done; "
        "python3 -m pip --version 2>/dev/null; /opt/loopwright/bin/python -m pip --version "
        "2>/dev/null; command -v git python3",
    )
    assert done.stdout.split() == ["/usr/bin/git", "/opt/loopwright/bin/python3"], done.stdout


def test_the_host_ca_certificates_are_trusted_and_no_private_key_is_copied(built: Built) -> None:
    done = run_in(built.tag, "ls /usr/local/share/ca-certificates")
    assert done.stdout.split() == sorted(["README", *built.ca_names])
    found = run_in(
        built.tag,
        f"grep -rlF {KEY_CANARY} / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev; "
        "grep -rlI -e '-----BEGIN [A-Z ]*PRIVATE KEY-----' /etc /usr/local /home /root "
        "/var/lib/loopwright 2>/dev/null; ls -A /etc/ssl/private",
    )
    assert found.stdout.strip() == "", found.stdout


def test_no_host_pip_configuration_or_environment_is_in_the_image(built: Built) -> None:
    found = run_in(
        built.tag,
        "find / -xdev \\( -name pip.conf -o -name pip.ini -o -name .pypirc -o -name .netrc "
        "-o -name constraints.txt \\) -print 2>/dev/null",
    )
    assert found.stdout.strip() == "", found.stdout
    # Where this host's pip is configured to look (an index with credentials, find-links, a
    # constraints file) appears nowhere in the image's configuration or history.
    pip_config = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    values = [
        line.partition("=")[2].strip().strip("'\"")
        for line in pip_config.splitlines()
        if "=" in line
    ]
    described = (
        subprocess.run(
            ["docker", "image", "inspect", built.tag], capture_output=True, text=True, check=True
        ).stdout
        + subprocess.run(
            ["docker", "history", "--no-trunc", built.tag],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    for value in values:
        if "/" in value and value != "/etc/ssl/certs/ca-certificates.crt":  # the image's bundle
            assert value not in described
    assert ENV_CANARY not in described
    env = json.loads(
        subprocess.run(
            ["docker", "image", "inspect", "--format", "{{json .Config.Env}}", built.tag],
            capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip
    assert {item.partition("=")[0] for item in env} == {
        "PATH", "LANG", "HOME", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED",
        "LOOPWRIGHT_DATA_DIR", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE",
    }  # fmt: skip


def test_the_build_reports_its_wheels_and_base(built: Built) -> None:
    assert any(line.endswith("wheels ready") for line in built.log)
    assert any(line.startswith("building server image") for line in built.log)
    assert built.log[-1] == f"server image {built.tag} ready"


def test_a_worker_in_the_image_runs_a_mission_through_the_docker_socket(
    built: Built, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The deployment's worker: the image as uid 10001, the host's Docker socket reached
    through its group (as compose's `group_add` gives it), the store and the queue on
    PostgreSQL; a server on the host only enqueues. The mission's sandboxes carry the
    container's host name in their owner label and are gone when the worker stops."""
    from tests.integration.app_harness import REPO, ServeProcess, app_world, post_webhook
    from tests.scenarios import CORRECT

    database = request.getfixturevalue("postgres_url")
    env = {"LOOPWRIGHT_QUEUE_URL": database, "LOOPWRIGHT_DATABASE_URL": database,
           "LOOPWRIGHT_QUEUE_HEARTBEAT_S": "5"}  # fmt: skip
    hostname = f"lw-worker-{uuid.uuid4().hex[:8]}"
    name = f"loopwright-test-{hostname}"
    with app_world(tmp_path, CORRECT, serve=False, env=env) as world:
        # The worker's uid writes the missions' files; the server (here root) reads them.
        data = Path(world.env["LOOPWRIGHT_DATA_DIR"])
        data.mkdir(parents=True, exist_ok=True)
        data.chmod(0o777)
        server = ServeProcess(
            {**world.env, "DOCKER_HOST": "unix:///nonexistent.sock"}, tmp_path / "serve.log"
        ).start()
        worker_env = {
            **{k: v for k, v in world.env.items() if k.startswith("LOOPWRIGHT_")},
            "LOOPWRIGHT_SANDBOX": "docker", "LOOPWRIGHT_NETWORK": "none",
            "LOOPWRIGHT_WARM_POOL": "0", "LOOPWRIGHT_DATA_DIR": str(data),
        }  # fmt: skip
        worker_env.pop("LOOPWRIGHT_WEBHOOK_SECRET")
        socket_gid = str(Path(SOCKET).stat().st_gid)
        # Values travel in the docker CLI's environment (`-e NAME`), never on its command line.
        command = [
            "docker", "run", "--rm", "--name", name, "--hostname", hostname, "--init",
            "--network", "host", "--group-add", socket_gid,
            "-v", f"{SOCKET}:{SOCKET}", "-v", f"{data}:{data}",
            *[arg for key in sorted(worker_env) for arg in ("-e", key)],
            built.tag, "worker", "--concurrency", "1",
        ]  # fmt: skip
        log = tmp_path / "worker.log"
        with log.open("ab") as out:
            worker = subprocess.Popen(
                command, env={**os.environ, **worker_env}, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            body = json.dumps(world.check_run_payload()).encode()
            with httpx.Client(timeout=10) as client:
                answer = post_webhook(client, server.url, "check_run", body)
            assert answer.status_code == 202, answer.text
            mission_id = str(answer.json()["mission"])
            done = server.wait(mission_id, timeout=300)
            assert done["status"] == "verified", log.read_text()[-4000:]
            assert done["runner"].split(":")[0] == hostname
            assert [
                p for p in world.github.pulls(REPO) if p["head"]["ref"].startswith("loopwright/")
            ]
        finally:
            subprocess.run(["docker", "stop", "-t", "60", name], capture_output=True, check=False)
            worker.wait(90)
            server.stop()
        left = subprocess.run(
            ["docker", "ps", "-a", "-q", "--filter", f"label={OWNER_LABEL}"],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        owners = [
            subprocess.run(
                ["docker", "inspect", "--format", LABEL_FORMAT, c],
                capture_output=True, text=True, check=False,
            ).stdout.strip()
            for c in left
        ]  # fmt: skip
        assert not [o for o in owners if o.startswith(f"{hostname}:")]
        assert "worker running up to 1 missions at a time from the queue" in log.read_text()
        world.github.assert_no_rejections()
