"""Building the server image (`loopwright image build`): Python and Loopwright from this
checkout, on the same Debian base as the sandbox image, running as uid 10001.

No Python package is fetched while the image builds. Loopwright is made into a wheel on
this host, and this host's pip, with its own configuration (its index, mirror, find-links,
constraints and CA bundle, whatever they are), downloads the binary wheels of every
dependency for the image's Python and C library (Debian bookworm: CPython 3.11.2, glibc
2.36) rather than for its own; the image installs only from those wheels, and keeps no pip.
The base is the sandbox's: `debian:bookworm-slim` where a registry answers, otherwise the
base that `deploy/sandbox/bootstrap-base.sh` makes offline with debootstrap from this host's
apt mirrors, which already holds Python and git; the sandbox's toolchain is removed from it.
"""

from __future__ import annotations

import email.parser
import io
import platform
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from loopwright import __version__
from loopwright.hostpython import own_python
from loopwright.sandbox.base import SandboxError
from loopwright.sandbox.image import HOST_CA_DIR, build_image, choose_base

SERVER_IMAGE = "loopwright-server:latest"
PROJECT_DIR = Path(__file__).resolve().parents[1]
"""The checkout this module runs from (the Dockerfile is not part of the wheel)."""
CONTEXT = Path("deploy") / "server"
IMAGE_PYTHON = "3.11.2"
"""The Python of Debian bookworm (stable keeps its upstream version); the wheels are chosen
for it, and the image build checks that its Python is this one."""
IMAGE_GLIBC = (2, 36)
"""The C library of Debian bookworm: the newest `manylinux` wheels the image can load."""
MAX_DOWNLOAD_ROUNDS = 5
"""Rounds of fetching what the image's Python needs beyond what pip chose; each round's
wheels may need more, but the chains are short."""
VERSION_LABEL = "loopwright.version"
BUILD_COMMAND = "loopwright image build"

Log = Callable[[str], None]


class ServerImageError(RuntimeError):
    """The server image could not be built; the message says what to do."""


def build_server_image(
    client: Any,
    log: Log,
    *,
    tag: str = SERVER_IMAGE,
    project_dir: Path = PROJECT_DIR,
    ca_dir: Path = HOST_CA_DIR,
) -> str:
    """Build the server image as `tag` and return the tag."""

    dockerfile = project_dir / CONTEXT / "Dockerfile"
    if not (project_dir / "pyproject.toml").is_file() or not dockerfile.is_file():
        raise ServerImageError(
            f"{project_dir} is not a Loopwright checkout (it lacks pyproject.toml or "
            "deploy/server/Dockerfile): install Loopwright from its repository "
            f"(`pip install -e .` in a checkout) and run `{BUILD_COMMAND}` again"
        )
    with tempfile.TemporaryDirectory(prefix="loopwright-image-") as scratch:
        wheels = Path(scratch) / "wheels"
        _build_wheels(project_dir, Path(scratch) / "source", wheels, log)
        try:
            base = choose_base(client, project_dir / "deploy" / "sandbox", log)
        except SandboxError as exc:
            raise ServerImageError(str(exc)) from exc
        with tempfile.TemporaryFile() as context:
            _build_context(context, dockerfile, wheels, ca_dir)
            context.seek(0)
            log(f"building server image {tag} on {base}")
            try:
                build_image(
                    client,
                    context,
                    tag=tag,
                    buildargs={"BASE": base, "PYTHON_VERSION": IMAGE_PYTHON},
                    labels={VERSION_LABEL: __version__},
                    log=log,
                    what="the server image",
                )
            except SandboxError as exc:
                raise ServerImageError(str(exc)) from exc
    log(f"server image {tag} ready")
    return tag


