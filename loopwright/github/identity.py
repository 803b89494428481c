"""The App's credentials checked at start-up: the key parses, and `GET /app` with a token
signed by it answers with the App the settings name. A server that cannot authenticate says
which setting to fix before it accepts a single webhook."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from githubkit import AppAuthStrategy, GitHub
from githubkit.exception import GitHubException, RequestFailed

from loopwright.config import ConfigError, GitHubAppSettings

CHECK_TIMEOUT_S = 10.0
SETTINGS_PAGE = "the App's settings page (Settings → Developer settings → GitHub Apps)"


@dataclass(frozen=True)
class AppIdentity:
    id: int
    slug: str
    name: str


def check_app_credentials(app: GitHubAppSettings) -> AppIdentity:
    """Who GitHub says the App is; raises `ConfigError` naming the setting to fix."""
    if not app.app_id or not app.private_key:
        raise ConfigError("the GitHub App needs LOOPWRIGHT_GITHUB_APP_ID and a private key")
    _check_key(app.private_key, app.private_key_source)
    gh = GitHub(
        AppAuthStrategy(app.app_id, app.private_key),
        base_url=app.api_url,
        auto_retry=False,
        http_cache=False,
        timeout=CHECK_TIMEOUT_S,
        user_agent="loopwright",
    )
    try:
        data: Any = gh.rest.apps.get_authenticated().json()
    except RequestFailed as exc:
        raise ConfigError(_rejected(app, exc.response.status_code, _message(exc))) from None
    except GitHubException as exc:
        raise ConfigError(
            f"could not reach GitHub at {app.api_url} ({exc}); check LOOPWRIGHT_GITHUB_API_URL "
            "(https://api.github.com, or https://HOST/api/v3 on GitHub Enterprise Server) and "
            "the network"
        ) from None
    identity = AppIdentity(int(data["id"]), str(data["slug"]), str(data.get("name") or ""))
    if str(identity.id) != str(app.app_id):
        raise ConfigError(
            f"LOOPWRIGHT_GITHUB_APP_ID={app.app_id} but the key belongs to App {identity.id} "
            f"({identity.slug}); copy the App ID from {SETTINGS_PAGE}"
        )
    return identity


def _check_key(pem: str, source: str) -> None:
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"{source} is not a usable PEM private key ({reason}); use the unencrypted .pem "
            f"file GitHub generated for the App ({SETTINGS_PAGE} → Private keys)"
        ) from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ConfigError(
            f"{source} is not an RSA key; GitHub Apps sign with RSA: use the .pem file "
            f"GitHub generated for the App ({SETTINGS_PAGE} → Private keys)"
        )


def _rejected(app: GitHubAppSettings, status: int, message: str) -> str:
    said = f" (GitHub said: {message})" if message else ""
    if status == 401 and "integration not found" in message.lower():
        return (
            f"GitHub knows no App with LOOPWRIGHT_GITHUB_APP_ID={app.app_id}{said}; copy the "
            f"App ID from {SETTINGS_PAGE}"
        )
    if status == 401 and ("'iat'" in message or "'exp'" in message):
        return (
            f"GitHub rejected the App's token because of its times{said}; check this "
            "machine's clock"
        )
    if status == 401:
        return (
            f"{app.private_key_source} does not match App {app.app_id}: GitHub could not "
            f"verify a token signed with it{said}; generate a new private key on "
            f"{SETTINGS_PAGE} and check LOOPWRIGHT_GITHUB_APP_ID"
        )
    if status == 404:
        return (
            f"GET /app answered 404 at {app.api_url}{said}; check LOOPWRIGHT_GITHUB_API_URL "
            "(https://api.github.com, or https://HOST/api/v3 on GitHub Enterprise Server)"
        )
    return f"GET /app at {app.api_url} answered {status}{said}; check LOOPWRIGHT_GITHUB_API_URL"


def _message(exc: RequestFailed) -> str:
    try:
        data = exc.response.json()
    except ValueError:
        return ""
    return str(data.get("message") or "")[:200] if isinstance(data, dict) else ""
