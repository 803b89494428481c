"""Alembic migrations for the missions store; run them with `loopwright.store.migrate(url)`."""
