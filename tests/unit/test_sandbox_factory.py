"""The sandbox factory: one discriminated config, one `get_provider` for every face."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from loopwright.config import Settings
from loopwright.sandbox.factory import (
    DockerSandboxConfig,
    LocalSandboxConfig,
    SandboxConfig,
    get_provider,
    sandbox_config,
)
from loopwright.sandbox.local import LocalProvider

ADAPTER: TypeAdapter[DockerSandboxConfig | LocalSandboxConfig] = TypeAdapter(SandboxConfig)


def test_the_type_field_picks_the_backend() -> None:
    docker = ADAPTER.validate_python({"type": "docker", "image": "img:1", "warm_pool": 2})
    local = ADAPTER.validate_python({"type": "local", "base_dir": "/tmp/boxes"})
    assert docker == DockerSandboxConfig(image="img:1", warm_pool=2)
    assert docker.reap_abandoned
    assert local == LocalSandboxConfig(base_dir=Path("/tmp/boxes"))


@pytest.mark.parametrize(
    "data",
    [
        {"type": "docker", "image": "img", "base_dir": "/tmp"},
        {"type": "local", "image": "img"},
        {"type": "podman", "image": "img"},
        {"type": "docker", "image": "img", "warm_pool": -1},
        {"type": "docker"},
    ],
    ids=[
        "local-field-on-docker",
        "docker-field-on-local",
        "unknown-type",
        "negative-pool",
        "no-image",
    ],
)
def test_fields_of_another_backend_or_unknown_values_are_refused(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ADAPTER.validate_python(data)


def test_settings_describe_the_config() -> None:
    settings = Settings(sandbox_image="img:2", warm_pool=3)
    assert sandbox_config(settings) == DockerSandboxConfig(image="img:2", warm_pool=3)
    local = sandbox_config(
        settings.with_overrides(sandbox="local"), base_dir=Path("/b"), extra_env={"GOPATH": "/g"}
    )
    assert local == LocalSandboxConfig(base_dir=Path("/b"), extra_env={"GOPATH": "/g"})


def test_the_config_keeps_a_warm_pool_for_servers_only_unless_the_settings_name_one() -> None:
    unset = Settings(sandbox_image="img")
    assert sandbox_config(unset).warm_pool == 0  # fix, build, the Action
    assert sandbox_config(unset, server=True).warm_pool == 2  # serve, worker, the App
    off = Settings(sandbox_image="img", warm_pool=0)
    assert sandbox_config(off, server=True).warm_pool == 0
    assert sandbox_config(Settings(warm_pool=4)).warm_pool == 4


def test_get_provider_builds_the_local_backend_from_its_config(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("hello")
    boxes = tmp_path / "boxes"
    boxes.mkdir()
    provider = get_provider(Settings(sandbox="local"), LocalSandboxConfig(base_dir=boxes))
    try:
        assert isinstance(provider, LocalProvider) and provider.kind == "local"
        assert provider.reap_abandoned() == []
        box = provider.create("m1", tree, network=False)
        assert box.read_file("a.txt") == b"hello"
        assert any(boxes.iterdir())  # made under the configured base directory
        box.close()
    finally:
        provider.close()
