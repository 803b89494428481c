"""Database engines for the missions store, and the Alembic upgrade that shapes them.

SQLite (a file in `LOOPWRIGHT_DATA_DIR`) by default, in WAL mode with a busy timeout so the
web process and the mission workers can write at once; any other SQLAlchemy URL (PostgreSQL
with a sync driver such as `postgresql+psycopg://`) from `LOOPWRIGHT_DATABASE_URL`.
"""

from __future__ import annotations

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


def migrate(url: str) -> None:
    """Bring the database at `url` to the newest schema (`alembic upgrade head`).

    Safe to run on every start and from several processes: on SQLite the upgrade holds the
    write lock, so a second process waits and then finds nothing to do.
    """
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            config = Config()
            config.set_main_option("script_location", str(MIGRATIONS))
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
            connection.commit()
    finally:
        engine.dispose()
