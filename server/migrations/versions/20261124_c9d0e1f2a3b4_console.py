"""admin console: browser logins, per-organisation quotas

Revision ID: c9d0e1f2a3b4
Revises: b8c9d0e1f2a3
Create Date: 2026-11-24 08:00:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 'c9d0e1f2a3b4'
down_revision: str | Sequence[str] | None = 'b8c9d0e1f2a3'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('console_logins',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('key_id', sa.Uuid(), nullable=False),
    sa.Column('csrf_token', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['key_id'], ['api_keys.id'], name=op.f('fk_console_logins_key_id_api_keys'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_console_logins'))
    )
    op.create_index(op.f('ix_console_logins_key_id'), 'console_logins', ['key_id'], unique=False)
    with op.batch_alter_table('organisations') as batch:
        batch.add_column(sa.Column('max_concurrent_sessions', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('max_sessions_per_period', sa.Integer(), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('organisations') as batch:
        batch.drop_column('max_sessions_per_period')
        batch.drop_column('max_concurrent_sessions')
    op.drop_index(op.f('ix_console_logins_key_id'), table_name='console_logins')
    op.drop_table('console_logins')
