"""Revoked sign-in sessions in the store: the id a session cookie carries, recorded at
sign-out and refused until the cookie would have expired, by every process on the store."""

from __future__ import annotations

import datetime

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from loopwright.store.models import RevokedSession, utcnow


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
                session.add(RevokedSession(id=session_id, expires_at=expires_at))
        except IntegrityError:
            # Another sign-out (or another process) recorded this id first; it stays revoked.
            return

    def session_revoked(self, session_id: str) -> bool:
        with self._session() as session:
            return session.get(RevokedSession, session_id) is not None
