"""Read `.env` files into dictionaries."""

from envfile.parser import EnvSyntaxError, load, parse

__all__ = ["EnvSyntaxError", "load", "parse"]
