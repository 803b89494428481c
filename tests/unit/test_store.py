"""The missions store on a real SQLite file and a real PostgreSQL database: schema and
migrations, race-safe dedupe, deliveries, claims, revocations, the event log, costs."""

from __future__ import annotations

import base64
import concurrent.futures
import dataclasses
import datetime
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, event, insert, inspect, select, text, update
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session

from loopwright.agent.pair import ApprovalRequest
from loopwright.config import ConfigError, Settings
from loopwright.events import EventBus, EventList
from loopwright.missions.result import MissionResult
from loopwright.redaction import Redactor
from loopwright.request import MissionRequest, ReviewComment
from loopwright.sandbox.claims import ClaimLedger, SandboxClaim
from loopwright.sandbox.docker.reaper import owner_id
from loopwright.store import (
    Mission,
    MissionNotFound,
    Store,
    database_url,
    make_engine,
    migrate,
    open_store,
)
from loopwright.store.deliveries import mission_columns
from loopwright.store.missions import (
    MissionTakenOver,
    claimed,
    lock_head,
    mission_values,
    patch_bytes,
    stored_result,
)
from loopwright.store.models import Base, Delivery, PairDecisionRecord, utcnow
from loopwright.store.sessions import session_key
from tests.services import PostgresCluster


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


@pytest.fixture
def url(store_url: str) -> str:
    return store_url


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    with Store(url) as store:
        yield store


def request(
    head: int = 1, repo: str = "acme/app", check: str = "tests", **extra: Any
) -> MissionRequest:
    extra.setdefault("trigger", "check_run")
    return MissionRequest(
        repo=repo,
        clone_url=f"https://github.com/{repo}.git",
        head_sha=f"{head:040x}",
        head_ref="main",
        check_name=check,
        **extra,
    )


def concurrently(n: int, call: Callable[[], Any]) -> list[Any]:
    """Run `call` on n threads released at the same moment; return every result."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        barrier.wait()
        try:
            results[i] = call()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return results


# -- schema ----------------------------------------------------------------------------


def test_migrations_create_a_missing_sqlite_directory(tmp_path: Path):
    path = tmp_path / "nested" / "dir" / "loopwright.db"
    migrate(sqlite_url(path))
    assert path.is_file()


def test_migrations_create_the_schema_on_an_empty_database_and_are_idempotent(
    empty_database_url: str,
):
    url = empty_database_url
    migrate(url)
    migrate(url)
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            tables = set(inspect(connection).get_table_names())
            assert tables == {
                "alembic_version",
                "missions",
                "deliveries",
                "events",
                "mission_usage",
                "revoked_sessions",
                "sign_in_sessions",
                "sandbox_claims",
                "mission_slots",
                "pair_requests",
                "pair_decisions",
            }
            version = connection.execute(text("SELECT version_num FROM alembic_version")).all()
            assert version == [(head_revision(),)]
            uniques = inspect(connection).get_unique_constraints("missions")
            assert [u["column_names"] for u in uniques] == [["dedupe_key"]]
            assert inspect(connection).get_pk_constraint("events")["constrained_columns"] == [
                "mission_id",
                "seq",
            ]
            if connection.dialect.name == "sqlite":
                assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
            else:
                columns = {c["name"]: c["type"] for c in inspect(connection).get_columns("events")}
                assert columns["body"].__class__.__name__ == "JSONB"
    finally:
        engine.dispose()


def head_revision() -> str:
    """The newest migration shipped (a new migration should not have to edit this test)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from loopwright.store.engine import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    (head,) = ScriptDirectory.from_config(config).get_heads()
    return str(head)


def alembic_to(url: str, revision: str, *, down: bool = False) -> None:
    from alembic import command
    from alembic.config import Config

    from loopwright.store.engine import MIGRATIONS

    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            config = Config()
            config.set_main_option("script_location", str(MIGRATIONS))
            config.attributes["connection"] = connection
            (command.downgrade if down else command.upgrade)(config, revision)
    finally:
        engine.dispose()


