"""Building the sandbox image (with or without a registry) and checking what a host is missing.

The image carries the label `loopwright.inputs=<hash>` of the Dockerfile, the base bootstrap
script, Loopwright's test reporters and the host's extra CA certificates; it is rebuilt only
when that hash changes.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from loopwright.config import Settings
from loopwright.sandbox.base import SandboxError

INPUTS_LABEL = "loopwright.inputs"
REGISTRY_BASE = "debian:bookworm-slim"
BOOTSTRAP_BASE = "loopwright-sandbox-base:bookworm"
CONTEXT_DIR = Path(__file__).resolve().parents[2] / "deploy" / "sandbox"
REPORTERS_DIR = Path(__file__).resolve().parents[1] / "verify" / "reporters"
"""The test reporters the image carries at /opt/loopwright/reporters (package data)."""
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
CHROMIUM = Path("/usr/bin/chromium")
BUILD_COMMAND = "loopwright sandbox build"
MIN_FREE_BYTES = 3 * 1024**3
PULL_TIMEOUT_S = 20

Log = Callable[[str], None]


@dataclass(frozen=True)
class DoctorCheck:
    """One line of `loopwright doctor`: what was checked, whether it passed, how to fix it."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None


def _context_dir(context_dir: Path | None) -> Path:
    directory = context_dir or CONTEXT_DIR
    if not (directory / "Dockerfile").is_file():
        raise SandboxError(
            f"the sandbox Dockerfile is not at {directory}/Dockerfile; run Loopwright from a "
            "checkout of its repository (deploy/sandbox/ is not part of the wheel)"
        )
    return directory


def _ca_certificates(ca_dir: Path) -> list[Path]:
    return sorted(ca_dir.glob("*.crt")) if ca_dir.is_dir() else []


def _reporters(reporters_dir: Path) -> list[Path]:
    return sorted(p for p in reporters_dir.iterdir() if p.is_file() and p.suffix in (".py", ".mjs"))


def image_inputs_hash(
    context_dir: Path | None = None,
    ca_dir: Path = HOST_CA_DIR,
    reporters_dir: Path = REPORTERS_DIR,
) -> str:
    """SHA-256 over the Dockerfile, the bootstrap script, the reporters and the extra CAs."""
    directory = _context_dir(context_dir)
    digest = hashlib.sha256()
    inputs = [directory / "Dockerfile", directory / "bootstrap-base.sh"]
    for path in inputs:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for reporter in _reporters(reporters_dir):
        name = b"reporters/" + reporter.name.encode()
        digest.update(name + b"\0" + reporter.read_bytes() + b"\0")
    for cert in _ca_certificates(ca_dir):
        digest.update(b"ca/" + cert.name.encode() + b"\0" + cert.read_bytes() + b"\0")
    return digest.hexdigest()


def _image_labels(client: Any, name: str) -> dict[str, str] | None:
    import docker.errors

    try:
        image = client.images.get(name)
    except docker.errors.ImageNotFound:
        return None
    return dict(image.labels or {})


def image_is_current(client: Any, settings: Settings, context_dir: Path | None = None) -> bool:
    labels = _image_labels(client, settings.sandbox_image)
    return labels is not None and labels.get(INPUTS_LABEL) == image_inputs_hash(context_dir)


def ensure_image(
    client: Any,
    settings: Settings,
    log: Log,
    *,
    force: bool = False,
    context_dir: Path | None = None,
) -> str:
    """Build `settings.sandbox_image` unless an image with the current inputs hash exists.

    Uses `debian:bookworm-slim` as the base when it is present or can be pulled quickly;
    otherwise bootstraps a base offline with `bootstrap-base.sh` (needs root). Returns the
    image name. Raises `SandboxError` with the command that fixes the problem.
    """

    directory = _context_dir(context_dir)
    digest = image_inputs_hash(directory)
    name = settings.sandbox_image
    labels = _image_labels(client, name)
    if not force and labels is not None and labels.get(INPUTS_LABEL) == digest:
        log(f"sandbox image {name} is current ({digest[:12]})")
        return name
    log(f"building sandbox image {name} (inputs {digest[:12]})")
    base = choose_base(client, directory, log)
    context = _build_context(directory, HOST_CA_DIR, REPORTERS_DIR)
    build_image(
        client,
        context,
        tag=name,
        buildargs={"BASE": base},
        labels={INPUTS_LABEL: digest},
        log=log,
        what="the sandbox image",
    )
    log(f"sandbox image {name} ready")
    return name


