"""adaptive v2: the draws of model-assisted sessions

Revision ID: d0e1f2a3b4c5
Revises: c9d0e1f2a3b4
Create Date: 2026-11-24 12:00:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 'd0e1f2a3b4c5'
down_revision: str | Sequence[str] | None = 'c9d0e1f2a3b4'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('adaptive_draws',
    sa.Column('session_id', sa.Uuid(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('probability', sa.Float(), nullable=False),
    sa.Column('predicted', sa.Float(), nullable=False),
    sa.Column('unseen_predicted', sa.Float(), nullable=False),
    sa.Column('weight', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['eval_sessions.id'], name=op.f('fk_adaptive_draws_session_id_eval_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', 'position', name=op.f('pk_adaptive_draws'))
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table('adaptive_draws')
