"""answer reports: why the model's reply ended and the model's own latency, as the client
reports them with the answer

Revision ID: a3b4c5d6e7f8
Revises: f2a3b4c5d6e7
Create Date: 2026-12-03 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a3b4c5d6e7f8"
down_revision: str | Sequence[str] | None = "f2a3b4c5d6e7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table("answers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("finish_reason", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("reported_latency_s", sa.Float(), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("answers", schema=None) as batch_op:
        batch_op.drop_column("reported_latency_s")
        batch_op.drop_column("finish_reason")
