"""hardening: audit refusal counts, the operator organisation

Revision ID: e5f6a7b8c9d0
Revises: d4e5f6a7b8c9
Create Date: 2026-11-23 20:15:00.000000

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = 'e5f6a7b8c9d0'
down_revision: Union[str, Sequence[str], None] = 'd4e5f6a7b8c9'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    # Plain ADD COLUMN (no batch copy on SQLite, which would drop the audit triggers).
    op.add_column('audit_log', sa.Column('repeats', sa.Integer(), server_default='1', nullable=False))
    op.add_column(
        'organisations',
        sa.Column('is_operator', sa.Boolean(), server_default=sa.text('false'), nullable=False),
    )
    op.create_index(
        'uq_organisations_one_operator',
        'organisations',
        ['is_operator'],
        unique=True,
        postgresql_where=sa.text('is_operator'),
        sqlite_where=sa.text('is_operator'),
    )
    # Platform roles (admin, auditor) now belong to the operator's organisation only. An
    # existing deployment whose live admin keys all sit in one organisation keeps them
    # working: that organisation becomes the operator.
    op.execute(
        "UPDATE organisations SET is_operator = true WHERE id IN ("
        " SELECT org_id FROM api_keys WHERE role = 'admin' AND revoked_at IS NULL)"
        " AND (SELECT count(DISTINCT org_id) FROM api_keys"
        " WHERE role = 'admin' AND revoked_at IS NULL) = 1"
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_index('uq_organisations_one_operator', table_name='organisations')
    with op.batch_alter_table('organisations', schema=None) as batch_op:
        batch_op.drop_column('is_operator')
    # SQLite cannot drop a column of a table with triggers without a copy; leave it there.
    if op.get_context().dialect.name != 'sqlite':
        op.drop_column('audit_log', 'repeats')
