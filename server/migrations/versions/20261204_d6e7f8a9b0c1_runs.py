"""runs: evaluation runs driven by the server and their session slots

Revision ID: d6e7f8a9b0c1
Revises: c5d6e7f8a9b0
Create Date: 2026-12-04 18:52:08.985677
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = 'd6e7f8a9b0c1'
down_revision: str | Sequence[str] | None = 'c5d6e7f8a9b0'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('runs',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('org_id', sa.Uuid(), nullable=False),
    sa.Column('model_id', sa.Uuid(), nullable=False),
    sa.Column('created_by', sa.String(length=64), nullable=False),
    sa.Column('created_role', sa.String(length=16), nullable=False),
    sa.Column('mode', sa.String(length=16), nullable=False),
    sa.Column('sessions', sa.Integer(), nullable=False),
    sa.Column('n_items', sa.Integer(), nullable=True),
    sa.Column('cost_cap_usd', sa.Float(), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('stop_reason', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('answers', sa.Integer(), nullable=False),
    sa.Column('prompt_tokens', sa.BigInteger(), nullable=False),
    sa.Column('completion_tokens', sa.BigInteger(), nullable=False),
    sa.Column('cost_usd', sa.Float(), nullable=False),
    sa.Column('reserved_usd', sa.Float(), nullable=False),
    sa.Column('failures', JSON, nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['registered_models.id'], name=op.f('fk_runs_model_id_registered_models'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['org_id'], ['organisations.id'], name=op.f('fk_runs_org_id_organisations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runs'))
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runs_model_id'), ['model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_org_id'), ['org_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_state'), ['state'], unique=False)

    op.create_table('run_slots',
    sa.Column('run_id', sa.Uuid(), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False),
    sa.Column('session_id', sa.Uuid(), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('lease_owner', sa.String(length=64), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_run_slots_run_id_runs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['session_id'], ['eval_sessions.id'], name=op.f('fk_run_slots_session_id_eval_sessions'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('run_id', 'index', name=op.f('pk_run_slots'))
    )
    with op.batch_alter_table('run_slots', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_run_slots_state'), ['state'], unique=False)



def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('run_slots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_slots_state'))

    op.drop_table('run_slots')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_runs_state'))
        batch_op.drop_index(batch_op.f('ix_runs_org_id'))
        batch_op.drop_index(batch_op.f('ix_runs_model_id'))

    op.drop_table('runs')
