"""Database engines for the missions store, and the Alembic upgrade that shapes them.

SQLite (a file in `LOOPWRIGHT_DATA_DIR`) by default, in WAL mode with a busy timeout so the
web process and the mission workers can write at once; any other SQLAlchemy URL (PostgreSQL
with a sync driver such as `postgresql+psycopg://`) from `LOOPWRIGHT_DATABASE_URL`.

PostgreSQL's text and JSONB cannot hold a NUL character, which a command's output (and so a
`tool_result` event or an error message) may carry. On PostgreSQL the store writes U+FFFD
(the replacement character) in its place rather than failing the write; SQLite keeps it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from loopwright.config import ConfigError, Settings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
BUSY_TIMEOUT_S = 30.0
"""How long a SQLite writer waits for another writer's lock before giving up."""
CONNECT_TIMEOUT_S = 10
"""Seconds a new PostgreSQL connection may take (libpq's `connect_timeout`)."""
NUL = "\x00"
NUL_STAND_IN = "\ufffd"
"""What PostgreSQL stores for a NUL character, which its text types reject."""


def database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    return f"sqlite:///{settings.data_dir / 'loopwright.db'}"


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_dialect().is_async:
        raise ConfigError(
            f"LOOPWRIGHT_DATABASE_URL uses the async driver {parsed.drivername!r}; the store "
            "needs a sync one, e.g. postgresql+psycopg://user@host/db or sqlite:///path.db"
        )
    # PostgreSQL's default isolation, whatever the database's or role's own default: the
    # attempt cap's count after a head's lock (`lock_head`) must see the commit it waited
    # for, where a repeatable-read snapshot taken earlier in the transaction would not.
    isolation = {"isolation_level": "READ COMMITTED"}
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() == "psycopg":
        # A database that stops answering fails a connect in seconds instead of holding the
        # thread (and a pool slot) until the kernel gives up; the URL's own value wins.
        given = "connect_timeout" in parsed.query
        timeout = {} if given else {"connect_timeout": CONNECT_TIMEOUT_S}
        engine = create_engine(
            parsed,
            pool_pre_ping=True,
            json_serializer=_json_without_nul,
            connect_args=timeout,
            **isolation,
        )
        event.listen(engine, "connect", _psycopg_text_without_nul)
        return engine
    if parsed.get_backend_name() == "postgresql":
        return create_engine(parsed, pool_pre_ping=True, **isolation)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        raise ConfigError(
            f"LOOPWRIGHT_DATABASE_URL={parsed.render_as_string()!r} is not a SQLite file; "
            "threads and processes share the store only through a file, e.g. sqlite:///path.db"
        )
    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        parsed,
        connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
        pool_size=10,
        max_overflow=20,
    )
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        # WAL lets readers (the live view) run while a mission writes events.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        # In WAL mode NORMAL survives a killed process; only a power cut can lose the tail.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def without_nul(value: Any) -> Any:
    """`value` (JSON-shaped data) with every NUL in its strings and keys replaced."""
    if isinstance(value, str):
        return value.replace(NUL, NUL_STAND_IN)
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(v) for v in value]
    return value


def _json_without_nul(value: Any) -> str:
    return json.dumps(without_nul(value))


def _psycopg_text_without_nul(dbapi_connection: Any, _record: Any) -> None:
    text, binary = _nul_free_dumpers()
    dbapi_connection.adapters.register_dumper(str, text)
    dbapi_connection.adapters.register_dumper(str, binary)


@functools.cache
def _nul_free_dumpers() -> tuple[type, type]:
    """psycopg's `str` dumpers (its pure-Python ones: the C ones cannot be subclassed),
    replacing NUL before dumping. Imported here: only PostgreSQL engines need psycopg."""
    from psycopg.types.string import StrBinaryDumper, StrDumperUnknown

    class NulFreeText(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace(NUL, NUL_STAND_IN))

    class NulFreeBinary(StrBinaryDumper):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace(NUL, NUL_STAND_IN))

    return NulFreeText, NulFreeBinary


MIGRATION_LOCK_KEY = 0x6C77_6D69_6772  # "lwmigr": the PostgreSQL advisory lock of migrations
"""Held by every `migrate` on PostgreSQL until its upgrade commits; nothing else takes it."""


def migrate(url: str) -> None:
    """Bring the database at `url` to the newest schema (`alembic upgrade head`).

    Safe to run on every start and from several processes: the upgrade holds a lock (SQLite:
    the write lock; PostgreSQL: a transaction advisory lock, since processes creating the
    same tables at once block each other for good), so a second process waits and then
    finds nothing to do.
    """
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            elif connection.dialect.name == "postgresql":
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
            config = Config()
            config.set_main_option("script_location", str(MIGRATIONS))
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
            connection.commit()
    finally:
        engine.dispose()
