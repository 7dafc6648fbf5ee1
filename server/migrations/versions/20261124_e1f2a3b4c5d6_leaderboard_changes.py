"""leaderboard: a change counter kept by triggers (the cache's data version)

Revision ID: e1f2a3b4c5d6
Revises: d0e1f2a3b4c5
Create Date: 2026-11-24 19:00:00.000000
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 'e1f2a3b4c5d6'
down_revision: str | Sequence[str] | None = 'd0e1f2a3b4c5'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SLOTS = 16

STATEMENT_TRIGGERS = {
    "verdicts": "INSERT OR UPDATE OR DELETE OR TRUNCATE",
    "ranking_anchors": "INSERT OR UPDATE OR DELETE OR TRUNCATE",
    "registered_models": "INSERT OR UPDATE OR DELETE OR TRUNCATE",
    "organisations": "UPDATE OR DELETE OR TRUNCATE",
    "review_tasks": "INSERT OR DELETE OR TRUNCATE",
    "eval_sessions": "DELETE OR TRUNCATE",
}
"""Tables whose every write of these kinds may change the board: one bump per statement."""

ROW_TRIGGERS = {
    "eval_sessions_state": (
        "UPDATE", "eval_sessions",
        # only sessions on the board (scored, reviewed) or entering or leaving it: a session
        # opened, answered or expired does not invalidate every worker's board
        "(OLD.state IN ('scored', 'reviewed') OR NEW.state IN ('scored', 'reviewed'))"
        " AND (OLD.state IS DISTINCT FROM NEW.state"
        " OR OLD.model_id IS DISTINCT FROM NEW.model_id OR OLD.mode IS DISTINCT FROM NEW.mode)",
    ),
    "eval_sessions_scored": (
        "INSERT", "eval_sessions", "NEW.state IN ('scored', 'reviewed')",
    ),
    "review_tasks_state": ("UPDATE", "review_tasks", "OLD.state IS DISTINCT FROM NEW.state"),
    "items_discipline": (
        "UPDATE", "items", "OLD.discipline IS DISTINCT FROM NEW.discipline",
    ),
}
"""Tables written often in ways that do not matter (a delivery counts on its session, an
item is flagged): a bump only for the rows whose relevant columns changed."""


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('leaderboard_changes',
    sa.Column('slot', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('n', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.PrimaryKeyConstraint('slot', name=op.f('pk_leaderboard_changes'))
    )
    op.bulk_insert(
        sa.table('leaderboard_changes', sa.column('slot', sa.Integer), sa.column('n', sa.Integer)),
        [{'slot': slot, 'n': 0} for slot in range(SLOTS)],
    )
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite: the service computes its data version from the tables themselves
    op.execute(
        "CREATE FUNCTION leaderboard_changed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"UPDATE leaderboard_changes SET n = n + 1 WHERE slot = pg_backend_pid() % {SLOTS}; "
        "RETURN NULL; END $$"
    )
    for table, events in STATEMENT_TRIGGERS.items():
        op.execute(
            f"CREATE TRIGGER leaderboard_changed AFTER {events} ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION leaderboard_changed()"
        )
    for name, (event, table, condition) in ROW_TRIGGERS.items():
        op.execute(
            f"CREATE TRIGGER leaderboard_changed_{name} AFTER {event} ON {table} "
            f"FOR EACH ROW WHEN ({condition}) EXECUTE FUNCTION leaderboard_changed()"
        )


def downgrade() -> None:
    """Downgrade schema."""
    if op.get_bind().dialect.name == "postgresql":
        for name, (_, table, _) in ROW_TRIGGERS.items():
            op.execute(f"DROP TRIGGER leaderboard_changed_{name} ON {table}")
        for table in STATEMENT_TRIGGERS:
            op.execute(f"DROP TRIGGER leaderboard_changed ON {table}")
        op.execute("DROP FUNCTION leaderboard_changed()")
    op.drop_table('leaderboard_changes')