def build_image(
    client: Any,
    context: IO[bytes],
    *,
    tag: str,
    buildargs: dict[str, str],
    labels: dict[str, str],
    log: Log,
    what: str,
) -> None:
    """Build `tag` from the tar `context` on the engine (never pulling), streaming the
    build's output to `log`; a failed step raises `SandboxError` saying which image."""
    import docker.errors

    try:
        for line in client.api.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            buildargs=buildargs,
            labels=labels,
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
        ):
            if "error" in line:
                raise SandboxError(f"building {what} failed: {str(line['error']).strip()}")
            text = str(line.get("stream", "")).rstrip()
            if text:
                log(text)
    except docker.errors.APIError as exc:
        raise SandboxError(f"building {what} failed: {exc}") from exc


def choose_base(client: Any, directory: Path, log: Log) -> str:
    """The base of an image Loopwright builds (the sandbox's and the server's):
    `debian:bookworm-slim` where it is present or pulled quickly, else the base
    `directory/bootstrap-base.sh` makes offline (made now when missing)."""
    import docker.errors
    import requests.exceptions

    if _image_labels(client, REGISTRY_BASE) is not None:
        return REGISTRY_BASE
    # Without a registry a pull must fail fast, not hang: a short timeout for this call only.
    api = client.api
    saved = api.timeout
    api.timeout = PULL_TIMEOUT_S
    try:
        repository, _, tag = REGISTRY_BASE.partition(":")
        api.pull(repository, tag=tag)
        log(f"pulled {REGISTRY_BASE}")
        return REGISTRY_BASE
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        reason = (str(exc).splitlines() or [""])[0][:160]
        log(f"no registry ({reason}); bootstrapping the base offline")
    finally:
        api.timeout = saved
    _bootstrap_base(directory, log)
    return BOOTSTRAP_BASE


