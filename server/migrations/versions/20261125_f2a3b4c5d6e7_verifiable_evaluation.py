"""verifiable evaluation: hash-chained audit log, signed checkpoints, results ledger,
sample commitments and the exposure history that re-derives a sample

Revision ID: f2a3b4c5d6e7
Revises: e1f2a3b4c5d6
Create Date: 2026-11-25 09:00:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = 'f2a3b4c5d6e7'
down_revision: str | Sequence[str] | None = 'e1f2a3b4c5d6'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')
APPEND_ONLY = ("chain_checkpoints", "result_ledger")
"""New tables the database itself keeps append-only, like ``audit_log``."""


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.add_column(sa.Column('chain', sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column('prev_hash', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('row_hash', sa.String(length=64), nullable=True))
        batch_op.create_index(batch_op.f('ix_audit_log_chain_id'), ['chain', 'id'], unique=False)

    op.create_table('chain_checkpoints',
    sa.Column('id', BIG, autoincrement=True, nullable=False),
    sa.Column('log', sa.String(length=16), nullable=False),
    sa.Column('chain', sa.String(length=40), nullable=False),
    sa.Column('last_row_id', BIG, nullable=False),
    sa.Column('n_rows', BIG, nullable=False),
    sa.Column('head_hash', sa.String(length=64), nullable=False),
    sa.Column('prev_checkpoint_hash', sa.String(length=64), nullable=True),
    sa.Column('checkpoint_hash', sa.String(length=64), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('key_id', sa.String(length=64), nullable=False),
    sa.Column('signature', sa.String(length=128), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_chain_checkpoints'))
    )
    with op.batch_alter_table('chain_checkpoints', schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f('ix_chain_checkpoints_log_chain_id'), ['log', 'chain', 'id'], unique=False
        )

    op.create_table('result_ledger',
    sa.Column('id', BIG, autoincrement=True, nullable=False),
    sa.Column('chain', sa.String(length=40), nullable=False),
    sa.Column('prev_hash', sa.String(length=64), nullable=False),
    sa.Column('row_hash', sa.String(length=64), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('verdict_id', BIG, nullable=False),
    sa.Column('session_id', sa.Uuid(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('judge', sa.String(length=100), nullable=False),
    sa.Column('prompt_version', sa.String(length=40), nullable=False),
    sa.Column('score', sa.Integer(), nullable=True),
    sa.Column('method', sa.String(length=16), nullable=False),
    sa.Column('needs_review', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_result_ledger'))
    )
    with op.batch_alter_table('result_ledger', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_result_ledger_chain_id'), ['chain', 'id'], unique=False)
        batch_op.create_index(
            batch_op.f('ix_result_ledger_session_id_position'), ['session_id', 'position'],
            unique=False,
        )

    op.create_table('exposure_releases',
    sa.Column('id', BIG, autoincrement=True, nullable=False),
    sa.Column('org_id', sa.Uuid(), nullable=False),
    sa.Column('family_id', sa.Uuid(), nullable=False),
    sa.Column('item_id', sa.Uuid(), nullable=False),
    sa.Column('session_id', sa.Uuid(), nullable=True),
    sa.Column('exposed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('released_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_exposure_releases'))
    )
    with op.batch_alter_table('exposure_releases', schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f('ix_exposure_releases_org_id_released_at'), ['org_id', 'released_at'],
            unique=False,
        )

    with op.batch_alter_table('samples', schema=None) as batch_op:
        batch_op.add_column(sa.Column('drawn_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('source', JSON, nullable=True))
        batch_op.add_column(sa.Column('salt', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('commitment', sa.String(length=64), nullable=True))
    with op.batch_alter_table('sample_items', schema=None) as batch_op:
        batch_op.add_column(sa.Column('drawn_position', sa.Integer(), nullable=True))

    for table in APPEND_ONLY:
        _make_append_only(table)


def _make_append_only(table: str) -> None:
    """The database refuses UPDATE and DELETE (and TRUNCATE) on ``table``."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"CREATE FUNCTION {table}_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN RAISE EXCEPTION '{table} is append-only'; END $$"
        )
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {table}_append_only()"
        )
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {table}_append_only()"
        )
    else:
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_no_{event.lower()} BEFORE {event} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
            )


def downgrade() -> None:
    """Downgrade schema."""
    postgres = op.get_bind().dialect.name == "postgresql"
    for table in APPEND_ONLY:
        if postgres:
            op.execute(f"DROP FUNCTION IF EXISTS {table}_append_only() CASCADE")
    with op.batch_alter_table('sample_items', schema=None) as batch_op:
        batch_op.drop_column('drawn_position')
    with op.batch_alter_table('samples', schema=None) as batch_op:
        batch_op.drop_column('commitment')
        batch_op.drop_column('salt')
        batch_op.drop_column('source')
        batch_op.drop_column('drawn_at')
    op.drop_table('exposure_releases')
    op.drop_table('result_ledger')
    op.drop_table('chain_checkpoints')
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_audit_log_chain_id'))
        batch_op.drop_column('row_hash')
        batch_op.drop_column('prev_hash')
        batch_op.drop_column('chain')
