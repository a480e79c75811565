"""Settlement of a trade's crypto leg (walletcore.domain.settlement, docs/settlement.md).

- `settlements`: one row per trade that moves coins, keyed by (client, trade), moved by
  compare-and-set on (status, attempt), with the partial index of the statuses the jobs
  work on (`ix_settlements_due`), the partial index of a user's holding sells
  (`ix_settlements_held`) and a client's newest first (`ix_settlements_listing`);
- `sends` gets what a user's send takes out of the wallet (`spend_user_id`,
  `spend_asset_id`, `spend_units`; NULL for the sends already there: none is counted),
  with the partial index of those in flight (`ix_sends_spending`);
- `desk_pauses`: the deliveries of an asset paused for an api client, one row per
  (client, asset) (walletcore.domain.desk).

Nothing is dropped or rewritten: an upgrade only adds, and the new table starts empty.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here, not imported, so this revision never changes under later code.
WHEN = sa.DateTime(timezone=True)
UNITS = sa.Numeric(78, 0).with_variant(sa.String(79), "sqlite")  # exact text on SQLite
ID = 64
_STATUSES = (
    "('reserved', 'awaiting_password', 'queued', 'short', 'sent', 'settled', 'failed', 'released')"
)
_DUE = "status IN ('reserved', 'queued', 'short', 'sent', 'failed')"
_HOLDING = "side = 'sell' AND status IN ('reserved', 'awaiting_password', 'sent', 'failed')"
_SPENDING = (
    "spend_user_id IS NOT NULL AND (state IN ('signed', 'broadcast') "
    "OR chain_status IN ('pending', 'stuck', 'dropped'))"
)


def upgrade() -> None:
    op.create_table(
        "settlements",
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("trade_id", sa.String(ID), nullable=False),
        sa.Column("user_id", sa.String(ID), nullable=False),
        sa.Column("side", sa.String(8), nullable=False),
        sa.Column("asset_id", sa.Integer(), nullable=False),
        sa.Column("units", UNITS, nullable=False),
        sa.Column("fee_units", UNITS, nullable=False),
        sa.Column("fee_asset_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("tx_hash", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("due_at", WHEN, nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("client_id", "trade_id", name="pk_settlements"),
        sa.ForeignKeyConstraint(
            ["client_id"], ["api_clients.client_id"], name="fk_settlements_client_id_api_clients"
        ),
        sa.ForeignKeyConstraint(
            ["client_id", "user_id"],
            ["users.client_id", "users.user_id"],
            name="fk_settlements_client_id_user_id_users",
        ),
        sa.CheckConstraint("side IN ('buy', 'sell')", name=op.f("ck_settlements_side")),
        sa.CheckConstraint(f"status IN {_STATUSES}", name=op.f("ck_settlements_status")),
        sa.CheckConstraint("attempt >= 0", name=op.f("ck_settlements_attempt")),
    )
    op.create_index(
        "ix_settlements_due",
        "settlements",
        ["due_at", "trade_id"],
        postgresql_where=sa.text(_DUE),
        sqlite_where=sa.text(_DUE),
    )
    op.create_index(
        "ix_settlements_held",
        "settlements",
        ["client_id", "user_id"],
        postgresql_where=sa.text(_HOLDING),
        sqlite_where=sa.text(_HOLDING),
    )
    op.create_index(
        "ix_settlements_listing",
        "settlements",
        ["client_id", sa.text("created_at DESC"), sa.text("trade_id DESC")],
    )

    op.create_table(
        "desk_pauses",
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("asset_id", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("paused_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("client_id", "asset_id", name="pk_desk_pauses"),
        sa.ForeignKeyConstraint(
            ["client_id"], ["api_clients.client_id"], name="fk_desk_pauses_client_id_api_clients"
        ),
    )

    # Nullable columns only: added in place on both databases.
    op.add_column("sends", sa.Column("spend_user_id", sa.String(ID), nullable=True))
    op.add_column("sends", sa.Column("spend_asset_id", sa.Integer(), nullable=True))
    op.add_column("sends", sa.Column("spend_units", UNITS, nullable=True))
    op.create_index(
        "ix_sends_spending",
        "sends",
        ["client_id", "spend_user_id", "spend_asset_id"],
        postgresql_where=sa.text(_SPENDING),
        sqlite_where=sa.text(_SPENDING),
    )


def downgrade() -> None:
    op.drop_index("ix_sends_spending", table_name="sends")
    with op.batch_alter_table("sends") as batch:
        batch.drop_column("spend_units")
        batch.drop_column("spend_asset_id")
        batch.drop_column("spend_user_id")
    op.drop_table("desk_pauses")
    op.drop_index("ix_settlements_listing", table_name="settlements")
    op.drop_index("ix_settlements_held", table_name="settlements")
    op.drop_index("ix_settlements_due", table_name="settlements")
    op.drop_table("settlements")
