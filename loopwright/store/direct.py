"""Statements of the webhook's hot path, run on the database driver's own cursor.

A webhook delivery's write is one to three small statements (a red check: its head's
attempt count, the mission, the delivery). Through `Connection.execute` each of them costs
about 50 µs of SQLAlchemy's own work (the compiled cache's lookup, an execution context,
the parameters' processing, a result object) against about 13 µs of the driver's, on a
delivery path that costs about 1 ms of CPU in all. `DirectStatement` compiles a Core
statement once per dialect and runs it on the connection's DBAPI cursor, in the
connection's transaction, with each parameter's type processing (JSON, dates) applied as
SQLAlchemy would. It is for statements whose every parameter the caller gives (no column
default is filled in: a missing one is an error), and it keeps what callers rely on:

- a driver error is raised as SQLAlchemy's (`IntegrityError`, `OperationalError`, and the
  `DBAPIError` whose SQLSTATE tells the group commit that a deadlock may be run again);
- a lost connection is invalidated, as SQLAlchemy invalidates it;
- the engine's `before_cursor_execute` and `after_cursor_execute` listeners (statement
  logging, tracing, the store's own text checks) see each statement, with no execution
  context (which SQLAlchemy documents may be None); what a `before_cursor_execute`
  listener returns is run, as SQLAlchemy runs it, and the engine's `echo` does not show it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement


@dataclass(frozen=True)
class _Prepared:
    compiled: SQLCompiler
    sql: str
    order: tuple[str, ...] | None
    """Parameter names in the statement's order, for a positional driver (SQLite); None
    for a driver that takes them by name (psycopg)."""
    processors: dict[str, Callable[[Any], Any]]


class DirectStatement:
    """A Core statement run on the driver's cursor; `first(connection, params)` returns the
    first column of the first row it returns, or None (no row, or no result)."""

    def __init__(self, statement: ClauseElement) -> None:
        self._statement = statement
        self._prepared: dict[tuple[str, str], _Prepared] = {}
        """By dialect and driver: every engine of the store is made alike (`make_engine`)."""
        self._lock = threading.Lock()

    def first(self, connection: Connection, params: Mapping[str, Any]) -> Any:
        dialect = connection.dialect
        prepared = self._prepared.get((dialect.name, dialect.driver)) or self._prepare(dialect)
        values = prepared.compiled.construct_params(params)
        for name, process in prepared.processors.items():
            values[name] = process(values[name])
        driver_params: Any = (
            values if prepared.order is None else tuple(values[name] for name in prepared.order)
        )
        if not connection.in_transaction():
            # As `Connection.execute` does: the transaction the driver opens for this
            # statement is then SQLAlchemy's, which `commit()` commits.
            connection.begin()
        dispatch = connection.dispatch
        dbapi_connection = connection.connection.dbapi_connection
        assert dbapi_connection is not None  # a connection in a transaction holds one
        cursor = dbapi_connection.cursor()
        try:
            sql = prepared.sql
            # SQLAlchemy wraps a listener made without `retval=True` to return what it got.
            for listener in dispatch.before_cursor_execute:
                sql, driver_params = listener(connection, cursor, sql, driver_params, None, False)
            try:
                cursor.execute(sql, driver_params)
                row = cursor.fetchone() if cursor.description else None
            except dialect.loaded_dbapi.Error as exc:
                # As SQLAlchemy's own execution does: a lost connection is invalidated, so
                # the rollback that follows does not use it and the group commit's rerun of
                # the batch gets a fresh one.
                lost = dialect.is_disconnect(exc, dbapi_connection, cursor)
                if lost:
                    connection.invalidate(exc)
                raise DBAPIError.instance(
                    sql,
                    driver_params,
                    exc,
                    dialect.loaded_dbapi.Error,
                    connection_invalidated=lost,
                    dialect=dialect,
                ) from exc
            if dispatch.after_cursor_execute:
                dispatch.after_cursor_execute(connection, cursor, sql, driver_params, None, False)
        finally:
            if not connection.invalidated:
                cursor.close()
        return None if row is None else row[0]

    def _prepare(self, dialect: Dialect) -> _Prepared:
        with self._lock:
            key = (dialect.name, dialect.driver)
            if key not in self._prepared:
                compiled = cast(SQLCompiler, self._statement.compile(dialect=dialect))
                if compiled.escaped_bind_names or "POSTCOMPILE" in compiled.string:
                    raise ValueError(
                        "a statement on the driver's cursor takes plain parameters: no "
                        f"expanding (IN) parameter and no name to escape: {compiled.string}"
                    )
                processors: dict[str, Callable[[Any], Any]] = {}
                for name, bind in compiled.binds.items():
                    process = bind.type.dialect_impl(dialect).bind_processor(dialect)
                    if process is not None:
                        processors[name] = process
                order = tuple(compiled.positiontup or ()) if compiled.positional else None
                self._prepared[key] = _Prepared(compiled, compiled.string, order, processors)
            return self._prepared[key]
