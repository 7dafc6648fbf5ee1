"""The bank's taxonomy in the database: known disciplines and the evaluated set.

The ``disciplines`` table starts with :data:`bank.taxonomy.DEFAULT_TAXONOMY` (the
migration seeds it); imports may add disciplines (``add_disciplines``), operators choose
the evaluated set (:func:`set_evaluated`). Fixed and adaptive sessions split their quota
over :func:`sampled_disciplines`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.models import Discipline, Stratum
from bank.taxonomy import DisciplineMap, canonical_key


class UnknownDisciplines(ValueError):
    """Names that are not in the bank's taxonomy."""


@dataclass(frozen=True, slots=True)
class DisciplineRow:
    """One discipline of the bank with its number of active items."""

    key: str
    display_name: str
    evaluated: bool
    items: int

    def as_dict(self) -> dict[str, object]:
        return {
            "key": self.key,
            "display_name": self.display_name,
            "evaluated": self.evaluated,
            "items": self.items,
        }


async def known_disciplines(session: AsyncSession) -> dict[str, str]:
    """Every discipline of the bank: key -> display name."""
    rows = await session.execute(select(Discipline.key, Discipline.display_name))
    return dict(rows.tuples().all())


async def add_disciplines(session: AsyncSession, display_names: Mapping[str, str]) -> None:
    """Add disciplines (key -> display name) to the taxonomy, evaluated, as every
    discipline with items was before the bank had an evaluated set. Flushes."""
    session.add_all(
        Discipline(key=key, display_name=name, evaluated=True)
        for key, name in display_names.items()
    )
    await session.flush()


async def list_disciplines(session: AsyncSession) -> list[DisciplineRow]:
    """The taxonomy in key order, each discipline with its active items."""
    counts = (
        select(Stratum.discipline, func.sum(Stratum.n_active).label("n_items"))
        .group_by(Stratum.discipline)
        .subquery()
    )
    rows = await session.execute(
        select(
            Discipline.key,
            Discipline.display_name,
            Discipline.evaluated,
            func.coalesce(counts.c.n_items, 0),
        )
        .outerjoin(counts, counts.c.discipline == Discipline.key)
        .order_by(Discipline.key)
    )
    return [DisciplineRow(k, name, bool(ev), int(n)) for k, name, ev, n in rows.tuples()]


async def set_evaluated(session: AsyncSession, names: Iterable[str]) -> list[str]:
    """Make exactly ``names`` (any spelling of a key, display name or not) the evaluated
    set; returns their keys. Flushes.

    Raises
    ------
    UnknownDisciplines
        If a name is not in the taxonomy or none is given; nothing changes then.
    """
    known = await known_disciplines(session)
    by_name = {canonical_key(name): key for key, name in known.items()} | {k: k for k in known}
    aliases = DisciplineMap.aliases()
    wanted = {n: canonical_key(aliases.apply(n).discipline) for n in names if n.strip()}
    unknown = [n for n, key in wanted.items() if key not in by_name]
    if unknown or not wanted:
        problem = f"unknown discipline {unknown[0]!r}" if unknown else "no discipline given"
        raise UnknownDisciplines(f"{problem} (known: {', '.join(sorted(known))})")
    keys = sorted({by_name[key] for key in wanted.values()})
    await session.execute(update(Discipline).values(evaluated=Discipline.key.in_(keys)))
    await session.flush()
    return keys


async def sampled_disciplines(session: AsyncSession) -> Sequence[str]:
    """The evaluated disciplines that have active items: a session's discipline quota is
    split evenly over these. An evaluated discipline without active items takes no share,
    as a stratum without items takes none."""
    rows = await session.execute(
        select(Discipline.key)
        .join(Stratum, Stratum.discipline == Discipline.key)
        .where(Discipline.evaluated)
        .group_by(Discipline.key)
        .having(func.sum(Stratum.n_active) > 0)
        .order_by(Discipline.key)
    )
    return list(rows.scalars())