def schema_drift(url: str) -> list[Any]:
    """What alembic's autogenerate would change to make the database match the models."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def test_processes_starting_together_on_an_empty_database_all_migrate_it(
    empty_database_url: str,
):
    """Servers and workers of a fresh deployment start at once, each migrating on start;
    one upgrades, the others wait for it and find nothing left to do."""
    url = empty_database_url
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        starts = [pool.submit(migrate, url) for _ in range(4)]
        for start in starts:
            start.result(timeout=120)
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            versions = connection.exec_driver_sql("SELECT version_num FROM alembic_version")
            assert len(versions.all()) == 1
            assert "missions" in inspect(connection).get_table_names()
    finally:
        engine.dispose()


def test_migrations_downgrade_to_base_and_upgrade_again_to_the_models(empty_database_url: str):
    url = empty_database_url
    alembic_to(url, "head")
    alembic_to(url, "base", down=True)
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            assert set(inspect(connection).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()
    alembic_to(url, "head")
    assert schema_drift(url) == []
    with Store(url) as store:
        assert store.create_mission(request())[1]


def database_at(url: str, revision: str, insert: str) -> list[str]:
    """A database migrated only to `revision`, with one row written by `insert`; its
    tables before the upgrade."""
    alembic_to(url, revision)
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text(insert))
            return inspect(connection).get_table_names()
    finally:
        engine.dispose()


def test_a_database_from_before_the_tracking_comment_upgrades_and_keeps_its_missions(
    empty_database_url: str,
):
    url = empty_database_url
    database_at(
        url,
        "0001",
        "INSERT INTO missions (id, status, kind, trigger, repo, head_sha, dedupe_key,"
        " request, cost_usd, attempts, created_at) VALUES ('m1', 'verified', 'fix',"
        " 'cli', 'o/r', 'abc', 'k', '{}', 0, 0, '2026-01-01 00:00:00+00:00')",
    )
    migrate(url)
    with Store(url) as store:
        old = store.get_mission("m1")
        assert old is not None and old.tracking_comment_id is None
        store.set_links("m1", tracking_comment_id=9_000_000_001)
        assert store.get_mission("m1").tracking_comment_id == 9_000_000_001  # type: ignore[union-attr]
        assert store.get_mission("m1").to_dict()["tracking_comment_id"] == 9_000_000_001  # type: ignore[union-attr]


def test_a_database_from_before_session_revocation_upgrades_and_keeps_its_missions(
    empty_database_url: str,
):
    url = empty_database_url
    tables = database_at(
        url,
        "0002",
        "INSERT INTO missions (id, status, kind, trigger, repo, head_sha, dedupe_key,"
        " request, cost_usd, attempts, created_at, tracking_comment_id) VALUES"
        " ('m1', 'verified', 'fix', 'cli', 'o/r', 'abc', 'k', '{}', 0, 0,"
        " '2026-01-01 00:00:00+00:00', 7)",
    )
    assert "revoked_sessions" not in tables
    migrate(url)
    with Store(url) as store:
        old = store.get_mission("m1")
        assert old is not None and old.tracking_comment_id == 7
        assert not store.session_revoked("s1")
        store.revoke_session("s1", utcnow() + datetime.timedelta(hours=1))
        assert store.session_revoked("s1")


def test_a_database_from_before_sandbox_claims_upgrades_and_keeps_its_missions(
    empty_database_url: str,
):
    url = empty_database_url
    tables = database_at(
        url,
        "0003",
        "INSERT INTO missions (id, status, kind, trigger, repo, head_sha, dedupe_key,"
        " request, cost_usd, attempts, created_at) VALUES ('m1', 'running', 'fix',"
        " 'cli', 'o/r', 'abc', 'k', '{}', 0, 0, '2026-01-01 00:00:00+00:00')",
    )
    assert "sandbox_claims" not in tables
    migrate(url)
    with Store(url) as store:
        assert store.get_mission("m1").status == "running"  # type: ignore[union-attr]
        assert store.claim_of("c" * 64) is None
        store.record_claim(SandboxClaim("c" * 64, "m1", "host:1:2", utcnow()))
        assert store.claim_of("c" * 64).mission_id == "m1"  # type: ignore[union-attr]


def test_the_migration_matches_the_models(url: str):
    assert schema_drift(url) == []


def test_database_url_defaults_to_sqlite_in_the_data_dir(tmp_path: Path):
    settings = Settings.from_env({"LOOPWRIGHT_DATA_DIR": str(tmp_path / "data")})
    assert database_url(settings) == sqlite_url(tmp_path / "data" / "loopwright.db")
    assert settings.max_concurrent_missions == 2
    with open_store(settings) as store:
        assert store.list_missions() == []
    assert (tmp_path / "data" / "loopwright.db").is_file()

    env = {
        "LOOPWRIGHT_DATABASE_URL": "postgresql+psycopg://loopwright@db/loopwright",
        "LOOPWRIGHT_MAX_CONCURRENT_MISSIONS": "5",
    }
    settings = Settings.from_env(env)
    assert database_url(settings) == env["LOOPWRIGHT_DATABASE_URL"]
    assert settings.max_concurrent_missions == 5
    with pytest.raises(ConfigError, match="LOOPWRIGHT_MAX_CONCURRENT_MISSIONS"):
        Settings.from_env({"LOOPWRIGHT_MAX_CONCURRENT_MISSIONS": "0"})


@pytest.mark.parametrize(
    "bad_url",
    ["sqlite+aiosqlite:///x.db", "sqlite://", "sqlite:///:memory:"],
    ids=["async-driver", "memory-default", "memory-explicit"],
)
def test_urls_the_store_cannot_share_are_refused_with_a_hint(bad_url: str):
    with pytest.raises(ConfigError, match="LOOPWRIGHT_DATABASE_URL"):
        make_engine(bad_url)


# -- revoked sessions ------------------------------------------------------------------


def test_a_revoked_session_is_refused_by_every_store_on_the_database(url: str, store: Store):
    later = utcnow() + datetime.timedelta(hours=8)
    assert not store.session_revoked("session-a")
    store.revoke_session("session-a", later)
    # Revoking again (a second sign-out, another process) keeps it revoked.
    store.revoke_session("session-a", later)
    assert store.session_revoked("session-a")
    assert not store.session_revoked("session-b")
    with Store(url) as other_process:
        assert other_process.session_revoked("session-a")


def test_revocations_past_their_expiry_are_pruned_when_another_is_recorded(store: Store):
    now = utcnow()
    store.revoke_session("expired", now - datetime.timedelta(seconds=1))
    store.revoke_session("still-valid", now + datetime.timedelta(hours=1))
    store.revoke_session("newest", now + datetime.timedelta(hours=8))
    with store.engine.connect() as connection:
        left = {row[0] for row in connection.execute(text("SELECT id FROM revoked_sessions"))}
    assert left == {session_key("newest"), session_key("still-valid")}


def test_a_sign_in_is_kept_for_every_store_on_the_database_under_a_hash_of_its_id(
    url: str, store: Store
):
    later = utcnow() + datetime.timedelta(hours=8)
    store.record_sign_in("session-a", ["acme/api", "acme/Web"], later)
    assert store.sign_in_repos("session-a") == ("acme/api", "acme/Web")
    assert store.sign_in_repos("session-b") is None
    with Store(url) as other_process:
        assert other_process.sign_in_repos("session-a") == ("acme/api", "acme/Web")
        other_process.end_sign_in("session-a")
    assert store.sign_in_repos("session-a") is None
    store.record_sign_in("session-c", ["acme/api"], later)
    with store.engine.connect() as connection:
        keys = connection.execute(text("SELECT id_hash FROM sign_in_sessions")).scalars().all()
    assert keys == [session_key("session-c")] and len(keys[0]) == 64


def test_an_expired_sign_in_is_refused_and_deleted_on_read_and_by_the_next_sign_in(
    store: Store,
):
    now = utcnow()
    store.record_sign_in("expired-read", ["acme/api"], now - datetime.timedelta(seconds=1))
    store.record_sign_in("expired-swept", ["acme/api"], now + datetime.timedelta(seconds=1))
    assert store.sign_in_repos("expired-read") is None

    def kept() -> set[str]:
        with store.engine.connect() as connection:
            return set(connection.execute(text("SELECT id_hash FROM sign_in_sessions")).scalars())

    assert kept() == {session_key("expired-swept")}
    with store.engine.begin() as connection:
        # As if the second sign-in's eight hours had passed.
        connection.execute(
            text("UPDATE sign_in_sessions SET expires_at = :past"),
            {"past": now - datetime.timedelta(seconds=1)},
        )
    store.record_sign_in("newest", ["acme/web"], now + datetime.timedelta(hours=8))
    assert kept() == {session_key("newest")}


def test_a_database_at_0007_upgrades_keeping_its_revocations_and_downgrades_back(
    empty_database_url: str,
):
    url = empty_database_url
    tables = database_at(
        url,
        "0007",
        "INSERT INTO revoked_sessions (id, expires_at) VALUES"
        " ('signed-out-before-the-upgrade', '2999-01-01 00:00:00+00:00')",
    )
    assert "sign_in_sessions" not in tables
    alembic_to(url, "head")
    assert schema_drift(url) == []
    with Store(url) as store:
        # The revocation was rewritten to the hash of the id: the old cookie stays refused.
        assert store.session_revoked("signed-out-before-the-upgrade")
        assert not store.session_revoked("another")
        with store.engine.connect() as connection:
            ids = connection.execute(text("SELECT id FROM revoked_sessions")).scalars().all()
        assert ids == [session_key("signed-out-before-the-upgrade")]
        store.record_sign_in("s1", ["acme/api"], utcnow() + datetime.timedelta(hours=1))
    alembic_to(url, "0007", down=True)
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            assert "sign_in_sessions" not in inspect(connection).get_table_names()
            version = connection.execute(text("SELECT version_num FROM alembic_version")).all()
            assert version == [("0007",)]
            # The hashes mean nothing to 0007's lookups by id: they are not left behind.
            revoked = connection.execute(text("SELECT count(*) FROM revoked_sessions")).scalar()
            assert revoked == 0
    finally:
        engine.dispose()
    alembic_to(url, "head")
    assert schema_drift(url) == []


# -- deliveries ------------------------------------------------------------------------


def test_the_same_delivery_id_fifty_times_at_once_is_recorded_once(store: Store):
    results = concurrently(50, lambda: store.record_delivery("d-1", "check_run", "completed"))
    assert results.count(True) == 1
    assert results.count(False) == 49
    assert store.record_delivery("d-2", "ping", None) is True


def test_a_delivery_remembers_what_was_decided(store: Store):
    assert store.record_delivery("d-1", "check_run", "completed")
    mission, _ = store.create_mission(request())
    store.decide_delivery("d-1", "mission", mission.id)
    delivery = store.get_delivery("d-1")
    assert delivery is not None
    assert (delivery.event, delivery.action) == ("check_run", "completed")
    assert (delivery.decision, delivery.mission_id) == ("mission", mission.id)
    assert delivery.received_at.utcoffset() == datetime.timedelta(0)
    assert store.get_delivery("unknown") is None


# -- missions --------------------------------------------------------------------------


def test_twenty_concurrent_requests_for_one_failure_make_one_mission(store: Store):
    results = concurrently(20, lambda: store.create_mission(request()))
    assert [created for _, created in results].count(True) == 1
    assert len({mission.id for mission, _ in results}) == 1
    assert len(store.list_missions()) == 1


def test_a_mission_keeps_its_request(store: Store):
    req = request(pr_number=7, installation_id=42, extra={"run_id": 9})
    _, created = store.create_mission(req, mission_id="abcdef012345")
    assert created
    stored = store.get_mission("abcdef012345")
    assert stored is not None
    assert MissionRequest.from_dict(stored.request) == req
    assert (stored.status, stored.kind, stored.trigger) == ("queued", "fix", "check_run")
    assert (stored.repo, stored.head_sha, stored.pr_number) == ("acme/app", req.head_sha, 7)
    assert stored.dedupe_key == req.dedupe_key
    assert (stored.attempts, stored.cost_usd, stored.finished_at) == (0, 0.0, None)
    assert stored.created_at.utcoffset() == datetime.timedelta(0)  # UTC, whatever the server's zone
    assert stored.to_dict()["created_at"] == stored.created_at.isoformat()
    assert stored.to_dict()["created_at"].endswith("+00:00")
    assert store.get_mission("nope") is None


def test_a_requests_dict_is_what_asdict_gives_and_shares_nothing_mutable():
    """`to_dict` (stored with every mission) skips `asdict`'s copy of each plain field: it
    must still give the same dict, a review as a dict, and an `extra` of its own."""
    review = ReviewComment(id=5, path="src/a.py", line=3, diff_hunk="@@ -1 +1 @@")
    for req in (
        request(2),
        request(2, pr_number=7, extra={"delivery": "d-1", "runs": [1, {"job": "x"}]}),
        request(2, trigger="comment", comment_id=9, review=review, guidance="café ✓"),
    ):
        data = req.to_dict()
        assert data == dataclasses.asdict(req)
        assert MissionRequest.from_dict(data) == req
        assert data["extra"] is not req.extra
        if "runs" in req.extra:
            data["extra"]["runs"][1]["job"] = "changed"
            assert req.extra["runs"][1] == {"job": "x"}


def test_admission_can_pin_the_request_of_a_stored_mission(store: Store):
    mission, _ = store.create_mission(request(1))
    pinned = request(9, pr_number=3)
    assert store.pin_within_cap(mission.id, pinned, 3) is None
    stored = store.get_mission(mission.id)
    assert stored is not None
    assert (stored.head_sha, stored.request) == (pinned.head_sha, pinned.to_dict())
    assert stored.dedupe_key == mission.dedupe_key
    # Pinned again on the same head (a run taken over): it does not count itself.
    assert store.pin_within_cap(mission.id, pinned, 1) is None
    for cap in (3, 0):  # below the cap it writes nothing; at it, it still looks
        with pytest.raises(MissionNotFound):
            store.pin_within_cap("missing", pinned, cap)


def test_a_run_taken_over_pins_nothing_below_or_at_the_cap(store: Store):
    mission, _ = store.create_mission(request(1))
    first = store.claim(mission.id, runner="a.invalid:1:1")
    assert first is not None and store.set_status(mission.id, "queued")
    assert store.claim(mission.id, runner="b.invalid:2:2") is not None  # another run now
    for cap in (3, 0):
        with claimed(first), pytest.raises(MissionTakenOver):
            store.pin_within_cap(mission.id, request(9, pr_number=3), cap)
    stored = store.get_mission(mission.id)
    assert stored is not None and stored.head_sha == request(1).head_sha


def comment_mission(store: Store, comment_id: int) -> str:
    """A `/loopwright fix` comment's mission as stored before admission (no head yet)."""
    unpinned = request(0, trigger="comment", comment_id=comment_id, pr_number=3)
    mission, created = store.create_mission(replace(unpinned, head_sha=""))
    assert created
    return mission.id


