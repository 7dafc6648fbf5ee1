"""Strata rows and the dense slots that make uniform draws cheap (see ``bank.models``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sqlalchemy import bindparam, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from bank.bulk import model_table
from bank.models import Stratum
from bank.stratum_key import StratumKey


async def reserve_slots(
    session: AsyncSession, keys: Sequence[StratumKey]
) -> dict[StratumKey, tuple[int, int]]:
    """Reserve ``keys.count(k)`` consecutive ranks in each stratum ``k`` for new active items.

    Creates missing strata, locks the rows (PostgreSQL ``FOR UPDATE``) so concurrent imports
    serialise, and returns ``{key: (stratum_id, first reserved rank)}``.
    """
    wanted = Counter(keys)
    if not wanted:
        return {}
    strata = await _get_or_create(session, sorted(wanted))
    firsts = {key: strata[key] for key in wanted}
    table = model_table(Stratum)
    connection = await session.connection()  # one executemany, not a round trip per stratum
    await connection.execute(
        update(table)
        .where(table.c.id == bindparam("stratum"))
        .values(
            n_slots=table.c.n_slots + bindparam("added"),
            n_active=table.c.n_active + bindparam("added"),
        ),
        [{"stratum": strata[key][0], "added": count} for key, count in wanted.items()],
    )
    return firsts


async def _get_or_create(
    session: AsyncSession, keys: list[StratumKey]
) -> dict[StratumKey, tuple[int, int]]:
    found = await _lock(session, keys)
    missing = [k for k in keys if k not in found]
    if missing:
        session.add_all(
            Stratum(
                discipline=k.discipline,
                qtype=k.qtype,
                subdiscipline=k.subdiscipline,
                n_slots=0,
                n_active=0,
            )
            for k in missing
        )
        await session.flush()
        found.update(await _lock(session, missing))
    return found


async def _lock(session: AsyncSession, keys: list[StratumKey]) -> dict[StratumKey, tuple[int, int]]:
    found: dict[StratumKey, tuple[int, int]] = {}
    columns = tuple_(Stratum.discipline, Stratum.qtype, Stratum.subdiscipline)
    for start in range(0, len(keys), 1000):
        chunk = keys[start : start + 1000]
        rows = await session.execute(
            select(
                Stratum.discipline,
                Stratum.qtype,
                Stratum.subdiscipline,
                Stratum.id,
                Stratum.n_slots,
            )
            .where(columns.in_([tuple(k) for k in chunk]))
            .order_by(Stratum.id)
            .with_for_update()
        )
        for discipline, qtype, sub, stratum_id, n_slots in rows:
            found[StratumKey(discipline, qtype, sub)] = (stratum_id, n_slots)
    return found
