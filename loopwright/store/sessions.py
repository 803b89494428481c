"""Sign-in sessions in the store, shared by every server process on it: the ids of revoked
sessions (refused until the cookie would have expired) and the repository lists of GitHub
sign-ins too long for their cookie.

Both are keyed by the SHA-256 of the session id, never the id itself: the cookie is signed,
and the row alone is not something a reader of the database can present as one.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Sequence

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from loopwright.store.models import RevokedSession, SignInSession, utcnow


def session_key(session_id: str) -> str:
    """What the store keeps of a session id: its SHA-256, hex."""
    return hashlib.sha256(session_id.encode()).hexdigest()


class SessionRevocations:
    """The store's reads and writes of revoked sessions."""

    _session: sessionmaker[Session]

    def revoke_session(self, session_id: str, expires_at: datetime.datetime) -> None:
        """Refuse `session_id` from now until `expires_at`, when its cookie expires anyway.

        Revocations already past their expiry are deleted in the same transaction, so the
        table holds only sessions that could still be replayed. Revoking twice is a no-op.
        """
        try:
            with self._session.begin() as session:
                session.execute(delete(RevokedSession).where(RevokedSession.expires_at < utcnow()))
                session.add(RevokedSession(id=session_key(session_id), expires_at=expires_at))
        except IntegrityError:
            # Another sign-out (or another process) recorded this id first; it stays revoked.
            return

    def session_revoked(self, session_id: str) -> bool:
        with self._session() as session:
            return session.get(RevokedSession, session_key(session_id)) is not None


class SignInSessions:
    """The store's reads and writes of the repository lists kept for GitHub sign-ins."""

    _session: sessionmaker[Session]

    def record_sign_in(
        self, session_id: str, repos: Sequence[str], expires_at: datetime.datetime
    ) -> None:
        """Keep `repos` for the session until `expires_at`. Sign-ins past their expiry are
        deleted in the same transaction, so the table holds only sessions still usable."""
        with self._session.begin() as session:
            session.execute(delete(SignInSession).where(SignInSession.expires_at < utcnow()))
            session.add(
                SignInSession(
                    id_hash=session_key(session_id), repos=list(repos), expires_at=expires_at
                )
            )

    def sign_in_repos(self, session_id: str) -> tuple[str, ...] | None:
        """The repositories kept for the session; None when it was never kept here, was
        signed out, or has expired (its row is then deleted)."""
        key = session_key(session_id)
        with self._session.begin() as session:
            found = session.get(SignInSession, key)
            if found is None:
                return None
            if found.expires_at <= utcnow():
                session.execute(delete(SignInSession).where(SignInSession.id_hash == key))
                return None
            return tuple(str(name) for name in found.repos)

    def end_sign_in(self, session_id: str) -> None:
        """Forget the session's repositories, on every server process at once."""
        with self._session.begin() as session:
            session.execute(
                delete(SignInSession).where(SignInSession.id_hash == session_key(session_id))
            )