def test_a_head_at_its_cap_takes_no_pin(store: Store):
    head = request(8, trigger="comment", pr_number=3)
    ids = [comment_mission(store, n) for n in (1, 2, 3)]
    assert [store.pin_within_cap(i, replace(head, comment_id=n), 2) for n, i in
            zip((1, 2, 3), ids, strict=True)] == [None, None, 2]  # fmt: skip
    refused = store.get_mission(ids[2])
    assert refused is not None and refused.head_sha == ""  # nothing was written
    assert store.attempts_for_head("acme/app", head.head_sha) == 2


def test_admissions_at_once_on_one_head_take_its_last_attempt_once(url: str):
    """Eight missions admitted at the same moment on one head with one attempt left, half
    through one store and half through another (two servers on one database)."""
    head = request(8, trigger="comment", pr_number=3)
    with Store(url) as first, Store(url) as second:
        first.create_mission(head)  # an earlier attempt: one left under a cap of two
        ids = [comment_mission(first, n) for n in range(10, 18)]
        servers = [first, second] * 4
        calls = iter(range(8))

        def admit() -> int | None:
            n = next(calls)
            return servers[n].pin_within_cap(ids[n], replace(head, comment_id=10 + n), 2)

        outcomes = concurrently(8, admit)
        assert (outcomes.count(None), outcomes.count(2)) == (1, 7)  # one pinned, 7 refused
        assert first.attempts_for_head("acme/app", head.head_sha) == 2


