"""The cost view: spend and tokens per tier, repository and day, summed from the stored
per-tier usage of missions."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Date, distinct, func, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import GenericFunction

from loopwright.store.models import ACTIVE_STATUSES, Mission, MissionUsage


class CostView:
    """The store's spend and token totals."""

    _session: sessionmaker[Session]

    def costs_by_tier(self) -> list[dict[str, Any]]:
        """Spend and tokens per tier, and how many finished missions ended on each tier
        (`finished` and `share`), ordered by tier name."""
        rows = self._usage_totals(MissionUsage.tier, select_from=MissionUsage)
        with self._session() as session:
            ended = dict(
                session.execute(
                    select(Mission.tier_reached, func.count())
                    .where(
                        Mission.tier_reached.is_not(None),
                        Mission.status.not_in(ACTIVE_STATUSES),
                    )
                    .group_by(Mission.tier_reached)
                ).all()
            )
        total_ended = sum(ended.values())
        tiers = sorted({*rows, *ended})
        result = []
        for tier in tiers:
            totals = rows.get(tier, _zero_totals())
            finished = int(ended.get(tier, 0))
            share = finished / total_ended if total_ended else 0.0
            result.append({"tier": tier, **totals, "finished": finished, "share": share})
        return result

    def costs_by_repo(self) -> list[dict[str, Any]]:
        """Spend and tokens per repository, most expensive first."""
        rows = self._usage_totals(Mission.repo, select_from=Mission, outer=True)
        result = [{"repo": repo, **totals} for repo, totals in rows.items()]
        return sorted(result, key=lambda r: (-r["cost_usd"], r["repo"]))

    def costs_by_day(self) -> list[dict[str, Any]]:
        """Spend and tokens per UTC day the missions were created on, oldest first."""
        day = utc_date(Mission.created_at)
        rows = self._usage_totals(day, select_from=Mission, outer=True)
        result = [{"day": str(d), **totals} for d, totals in rows.items()]
        return sorted(result, key=lambda r: r["day"])

    def _usage_totals(
        self, key: ColumnElement[Any] | Any, *, select_from: type[Any], outer: bool = False
    ) -> dict[Any, dict[str, Any]]:
        """Sum usage grouped by `key`; with `outer`, missions without usage still count."""
        query = select(
            key,
            func.count(distinct(MissionUsage.mission_id if not outer else Mission.id)),
            func.coalesce(func.sum(MissionUsage.calls), 0),
            func.coalesce(func.sum(MissionUsage.prompt_tokens), 0),
            func.coalesce(func.sum(MissionUsage.completion_tokens), 0),
            func.coalesce(func.sum(MissionUsage.cost_usd), 0.0),
        ).select_from(select_from)
        if outer:
            query = query.outerjoin(MissionUsage, MissionUsage.mission_id == Mission.id)
        query = query.group_by(key)
        with self._session() as session:
            rows = session.execute(query).all()
        return {
            k: {
                "missions": int(missions),
                "calls": int(calls),
                "prompt_tokens": int(prompt),
                "completion_tokens": int(completion),
                "cost_usd": round(float(cost), 6),
            }
            for k, missions, calls, prompt, completion, cost in rows
        }


class utc_date(GenericFunction[Any]):
    """The UTC calendar day of a timestamp. PostgreSQL's `date()` of a `timestamptz` is the
    day in the session's time zone; SQLite stores the UTC text, whose date is the UTC day."""

    type = Date()
    inherit_cache = True


@compiles(utc_date, "postgresql")
def _utc_date_postgresql(element: utc_date, compiler: SQLCompiler, **kw: Any) -> str:
    return f"date(timezone('UTC', {compiler.process(element.clauses, **kw)}))"


@compiles(utc_date)
def _utc_date(element: utc_date, compiler: SQLCompiler, **kw: Any) -> str:
    return f"date({compiler.process(element.clauses, **kw)})"


def _zero_totals() -> dict[str, Any]:
    return {"missions": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
