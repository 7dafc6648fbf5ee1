"""judging v2: human review queue, calibration sets, judge drift, calibration intervals

Revision ID: b8c9d0e1f2a3
Revises: a7b8c9d0e1f2
Create Date: 2026-11-24 05:00:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = 'b8c9d0e1f2a3'
down_revision: str | Sequence[str] | None = 'a7b8c9d0e1f2'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('calibration_sets',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('n', sa.Integer(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('created_by', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_calibration_sets')),
    sa.UniqueConstraint('name', 'version', name=op.f('uq_calibration_sets_name_version'))
    )
    op.create_table('review_audit_strata',
    sa.Column('discipline', sa.String(length=100), nullable=False),
    sa.Column('judge', sa.String(length=100), nullable=False),
    sa.Column('start', sa.Float(), nullable=False),
    sa.Column('seen', sa.BigInteger(), nullable=False),
    sa.Column('drawn', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('discipline', 'judge', name=op.f('pk_review_audit_strata'))
    )
    op.create_table('calibration_answers',
    sa.Column('set_id', sa.Uuid(), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False),
    sa.Column('question', sa.Text(), nullable=False),
    sa.Column('reference', sa.Text(), nullable=False),
    sa.Column('answer', sa.Text(), nullable=False),
    sa.Column('language', sa.String(length=16), nullable=False),
    sa.Column('human_score', sa.Integer(), nullable=False),
    sa.Column('discipline', sa.String(length=100), nullable=True),
    sa.Column('model_family', sa.String(length=100), nullable=True),
    sa.Column('cluster', sa.String(length=100), nullable=True),
    sa.ForeignKeyConstraint(['set_id'], ['calibration_sets.id'], name=op.f('fk_calibration_answers_set_id_calibration_sets'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('set_id', 'index', name=op.f('pk_calibration_answers'))
    )
    op.create_table('judge_drifts',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('judge', sa.String(length=100), nullable=False),
    sa.Column('prompt_version', sa.String(length=40), nullable=False),
    sa.Column('baseline_id', sa.Uuid(), nullable=False),
    sa.Column('run_id', sa.Uuid(), nullable=False),
    sa.Column('detail', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('cleared_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('cleared_by', sa.String(length=64), nullable=True),
    sa.ForeignKeyConstraint(['baseline_id'], ['judge_calibrations.id'], name=op.f('fk_judge_drifts_baseline_id_judge_calibrations')),
    sa.ForeignKeyConstraint(['run_id'], ['judge_calibrations.id'], name=op.f('fk_judge_drifts_run_id_judge_calibrations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_judge_drifts'))
    )
    with op.batch_alter_table('judge_drifts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_judge_drifts_judge'), ['judge'], unique=False)

    op.create_table('review_tasks',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('session_id', sa.Uuid(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('reason', sa.String(length=16), nullable=False),
    sa.Column('judge', sa.String(length=100), nullable=True),
    sa.Column('discipline', sa.String(length=100), nullable=False),
    sa.Column('required', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=8), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('closed_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['session_id', 'position'], ['answers.session_id', 'answers.position'], name=op.f('fk_review_tasks_session_id_answers'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_review_tasks')),
    sa.UniqueConstraint('session_id', 'position', name=op.f('uq_review_tasks_session_id_position'))
    )
    with op.batch_alter_table('review_tasks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_review_tasks_state_id'), ['state', 'id'], unique=False)

    op.create_table('review_skips',
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('reviewer', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['review_tasks.id'], name=op.f('fk_review_skips_task_id_review_tasks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('task_id', 'reviewer', name=op.f('pk_review_skips'))
    )
    with op.batch_alter_table('judge_calibrations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('set_id', sa.Uuid(), nullable=True))
        batch_op.add_column(sa.Column('model', sa.String(length=200), nullable=True))
        batch_op.add_column(
            sa.Column('kind', sa.String(length=8), nullable=False, server_default='full')
        )
        batch_op.add_column(sa.Column('kappa_low', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('kappa_high', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('weighted_low', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('weighted_high', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('scores', JSON, nullable=True))
        batch_op.create_index(batch_op.f('ix_judge_calibrations_set_id'), ['set_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_judge_calibrations_set_id_calibration_sets'), 'calibration_sets', ['set_id'], ['id'])



def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('judge_calibrations', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_judge_calibrations_set_id_calibration_sets'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_judge_calibrations_set_id'))
        batch_op.drop_column('scores')
        batch_op.drop_column('weighted_high')
        batch_op.drop_column('weighted_low')
        batch_op.drop_column('kappa_high')
        batch_op.drop_column('kappa_low')
        batch_op.drop_column('kind')
        batch_op.drop_column('model')
        batch_op.drop_column('set_id')

    op.drop_table('review_skips')
    with op.batch_alter_table('review_tasks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_review_tasks_state_id'))

    op.drop_table('review_tasks')
    with op.batch_alter_table('judge_drifts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_judge_drifts_judge'))

    op.drop_table('judge_drifts')
    op.drop_table('calibration_answers')
    op.drop_table('review_audit_strata')
    op.drop_table('calibration_sets')