@contextmanager
def another_writer_on(store: Store, head_sha: str) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A writer elsewhere holding `head_sha` of acme/app (on SQLite, the database) until it
    adds its mission with the function this yields, and commits; rolled back if the block
    raises first, so that no writer waits on it for good. The function takes the mission's
    `mission_values`."""
    other = store.engine.connect()
    try:
        if other.dialect.name == "sqlite":
            other.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            other.begin()
        lock_head(other, "acme/app", head_sha)

        def add(values: dict[str, Any]) -> None:
            other.execute(insert(Mission).values(mission_columns(values)))
            other.commit()

        yield add
    finally:
        other.rollback()
        other.close()


def test_an_admission_counts_after_another_writer_on_its_head(url: str):
    """A writer deciding on the head (a server's red check, elsewhere) holds it: the
    admission's count waits for that writer's mission and counts it."""
    head = request(8, trigger="comment", pr_number=3)
    with Store(url) as store:
        waiting_id = comment_mission(store, 20)
        # The writer's exit comes first: the pool's waits for the pin, which waits for it.
        with (
            concurrent.futures.ThreadPoolExecutor(1) as pool,
            another_writer_on(store, head.head_sha) as add,
        ):
            pinned = pool.submit(store.pin_within_cap, waiting_id, head, 1)
            time.sleep(0.5)
            assert not pinned.done()
            add(mission_values(request(8), None, "queued", None))  # a red check's mission
            assert pinned.result(10) == 1
        stored = store.get_mission(waiting_id)
        assert stored is not None and stored.head_sha == ""


def test_the_store_reads_committed_whatever_the_databases_default(
    postgres: PostgresCluster, postgres_url: str
) -> None:
    """A count after `lock_head` must see the commit it waited for: a database or role set
    to repeatable read would hand the transaction an older snapshot."""
    name = postgres_url.rsplit("/", 1)[1]
    postgres.sql(
        f"ALTER DATABASE \"{name}\" SET default_transaction_isolation TO 'repeatable read'"
    )
    show = text("SHOW transaction_isolation")
    plain = create_engine(postgres_url)
    try:
        with plain.connect() as connection:  # the database's default, as set
            assert connection.execute(show).scalar() == "repeatable read"
    finally:
        plain.dispose()
    engine = make_engine(postgres_url)
    try:
        with engine.connect() as connection:
            assert connection.execute(show).scalar() == "read committed"
    finally:
        engine.dispose()


def test_a_red_check_counts_after_another_writer_on_its_head(url: str):
    """The other half: a red check's delivery decided on the head's count waits for a
    writer holding the head (an admission, elsewhere) and counts its mission."""
    head = f"{8:040x}"

    def capped_at_one(attempts: Mapping[str, int]) -> tuple[str, MissionRequest | None]:
        if attempts[head] >= 1:
            return "ignored: attempt cap 1 reached", None
        return "mission", request(8)

    with Store(url) as store:
        with another_writer_on(store, head) as add:
            pending = store.accept_delivery_deciding_later(
                "d-red", "check_run", "completed", repo="acme/app", decide=capped_at_one
            )
            time.sleep(0.5)
            assert not pending.done()
            add(mission_values(request(8, trigger="comment", comment_id=4), None, "running", None))
        accepted = pending.result(10)
        assert accepted.new_delivery and accepted.mission is None
        decided = store.get_delivery("d-red")
        assert decided is not None and decided.decision == "ignored: attempt cap 1 reached"
        assert store.attempts_for_head("acme/app", head) == 1


def test_a_colliding_mission_id_is_an_error_not_a_dedupe(store: Store):
    store.create_mission(request(1), mission_id="aaaaaaaaaaaa")
    with pytest.raises(IntegrityError):
        store.create_mission(request(2), mission_id="aaaaaaaaaaaa")


def test_attempts_for_head_count_missions_but_not_refusals(store: Store):
    store.create_mission(request(1, check="tests"))
    _, created = store.create_mission(request(1, check="lint"))
    assert not created  # one red CI run of a commit is one mission, whatever reports it
    store.create_mission(request(1, trigger="comment", comment_id=7))
    store.create_mission(
        request(1, trigger="comment", comment_id=8), status="refused", message="read access"
    )
    store.create_mission(
        request(1, trigger="comment", comment_id=9), status="ignored", message="over the cap"
    )
    store.create_mission(request(2))
    assert store.attempts_for_head("acme/app", f"{1:040x}") == 2
    assert store.attempts_for_head("acme/app", f"{3:040x}") == 0
    refused = store.list_missions(status="refused")[0]
    assert refused.finished_at is not None
    assert refused.message == "read access"


def test_a_mission_is_claimed_once_and_statuses_are_checked(store: Store):
    mission, _ = store.create_mission(request())
    assert concurrently(10, lambda: store.mark_running(mission.id)).count(True) == 1
    running = store.get_mission(mission.id)
    assert running is not None
    assert (running.status, running.attempts) == ("running", 1)
    assert running.started_at is not None
    assert not store.set_status(mission.id, "error", expect="queued")
    assert store.set_status(mission.id, "error", message="boom", expect="running")
    failed = store.get_mission(mission.id)
    assert failed is not None
    assert (failed.status, failed.message) == ("error", "boom")
    assert failed.finished_at is not None
    with pytest.raises(ValueError, match="unknown mission status"):
        store.set_status(mission.id, "exploded")  # type: ignore[arg-type]


def test_a_queued_mission_is_cancelled_at_once_and_never_claimed(store: Store):
    mission, _ = store.create_mission(request())
    assert store.request_cancel(mission.id, "Cancelled by @ann.") == "cancelled"
    cancelled = store.get_mission(mission.id)
    assert cancelled is not None
    assert (cancelled.status, cancelled.message) == ("cancelled", "Cancelled by @ann.")
    assert cancelled.finished_at is not None
    assert not store.mark_running(mission.id)
    assert store.request_cancel(mission.id, "again") == "not_active"


def test_a_running_mission_gets_the_request_for_its_runner_to_notice(store: Store):
    mission, _ = store.create_mission(request())
    store.mark_running(mission.id)
    assert store.cancel_requested(mission.id) is None
    assert store.request_cancel(mission.id, "Cancelled by @ann.") == "requested"
    assert store.request_cancel(mission.id, "Cancelled by @bob.") == "requested"
    assert store.cancel_requested(mission.id) == "Cancelled by @ann."  # the first one counts
    running = store.get_mission(mission.id)
    assert running is not None and running.status == "running"
    store.mark_finished(MissionResult(mission.id, "cancelled", message="Cancelled by @ann."))
    assert store.cancel_requested(mission.id) is None
    assert store.request_cancel(mission.id, "late") == "not_active"
    assert store.request_cancel("0123456789ab", "nobody") == "not_found"


def test_missions_for_pull_are_newest_first_and_only_that_pull(store: Store):
    older, _ = store.create_mission(request(1, pr_number=7))
    newer, _ = store.create_mission(request(2, pr_number=7))
    store.create_mission(request(3, pr_number=8))
    store.create_mission(request(4, repo="acme/other", pr_number=7))
    found = store.missions_for_pull("acme/app", 7)
    assert {m.id for m in found} == {older.id, newer.id}
    assert found[0].created_at >= found[1].created_at


def test_recent_deliveries_count_one_decision_in_a_window(store: Store):
    for n in range(3):
        store.record_delivery(f"d{n}", "issue_comment", "created")
        store.decide_delivery(f"d{n}", "non-writer reply on acme/app#7" if n else "other")
    assert store.recent_deliveries("non-writer reply on acme/app#7", 600) == 2
    assert store.recent_deliveries("non-writer reply on acme/app#7", -1) == 0


def test_mark_finished_stores_the_result_and_its_usage(store: Store):
    mission, _ = store.create_mission(request())
    store.mark_running(mission.id)
    usage = {"nano": {"calls": 3, "prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.5}}
    result = MissionResult(
        mission.id, "verified", summary="fixed", patch="diff", usage=usage, cost_usd=0.5
    )
    result.final_tier = "nano"
    store.mark_finished(result)
    store.set_links(mission.id, check_run_id=31_000_000_000, pr_url="https://x/pull/3")
    done = store.get_mission(mission.id)
    assert done is not None
    assert (done.status, done.cost_usd, done.tier_reached) == ("verified", 0.5, "nano")
    assert done.result is not None and done.result["patch"] == "diff"
    assert (done.check_run_id, done.pr_url) == (31_000_000_000, "https://x/pull/3")
    assert done.finished_at is not None
    assert store.costs_by_tier()[0]["calls"] == 3
    with pytest.raises(MissionNotFound):
        store.mark_finished(MissionResult("missing", "error"))
    with pytest.raises(MissionNotFound):
        store.set_links("missing", pr_url="https://x")


def test_list_missions_filters_by_status_and_repository_newest_first(store: Store):
    ids = []
    for n, repo in enumerate(["acme/app", "acme/api", "acme/app", "acme/app"]):
        mission, _ = store.create_mission(request(n, repo=repo))
        ids.append(mission.id)
    store.mark_running(ids[2])
    assert [m.id for m in store.list_missions()] == ids[::-1]
    assert [m.id for m in store.list_missions(repo="acme/app")] == [ids[3], ids[2], ids[0]]
    assert [m.id for m in store.list_missions(status="running")] == [ids[2]]
    assert [m.id for m in store.list_missions(status="queued", repo="acme/app")] == [
        ids[3],
        ids[0],
    ]
    assert [m.id for m in store.list_missions(limit=2)] == [ids[3], ids[2]]
    assert [m.id for m in store.queued_missions()] == [ids[0], ids[1], ids[3]]
    assert store.queued_mission_ids() == [ids[0], ids[1], ids[3]]


def test_interrupt_running_marks_and_returns_only_running_missions(store: Store):
    missions = [store.create_mission(request(n))[0] for n in range(4)]
    store.mark_running(missions[0].id)
    store.mark_running(missions[1].id)
    store.mark_finished(MissionResult(missions[1].id, "verified"))
    store.mark_running(missions[2].id)
    interrupted = store.interrupt_running()
    assert sorted(m.id for m in interrupted) == sorted([missions[0].id, missions[2].id])
    assert all(m.status == "interrupted" for m in interrupted)
    statuses = {m.id: m.status for m in store.list_missions()}
    assert statuses == {
        missions[0].id: "interrupted",
        missions[1].id: "verified",
        missions[2].id: "interrupted",
        missions[3].id: "queued",
    }
    assert store.interrupt_running() == []


# -- the event log ---------------------------------------------------------------------


def test_events_round_trip_in_order_through_an_event_bus_sink(store: Store):
    mission, _ = store.create_mission(request())
    memory = EventList()
    bus = EventBus(mission.id, sinks=[store.event_sink(mission.id), memory], redactor=Redactor())
    bus.enter("prepare", source="acme/app")
    bus.emit(
        "tool_call",
        id="c1",
        tool="run_command",
        arguments='{"command": "pytest -q"}',
        args={"command": "pytest -q"},
        summary="Ran `pytest -q`",
    )
    bus.emit("tool_result", id="c1", tool="run_command", status="failed",
             output="ünïcode ✓\n" * 3, exit_code=1)  # fmt: skip
    bus.leave("prepare", "done")
    bus.enter("loop")
    bus.emit("verification", verified=True, rows=[{"id": "t", "nested": [1, 2, {"a": None}]}])

    expected = [e.to_dict() for e in memory.events]
    assert store.events_after(mission.id, 0) == expected
    assert [e["seq"] for e in store.events_after(mission.id, 3)] == [4, 5, 6]
    assert [e["seq"] for e in store.events_after(mission.id, 1, limit=2)] == [2, 3]
    assert store.events_after(mission.id, 6) == []
    assert store.events_after("other", 0) == []
    current = store.get_mission(mission.id)
    assert current is not None and current.stage == "loop"


def test_a_repeated_event_is_not_stored_twice_and_unknown_missions_fail(store: Store):
    mission, _ = store.create_mission(request())
    memory = EventList()
    EventBus(mission.id, sinks=[memory], redactor=Redactor()).emit(
        "stage", "prepare", status="started"
    )
    event = memory.events[0]
    assert store.append_event(event) is True
    assert store.append_event(event) is False
    assert len(store.events_after(mission.id, 0)) == 1
    with pytest.raises(ValueError, match="sent to the sink"):
        store.event_sink("another")(event)
    stray = EventList()
    EventBus("ghost", sinks=[stray], redactor=Redactor()).emit("error", message="x")
    with pytest.raises(IntegrityError):
        store.append_event(stray.events[0])


def test_a_nul_in_command_output_or_a_message_is_stored_not_refused(url: str, store: Store):
    """PostgreSQL's text types cannot hold NUL; there the store keeps U+FFFD in its place."""
    mission, _ = store.create_mission(request())
    bus = EventBus(mission.id, sinks=[store.event_sink(mission.id)], redactor=Redactor())
    bus.emit("tool_result", id="c1", tool="run_command", status="failed",
             output="find -print0: a\x00b\x00", exit_code=1)  # fmt: skip
    bus.emit("verification", verified=False, rows=[{"id\x00": ["\x00"]}])
    store.set_status(mission.id, "error", message="boom\x00")
    nul = "\x00" if url.startswith("sqlite") else "\ufffd"
    output, verification = store.events_after(mission.id, 0)
    assert output["output"] == f"find -print0: a{nul}b{nul}"
    assert verification["rows"] == [{f"id{nul}": [nul]}]
    assert store.get_mission(mission.id).message == f"boom{nul}"  # type: ignore[union-attr]
    # A NUL in a lookup finds nothing rather than failing the query.
    assert store.get_mission(f"{mission.id}\x00") is None


def test_model_calls_make_cost_and_usage_live_while_the_mission_runs(store: Store):
    mission, _ = store.create_mission(request())
    bus = EventBus(mission.id, sinks=[store.event_sink(mission.id)], redactor=Redactor())
    bus.emit("model_call", "loop", step=1, tier="nano", prompt_tokens=100, completion_tokens=10,
             cost_usd=0.01, total_cost_usd=0.01)  # fmt: skip
    bus.emit("model_call", "loop", step=2, tier="nano", prompt_tokens=200, completion_tokens=20,
             cost_usd=0.02, total_cost_usd=0.03)  # fmt: skip
    bus.emit("model_call", "loop", step=3, tier="super", prompt_tokens=300, completion_tokens=30,
             cost_usd=0.5, total_cost_usd=0.53)  # fmt: skip
    running = store.get_mission(mission.id)
    assert running is not None
    assert (running.cost_usd, running.tier_reached) == (0.53, "super")
    tiers = {row["tier"]: row for row in store.costs_by_tier()}
    assert tiers["nano"]["calls"] == 2
    assert tiers["nano"]["prompt_tokens"] == 300
    assert tiers["super"]["cost_usd"] == pytest.approx(0.5)
    # An interrupted mission keeps the spend its events recorded.
    store.mark_running(mission.id)
    store.interrupt_running()
    assert store.costs_by_repo()[0]["cost_usd"] == pytest.approx(0.53)


# -- the cost view ---------------------------------------------------------------------


def finish(
    store: Store, mission: Mission, tier: str, usage: dict[str, tuple[int, int, float]]
) -> None:
    store.mark_running(mission.id)
    result = MissionResult(
        mission.id,
        "verified",
        usage={
            name: {"calls": 1, "prompt_tokens": p, "completion_tokens": c, "cost_usd": cost}
            for name, (p, c, cost) in usage.items()
        },
        cost_usd=sum(cost for _, _, cost in usage.values()),
    )
    result.final_tier = tier
    store.mark_finished(result)


def test_cost_aggregates_by_tier_repository_and_day(store: Store):
    a, _ = store.create_mission(request(1, repo="acme/app"))
    b, _ = store.create_mission(request(2, repo="acme/app"))
    c, _ = store.create_mission(request(3, repo="acme/api"))
    store.create_mission(request(4, repo="acme/docs"))  # queued: no spend yet
    finish(store, a, "nano", {"nano": (100, 10, 0.25)})
    finish(store, b, "super", {"nano": (100, 10, 0.25), "super": (1000, 100, 2.0)})
    finish(store, c, "nano", {"nano": (50, 5, 0.5)})
    # Late in the UTC day, so a day counted in any other time zone would be the next one.
    late = datetime.datetime(2026, 6, 30, 23, 30, tzinfo=datetime.UTC)
    with store.engine.begin() as connection:
        connection.execute(update(Mission).values(created_at=late))
        connection.execute(
            update(Mission).where(Mission.id == c.id).values(created_at=late.replace(year=2020))
        )

    by_tier = {row["tier"]: row for row in store.costs_by_tier()}
    assert list(by_tier) == ["nano", "super"]
    assert by_tier["nano"]["missions"] == 3
    assert by_tier["nano"]["cost_usd"] == pytest.approx(1.0)
    assert (by_tier["nano"]["prompt_tokens"], by_tier["nano"]["completion_tokens"]) == (250, 25)
    assert (by_tier["nano"]["finished"], by_tier["super"]["finished"]) == (2, 1)
    assert by_tier["nano"]["share"] == pytest.approx(2 / 3)
    assert by_tier["super"]["cost_usd"] == pytest.approx(2.0)

    by_repo = store.costs_by_repo()
    assert [row["repo"] for row in by_repo] == ["acme/app", "acme/api", "acme/docs"]
    assert by_repo[0]["missions"] == 2
    assert by_repo[0]["cost_usd"] == pytest.approx(2.5)
    assert by_repo[0]["prompt_tokens"] == 1200
    assert (by_repo[2]["missions"], by_repo[2]["cost_usd"]) == (1, 0.0)

    by_day = store.costs_by_day()
    assert [row["day"] for row in by_day] == ["2020-06-30", "2026-06-30"]
    assert by_day[0]["cost_usd"] == pytest.approx(0.5)
    assert (by_day[1]["missions"], by_day[1]["cost_usd"]) == (3, pytest.approx(2.5))


def test_accept_delivery_is_one_race_safe_write(store: Store):
    results = concurrently(
        30,
        lambda: store.accept_delivery(
            "d-same", "check_run", "completed", decision="mission", request=request(9)
        ),
    )
    assert [r.new_delivery for r in results].count(True) == 1
    winner = next(r for r in results if r.new_delivery)
    assert winner.created and winner.mission is not None
    joined = store.accept_delivery(
        "d-other", "check_suite", "completed", decision="mission", request=request(9, check="x")
    )
    assert (joined.new_delivery, joined.created) == (True, False)
    assert joined.mission is not None and joined.mission.id == winner.mission.id
    other = store.get_delivery("d-other")
    assert other is not None
    assert (other.decision, other.mission_id) == ("duplicate mission", winner.mission.id)
    ignored = store.accept_delivery("d-ign", "push", None, decision="ignored: push")
    assert ignored.new_delivery and ignored.mission is None
    assert len(store.list_missions()) == 1


def test_an_accepted_delivery_names_its_mission_and_makes_it_as_stored(store: Store):
    """The webhook answers with `mission_id` alone; `mission`, made from the values the
    mission was inserted with only when read, is the row the store holds, column by
    column. A joined mission is the stored one; a replay names none."""
    created = store.accept_delivery(
        "d-1", "check_run", "completed", decision="mission", request=request(3)
    )
    assert created.created and created.mission_id is not None
    made = created.mission
    assert made is not None and made.id == created.mission_id
    stored = store.get_mission(created.mission_id)
    assert stored is not None
    for column in Mission.__table__.columns:
        assert getattr(made, column.key) == getattr(stored, column.key), column.key
    assert created.mission is made  # made once
    joined = store.accept_delivery(
        "d-2", "check_suite", "completed", decision="mission", request=request(3, check="x")
    )
    assert (joined.created, joined.mission_id) == (False, created.mission_id)
    assert joined.mission is not None and joined.mission.id == created.mission_id
    replayed = store.accept_delivery(
        "d-1", "check_run", "completed", decision="mission", request=request(4)
    )
    assert (replayed.new_delivery, replayed.mission_id, replayed.mission) == (False, None, None)
    assert store.get_delivery("d-1").mission_id == created.mission_id  # type: ignore[union-attr]
    assert [m.id for m in store.list_missions()] == [created.mission_id]
    ignored = store.accept_delivery("d-3", "push", None, decision="ignored: push")
    assert (ignored.mission_id, ignored.mission) == (None, None)
    assert "mission_id=None" in repr(ignored)


def test_a_decision_on_the_attempt_count_reads_it_in_its_own_write(store: Store):
    head = f"{5:040x}"
    by_comment = request(5, trigger="comment", comment_id=1)
    earlier = store.accept_delivery(
        "d-0", "issue_comment", "created", decision="mission", request=by_comment
    )
    assert earlier.created
    seen: list[tuple[str, int]] = []

    def capped_at_one(repo: str) -> Callable[[Mapping[str, int]], Any]:
        def decide(attempts: Mapping[str, int]) -> tuple[str, MissionRequest | None]:
            seen.append((repo, attempts[head]))
            if attempts[head] >= 1:
                return "ignored: attempt cap 1 reached", None
            return "mission", request(5, repo=repo)

        return decide

    capped = store.accept_delivery_deciding_later(
        "d-1", "check_run", "completed", repo="acme/app", decide=capped_at_one("acme/app")
    ).result(10)
    other = store.accept_delivery_deciding_later(
        "d-2", "check_run", "completed", repo="acme/other", decide=capped_at_one("acme/other")
    ).result(10)
    replayed = store.accept_delivery_deciding_later(
        "d-2", "check_run", "completed", repo="acme/other", decide=capped_at_one("acme/other")
    ).result(10)
    assert seen == [("acme/app", 1), ("acme/other", 0), ("acme/other", 1)]
    assert (capped.new_delivery, capped.mission) == (True, None)
    assert other.created and other.mission is not None and other.mission.repo == "acme/other"
    assert (replayed.new_delivery, replayed.mission) == (False, None)
    stored = [store.get_delivery(d) for d in ("d-1", "d-2")]
    assert [(d.decision, d.mission_id) for d in stored if d is not None] == [
        ("ignored: attempt cap 1 reached", None),
        ("mission", other.mission.id),
    ]


def test_a_joining_or_replayed_delivery_needs_no_savepoint(store: Store):
    """The common duplicates (a check suite after its check run, GitHub's redelivery of an
    id) are inserts that do nothing, not failing ones: the batch they share is not rolled
    back and run again."""
    sent: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *args: sent.append(args[2]))
    first = store.accept_delivery("d-1", "check_run", "completed", decision="mission",
                                  request=request(4))  # fmt: skip
    joined = store.accept_delivery("d-2", "check_suite", "completed", decision="mission",
                                   request=request(4, check="suite"))  # fmt: skip
    replayed = store.accept_delivery("d-2", "check_suite", "completed", decision="mission",
                                     request=request(4, check="suite"))  # fmt: skip
    assert first.created and not joined.created
    assert first.mission is not None and joined.mission is not None
    assert joined.mission.id == first.mission.id
    assert (replayed.new_delivery, replayed.mission) == (False, None)
    assert [s for s in sent if "SAVEPOINT" in s.upper()] == []
    written = ("INSERT", "SELECT", "UPDATE", "DELETE")
    assert [s.split()[0] for s in sent if s.split()[0] in written] == [
        "INSERT", "INSERT",  # a new mission, then the delivery, decided, in one row
        "INSERT", "SELECT", "INSERT",  # the same failure: the stored mission is read
        "INSERT", "SELECT", "INSERT",  # the replayed id: the same, and nothing is written
    ]  # fmt: skip
    stored = store.get_delivery("d-2")
    assert stored is not None
    assert (stored.decision, stored.mission_id) == ("duplicate mission", first.mission.id)


