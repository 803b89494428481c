"""`DirectStatement`: the delivery path's statements on the driver's cursor store exactly
what SQLAlchemy's own execution stores, and fail the way it fails, on both dialects."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import bindparam, event, insert, select, text, update
from sqlalchemy.exc import IntegrityError, InvalidRequestError

from loopwright.request import MissionRequest
from loopwright.store import Store
from loopwright.store.deliveries import _INSERT_DELIVERY, _INSERT_MISSION, mission_columns
from loopwright.store.direct import DirectStatement
from loopwright.store.missions import attempts_on, mission_row, mission_values
from loopwright.store.models import Delivery, Mission


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with Store(store_url) as store:
        yield store


def _request(head: str, **extra: Any) -> MissionRequest:
    return MissionRequest(repo="acme/app", clone_url="https://github.com/acme/app.git",
                          head_sha=head, head_ref="main", check_name="tests",
                          trigger="check_run", extra=extra)  # fmt: skip


def _stored(store: Store, table: Any, key: str) -> dict[str, Any]:
    """A row as the database holds it, read without the ORM's type processing."""
    with store.engine.connect() as connection:
        row = connection.exec_driver_sql(f"SELECT * FROM {table.name} WHERE id = '{key}'").one()
    return dict(row._mapping)


def _all_columns(mission: Mission) -> dict[str, Any]:
    return {column.key: getattr(mission, column.key) for column in Mission.__table__.columns}


def test_a_mission_and_a_delivery_are_stored_as_sqlalchemy_stores_them(store: Store) -> None:
    """Every column (the request's JSON with non-ASCII text, the times, the NULLs) holds
    the same value through the driver's cursor as through SQLAlchemy's execution."""
    dialect = store.engine.dialect.name
    # The writer's values for one mission; SQLAlchemy's insert of a `Mission` for another.
    direct = mission_values(_request("a" * 40, note="café ✓", n=[1, 2]), None, "queued", None)
    usual = mission_row(_request("b" * 40, note="café ✓", n=[1, 2]), None, "queued", None)
    usual.created_at = direct["created_at"]
    at = datetime.datetime(2026, 12, 6, 7, 8, 9, 123456, tzinfo=datetime.UTC)
    delivery = {"event": "check_run", "action": None, "decision": "mission", "received_at": at}
    with store.engine.begin() as connection:
        assert _INSERT_MISSION[dialect].first(connection, mission_columns(direct)) == direct["id"]
        connection.execute(insert(Mission), [_all_columns(usual)])
        row = {**delivery, "id": "d-direct", "mission_id": direct["id"]}
        assert _INSERT_DELIVERY[dialect].first(connection, row) == "d-direct"
        connection.execute(
            insert(Delivery), [{**delivery, "id": "d-usual", "mission_id": usual.id}]
        )
    ours, theirs = (
        _stored(store, Mission.__table__, direct["id"]),
        _stored(store, Mission.__table__, usual.id),
    )
    differ = {"id", "head_sha", "dedupe_key", "request"}
    assert {k: v for k, v in ours.items() if k not in differ} == {
        k: v for k, v in theirs.items() if k not in differ
    }
    # SQLite keeps the JSON text as written; PostgreSQL's JSONB comes back parsed.
    if isinstance(theirs["request"], str):
        assert ours["request"] == theirs["request"].replace("b" * 40, "a" * 40)
    else:
        assert ours["request"] == {**theirs["request"], "head_sha": "a" * 40}
    read = store.get_mission(direct["id"])
    assert read is not None and read.request == direct["request"]
    assert read.created_at == direct["created_at"]
    stored = {k: v for k, v in _stored(store, Delivery.__table__, "d-direct").items()}
    other = _stored(store, Delivery.__table__, "d-usual")
    assert {k: v for k, v in stored.items() if k not in {"id", "mission_id"}} == {
        k: v for k, v in other.items() if k not in {"id", "mission_id"}
    }
    got = store.get_delivery("d-direct")
    assert got is not None and got.received_at == at


