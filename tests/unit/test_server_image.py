"""Choosing the server image's wheels for its own Python: which requirements the image's
CPython needs that pip, judging markers by the host's Python, left out."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from loopwright.server_image import (
    IMAGE_PYTHON,
    ServerImageError,
    build_server_image,
    image_marker_environment,
    manylinux_tags,
    missing_requirements,
    read_wheels,
)


def wheel(where: Path, name: str, version: str, requires: list[str]) -> None:
    """A wheel with only its METADATA, as pip download leaves it in the folder."""
    dist = f"{name.replace('-', '_')}-{version}"
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    with zipfile.ZipFile(where / f"{dist}-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{dist}.dist-info/METADATA", "\n".join(lines) + "\n")


REDIS = {"app": ["redis>=5"], "redis": ["async-timeout>=4.0.3; python_full_version < '3.11.3'"]}
IMAGE = image_marker_environment(IMAGE_PYTHON, "x86_64")
NEWER = image_marker_environment("3.11.7", "x86_64")


@pytest.mark.parametrize(
    ("requires", "environment", "expected"),
    [
        pytest.param(
            REDIS, IMAGE, ["async-timeout>=4.0.3"], id="full-version-marker-true-on-the-image",
        ),
        pytest.param(
            REDIS, NEWER, [], id="same-marker-false-on-a-newer-python",
        ),
        pytest.param(
            {"app": ["saq[redis]"], "saq": ["redis>=4; extra == 'redis'", "x; extra == 'web'"]},
            IMAGE, ["redis>=4"], id="only-requested-extras",
        ),
        pytest.param(
            {"app": ["tool"],
             "tool": ["colorama; sys_platform == 'win32'", "uvloop; sys_platform == 'linux'"]},
            IMAGE, ["uvloop"], id="platform-markers",
        ),
        pytest.param(
            {"app": ["a"], "a": ["b[fast]"], "b": ["c; extra == 'fast'"], "c": ["a"]},
            IMAGE, [], id="cycles-end-and-present-wheels-count",
        ),
        pytest.param(
            {"app": ["tomli; python_version < '3.11'", "Typing_Extensions>=4"]},
            IMAGE, ["Typing_Extensions>=4"], id="python-version-and-names-as-written",
        ),
    ],
)  # fmt: skip
def test_missing_requirements(
    requires: dict[str, list[str]], environment: dict[str, str], expected: list[str]
) -> None:
    assert missing_requirements(requires, "app", environment) == expected


def test_read_wheels_normalises_names_and_keeps_the_newest_version(tmp_path: Path) -> None:
    wheel(tmp_path, "Async_Timeout", "4.0.3", ["old"])
    wheel(tmp_path, "async-timeout", "5.0.1", [])
    wheel(tmp_path, "redis", "8.1.0", ["async-timeout>=4.0.3; python_full_version < '3.11.3'"])
    found = read_wheels(tmp_path)
    assert found == {
        "async-timeout": [],
        "redis": ["async-timeout>=4.0.3; python_full_version < '3.11.3'"],
    }
    assert missing_requirements(found, "redis", IMAGE) == []


def test_manylinux_tags_cover_every_glibc_up_to_the_images_with_the_legacy_aliases() -> None:
    tags = manylinux_tags((2, 36), "x86_64")
    assert tags[0] == "manylinux_2_36_x86_64"
    assert "manylinux_2_17_x86_64" in tags and "manylinux_2_37_x86_64" not in tags
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert tags[-1] == "any"


def test_image_build_outside_a_checkout_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ServerImageError, match="not a Loopwright checkout"):
        build_server_image(None, lambda line: None, project_dir=tmp_path)
