"""disciplines: one taxonomy with canonical keys and the evaluated set

Revision ID: f6a7b8c9d0e1
Revises: e5f6a7b8c9d0
Create Date: 2026-11-23 23:20:00.000000

Creates ``disciplines`` (seeded with the default taxonomy of ``bank.taxonomy``), rewrites
every item's and stratum's discipline to its canonical key ("Biology" and "biology"
become "biology"), merges strata that thereby name the same cell (their items keep dense
slots). No foreign key to ``disciplines``: on SQLite adding one rebuilds ``strata``, which
``items`` references; the importer adds only known disciplines. Disciplines that already have items
are evaluated, as every discipline with items was before; the others follow the default.
The downgrade drops the table; the keys stay canonical.
"""
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from bank.taxonomy import DEFAULT_TAXONOMY, canonical_key

# revision identifiers, used by Alembic.
revision: str = 'f6a7b8c9d0e1'
down_revision: str | Sequence[str] | None = 'e5f6a7b8c9d0'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RANK_BITS = 32


def upgrade() -> None:
    """Upgrade schema."""
    disciplines = op.create_table(
        'disciplines',
        sa.Column('key', sa.String(length=100), nullable=False),
        sa.Column('display_name', sa.String(length=200), nullable=False),
        sa.Column('evaluated', sa.Boolean(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('key', name=op.f('pk_disciplines')),
    )
    connection = op.get_bind()
    spellings = _spellings(connection)
    now = datetime.now(UTC)
    rows = [
        dict(key=d.key, display_name=d.display_name, evaluated=d.evaluated or d.key in spellings)
        for d in DEFAULT_TAXONOMY
    ]
    defaults = {d.key for d in DEFAULT_TAXONOMY}
    rows += [
        {'key': key, 'display_name': names[0], 'evaluated': True}
        for key, names in sorted(spellings.items())
        if key not in defaults
    ]
    op.bulk_insert(disciplines, [dict(r, created_at=now) for r in rows])
    _canonicalise_strata(connection)
    for key, names in spellings.items():
        for name in names:
            if name != key:
                connection.execute(
                    sa.text('UPDATE items SET discipline = :key WHERE discipline = :name'),
                    {'key': key, 'name': name},
                )


def _spellings(connection: Any) -> dict[str, list[str]]:
    """Canonical key -> the spellings the bank uses for it, most items first."""
    counts = connection.execute(
        sa.text('SELECT discipline, COUNT(*) FROM items GROUP BY discipline')
    ).all()
    counts += [
        (name, 0)
        for (name,) in connection.execute(sa.text('SELECT DISTINCT discipline FROM strata'))
    ]
    totals: dict[str, int] = defaultdict(int)
    for name, n in counts:
        totals[name] += n
    spellings: dict[str, list[str]] = defaultdict(list)
    for name in sorted(totals, key=lambda s: (-totals[s], s)):
        spellings[canonical_key(name) or name].append(name)
    return dict(spellings)


def _canonicalise_strata(connection: Any) -> None:
    """Rename strata to canonical keys; merge the ones that become one cell into the
    oldest, appending their items' ranks after its own."""
    strata = connection.execute(
        sa.text('SELECT id, discipline, qtype, subdiscipline, n_slots FROM strata ORDER BY id')
    ).all()
    cells: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for row in strata:
        key = canonical_key(row.discipline) or row.discipline
        cells[(key, row.qtype, row.subdiscipline)].append(row)
    for group in cells.values():
        keep, merged = group[0], group[1:]
        n_slots = keep.n_slots
        for other in merged:
            _merge(connection, keep.id, other.id, n_slots)
            n_slots += other.n_slots
        if merged:
            connection.execute(
                sa.text(
                    'UPDATE strata SET n_slots = :n_slots, n_active = ('
                    "SELECT COUNT(*) FROM items WHERE stratum_id = :id AND status = 'active') "
                    'WHERE id = :id'
                ),
                {'n_slots': n_slots, 'id': keep.id},
            )
    for (key, _, _), group in cells.items():
        if group[0].discipline != key:
            connection.execute(
                sa.text('UPDATE strata SET discipline = :key WHERE id = :id'),
                {'key': key, 'id': group[0].id},
            )


def _merge(connection: Any, keep: int, other: int, first_rank: int) -> None:
    """Move stratum ``other`` 's items and exclusion counts into ``keep``; delete it."""
    connection.execute(
        sa.text(
            'UPDATE items SET stratum_id = :keep, slot = :new_base + (slot - :old_base) '
            'WHERE stratum_id = :other'
        ),
        {
            'keep': keep,
            'other': other,
            'new_base': (keep << RANK_BITS) + first_rank,
            'old_base': other << RANK_BITS,
        },
    )
    exclusions = connection.execute(
        sa.text('SELECT org_id, n_items FROM org_stratum_exclusions WHERE stratum_id = :other'),
        {'other': other},
    ).all()
    for org_id, n_items in exclusions:
        updated = connection.execute(
            sa.text(
                'UPDATE org_stratum_exclusions SET n_items = n_items + :n '
                'WHERE org_id = :org AND stratum_id = :keep'
            ),
            {'n': n_items, 'org': org_id, 'keep': keep},
        )
        if updated.rowcount == 0:
            connection.execute(
                sa.text(
                    'INSERT INTO org_stratum_exclusions (org_id, stratum_id, n_items) '
                    'VALUES (:org, :keep, :n)'
                ),
                {'n': n_items, 'org': org_id, 'keep': keep},
            )
    connection.execute(
        sa.text('DELETE FROM org_stratum_exclusions WHERE stratum_id = :other'), {'other': other}
    )
    connection.execute(sa.text('DELETE FROM strata WHERE id = :other'), {'other': other})


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table('disciplines')
