"""Web apps in verification: booted inside the sandbox, loaded in real Chromium, screenshotted."""

from __future__ import annotations

import json
import os
import socket
import struct
import zlib
from pathlib import Path

import docker
import pytest

from loopwright.agent.model import OpenAIModel
from loopwright.config import Settings
from loopwright.events import EventBus, EventList
from loopwright.missions.fix import FixMission, FixRequest
from loopwright.redaction import Redactor
from loopwright.sandbox.base import MISSION_LABEL
from loopwright.sandbox.factory import get_provider
from loopwright.verify.web import CHROMIUM
from tests.conftest import step, tool

pytestmark = pytest.mark.browser

BUG = "  return todos.filter((todo) => todo.done).length;\n"
FIX = "  return todos.filter((todo) => !todo.done).length;\n"
FIX_SCRIPT = [
    step(tool("update_plan", items=[{"step": "count open items", "status": "in_progress"}])),
    step(tool("edit_file", path="src/todos.js", old=BUG, new=FIX)),
    step(tool("run_command", command="npm test")),
    step(tool("finish", summary="remaining() counted finished items; count open ones")),
]


@pytest.fixture(scope="session")
def chromium_ready() -> None:
    """Debian's Chromium; mandatory in CI, skipped on a laptop without it."""
    if not Path(CHROMIUM).is_file():
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but {CHROMIUM} is missing; scripts/bootstrap.sh installs it")
        pytest.skip(f"no Chromium at {CHROMIUM} (run scripts/bootstrap.sh)")


def model_env(server) -> dict[str, str]:
    return {
        "LOOPWRIGHT_MODEL_BASE_URL": server.base_url,
        "LOOPWRIGHT_MODEL_API_KEY": "sk-test-not-a-real-key",
        "LOOPWRIGHT_MODEL_TIERS": "nano=model-nano,super=model-super,ultra=model-ultra",
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def app_config(kind: str, start: str = "npm start") -> dict[str, str]:
    """On Docker the `scripts.start` convention (port 3000 inside the sandbox); the local
    backend shares the host's ports, so it gets a free one through `.loopwright.yml`."""
    if kind == "docker" and start == "npm start":
        return {}
    port = 3000 if kind == "docker" else free_port()
    return {".loopwright.yml": f"app:\n  start: {json.dumps(start)}\n  port: {port}\n"}


def assert_no_container_left(mission: str) -> None:
    client = docker.from_env(version="auto")
    try:
        left = client.containers.list(all=True, filters={"label": f"{MISSION_LABEL}={mission}"})
    finally:
        client.close()
    assert left == []


def png_pixels(path: Path) -> tuple[int, int, set[bytes]]:
    """Width, height and the set of distinct pixels of an 8-bit RGB/RGBA PNG (pure zlib)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    pixels: set[bytes] = set()
    for row in range(height):
        start = row * (stride + 1)
        kind_byte = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            if kind_byte == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind_byte == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind_byte == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind_byte == 4:
                upleft = prev[i - bpp] if i >= bpp else 0
                p = left + up - upleft
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - upleft)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else upleft
                line[i] = (line[i] + pred) & 0xFF
        pixels.update(bytes(line[i : i + bpp]) for i in range(0, stride, bpp * 7))
        prev = line
    return width, height, pixels


def assert_real_screenshot(path: Path) -> None:
    width, height, pixels = png_pixels(path)
    assert width >= 800 and height >= 400
    assert len(pixels) >= 3, "the screenshot is blank (a single colour)"


def test_fixed_web_app_is_booted_and_screenshotted(
    example_repo, scripted, run_cli, sandbox_kind, chromium_ready
):
    repo = example_repo("node-todo-web", app_config(sandbox_kind))
    server = scripted(FIX_SCRIPT)
    run = run_cli("fix", str(repo), "--sandbox", sandbox_kind, env=model_env(server))

    assert run.exit_code == 0, (run.stderr, run.result)
    assert run.result["status"] == "verified"
    web = run.result["verification"]["web"]
    assert web["ok"] is True and web["http_status"] == 200, web
    assert web["console_errors"] == []
    assert "to-do page on" in web["output"]
    shot = Path(run.result["screenshot"])
    assert shot.is_file() and web["screenshot"] == str(shot)
    assert_real_screenshot(shot)
    (event,) = run.of_type("screenshot")
    assert event["stage"] == "verify"
    assert event["path"] == str(shot) and event["http_status"] == 200
    assert event["console_errors"] == []
    assert run.of_type("verification")[-1]["web"]["http_status"] == 200
    if sandbox_kind == "docker":
        assert_no_container_left(run.result["mission"])


def test_app_that_exits_without_opening_its_port_is_unverified(
    example_repo, scripted, run_cli, sandbox_kind, chromium_ready
):
    start = "node -e \"console.error('cannot start: no database'); process.exit(3)\""
    repo = example_repo("node-todo-web", app_config(sandbox_kind, start))
    server = scripted(FIX_SCRIPT)
    run = run_cli("fix", str(repo), "--sandbox", sandbox_kind, env=model_env(server))

    assert run.exit_code == 1
    assert run.result["status"] == "unverified"
    assert "did not open port" in run.result["message"]
    assert "exited with code 3" in run.result["message"]
    web = run.result["verification"]["web"]
    assert web["ok"] is False and web["http_status"] is None
    assert "cannot start: no database" in web["output"]
    assert run.result["screenshot"] is None
    # the tests themselves were fixed: only the app keeps the verdict from passing
    rows = {r["id"]: r["status"] for r in run.result["verification"]["rows"]}
    assert "fixed" in rows.values()
    if sandbox_kind == "docker":
        assert_no_container_left(run.result["mission"])


def test_app_that_never_opens_its_port_times_out_with_its_output(
    example_repo, scripted, tmp_path, sandbox_kind, chromium_ready
):
    start = "node -e \"console.log('listening somewhere else'); setInterval(() => {}, 1000)\""
    repo = example_repo("node-todo-web", app_config(sandbox_kind, start))
    server = scripted(FIX_SCRIPT)
    settings = Settings.from_env(
        {
            **model_env(server),
            "LOOPWRIGHT_SANDBOX": sandbox_kind,
            "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
        }
    )
    sink = EventList()
    request = FixRequest(source=str(repo), boot_timeout_s=3, dry_run=True)
    provider = get_provider(settings)
    model = OpenAIModel(settings)
    try:
        result = FixMission(
            request,
            settings=settings,
            provider=provider,
            model=model,
            events=EventBus(request.mission_id, [sink], Redactor()),
        ).run()
    finally:
        model.close()
        provider.close()

    assert result.status == "unverified"
    assert "did not open port" in result.message and "within 3 s" in result.message
    assert "still running" in result.message
    assert result.verification is not None
    assert "listening somewhere else" in result.verification["web"]["output"]
    (event,) = sink.of_type("screenshot")
    assert event.fields["path"] is None and event.fields["ok"] is False
    if sandbox_kind == "docker":
        assert_no_container_left(result.mission)
