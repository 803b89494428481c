"""How the server talks to GitHub as an App, read from the LOOPWRIGHT_GITHUB_* variables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from loopwright.config.env import ConfigError, read_float, read_int

GITHUB_COM_WRITE_INTERVAL_S = 1.0
"""GitHub's guidance for github.com: at least a second between content-creating requests."""


def _github_com_host(api_url: str) -> str | None:
    """The host of `api_url` when it is GitHub's own (github.com, or GitHub Enterprise
    Cloud's ghe.com), as the HTTP client will resolve it: its parser folds case and maps
    the other full stops IDNA allows (`api。github。com`) to dots."""
    import httpx  # only for a write interval below a second: the CLI starts without it

    try:
        host = httpx.URL(api_url).host.lower().rstrip(".")
    except httpx.InvalidURL as exc:
        raise ConfigError(
            f"LOOPWRIGHT_GITHUB_API_URL={api_url!r} is not a valid URL: {exc}"
        ) from None
    github = host == "github.com" or host.endswith((".github.com", ".ghe.com"))
    return host if github else None


@dataclass(frozen=True)
class GitHubAppSettings:
    """How the server talks to GitHub as an App (all optional for the CLI)."""

    app_id: str | None = None
    private_key: str | None = None
    """The App's PEM private key (from LOOPWRIGHT_GITHUB_PRIVATE_KEY or ..._PATH)."""
    webhook_secret: str | None = None
    api_url: str = "https://api.github.com"
    """Set for GitHub Enterprise Server (https://HOST/api/v3) and for tests."""
    public_url: str | None = None
    """Where the server is reachable, for links to the live view and screenshots."""
    app_slug: str = "loopwright"
    allowed_bots: tuple[str, ...] = ()
    max_attempts: int = 3
    """Missions per head commit before Loopwright stops trying."""
    comment_interval_s: float = 3.0
    """The tracking comment is edited at most once in this many seconds (the last state is
    always written)."""
    write_interval_s: float = 1.0
    """GitHub writes (POST, PATCH, PUT, DELETE) of one process are at least this far apart:
    GitHub's guidance against its secondary rate limits. At least `GITHUB_COM_WRITE_INTERVAL_S`
    against github.com; shorter only for GitHub Enterprise Server, whose administrator sets
    its limits (they are off unless enabled), or a test GitHub."""
    client_id: str | None = None
    """The App's OAuth client ID; with `client_secret`, the live view offers GitHub sign-in."""
    client_secret: str | None = None
    web_url: str = "https://github.com"
    """GitHub's web address for the OAuth sign-in pages (https://HOST on GitHub Enterprise)."""
    private_key_source: str = "LOOPWRIGHT_GITHUB_PRIVATE_KEY"
    """The setting the key came from, as messages about a bad key name it (`..._PATH='...'`
    when it was read from a file)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GitHubAppSettings:
        key = env.get("LOOPWRIGHT_GITHUB_PRIVATE_KEY") or None
        key_path = env.get("LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH")
        key_source = "LOOPWRIGHT_GITHUB_PRIVATE_KEY"
        if key is None and key_path:
            key_source = f"LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH={key_path!r}"
            try:
                key = Path(key_path).expanduser().read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise ConfigError(
                    f"{key_source} is not a PEM private key (the file is not text); point it "
                    "at the .pem file GitHub generated for the App"
                ) from None
            except OSError as exc:
                raise ConfigError(
                    f"{key_source} cannot be read ({exc.strerror}); point it at the .pem file "
                    "GitHub generated for the App"
                ) from None
        if key is not None and "PRIVATE KEY" not in key:
            hint = (
                "point it at the .pem file GitHub generated for the App"
                if key_source != "LOOPWRIGHT_GITHUB_PRIVATE_KEY"
                else "paste the whole .pem file GitHub generated"
            )
            raise ConfigError(
                f"{key_source} is not a PEM private key; {hint} "
                "(-----BEGIN RSA PRIVATE KEY----- ...)"
            )
        app_id = env.get("LOOPWRIGHT_GITHUB_APP_ID") or None
        if app_id is not None and not app_id.strip().isdigit():
            raise ConfigError(
                f"LOOPWRIGHT_GITHUB_APP_ID={app_id!r} is not a number; copy the App ID from "
                "the App's settings page (Settings → Developer settings → GitHub Apps)"
            )
        api_url = env.get("LOOPWRIGHT_GITHUB_API_URL") or cls.api_url
        if not api_url.startswith(("http://", "https://")):
            raise ConfigError(f"LOOPWRIGHT_GITHUB_API_URL={api_url!r} is not an http(s) URL")
        public_url = env.get("LOOPWRIGHT_PUBLIC_URL") or None
        if public_url is not None and not public_url.startswith(("http://", "https://")):
            raise ConfigError(f"LOOPWRIGHT_PUBLIC_URL={public_url!r} is not an http(s) URL")
        web_url = env.get("LOOPWRIGHT_GITHUB_WEB_URL") or cls.web_url
        if not web_url.startswith(("http://", "https://")):
            raise ConfigError(f"LOOPWRIGHT_GITHUB_WEB_URL={web_url!r} is not an http(s) URL")
        client_id = env.get("LOOPWRIGHT_GITHUB_CLIENT_ID") or None
        client_secret = env.get("LOOPWRIGHT_GITHUB_CLIENT_SECRET") or None
        if (client_id is None) != (client_secret is None):
            raise ConfigError(
                "GitHub sign-in needs both LOOPWRIGHT_GITHUB_CLIENT_ID and "
                "LOOPWRIGHT_GITHUB_CLIENT_SECRET; copy them from the App's settings page "
                "(Settings → Developer settings → GitHub Apps → Client secrets)"
            )
        bots = tuple(b.strip() for b in (env.get("LOOPWRIGHT_ALLOWED_BOTS") or "").split(","))
        write_interval_s = read_float(
            env, "LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S", GITHUB_COM_WRITE_INTERVAL_S
        )
        if write_interval_s < GITHUB_COM_WRITE_INTERVAL_S and (
            github_host := _github_com_host(api_url)
        ):
            raise ConfigError(
                f"LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S={env['LOOPWRIGHT_GITHUB_WRITE_INTERVAL_S']!r}"
                f" is below GitHub's guidance of {GITHUB_COM_WRITE_INTERVAL_S:g} s between "
                f"writes to {github_host} (its secondary rate limits); set it to 1 or more, "
                "or leave it unset"
            )
        return cls(
            app_id=app_id.strip() if app_id else None,
            private_key=key,
            private_key_source=key_source,
            webhook_secret=env.get("LOOPWRIGHT_WEBHOOK_SECRET") or None,
            api_url=api_url.rstrip("/"),
            public_url=public_url.rstrip("/") if public_url else None,
            app_slug=env.get("LOOPWRIGHT_GITHUB_APP_SLUG") or cls.app_slug,
            allowed_bots=tuple(b for b in bots if b),
            max_attempts=read_int(env, "LOOPWRIGHT_MAX_ATTEMPTS", cls.max_attempts),
            comment_interval_s=read_float(
                env, "LOOPWRIGHT_COMMENT_INTERVAL_S", cls.comment_interval_s
            ),
            write_interval_s=write_interval_s,
            client_id=client_id,
            client_secret=client_secret,
            web_url=web_url.rstrip("/"),
        )

    @property
    def oauth_enabled(self) -> bool:
        """GitHub sign-in for the live view is on when the client ID and secret are set."""
        return bool(self.client_id and self.client_secret)

    def missing(self, *, webhooks: bool = True) -> list[str]:
        """The settings `loopwright serve` cannot work without, by variable name; a worker,
        which receives no webhooks, needs no webhook secret (`webhooks=False`)."""
        names = []
        if not self.app_id:
            names.append("LOOPWRIGHT_GITHUB_APP_ID")
        if not self.private_key:
            names.append("LOOPWRIGHT_GITHUB_PRIVATE_KEY (or LOOPWRIGHT_GITHUB_PRIVATE_KEY_PATH)")
        if webhooks and not self.webhook_secret:
            names.append("LOOPWRIGHT_WEBHOOK_SECRET")
        return names
