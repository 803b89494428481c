"""The missions store (SQLAlchemy models, Alembic migrations, repository) and the queue."""

from loopwright.store.engine import database_url, make_engine, migrate
from loopwright.store.models import Delivery, EventRecord, Mission, MissionStatus, MissionUsage
from loopwright.store.queue import InProcessQueue, MissionQueue, open_queue
from loopwright.store.repository import MissionNotFound, Store, new_mission_id, open_store

__all__ = [
    "Delivery",
    "EventRecord",
    "InProcessQueue",
    "Mission",
    "MissionNotFound",
    "MissionQueue",
    "MissionStatus",
    "MissionUsage",
    "Store",
    "database_url",
    "make_engine",
    "migrate",
    "new_mission_id",
    "open_queue",
    "open_store",
]