def test_a_replayed_id_decided_as_new_work_this_time_leaves_no_mission(store: Store):
    """The mission is written before its delivery: when the delivery turns out to be a
    replay, a mission its unit created is taken back in the same transaction."""
    first = store.accept_delivery("d-1", "check_run", "completed", decision="ignored: cap")
    replayed = store.accept_delivery("d-1", "check_run", "completed", decision="mission",
                                     request=request(4))  # fmt: skip
    assert first.new_delivery and first.mission is None
    assert (replayed.new_delivery, replayed.mission, replayed.created) == (False, None, False)
    assert store.list_missions() == []
    stored = store.get_delivery("d-1")
    assert stored is not None
    assert (stored.decision, stored.mission_id) == ("ignored: cap", None)
    # The dedupe key is free: the next delivery about the failure gets its mission.
    again = store.accept_delivery("d-2", "check_run", "completed", decision="mission",
                                  request=request(4))  # fmt: skip
    assert again.created and again.mission is not None
    assert [m.id for m in store.list_missions()] == [again.mission.id]


# -- sandbox claims --------------------------------------------------------------------


def test_sandbox_claims_are_kept_per_container_and_read_back_by_another_store(url: str):
    ledger: ClaimLedger
    at = datetime.datetime(2026, 12, 3, 6, 30, tzinfo=datetime.UTC)
    with Store(url) as writer:
        ledger = writer
        ledger.record_claim(SandboxClaim("a" * 64, "m1", "h:10:100", at))
        ledger.record_claim(SandboxClaim("b" * 64, "m1", "h:10:100", at + datetime.timedelta(1)))
        ledger.record_claim(SandboxClaim("c" * 64, "m2", "h:11:200", at))
    # Another process (the restarted server) opens the same file.
    with Store(url) as reader:
        assert reader.claim_of("a" * 64) == SandboxClaim("a" * 64, "m1", "h:10:100", at)
        assert reader.claim_of("d" * 64) is None
        assert [c.container_id for c in reader.claims_of_mission("m1")] == ["a" * 64, "b" * 64]
        assert [c.owner for c in reader.claims_of_mission("m2")] == ["h:11:200"]
        # Read back aware and in UTC, like every other timestamp of the store.
        assert reader.claim_of("c" * 64).claimed_at.utcoffset() == datetime.timedelta(0)  # type: ignore[union-attr]


