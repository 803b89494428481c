"""Register usernames; two names that look the same to a person are the same name."""

from __future__ import annotations

from dataclasses import dataclass, field


class UsernameTaken(ValueError):
    pass


class InvalidUsername(ValueError):
    pass


def canonical(name: str) -> str:
    """The form usernames are compared in: trimmed and case-folded."""
    return name.strip().casefold()


def validate(name: str) -> str:
    name = name.strip()
    if not 3 <= len(name) <= 32:
        raise InvalidUsername("a username has 3 to 32 characters")
    if any(ch.isspace() for ch in name):
        raise InvalidUsername("a username cannot contain spaces")
    return name


@dataclass
class Registry:
    _users: dict[str, str] = field(default_factory=dict)

    def register(self, name: str) -> str:
        display = validate(name)
        key = canonical(display)
        if key in self._users:
            raise UsernameTaken(f"{display!r} is already taken by {self._users[key]!r}")
        self._users[key] = display
        return display

    def lookup(self, name: str) -> str | None:
        return self._users.get(canonical(name))

    def __len__(self) -> int:
        return len(self._users)
