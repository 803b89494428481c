"""What mission a recording belongs to: the fingerprint `--record` writes and `--replay`
checks, since a replay only makes sense against the mission it was recorded for."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any


def fix_fingerprint(tree: str | None, source: str) -> dict[str, Any]:
    """What a fix recording belongs to: the hash of the repository's files (or, for a git
    URL, the URL)."""
    return {"mode": "fix", "tree": tree} if tree else {"mode": "fix", "source": source}


def build_fingerprint(spec: str, lang: str) -> dict[str, Any]:
    """What a build recording belongs to: the specification's hash and the language."""
    digest = hashlib.sha256(spec.strip().encode("utf-8")).hexdigest()
    return {"mode": "build", "spec": f"sha256:{digest}", "lang": lang}


def fingerprint_mismatch(recorded: Mapping[str, Any], actual: Mapping[str, Any]) -> str | None:
    """Why a recording made for mission `recorded` cannot replay mission `actual` (None when
    it can): a replay only makes sense against the mission it was recorded for."""
    mode = recorded.get("mode")
    if mode != actual["mode"]:
        return f"it was recorded for `loopwright {mode}`, and this is `loopwright {actual['mode']}`"
    if mode == "build":
        if recorded.get("lang") != actual["lang"]:
            return f"it was recorded for --lang {recorded.get('lang')}, not --lang {actual['lang']}"
        if recorded.get("spec") != actual["spec"]:
            return "it was recorded for another specification"
        return None
    if "tree" in actual or "tree" in recorded:
        if recorded.get("tree") != actual.get("tree"):
            return (
                "it was recorded against another repository (or other files in it): its "
                f"files hashed to {str(recorded.get('tree'))[:19]}…, these hash to "
                f"{str(actual.get('tree'))[:19]}…"
            )
        return None
    if recorded.get("source") != actual.get("source"):
        return f"it was recorded for {recorded.get('source')}, not {actual.get('source')}"
    return None
