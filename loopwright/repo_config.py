"""Per-repository settings: `.loopwright.yml` (or `.github/loopwright.yml`) in the tree.

Unknown keys and values of the wrong type raise `ConfigError` with a message that names
the key and says what to write instead.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from loopwright.config import ConfigError, NetworkMode, Settings

REPO_CONFIG_FILES = (".loopwright.yml", ".github/loopwright.yml")


@dataclass(frozen=True)
class AppConfig:
    """How to boot the repository's web app for the screenshot during verification."""

    start: str
    port: int
    path: str = "/"


@dataclass(frozen=True)
class RepoConfig:
    """Per-repository settings from `.loopwright.yml` (or `.github/loopwright.yml`)."""

    test_cmd: str | None = None
    setup_cmd: str | None = None
    protected_paths: tuple[str, ...] | None = None
    """Globs Loopwright may never change; None means the built-in list."""
    allow_test_edits: tuple[str, ...] = ()
    """Globs of test files the fix may edit without the tamper check objecting."""
    auto_fix: bool = False
    max_cost_usd: float | None = None
    tiers: tuple[str, ...] | None = None
    network: NetworkMode | None = None
    """The repository's wish; it can only narrow the operator's setting (`effective_network`)."""
    app: AppConfig | None = None
    pair: bool = False
    """Pair mode for the App's missions: risky actions wait for a person's decision."""
    ask_paths: tuple[str, ...] = ()
    """Pair mode: globs whose files are changed only once a person approves."""
    ask_network: bool = True
    """Pair mode: commands that need the network (package installs) ask first."""
    ask_removals: int = 3
    """Pair mode: deleting or renaming more than this many files asks first."""
    ask_outside_scope: bool = True
    """Pair mode: changing files outside those the failing tests and their imports reach
    asks first."""
    source: str | None = None

    def narrow(self, settings: Settings) -> Settings:
        """The operator's settings with this repository's wishes applied, which can only
        narrow them: a lower cost cap, and a subset of the configured tiers (none in common
        keeps them all)."""
        if self.max_cost_usd is not None:
            cap = min(self.max_cost_usd, settings.max_cost_usd or self.max_cost_usd)
            settings = settings.with_overrides(max_cost_usd=cap)
        if self.tiers:
            tiers = tuple(t for t in settings.tiers if t.name in self.tiers)
            settings = settings.with_overrides(tiers=tiers or None)
        return settings


class _AppFile(BaseModel):
    """The `app:` mapping of a repository config."""

    model_config = ConfigDict(extra="forbid", strict=True)

    start: str
    """The command that boots the app, e.g. `npm start`."""
    port: int
    """The port the app listens on."""
    path: str = "/"
    """The page to load for the screenshot."""


class _RepoConfigFile(BaseModel):
    """The keys a repository config may set; any other key is a mistake to report."""

    model_config = ConfigDict(extra="forbid", strict=True)

    test_cmd: str | None = None
    """The command that runs the tests, e.g. `pytest -q`."""
    setup_cmd: str | None = None
    """The command that installs dependencies before the tests run."""
    protected_paths: list[str] | None = None
    """Globs Loopwright may never change; absent means the built-in list."""
    allow_test_edits: list[str] | None = None
    """Globs of test files the fix may edit without the tamper check objecting."""
    auto_fix: bool | None = None
    """Fix failing CI on its own, without being asked in a comment."""
    max_cost_usd: float | None = None
    """The most a mission may spend on the model, in US dollars."""
    tiers: list[str] | None = None
    """The model tiers to use, by name, weakest first."""
    network: NetworkMode | None = None
    """When the sandbox may reach the network: none, setup or always."""
    app: _AppFile | None = None
    """How to boot the repository's web app for the screenshot."""
    pair: bool | None = None
    """Pair mode: risky actions wait for a person's approval in the live view or a comment."""
    ask_paths: list[str] | None = None
    """Pair mode: globs whose files are changed only once a person approves."""
    ask_network: bool | None = None
    """Pair mode: commands that need the network ask first (default true)."""
    ask_removals: int | None = Field(default=None, ge=0)
    """Pair mode: deleting or renaming more than this many files asks first (default 3)."""
    ask_outside_scope: bool | None = None
    """Pair mode: changing files outside those the failing tests and their imports reach
    asks first (default true)."""


