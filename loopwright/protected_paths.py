"""Which repository paths a fix may not touch: the default list and the matcher.

A neutral home for the rule, shared by the tool layer (refusing writes), the verdict
(rejecting a patch that touches them) and the missions (the defaults they apply). The
patterns are gitignore-style and compiled with `pathspec`.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Sequence
from functools import lru_cache

import pathspec
from pathspec.pattern import Pattern

DEFAULT_PROTECTED_PATHS: tuple[str, ...] = (
    ".github/workflows/**",
    ".github/actions/**",
    "CODEOWNERS",
    ".github/CODEOWNERS",
    "docs/CODEOWNERS",
    ".loopwright.yml",
    ".github/loopwright.yml",
)

# Matching is case-sensitive, like git and GitHub: `.GITHUB/workflows/x.yml` is a different
# path from `.github/workflows/x.yml` in a git tree, and GitHub only runs the latter, so it
# is not protected. (The sandboxes are Linux file systems, where the two are different files
# too.)


def protected_by(path: str, patterns: Sequence[str]) -> str | None:
    """The pattern that protects the repository-relative `path`, or None when none does.

    `patterns` are gitignore-style (pathspec's `gitignore` syntax): a pattern without a slash
    matches at any depth (`CODEOWNERS`); one with a slash is anchored at the root
    (`.github/workflows/**`); `**` spans directories; a pattern that matches a directory
    covers everything inside it, and `dir/**` covers the directory itself (replacing it is
    touching it); `!pattern` exempts (last match wins). The path is normalised with
    `posixpath.normpath`; `..` is clamped at the root, so an escaping spelling still names
    the protected file.
    """
    rel = posixpath.normpath("/" + path).lstrip("/")
    if not rel or rel == ".":
        return None
    spec, sources = _spec(tuple(patterns))
    result = spec.check_file(rel)
    if not result.include or result.index is None:
        return None
    return sources[result.index]


def is_protected(path: str, patterns: Sequence[str]) -> bool:
    """Whether a repository-relative path matches the gitignore-style `patterns`.

    See `protected_by` for the syntax and the normalisation applied to `path`.
    """
    return protected_by(path, patterns) is not None


@lru_cache(maxsize=64)
def _spec(patterns: tuple[str, ...]) -> tuple[pathspec.PathSpec[Pattern], tuple[str, ...]]:
    """The compiled patterns, and for each compiled line the pattern it came from."""
    lines: list[str] = []
    sources: list[str] = []
    for raw in patterns:
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        lines.append(pattern)
        sources.append(raw)
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        if body.endswith("/**") and body.rstrip("/*"):
            lines.append(("!" if negate else "") + body[: -len("/**")])
            sources.append(raw)
    return pathspec.PathSpec.from_lines("gitignore", lines), tuple(sources)


def _literal_prefix(pattern: str) -> list[str] | None:
    """The leading literal directories of an anchored pattern (None for unanchored ones)."""
    body = pattern.strip()
    if not body or body.startswith(("#", "!")):
        return None
    body = body.rstrip("/")
    if "/" not in body:
        return None
    segments = [s for s in body.lstrip("/").split("/") if s]
    prefix: list[str] = []
    for segment in segments:
        if any(c in segment for c in "*?[\\"):
            break
        prefix.append(segment)
    return prefix


def covering_pattern(path: str, patterns: Sequence[str]) -> str | None:
    """The anchored pattern whose files all lie below the directory `path`, if any.

    A command acting on a whole tree (`rm -r .github`) touches what such a pattern protects.
    """
    rel = posixpath.normpath("/" + path).lstrip("/")
    parts = [] if rel in ("", ".") else rel.split("/")
    for pattern in patterns:
        prefix = _literal_prefix(pattern)
        if prefix is not None and len(parts) < len(prefix) and prefix[: len(parts)] == parts:
            return pattern
    return None


def _segments_overlap(glob: str, pattern: str) -> bool:
    """Whether a glob segment and a pattern segment can name the same file name."""
    glob_wild = any(c in _GLOB_CHARS for c in glob)
    pattern_wild = any(c in _GLOB_CHARS for c in pattern)
    if glob_wild and pattern_wild:
        return True
    if glob_wild:
        return fnmatch.fnmatchcase(pattern, glob)
    return fnmatch.fnmatchcase(glob, pattern)


def _glob_overlaps(glob: list[str], pattern: list[str], *, tree: bool) -> bool:
    """Whether the glob can name a path the pattern matches (or, for a tree, a parent of one)."""
    if not pattern:
        return not glob
    if not glob:
        return tree or all(segment == "**" for segment in pattern)
    if pattern[0] == "**":
        return _glob_overlaps(glob, pattern[1:], tree=tree) or _glob_overlaps(
            glob[1:], pattern, tree=tree
        )
    return _segments_overlap(glob[0], pattern[0]) and _glob_overlaps(
        glob[1:], pattern[1:], tree=tree
    )


def glob_protected_by(path: str, patterns: Sequence[str], *, tree: bool = False) -> str | None:
    """The pattern that a path holding unexpanded glob characters may name, or None.

    `tree`: the command acts on everything below what the glob names too.
    """
    glob = [s for s in path.split("/") if s not in ("", ".")]
    for raw in patterns:
        body = raw.strip()
        if not body or body.startswith(("#", "!")):
            continue
        body = body.rstrip("/")
        # An unanchored name (`CODEOWNERS`) is only tested at the root here: at any depth,
        # `rm -rf build/*` would look like it removes one. Verification's patch check still
        # refuses whatever such a command really touched.
        segments = [s for s in body.lstrip("/").split("/") if s]
        if _glob_overlaps(glob, segments, tree=tree):
            return raw
    return None


_GLOB_CHARS = frozenset("*?[")