def _bootstrap_base(directory: Path, log: Log) -> None:
    script = directory / "bootstrap-base.sh"
    if os.geteuid() != 0:
        raise SandboxError(
            f"no registry is reachable, so the base image must be bootstrapped, which needs "
            f"root: run `sudo {script} {BOOTSTRAP_BASE}`, then `{BUILD_COMMAND}` again"
        )
    if shutil.which("debootstrap") is None:
        raise SandboxError(
            "no registry is reachable and debootstrap is missing: run "
            f"`apt-get install -y debootstrap`, then `{BUILD_COMMAND}` again"
        )
    log(f"running {script} (debootstrap; takes a few minutes)")
    with subprocess.Popen(
        ["bash", str(script), BOOTSTRAP_BASE],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            tail = [*tail[-19:], line]
            log(line)
        code = proc.wait()
    if code != 0:
        raise SandboxError(
            f"bootstrapping the sandbox base failed (exit {code}); last output:\n" + "\n".join(tail)
        )


def _build_context(
    directory: Path, ca_dir: Path, reporters_dir: Path = REPORTERS_DIR
) -> io.BytesIO:
    """Dockerfile, the reporters and the host's extra CA certificates, as `docker build` reads."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(directory / "Dockerfile", arcname="Dockerfile")
        reporters = _reporters(reporters_dir)
        if not reporters:
            raise SandboxError(
                f"Loopwright's test reporters are missing from {reporters_dir}; reinstall "
                "Loopwright (they ship as package data)"
            )
        for reporter in reporters:
            tar.add(reporter, arcname=f"reporters/{reporter.name}")
        folder = tarfile.TarInfo("ca-certificates")
        folder.type = tarfile.DIRTYPE
        folder.mode = 0o755
        tar.addfile(folder)
        # An empty folder would make COPY fail on some builders; a marker keeps it present.
        marker = b"Extra CA certificates copied from the host that built this image.\n"
        info = tarfile.TarInfo("ca-certificates/README")
        info.size = len(marker)
        tar.addfile(info, io.BytesIO(marker))
        for cert in _ca_certificates(ca_dir):
            tar.add(cert, arcname=f"ca-certificates/{cert.name}")
    buf.seek(0)
    return buf


# -- doctor -------------------------------------------------------------------------------


def doctor(settings: Settings) -> list[DoctorCheck]:
    """What this host has and lacks for Docker sandboxes, each failure with its fix."""
    checks: list[DoctorCheck] = []
    try:
        import docker
    except ImportError as exc:
        checks.append(
            DoctorCheck(
                "docker package",
                False,
                f"cannot import docker: {exc}",
                "pip install 'docker>=7.1,<8'",
            )
        )
        checks.extend(_host_checks(settings, None))
        return checks
    checks.append(DoctorCheck("docker package", True, f"docker {docker.__version__}"))
    client = None
    try:
        client = docker.from_env(version="auto", timeout=10)
        version = client.version()
        checks.append(
            DoctorCheck(
                "docker engine",
                True,
                f"engine {version.get('Version')} (API {version.get('ApiVersion')})",
            )
        )
    except docker.errors.DockerException as exc:
        fix = (
            "apt-get install -y docker.io && (dockerd > /var/log/dockerd.log 2>&1 &)"
            if shutil.which("dockerd") is None
            else "dockerd > /var/log/dockerd.log 2>&1 &"
        )
        checks.append(DoctorCheck("docker engine", False, f"unreachable: {exc}", fix))
        client = None
    try:
        checks.append(_image_check(client, settings))
        checks.extend(_host_checks(settings, client))
    finally:
        if client is not None:
            client.close()
    return checks


def _image_check(client: Any, settings: Settings) -> DoctorCheck:
    name = settings.sandbox_image
    if client is None:
        return DoctorCheck(
            "sandbox image", False, f"{name}: cannot tell without the engine", BUILD_COMMAND
        )
    try:
        digest = image_inputs_hash()
    except SandboxError as exc:
        return DoctorCheck("sandbox image", False, str(exc), None)
    labels = _image_labels(client, name)
    if labels is None:
        return DoctorCheck("sandbox image", False, f"{name} is missing", BUILD_COMMAND)
    if labels.get(INPUTS_LABEL) != digest:
        return DoctorCheck(
            "sandbox image",
            False,
            f"{name} is out of date (its inputs changed since it was built)",
            BUILD_COMMAND,
        )
    return DoctorCheck("sandbox image", True, f"{name} is current ({digest[:12]})")


def _host_checks(settings: Settings, client: Any) -> Iterable[DoctorCheck]:
    debootstrap = shutil.which("debootstrap")
    yield DoctorCheck(
        "debootstrap",
        debootstrap is not None,
        debootstrap or "missing (needed to build the sandbox image where no registry is reachable)",
        None if debootstrap else "apt-get install -y debootstrap",
    )
    yield DoctorCheck(
        "chromium",
        CHROMIUM.exists(),
        str(CHROMIUM) if CHROMIUM.exists() else f"{CHROMIUM} missing (needed for screenshots)",
        None if CHROMIUM.exists() else "apt-get install -y chromium",
    )
    yield _disk_check(settings, client)
    if settings.network != "none":
        yield _firewall_check(client)


def _firewall_check(client: Any) -> DoctorCheck:
    """Whether the setup network's firewall is (or can be) in place on this host."""
    import docker.errors

    from loopwright.sandbox.docker.engine import NETWORK_NAME
    from loopwright.sandbox.docker.network import ensure_setup_firewall, the_network

    name = "setup network firewall"
    fix = "run Loopwright as root on the Docker host, or set LOOPWRIGHT_NETWORK=none"
    iptables = shutil.which("iptables")
    if iptables is None:
        return DoctorCheck(name, False, "iptables is missing", "apt-get install -y iptables")
    if client is None:
        return DoctorCheck(name, False, "cannot tell without the engine", None)
    try:
        network = the_network(client)
    except docker.errors.DockerException as exc:
        return DoctorCheck(name, False, f"cannot inspect {NETWORK_NAME}: {exc}", None)
    if network is None:
        listed = subprocess.run(
            [iptables, "-w", "5", "-S", "DOCKER-USER"], capture_output=True, text=True, check=False
        )
        if listed.returncode != 0:
            return DoctorCheck(
                name, False, f"cannot read the DOCKER-USER chain: {listed.stderr.strip()}", fix
            )
        return DoctorCheck(name, True, f"installed when {NETWORK_NAME} is first created")
    try:
        rules = ensure_setup_firewall(network.attrs)
    except SandboxError as exc:
        return DoctorCheck(name, False, str(exc), fix)
    return DoctorCheck(
        name, True, f"{len(rules)} rules keep {NETWORK_NAME} off the host, metadata and LAN"
    )


def _disk_check(settings: Settings, client: Any) -> DoctorCheck:
    where = Path("/var/lib/docker")
    if client is not None:
        import docker.errors
        import requests.exceptions

        try:
            where = Path(str(client.info().get("DockerRootDir") or where))
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            where = Path("/var/lib/docker")  # the engine's default; the check still runs
    probe = where if where.exists() else settings.data_dir
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    ok = free >= MIN_FREE_BYTES
    return DoctorCheck(
        "free disk",
        ok,
        f"{free / 1024**3:.1f} GB free at {probe}",
        None if ok else "docker system prune -f  # or free space under " + str(probe),
    )