def test_a_container_recorded_twice_keeps_the_latest_claim(store: Store):
    first = SandboxClaim("a" * 64, "m1", "h:1:1", utcnow())
    store.record_claim(first)
    later = SandboxClaim("a" * 64, "m2", "h:2:2", first.claimed_at + datetime.timedelta(1))
    store.record_claim(later)
    assert store.claim_of("a" * 64) == later
    assert store.claims_of_mission("m1") == []


def test_a_naive_claim_time_is_refused(store: Store):
    with pytest.raises(StatementError, match="naive datetime"):
        store.record_claim(SandboxClaim("a" * 64, "m1", "h:1:1", datetime.datetime(2026, 1, 1)))


def test_a_waiting_mission_is_still_running_for_cancel_heartbeat_takeover_and_crashes(
    store: Store,
):
    mission, _ = store.create_mission(request())
    store.mark_running(mission.id, runner="host:1:1")
    assert store.set_status(mission.id, "waiting", expect="running")
    assert [m.id for m in store.running_missions()] == [mission.id]
    before = store.get_mission(mission.id)
    assert before is not None and before.runner_seen_at is not None
    time.sleep(0.01)  # SQLite's clock counts milliseconds
    store.touch_runner(mission.id, "host:1:1")
    after = store.get_mission(mission.id)
    assert after is not None and after.runner_seen_at is not None
    assert after.runner_seen_at > before.runner_seen_at  # the heartbeat goes on
    assert store.request_cancel(mission.id, "Cancelled by @ann.") == "requested"
    assert store.cancel_requested(mission.id) == "Cancelled by @ann."
    # A crash while waiting ends it like a crash while running.
    assert store.set_status(mission.id, "error", message="boom", expect="running")
    assert store.get_mission(mission.id).status == "error"  # type: ignore[union-attr]

    lost, _ = store.create_mission(request(2))
    store.mark_running(lost.id, runner="host:2:2")
    store.set_status(lost.id, "waiting", expect="running")
    assert store.take_over_lost(lost.id, "host:2:2", "queued", "its worker was lost")
    assert store.get_mission(lost.id).status == "queued"  # type: ignore[union-attr]

    stuck, _ = store.create_mission(request(3))
    store.mark_running(stuck.id)
    store.set_status(stuck.id, "waiting", expect="running")
    assert [m.id for m in store.interrupt_running()] == [stuck.id]


