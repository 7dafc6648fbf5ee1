"""model endpoints: how the server calls a registered model (secret headers sealed)

Revision ID: c5d6e7f8a9b0
Revises: b4c5d6e7f8a9
Create Date: 2026-12-04 09:00:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = 'c5d6e7f8a9b0'
down_revision: str | Sequence[str] | None = 'b4c5d6e7f8a9'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('model_endpoints',
    sa.Column('model_id', sa.Uuid(), nullable=False),
    sa.Column('base_url', sa.String(length=2000), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('api', sa.String(length=16), nullable=False),
    sa.Column('paradigm', sa.String(length=16), nullable=False),
    sa.Column('adapter', sa.String(length=32), nullable=False),
    sa.Column('template', sa.String(length=32), nullable=True),
    sa.Column('system_prompt', sa.Text(), nullable=True),
    sa.Column('temperature', sa.Float(), nullable=False),
    sa.Column('max_tokens', sa.Integer(), nullable=True),
    sa.Column('stop', JSON, nullable=False),
    sa.Column('connect_timeout_s', sa.Float(), nullable=False),
    sa.Column('read_timeout_s', sa.Float(), nullable=False),
    sa.Column('concurrency', sa.Integer(), nullable=False),
    sa.Column('requests_per_minute', sa.Integer(), nullable=True),
    sa.Column('tokens_per_minute', sa.Integer(), nullable=True),
    sa.Column('secret_headers', sa.Text(), nullable=True),
    sa.Column('updated_by', sa.String(length=64), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['registered_models.id'], name=op.f('fk_model_endpoints_model_id_registered_models'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_id', name=op.f('pk_model_endpoints'))
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table('model_endpoints')
