"""Database engines for the missions store, and the Alembic upgrade that shapes them.

SQLite (a file in `LOOPWRIGHT_DATA_DIR`) by default, in WAL mode with a busy timeout so the
web process and the mission workers can write at once; any other SQLAlchemy URL (PostgreSQL
with a sync driver such as `postgresql+psycopg://`) from `LOOPWRIGHT_DATABASE_URL`.

PostgreSQL's text and JSONB cannot hold a NUL character, which a command's output (and so a
`tool_result` event or an error message) may carry. On PostgreSQL the store writes U+FFFD
(the replacement character) in its place rather than failing the write; SQLite keeps it.
Neither can hold a lone surrogate (how Python keeps a byte that is not UTF-8, in a file name
or a patch read with `surrogateescape`): both dialects store U+FFFD for one. A patch's
exact bytes are kept beside its text (`missions.stored_result`).
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
from loopwright.events import LONE_SURROGATE, encodable

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
            json_serializer=functools.partial(stored_json, nul_free=True),
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
        json_serializer=stored_json,
        json_deserializer=_loaded_json,
    )
    event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "before_cursor_execute", _sqlite_text_parameters, retval=True)
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


def valid_text(value: Any, *, nul_free: bool = False) -> Any:
    """`value` (JSON-shaped data) with every lone surrogate in its strings and keys replaced
    by U+FFFD, and with `nul_free` every NUL too. A name or an output read from bytes that
    are not UTF-8 holds lone surrogates (`surrogateescape`); no column stores them: SQLite's
    driver cannot encode them, and PostgreSQL refuses them in text and in JSONB."""
    if isinstance(value, str):
        if nul_free:
            value = value.replace(NUL, NUL_STAND_IN)
        return value if value.isascii() else encodable(value)
    if isinstance(value, dict):
        return {valid_text(k, nul_free=nul_free): valid_text(v, nul_free=nul_free)
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, list | tuple):
        return [valid_text(v, nul_free=nul_free) for v in value]
    return value


def stored_json(value: Any, *, nul_free: bool = False) -> str:
    """The text of a JSON column. `json.dumps` writes every non-ASCII character as an
    escape, so a NUL can only appear as `\\u0000` and a surrogate as `\\udXXX` (an astral
    character's pair too): only a text holding one is made again from `valid_text`."""
    text = json.dumps(value)
    if "\\ud" in text or (nul_free and "\\u0000" in text):
        text = json.dumps(valid_text(value, nul_free=nul_free))
    return text


def _loaded_json(text: str) -> Any:
    """A JSON column's value, read from SQLite. A row written before the store made its
    strings valid may hold a lone surrogate's escape, which would fail every page and API
    answer that shows it: such a value is read with U+FFFD in its place."""
    value = json.loads(text)
    return valid_text(value) if "\\ud" in text else value


def _sqlite_text_parameters(
    _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, executemany: bool
) -> tuple[str, Any]:
    """SQLite's driver raises on a string holding a lone surrogate: such a string is stored
    with U+FFFD in its place (ASCII strings, nearly all of them, are passed as they are).

    `executemany` parameters are rows, except in SQLAlchemy's "insertmanyvalues" batch (a
    multi-row INSERT ... RETURNING), which is one flat row of every row's values."""
    many = executemany and bool(parameters) and isinstance(parameters[0], tuple | list | dict)
    rows = parameters if many else (parameters,)
    for row in rows:  # loops, not generators: this runs for every statement
        for value in row.values() if isinstance(row, dict) else row:
            if isinstance(value, str) and not value.isascii() and LONE_SURROGATE.search(value):
                fixed = [_valid_row(each) for each in rows]
                return statement, fixed if many else fixed[0]
    return statement, parameters


def _valid_row(row: Any) -> Any:
    if isinstance(row, dict):
        return {k: valid_text(v) if isinstance(v, str) else v for k, v in row.items()}
    return type(row)([valid_text(v) if isinstance(v, str) else v for v in row])


def _psycopg_text_without_nul(dbapi_connection: Any, _record: Any) -> None:
    text, binary = _nul_free_dumpers()
    dbapi_connection.adapters.register_dumper(str, text)
    dbapi_connection.adapters.register_dumper(str, binary)


@functools.cache
def _nul_free_dumpers() -> tuple[type, type]:
    """psycopg's `str` dumpers (its pure-Python ones: the C ones cannot be subclassed),
    replacing NUL and lone surrogates before dumping. Imported here: only PostgreSQL
    engines need psycopg."""
    from psycopg.types.string import StrBinaryDumper, StrDumperUnknown

    class NulFreeText(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(valid_text(obj, nul_free=True))

    class NulFreeBinary(StrBinaryDumper):
        def dump(self, obj: str) -> Any:
            return super().dump(valid_text(obj, nul_free=True))

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
