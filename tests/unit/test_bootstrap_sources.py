"""The offline base bootstrap takes its Debian mirrors from the host's apt configuration.

`deploy/sandbox/bootstrap-base.sh --print-sources` reads `APT_DIR` (one-line `.list` files and
deb822 `.sources` files) and prints the sources.list the image gets; no mirror host name is
written in the script itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "sandbox" / "bootstrap-base.sh"


def print_sources(apt_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "--print-sources"],
        env={"PATH": "/usr/bin:/bin", "APT_DIR": str(apt_dir), **env},
        capture_output=True,
        text=True,
        check=False,
    )


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_one_line_sources_with_options_comments_and_deb_src(tmp_path: Path) -> None:
    write(
        tmp_path / "sources.list",
        "# the main archive\n"
        "deb-src http://src.mirror.test/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://one.mirror.test/debian "
        "bookworm main contrib  # trailing comment\n"
        "deb http://one.mirror.test/debian bookworm-updates main\n",
    )
    write(
        tmp_path / "sources.list.d/security.list",
        "deb https://sec.mirror.test/debian-security bookworm-security main\n",
    )
    proc = print_sources(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "deb http://one.mirror.test/debian bookworm main",
        "deb http://one.mirror.test/debian bookworm-updates main",
        "deb https://sec.mirror.test/debian-security bookworm-security main",
    ]


def test_deb822_sources_with_lists_disabled_stanzas_and_comments(tmp_path: Path) -> None:
    write(
        tmp_path / "sources.list.d/debian.sources",
        "Types: deb-src\n"
        "URIs: http://src-only.mirror.test/debian\n"
        "Suites: bookworm\n"
        "\n"
        "Types: deb\n"
        "Enabled: no\n"
        "URIs: http://disabled.mirror.test/debian\n"
        "Suites: bookworm\n"
        "\n"
        "Types: deb deb-src\n"
        "# a snapshot would go here\n"
        "URIs: http://822.mirror.test/debian http://second.mirror.test/debian\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        "\n"
        "types: deb\n"
        "uris: http://822-sec.mirror.test/debian-security\n"
        "suites: bookworm-security\n",
    )
    # A file that is not *.list or *.sources is not apt configuration.
    write(tmp_path / "sources.list.d/old.list.disabled", "deb http://x.test/d bookworm main\n")
    proc = print_sources(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "deb http://822.mirror.test/debian bookworm main",
        "deb http://822.mirror.test/debian bookworm-updates main",
        "deb http://822-sec.mirror.test/debian-security bookworm-security main",
    ]


def test_sources_list_comes_before_the_directory_and_missing_suites_are_left_out(
    tmp_path: Path,
) -> None:
    write(tmp_path / "sources.list", "deb http://first.mirror.test/debian bookworm main\n")
    write(
        tmp_path / "sources.list.d/a.sources",
        "Types: deb\nURIs: http://later.mirror.test/debian\nSuites: bookworm\n",
    )
    proc = print_sources(tmp_path)
    assert proc.stdout.splitlines() == ["deb http://first.mirror.test/debian bookworm main"]


def test_an_explicit_mirror_wins_over_the_apt_configuration(tmp_path: Path) -> None:
    write(tmp_path / "sources.list", "deb http://apt.mirror.test/debian bookworm main\n")
    proc = print_sources(tmp_path, MIRROR="http://operator.mirror.test/debian")
    assert proc.stdout.splitlines() == ["deb http://operator.mirror.test/debian bookworm main"]


DISABLED = "Types: deb\nEnabled: no\nURIs: http://m.test/d\nSuites: bookworm\n"


@pytest.mark.parametrize(
    "files",
    [
        {},
        {"sources.list": "deb http://only.mirror.test/debian trixie main\n"},
        {"sources.list.d/x.sources": DISABLED},
    ],
    ids=["no-configuration", "other-suite", "disabled"],
)
def test_no_bookworm_source_is_a_clear_error(tmp_path: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        write(tmp_path / rel, text)
    proc = print_sources(tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "no Debian bookworm source" in proc.stderr and "set MIRROR" in proc.stderr


def test_the_script_names_no_mirror_host() -> None:
    text = SCRIPT.read_text()
    assert "://" not in text.replace("http://HOST", "")  # no URL but the placeholder