def _build_wheels(project_dir: Path, source: Path, wheels: Path, log: Log) -> None:
    """Loopwright and its dependencies as wheels, by this host's pip and its configuration.

    From a clean copy of the package, so a stale `build/` in the checkout cannot leak files
    that no longer exist into the wheel. `pip download --python-version` picks wheels for the
    image's Python but judges `python_full_version` markers by this host's Python (3.11.7
    here skips `async-timeout; python_full_version < "3.11.3"`, which 3.11.2 needs), so the
    requirements the image's Python needs are then checked against the wheels and the
    missing ones fetched, until none is missing.
    """
    source.mkdir()
    shutil.copy2(project_dir / "pyproject.toml", source)
    if (project_dir / "README.md").is_file():
        shutil.copy2(project_dir / "README.md", source)
    shutil.copytree(
        project_dir / "loopwright",
        source / "loopwright",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    log("building the Loopwright wheel, and fetching its dependencies with this host's pip")
    _pip("wheel", "--no-deps", "--wheel-dir", str(wheels), str(source))
    [own] = wheels.glob("loopwright-*.whl")
    _download(wheels, [str(own)])
    environment = image_marker_environment(IMAGE_PYTHON, platform.machine())
    for _ in range(MAX_DOWNLOAD_ROUNDS):
        missing = missing_requirements(read_wheels(wheels), "loopwright", environment)
        if not missing:
            break
        log(f"fetching what Python {IMAGE_PYTHON} needs as well: {', '.join(missing)}")
        _download(wheels, missing)
    else:
        raise ServerImageError(
            f"the wheels for Python {IMAGE_PYTHON} still lack {', '.join(missing)} after "
            f"{MAX_DOWNLOAD_ROUNDS} rounds of `pip download`; check the index in `pip config list`"
        )
    count = len(list(wheels.glob("*.whl")))
    log(f"{count} wheels ready")


def _download(wheels: Path, requirements: list[str]) -> None:
    platforms = [f"--platform={tag}" for tag in manylinux_tags(IMAGE_GLIBC, platform.machine())]
    _pip(
        "download",
        "--dest",
        str(wheels),
        "--only-binary=:all:",
        f"--python-version={IMAGE_PYTHON}",
        "--implementation=cp",
        "--abi=cp" + "".join(IMAGE_PYTHON.split(".")[:2]),
        "--abi=abi3",
        "--abi=none",
        *platforms,
        *requirements,
    )


def image_marker_environment(python: str, machine: str) -> dict[str, str]:
    """The values environment markers see on the image's CPython on Linux."""
    major, minor, _ = python.split(".")
    return {
        "implementation_name": "cpython",
        "implementation_version": python,
        "os_name": "posix",
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_system": "Linux",
        "python_full_version": python,
        "python_version": f"{major}.{minor}",
        "sys_platform": "linux",
        "extra": "",
    }


def read_wheels(wheels: Path) -> dict[str, list[str]]:
    """Each wheel's project (normalised name) and its `Requires-Dist` lines, the newest
    version's where a project has several."""
    found: dict[str, tuple[Version, list[str]]] = {}
    for wheel in wheels.glob("*.whl"):
        name, version, *_ = parse_wheel_filename(wheel.name)
        with zipfile.ZipFile(wheel) as archive:
            [metadata] = [
                n
                for n in archive.namelist()
                if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
            ]
            message = email.parser.BytesParser().parsebytes(archive.read(metadata))
        if name not in found or found[name][0] < version:
            found[name] = (version, message.get_all("Requires-Dist") or [])
    return {name: requires for name, (_, requires) in found.items()}


def missing_requirements(
    requires: dict[str, list[str]], root: str, environment: dict[str, str]
) -> list[str]:
    """The requirements (without markers) reachable from `root` on `environment` whose
    project has no wheel in `requires`, sorted."""
    missing: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[str, frozenset[str]]] = [(canonicalize_name(root), frozenset())]
    while todo:
        name, extras = todo.pop()
        for line in requires.get(name, []):
            requirement = Requirement(line)
            wanted = requirement.marker is None or any(
                requirement.marker.evaluate({**environment, "extra": extra})
                for extra in ("", *extras)
            )
            if not wanted:
                continue
            needed = canonicalize_name(requirement.name)
            if needed not in requires:
                requirement.marker = None
                missing.add(str(requirement))
                continue
            key = (needed, frozenset(requirement.extras))
            if key not in seen:
                seen.add(key)
                todo.append(key)
    return sorted(missing)


def _pip(*args: str) -> None:
    done = subprocess.run(
        own_python("-m", "pip", *args, "--quiet"),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        raise ServerImageError(
            f"`pip {args[0]}` failed while gathering the image's wheels (pip reads its index "
            "from this host's configuration: `pip config list`; every dependency needs a "
            f"binary wheel for CPython {IMAGE_PYTHON}); last output:\n{tail}"
        )


def manylinux_tags(glibc: tuple[int, int], machine: str) -> list[str]:
    """Every platform tag a wheel loadable with this glibc may carry, newest first, with
    the legacy aliases (`manylinux2014` is 2.17, `manylinux2010` 2.12, `manylinux1` 2.5)."""
    major, newest = glibc
    tags = [f"manylinux_{major}_{minor}_{machine}" for minor in range(newest, 4, -1)]
    aliases = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags += [f"{name}_{machine}" for minor, name in aliases.items() if minor <= newest]
    return [*tags, "any"]


def _build_context(out: IO[bytes], dockerfile: Path, wheels: Path, ca_dir: Path) -> None:
    """The Dockerfile, the wheels and the host's extra CA certificates, as `docker build`
    reads them."""
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(dockerfile, arcname="Dockerfile")
        tar.add(wheels, arcname="wheels")
        folder = tarfile.TarInfo("ca-certificates")
        folder.type = tarfile.DIRTYPE
        folder.mode = 0o755
        tar.addfile(folder)
        # An empty folder would make COPY fail on some builders; a marker keeps it present.
        marker = b"Extra CA certificates copied from the host that built this image.\n"
        info = tarfile.TarInfo("ca-certificates/README")
        info.size = len(marker)
        tar.addfile(info, io.BytesIO(marker))
        certs = sorted(ca_dir.glob("*.crt")) if ca_dir.is_dir() else []
        for cert in certs:
            tar.add(cert, arcname=f"ca-certificates/{cert.name}")
