"""Background jobs: the shared price table and the index of trades in flight.

`price_records` holds the last known price of each (symbol, fiat) with when it was
recorded: the refresh job (`walletcore_jobs`, or in-process on SQLite) saves it once for
the whole deployment and every HTTP process reads it. Empty after the upgrade: the first
refresh fills it. `ix_trades_in_flight` (partial: approved and executing trades only) is
what the settlement job reads.

Revision ID: 0004
Revises: 0003
Create Date: 2026-04-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Types spelled out here, not imported, so this revision never changes under later code.
MONEY = sa.Numeric(78, 18).with_variant(sa.String(80), "sqlite")  # exact text on SQLite
WHEN = sa.DateTime(timezone=True)
_IN_FLIGHT = "status IN ('approved', 'executing')"


def upgrade() -> None:
    op.create_table(
        "price_records",
        sa.Column("symbol", sa.String(16), nullable=False),
        sa.Column("fiat", sa.String(8), nullable=False),
        sa.Column("price", MONEY, nullable=False),
        sa.Column("recorded_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("symbol", "fiat", name="pk_price_records"),
    )
    op.create_index(
        "ix_trades_in_flight",
        "trades",
        ["created_at", "trade_id"],
        postgresql_where=sa.text(_IN_FLIGHT),
        sqlite_where=sa.text(_IN_FLIGHT),
    )


def downgrade() -> None:
    op.drop_index("ix_trades_in_flight", table_name="trades")
    op.drop_table("price_records")
