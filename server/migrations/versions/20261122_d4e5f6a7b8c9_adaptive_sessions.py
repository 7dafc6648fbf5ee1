"""adaptive sessions

Revision ID: d4e5f6a7b8c9
Revises: c1d2e3f4a5b6
Create Date: 2026-11-22 23:30:00.000000

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from sqlalchemy.dialects import postgresql


# revision identifiers, used by Alembic.
revision: str = 'd4e5f6a7b8c9'
down_revision: Union[str, Sequence[str], None] = 'c1d2e3f4a5b6'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('adaptive_runs',
    sa.Column('session_id', sa.Uuid(), nullable=False),
    sa.Column('policy', sa.String(length=16), nullable=False),
    sa.Column('bound', sa.String(length=24), nullable=False),
    sa.Column('delta', sa.Float(), nullable=False),
    sa.Column('target_halfwidth', sa.Float(), nullable=False),
    sa.Column('check_every', sa.Integer(), nullable=False),
    sa.Column('pilot', sa.Integer(), nullable=False),
    sa.Column('checks_done', sa.Integer(), nullable=False),
    sa.Column('item_parameters', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('history_models', sa.Integer(), nullable=False),
    sa.Column('estimate', sa.Float(), nullable=True),
    sa.Column('halfwidth', sa.Float(), nullable=True),
    sa.Column('n_scored', sa.Integer(), nullable=False),
    sa.Column('stop_reason', sa.String(length=16), nullable=True),
    sa.ForeignKeyConstraint(['session_id'], ['eval_sessions.id'], name=op.f('fk_adaptive_runs_session_id_eval_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', name=op.f('pk_adaptive_runs'))
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table('adaptive_runs')
