"""The shape of JSON-like values read from outside (a model's tool arguments, a
repository's configuration files): how deep their objects and arrays nest.

Python's copies, comparisons, encoders and this project's redaction walk such a value one
frame per level, so a value nested a few hundred levels deep raises `RecursionError` far
from where it was read. Readers check the depth once, where the value comes in, without
recursion.
"""

from __future__ import annotations

from typing import Any


def nests_within(value: Any, limit: int) -> bool:
    """Whether `value`'s dicts and lists (and tuples) nest no deeper than `limit` levels:
    `{}` is one level, `{"a": [1]}` two."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list | tuple):
            if level >= limit:
                return False
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, level + 1) for child in children)
    return True
