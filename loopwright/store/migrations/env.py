"""Alembic environment: runs on the connection `migrate(url)` hands over.

For writing a new revision, `alembic -x url=sqlite:///dev.db revision --autogenerate -m ...`
with `script_location` pointing here works too.
"""

from __future__ import annotations

from typing import Any

from alembic import context

from loopwright.store.engine import make_engine
from loopwright.store.models import Base


def run(**target: Any) -> None:
    # Batch mode lets ALTER-style changes run on SQLite, which cannot alter constraints.
    context.configure(
        target_metadata=Base.metadata, render_as_batch=True, compare_type=True, **target
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if context.is_offline_mode():
    run(url=context.get_x_argument(as_dictionary=True)["url"])
elif connection is not None:
    run(connection=connection)
else:
    engine = make_engine(context.get_x_argument(as_dictionary=True)["url"])
    try:
        with engine.connect() as own_connection:
            run(connection=own_connection)
    finally:
        engine.dispose()
