"""The files shell commands name: the node preloads (`--require`, `--import`, `--loader`,
NODE_OPTIONS) and the repository files a test or setup command runs or reads."""

from __future__ import annotations

import posixpath
import re
import shlex

from loopwright.verify.testfiles.formats import Reader

_NODE_PRELOAD_FLAGS = ("--require", "-r", "--import", "--loader", "--experimental-loader")
_COMMAND_WORD = re.compile(r"^[\w./@+-]+$")


def _words(command: str) -> list[str]:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:
        return command.split()


def node_preloads(command: str) -> list[str]:
    """The files a node command line preloads, as repository-relative paths (also those of
    `NODE_OPTIONS=` values inside it, however often nested: read in a loop)."""
    found: list[str] = []
    pending = [command]
    while pending:
        words = _words(pending.pop(0))
        for index, word in enumerate(words):
            for flag in _NODE_PRELOAD_FLAGS:
                value = None
                if word == flag and index + 1 < len(words):
                    value = words[index + 1]
                elif word.startswith(flag + "=") and flag.startswith("--"):
                    value = word[len(flag) + 1 :]
                if value:
                    found.append(_relative(value))
        pending += [w.split("=", 1)[1] for w in words if w.startswith("NODE_OPTIONS=")]
    return found


def _relative(value: str) -> str:
    value = value.removeprefix("file:")
    return posixpath.normpath(value.removeprefix("./")) if value else value


def command_files(command: str | None, known: set[str], read: Reader, *, depth: int) -> set[str]:
    """Repository files a shell command names (and, to `depth`, the files they name)."""
    if not command:
        return set()
    found: set[str] = set()
    words = _words(command)
    for index, word in enumerate(words):
        if word == "make" or word.endswith("/make"):
            found.update(n for n in ("GNUmakefile", "makefile", "Makefile") if n in known)
        if word in ("-f", "--file", "-C") and index + 1 < len(words) and words[index + 1] in known:
            found.add(words[index + 1])
        for candidate in (word, word.split("=", 1)[-1]):
            if not _COMMAND_WORD.match(candidate):
                continue
            rel = _relative(candidate)
            if rel in known and not rel.startswith(".."):
                found.add(rel)
    if depth > 0:
        for path in list(found):
            text = read(path) or ""
            if path.endswith(".txt"):
                # requirements files include others with -r/-c lines
                text = " ".join(
                    line for line in text.splitlines() if line.strip().startswith(("-r", "-c"))
                )
            found |= command_files(text.replace("\n", " ; "), known, read, depth=depth - 1)
    return found