def test_a_pair_request_is_decided_once_and_guidance_is_handed_over_once(store: Store):
    from loopwright.store.pair import DecisionRefused

    mission, _ = store.create_mission(request())
    store.mark_running(mission.id)
    with pytest.raises(DecisionRefused, match="not waiting for a decision"):
        store.record_decision(mission.id, "approve", "@ann")
    guidance = store.record_decision(mission.id, "redirect", "dashboard", "look at tax.py")
    assert (guidance.request, guidance.decision, guidance.by) == (None, "redirect", "dashboard")
    assert [g.text for g in store.take_guidance(mission.id)] == ["look at tax.py"]
    assert store.take_guidance(mission.id) == []

    payload = {"what": "Run `pip install requests`", "why": "it needs the network"}
    store.open_request(mission.id, "1-call", payload)
    assert store.pending_request(mission.id) == {**payload, "id": "1-call"}
    with pytest.raises(DecisionRefused, match="request 9-x is not pending"):
        store.record_decision(mission.id, "approve", "@ann", request_id="9-x")
    assert store.decision_for(mission.id, "1-call") is None

    def approve() -> object:
        try:
            return store.record_decision(mission.id, "approve", "@ann", request_id="1-call")
        except DecisionRefused as refused:
            return refused

    answers = concurrently(6, approve)
    assert sum(isinstance(a, type(guidance)) for a in answers) == 1
    assert all("1-call" in str(a) for a in answers if isinstance(a, DecisionRefused))
    decided = store.decision_for(mission.id, "1-call")
    assert decided is not None and (decided.decision, decided.by) == ("approve", "@ann")
    assert store.pending_request(mission.id) is None
    # A redirect with a request pending decides it, and is not also guidance.
    store.open_request(mission.id, "2-call", payload)
    store.record_decision(mission.id, "redirect", "@bob", "use urllib")
    assert store.decision_for(mission.id, "2-call").text == "use urllib"  # type: ignore[union-attr]
    assert store.take_guidance(mission.id) == []
    # The mission stopped waiting (expired, cancelled): nothing is left to decide.
    store.open_request(mission.id, "3-call", payload)
    store.close_request(mission.id, "3-call")
    with pytest.raises(DecisionRefused):
        store.record_decision(mission.id, "reject", "@ann", request_id="3-call")
    assert [d.decision for d in store.decisions(mission.id)] == ["redirect", "approve", "redirect"]


@pytest.mark.parametrize(
    ("url", "timeout"),
    [
        ("postgresql+psycopg://loopwright@127.0.0.1:9/loopwright", 10),
        ("postgresql+psycopg://loopwright@127.0.0.1:9/loopwright?connect_timeout=3", "3"),
    ],
)
def test_a_postgresql_connect_is_bounded_unless_the_url_says_otherwise(url, timeout) -> None:
    engine = make_engine(url)
    seen: dict[str, object] = {}

    @event.listens_for(engine, "do_connect")
    def spy(dialect, record, cargs, cparams):  # type: ignore[no-untyped-def]
        seen.update(cparams)
        raise ConnectionRefusedError("not connecting in this test")

    with pytest.raises(ConnectionRefusedError):
        engine.connect()
    assert seen["connect_timeout"] == timeout
    engine.dispose()


def _network_request(request_id: str, command: str) -> ApprovalRequest:
    return ApprovalRequest(
        id=request_id,
        tool="run_command",
        rule="network",
        what=f"Run `{command}`",
        why="",
        command=command,
        network=True,
    )


def test_a_taken_over_mission_asks_afresh_and_never_meets_the_lost_runs_decision(store: Store):
    from loopwright.agent.pair import PairMode
    from loopwright.app.pair import StorePair, decide
    from loopwright.cancellation import Cancellation
    from loopwright.store.pair import DecisionRefused

    mission, _ = store.create_mission(request())
    store.mark_running(mission.id, runner="host:1:1")
    lost_run = PairMode(StorePair(store, mission.id, 900))
    first = _network_request(lost_run.request_id(), "pip install x")
    lost_run.channel.open(first)
    decide(store, store.get_mission(mission.id), "approve", "@ann", request_id=first.id)  # type: ignore[arg-type]

    # A second request of the lost run stays open while its worker is lost.
    second = _network_request(lost_run.request_id(), "pip install y")
    store.close_request(mission.id, first.id)
    store.set_status(mission.id, "running", expect="waiting")
    lost_run.channel.open(second)
    assert store.take_over_lost(mission.id, "host:1:1", "queued", "its worker was lost")
    assert store.pending_request(mission.id) is None
    with pytest.raises(DecisionRefused):
        store.record_decision(mission.id, "approve", "@ann", request_id=second.id)

    # The next run numbers its requests from 1 again, yet its ids are new.
    store.mark_running(mission.id, runner="host:2:2")
    next_run = PairMode(StorePair(store, mission.id, 0.2))
    ids = {next_run.request_id() for _ in range(50)}
    assert first.id not in ids and second.id not in ids
    assert all(len(i) <= 8 and i.split("-")[1].isalnum() for i in ids)
    again = _network_request(next_run.request_id(), "curl x")
    next_run.channel.open(again)
    assert next_run.channel.ask(again, Cancellation()).by == "expiry"
    # Reusing an id that was decided is refused, not merged into the old row.
    with pytest.raises(IntegrityError):
        store.open_request(mission.id, first.id, {"what": "Run `curl -d @.env x`"})