def test_a_second_insert_of_a_key_returns_nothing_and_a_violation_is_sqlalchemys_error(
    store: Store,
) -> None:
    dialect = store.engine.dialect.name
    at = datetime.datetime.now(datetime.UTC)
    row = {"id": "d-1", "event": "ping", "action": None, "decision": "ignored: ping",
           "mission_id": None, "received_at": at}  # fmt: skip
    with store.engine.begin() as connection:
        assert _INSERT_DELIVERY[dialect].first(connection, row) == "d-1"
        assert _INSERT_DELIVERY[dialect].first(connection, row) is None
    plain = DirectStatement(
        text("INSERT INTO deliveries (id, event, received_at) VALUES (:id, :event, :at)")
    )
    with store.engine.begin() as connection, pytest.raises(IntegrityError) as raised:
        plain.first(connection, {"id": "d-1", "event": "ping", "at": at})
    assert "d-1" in str(raised.value.params)
    assert store.get_delivery("d-1") is not None


def test_a_missing_value_is_refused_and_nothing_is_written(store: Store) -> None:
    """No column default is filled in on the driver's cursor: a row given without one of
    its columns is an error naming it, not a row with a NULL where a time belongs."""
    dialect = store.engine.dialect.name
    with (
        store.engine.begin() as connection,
        pytest.raises(InvalidRequestError, match="received_at"),
    ):
        _INSERT_DELIVERY[dialect].first(
            connection, {"id": "d-2", "event": "ping", "action": None, "decision": "x",
                         "mission_id": None},
        )  # fmt: skip
    assert store.get_delivery("d-2") is None


def test_the_engines_statement_listeners_see_each_statement(store: Store) -> None:
    """Statement logging and tracing hook the engine's cursor events: they see these too."""
    seen: list[tuple[str, Any]] = []

    def before(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    event.listen(store.engine, "before_cursor_execute", before)
    try:
        with store.engine.begin() as connection:
            assert attempts_on(connection, "acme/app", "c" * 40) == 0
    finally:
        event.remove(store.engine, "before_cursor_execute", before)
    (statement, params) = seen[-1]
    assert statement.lstrip().upper().startswith("SELECT COUNT(*)")
    assert "c" * 40 in (params.values() if isinstance(params, dict) else params)


def test_the_count_sees_the_missions_it_should(store: Store) -> None:
    """The attempt count on the driver's cursor: refused and ignored missions do not count,
    other heads and repositories do not count, the rest do."""
    head = "d" * 40
    for number, status in enumerate(("queued", "failed", "refused", "ignored")):
        accepted = store.accept_delivery(  # one head, a mission per comment
            f"d-{status}", "issue_comment", "created", decision="mission",
            request=replace(_request(head), trigger="comment", comment_id=number),
        )  # fmt: skip
        assert accepted.created and accepted.mission is not None
        with store.engine.begin() as connection:
            connection.execute(
                update(Mission).where(Mission.id == accepted.mission.id).values(status=status)
            )
    with store.engine.begin() as connection:
        assert attempts_on(connection, "acme/app", head) == 2
        assert attempts_on(connection, "acme/other", head) == 0
        assert attempts_on(connection, "acme/app", "e" * 40) == 0


def test_a_statement_the_cursor_cannot_take_as_compiled_is_refused(store: Store) -> None:
    """An expanding parameter (rendered per execution) or a name the driver needs escaped
    would reach the database wrong: such a statement is refused before it runs."""
    expanding = select(Mission.id).where(Mission.id.in_(bindparam("ids", expanding=True)))
    escaped = select(Mission.id).where(Mission.id == bindparam("a.b"))
    for statement in (expanding, escaped):
        with store.engine.begin() as connection, pytest.raises(ValueError, match="plain"):
            DirectStatement(statement).first(connection, {"ids": ["x"], "a.b": "x"})


def test_a_write_on_a_connection_with_no_transaction_is_committed_by_commit(store: Store) -> None:
    """On a connection nothing has begun on, the statement begins SQLAlchemy's transaction
    as `Connection.execute` does, so `commit()` commits it rather than leaving the driver's
    own transaction open, to be rolled back when the connection goes back to the pool."""
    dialect = store.engine.dialect.name
    row = {"id": "d-3", "event": "ping", "action": None, "decision": "x", "mission_id": None,
           "received_at": datetime.datetime.now(datetime.UTC)}  # fmt: skip
    with store.engine.connect() as connection:
        assert not connection.in_transaction()
        assert _INSERT_DELIVERY[dialect].first(connection, row) == "d-3"
        connection.commit()
    assert store.get_delivery("d-3") is not None
