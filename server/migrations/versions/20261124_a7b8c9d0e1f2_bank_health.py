"""bank health: item status history, health snapshots, item sets, edited item versions

Revision ID: a7b8c9d0e1f2
Revises: f6a7b8c9d0e1
Create Date: 2026-11-24 02:00:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = 'a7b8c9d0e1f2'
down_revision: str | Sequence[str] | None = 'f6a7b8c9d0e1'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('items') as batch:
        batch.add_column(sa.Column('replaces_id', sa.Uuid(), nullable=True))
    op.create_table(
        'item_status_changes',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False,
                  autoincrement=True),
        sa.Column('item_id', sa.Uuid(), nullable=False),
        sa.Column('from_status', sa.String(length=16), nullable=False),
        sa.Column('to_status', sa.String(length=16), nullable=False),
        sa.Column('reasons', JSON, nullable=False),
        sa.Column('note', sa.Text(), nullable=True),
        sa.Column('actor', sa.String(length=64), nullable=False),
        sa.Column('snapshot_id', sa.Uuid(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['item_id'], ['items.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(
        op.f('ix_item_status_changes_item_id'), 'item_status_changes', ['item_id']
    )
    op.create_table(
        'health_snapshots',
        sa.Column('id', sa.Uuid(), nullable=False),
        sa.Column('computed_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('population_text', sa.String(length=200), nullable=False),
        sa.Column('population', JSON, nullable=False),
        sa.Column('verdict_watermark', sa.BigInteger(), nullable=False),
        sa.Column('bank', JSON, nullable=False),
        sa.Column('report', JSON, nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(
        op.f('ix_health_snapshots_computed_at'), 'health_snapshots', ['computed_at']
    )
    op.create_index(
        op.f('ix_health_snapshots_population_text'), 'health_snapshots', ['population_text']
    )
    op.create_table(
        'item_sets',
        sa.Column('id', sa.Uuid(), nullable=False),
        sa.Column('name', sa.String(length=100), nullable=False),
        sa.Column('rule', JSON, nullable=False),
        sa.Column('n_items', sa.Integer(), nullable=False),
        sa.Column('created_by', sa.String(length=64), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('name'),
    )
    op.create_table(
        'item_set_members',
        sa.Column('set_id', sa.Uuid(), nullable=False),
        sa.Column('item_id', sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(['set_id'], ['item_sets.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['item_id'], ['items.id']),
        sa.PrimaryKeyConstraint('set_id', 'item_id'),
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table('item_set_members')
    op.drop_table('item_sets')
    op.drop_index(op.f('ix_health_snapshots_population_text'), table_name='health_snapshots')
    op.drop_index(op.f('ix_health_snapshots_computed_at'), table_name='health_snapshots')
    op.drop_table('health_snapshots')
    op.drop_index(op.f('ix_item_status_changes_item_id'), table_name='item_status_changes')
    op.drop_table('item_status_changes')
    with op.batch_alter_table('items') as batch:
        batch.drop_column('replaces_id')