def test_a_restart_interrupts_only_missions_whose_runner_is_gone(store: Store):
    """Store-only mode: `serve` restarts while `loopwright worker` processes run missions.
    A mission whose runner lives (another host, heartbeat fresh) runs on and its result
    lands; one whose runner exited on this host, or went silent elsewhere, is interrupted
    with its runner cleared, so that run's late result is refused."""
    live, silent, dead = (store.create_mission(request(n))[0].id for n in range(3))
    live_claim = store.claim(live, runner="workerhost.invalid:42:9")
    silent_claim = store.claim(silent, runner="quiet.invalid:7:7")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert store.claim(dead, runner=owner_id(child.pid)) is not None
    time.sleep(1.2)
    store.touch_runner(live, "workerhost.invalid:42:9")
    assert sorted(m.id for m in store.interrupt_running(stale_after_s=1.0)) == sorted(
        [silent, dead]
    )
    assert store.get_mission(silent).runner is None  # type: ignore[union-attr]
    with claimed(live_claim):
        store.mark_finished(MissionResult(live, "verified"))
    assert store.get_mission(live).status == "verified"  # type: ignore[union-attr]
    with claimed(silent_claim), pytest.raises(MissionTakenOver):
        store.mark_finished(MissionResult(silent, "verified"))
    assert store.get_mission(silent).status == "interrupted"  # type: ignore[union-attr]


def test_guidance_is_taken_only_while_the_pair_mode_loop_runs(store: Store):
    from loopwright.app.pair import StorePair, decide, takes_guidance
    from loopwright.store.pair import DecisionRefused

    mission, _ = store.create_mission(request())
    store.mark_running(mission.id)

    def send() -> object:
        return decide(store, store.get_mission(mission.id), "redirect", "dashboard", "see tax.py")  # type: ignore[arg-type]

    # Pair mode off (or its loop not started): nothing would read the guidance.
    assert not takes_guidance(store.get_mission(mission.id))  # type: ignore[arg-type]
    with pytest.raises(DecisionRefused, match="pair mode is not on"):
        send()
    pair = StorePair(store, mission.id, 900)
    pair.taking_guidance(True)
    assert takes_guidance(store.get_mission(mission.id))  # type: ignore[arg-type]
    send()
    assert [g.text for g in pair.guidance()] == ["see tax.py"]
    # Verification and delivery read no guidance.
    pair.taking_guidance(False)
    assert not takes_guidance(store.get_mission(mission.id))  # type: ignore[arg-type]
    with pytest.raises(DecisionRefused, match="its loop has ended"):
        send()
    assert store.take_guidance(mission.id) == []


LATIN1_PATCH = (
    "diff --git a/menu.txt b/menu.txt\n--- a/menu.txt\n+++ b/menu.txt\n@@ -1 +1 @@\n"
    "-cafe\n+caf\udce9 \U0001f375\n"
)
"""A patch to a Latin-1 file, as a mission reads git's bytes: the byte 0xE9 is the lone
surrogate U+DCE9. The emoji is UTF-8, and stays exact."""


def test_text_that_is_not_utf8_is_stored_readable_and_a_patch_keeps_its_bytes(
    url: str, store: Store
):
    """No column holds a lone surrogate (SQLite's driver cannot encode one, PostgreSQL
    refuses it): the store keeps U+FFFD for reading, and a patch's exact bytes beside it."""
    exact = LATIN1_PATCH.encode("utf-8", "surrogateescape")
    assert b"caf\xe9 \xf0\x9f\x8d\xb5" in exact
    mission, _ = store.create_mission(request())
    store.mark_running(mission.id)
    bus = EventBus(mission.id, sinks=[store.event_sink(mission.id)], redactor=Redactor())
    bus.emit("tool_result", id="c1", tool="run_command", status="failed",
             output="cat menu.txt: caf\udce9", exit_code=1)  # fmt: skip
    result = MissionResult(mission.id, "verified", summary="fixed caf\udce9", patch=LATIN1_PATCH)
    store.mark_finished(result)
    done = store.get_mission(mission.id)
    assert done is not None and done.result is not None
    assert done.result["patch"] == LATIN1_PATCH.replace("\udce9", "\ufffd")
    assert "\U0001f375" in done.result["patch"]
    assert done.result["summary"] == "fixed caf\ufffd"
    assert patch_bytes(done.result) == exact
    (event,) = store.events_after(mission.id, 0)
    assert event["output"] == "cat menu.txt: caf\ufffd"
    # A text column: a message quoting a name that is not UTF-8.
    assert store.set_status(mission.id, "error", message="no such file: caf\udce9.txt")
    assert store.get_mission(mission.id).message == "no such file: caf\ufffd.txt"  # type: ignore[union-attr]
    # A UTF-8 patch is stored as it is, with nothing beside it.
    other, _ = store.create_mission(request(2))
    store.mark_running(other.id)
    store.mark_finished(MissionResult(other.id, "verified", patch="+th\xe9 \U0001f375\n"))
    kept = store.get_mission(other.id)
    assert kept is not None and kept.result == {**kept.result, "patch": "+th\xe9 \U0001f375\n"}
    assert "patch_base64" not in kept.result
    assert patch_bytes(kept.result) == "+th\xe9 \U0001f375\n".encode()


def test_a_row_stored_with_a_lone_surrogate_is_read_with_u_fffd(tmp_path: Path):
    """A SQLite row written before the store kept strings valid holds a surrogate's escape;
    it is read with U+FFFD, so the pages and the API that show it still answer."""
    url = sqlite_url(tmp_path / "old.db")
    migrate(url)
    with Store(url) as store:
        mission, _ = store.create_mission(request())
    with closing(sqlite3.connect(tmp_path / "old.db")) as conn, conn:
        conn.execute(
            "UPDATE missions SET result = ? WHERE id = ?",
            ('{"patch": "+caf\\udce9\\n", "summary": "\\ud83c\\udf75"}', mission.id),
        )
    with Store(url) as store:
        read = store.get_mission(mission.id)
    assert read is not None and read.result == {"patch": "+caf\ufffd\n", "summary": "\U0001f375"}


def test_a_patch_holding_nul_keeps_its_bytes_and_only_the_store_writes_patch_base64(
    url: str, store: Store
):
    """A file git diffs as text may hold NUL, which PostgreSQL's JSONB cannot: the exact
    bytes are kept beside the text. A `patch_base64` that comes with a result is not kept."""
    mission, _ = store.create_mission(request())
    store.mark_running(mission.id)
    store.mark_finished(MissionResult(mission.id, "verified", patch="+a\x00b\n"))
    done = store.get_mission(mission.id)
    assert done is not None and patch_bytes(done.result) == b"+a\x00b\n"
    planted = {"patch": "+ok\n", "patch_base64": base64.b64encode(b"+evil\n").decode()}
    assert stored_result(planted) == {"patch": "+ok\n"}


def test_rows_written_together_take_the_same_care_of_text(url: str, store: Store):
    """Several rows in one flush (one INSERT of many rows, on SQLite a flat list of every
    row's values) and a statement on the driver's cursor (the webhook's) are stored too."""
    mission, _ = store.create_mission(request())
    now = utcnow()
    with Session(store.engine) as session, session.begin():
        session.add_all(
            PairDecisionRecord(
                mission_id=mission.id, kind="redirect", decided_by="@ann", text=text, decided_at=now
            )
            for text in ("use the cache", "not caf\udce9", "")
        )
    with Session(store.engine) as session:
        texts = session.scalars(
            select(PairDecisionRecord.text).order_by(PairDecisionRecord.id)
        ).all()
    assert texts == ["use the cache", "not caf\ufffd", ""]
    accepted = store.accept_delivery(
        "d-1", "check_run", "caf\udce9", decision="mission", request=request(2, check="caf\udce9")
    )
    assert accepted.mission is not None
    stored = store.get_mission(accepted.mission.id)
    assert stored is not None and stored.request["check_name"] == "caf\ufffd"
    with Session(store.engine) as session:
        assert session.scalars(select(Delivery.action)).all() == ["caf\ufffd"]
