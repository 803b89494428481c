"""Greedy word wrapping, indentation and centring for plain-text output."""

from __future__ import annotations


def wrap(text: str, width: int) -> list[str]:
    """Lines of at most `width` characters; a word longer than `width` gets a line of its own."""
    if width < 1:
        raise ValueError("width must be at least 1")
    lines: list[str] = []
    current = ""
    for word in text.split():
        if not current:
            current = word
        elif len(current) + len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def fill(text: str, width: int) -> str:
    return "\n".join(wrap(text, width))


def indent(lines: list[str], prefix: str) -> list[str]:
    return [prefix + line if line else line for line in lines]


def center(line: str, width: int) -> str:
    """`line` centred in `width` columns; extra space goes to the right."""
    if len(line) >= width:
        return line
    left = (width - len(line)) // 2
    return " " * left + line + " " * (width - len(line) - left)


def paragraphs(text: str, width: int) -> str:
    """Wrap each blank-line-separated paragraph on its own."""
    blocks = [b for b in text.split("\n\n") if b.strip()]
    return "\n\n".join(fill(block, width) for block in blocks)