_LIST_KEYS = ("protected_paths", "allow_test_edits", "tiers", "ask_paths")


def _unknown_keys(keys: list[str], allowed: list[str]) -> str:
    """`tset_cmd (did you mean `test_cmd`?), foo`: each unknown key with its nearest allowed
    key when one is close enough to be a misspelling."""
    named = []
    for key in keys:
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        named.append(f"{key} (did you mean `{close[0]}`?)" if close else key)
    return ", ".join(named)


_EXPECTED = {
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "float_type": "a number",
    "float_parsing": "a number",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "string_type": "a string",
    "greater_than_equal": "a whole number of 0 or more",
}
"""What to write instead, by the pydantic error type of a value of the wrong type."""


def _repo_config_problem(source: str, data: dict[str, Any], exc: ValidationError) -> str:
    """One message for the first problem pydantic found, naming the key and what to write."""
    error = exc.errors()[0]
    key = str(error["loc"][0])
    value = data.get(key)
    expected = _EXPECTED.get(error["type"])
    if key == "app":
        if not isinstance(value, dict):
            return f"{source}: `app` has the wrong type ({type(value).__name__})"
        sub = error["loc"][1] if len(error["loc"]) > 1 else None
        if expected and sub in _AppFile.model_fields:
            got = type(value.get(sub)).__name__
            return f"{source}: `app.{sub}` must be {expected} (got {got})"
        allowed = list(_AppFile.model_fields)
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            return (
                f"{source}: `app` has unknown key(s) {_unknown_keys(unknown, allowed)}; "
                f"allowed: {', '.join(allowed)}"
            )
        return (
            f"{source}: `app` needs `start` (a command) and `port` (a number), "
            "and may set `path` (the page, e.g. /)"
        )
    if key == "network" and isinstance(value, str):
        return f"{source}: `network` must be one of none, setup, always"
    if key in _LIST_KEYS and isinstance(value, list):
        return f"{source}: `{key}` must be a list of non-empty strings"
    if expected:
        return f"{source}: `{key}` must be {expected} (got {type(value).__name__})"
    return f"{source}: `{key}` has the wrong type ({type(value).__name__})"


def parse_repo_config(text: str, source: str) -> RepoConfig:
    """Validate a repository config; every problem names the file and the key to fix."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source} is not valid YAML: {exc}".replace("\n", " ")) from None
    except RecursionError:
        raise ConfigError(f"{source} nests too deeply to be read as YAML") from None
    if data is None:
        return RepoConfig(source=source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a mapping of settings, e.g. `test_cmd: pytest`")
    allowed = list(_RepoConfigFile.model_fields)
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {_unknown_keys(unknown, allowed)}; "
            f"allowed: {', '.join(allowed)}"
        )
    try:
        parsed = _RepoConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_repo_config_problem(source, data, exc)) from None
    for key in _LIST_KEYS:
        values: list[str] = getattr(parsed, key) or []
        if not all(values):
            raise ConfigError(f"{source}: `{key}` must be a list of non-empty strings")
    app = parsed.app
    return RepoConfig(
        test_cmd=parsed.test_cmd,
        setup_cmd=parsed.setup_cmd,
        protected_paths=(
            tuple(parsed.protected_paths) if parsed.protected_paths is not None else None
        ),
        allow_test_edits=tuple(parsed.allow_test_edits or ()),
        auto_fix=bool(parsed.auto_fix),
        max_cost_usd=parsed.max_cost_usd,
        tiers=tuple(parsed.tiers) if parsed.tiers else None,
        network=parsed.network,
        app=AppConfig(app.start, app.port, app.path) if app is not None else None,
        pair=bool(parsed.pair),
        ask_paths=tuple(parsed.ask_paths or ()),
        ask_network=parsed.ask_network is not False,
        ask_removals=parsed.ask_removals if parsed.ask_removals is not None else 3,
        ask_outside_scope=parsed.ask_outside_scope is not False,
        source=source,
    )


def load_repo_config(tree: Path) -> RepoConfig:
    for name in REPO_CONFIG_FILES:
        path = tree / name
        if path.is_file() and not path.is_symlink():
            return parse_repo_config(path.read_text(encoding="utf-8", errors="replace"), name)
    return RepoConfig()
