"""Deposits and the event feed (docs/events.md; docs/storage.md, "Deposits and the event
feed").

- `watched_addresses` (chain, address) -> whose: every address a wallet was stored with,
  what the deposit scan watches; back-filled here from `wallets.addresses` (the first
  wallet stored with an address keeps it, as the stores do from now on);
- `deposits`: one row per credit found, unique by (chain, tx hash, position), with the
  partial index of the `seen` ones the settling pass reads, and the indexes of a
  client's (and a user's) newest;
- `scan_cursors`: how far each chain was scanned;
- `events`: the feed, written with the change it tells of; `tx` is the writing
  transaction's id on PostgreSQL (`pg_current_xact_id()`, the column's default), 0 on
  SQLite, and `seq` a row number never reused (AUTOINCREMENT on SQLite).

Nothing is dropped or rewritten: an upgrade only adds, and the back-fill is one
INSERT ... SELECT.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here, not imported, so this revision never changes under later code.
WHEN = sa.DateTime(timezone=True)
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
UNITS = sa.Numeric(78, 0).with_variant(sa.String(79), "sqlite")  # exact text on SQLite
ID = 64
_SEEN = "status = 'seen'"
_CURRENT_TX = {
    "postgresql": "(pg_current_xact_id()::text::bigint)",
    "sqlite": "0",
}
# Every address of every wallet, the oldest wallet first (an address never changes owner).
_BACKFILL = {
    "postgresql": (
        "INSERT INTO watched_addresses (chain, address, client_id, owner, user_id) "
        "SELECT a.key, a.value, w.client_id, w.owner, w.user_id "
        "FROM wallets AS w, json_each_text(w.addresses) AS a "
        "ORDER BY w.wallet_id, a.key "
        "ON CONFLICT (chain, address) DO NOTHING"
    ),
    "sqlite": (
        "INSERT OR IGNORE INTO watched_addresses (chain, address, client_id, owner, user_id) "
        "SELECT a.key, a.value, w.client_id, w.owner, w.user_id "
        "FROM wallets AS w, json_each(w.addresses) AS a "
        "ORDER BY w.wallet_id, a.key"
    ),
}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "watched_addresses",
        sa.Column("chain", sa.String(24), nullable=False),
        sa.Column("address", sa.String(128), nullable=False),
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("owner", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(ID), nullable=True),
        sa.PrimaryKeyConstraint("chain", "address", name="pk_watched_addresses"),
        sa.CheckConstraint(
            "owner IN ('user', 'platform')", name=op.f("ck_watched_addresses_owner")
        ),
    )
    op.execute(_BACKFILL[dialect])

    op.create_table(
        "deposits",
        sa.Column("deposit_id", sa.String(ID), nullable=False),
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("owner", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(ID), nullable=True),
        sa.Column("chain", sa.String(24), nullable=False),
        sa.Column("asset_id", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(128), nullable=False),
        sa.Column("tx_hash", sa.String(128), nullable=False),
        sa.Column("position", sa.String(255), nullable=False),
        sa.Column("amount", UNITS, nullable=False),
        sa.Column("sender", sa.Text(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("block_height", sa.BigInteger(), nullable=True),
        sa.Column("block_hash", sa.String(128), nullable=True),
        sa.Column("seen_at", WHEN, nullable=False),
        sa.Column("confirmed_at", WHEN, nullable=True),
        sa.Column("reversed_at", WHEN, nullable=True),
        sa.PrimaryKeyConstraint("deposit_id", name="pk_deposits"),
        sa.UniqueConstraint(
            "chain", "tx_hash", "position", name="uq_deposits_chain_tx_hash_position"
        ),
        sa.CheckConstraint(
            "status IN ('seen', 'confirmed', 'reversed')", name=op.f("ck_deposits_status")
        ),
        sa.CheckConstraint("owner IN ('user', 'platform')", name=op.f("ck_deposits_owner")),
        sa.CheckConstraint(
            "(block_height IS NULL) = (block_hash IS NULL)", name=op.f("ck_deposits_block")
        ),
    )
    op.create_index(
        "ix_deposits_unsettled",
        "deposits",
        ["chain", "seen_at", "tx_hash", "position"],
        postgresql_where=sa.text(_SEEN),
        sqlite_where=sa.text(_SEEN),
    )
    op.create_index(
        "ix_deposits_user_seen",
        "deposits",
        ["client_id", "user_id", sa.text("seen_at DESC"), sa.text("deposit_id DESC")],
    )
    op.create_index(
        "ix_deposits_client_seen",
        "deposits",
        ["client_id", sa.text("seen_at DESC"), sa.text("deposit_id DESC")],
    )

    op.create_table(
        "scan_cursors",
        sa.Column("chain", sa.String(24), nullable=False),
        sa.Column("height", sa.BigInteger(), nullable=False),
        sa.Column("block_hash", sa.String(128), nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("chain", name="pk_scan_cursors"),
    )

    op.create_table(
        "events",
        sa.Column("seq", BIG_ID, autoincrement=True, nullable=False),
        sa.Column(
            "tx", sa.BigInteger(), nullable=False, server_default=sa.text(_CURRENT_TX[dialect])
        ),
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("user_id", sa.String(ID), nullable=True),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("at", WHEN, nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_events"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_events_client_tx_seq", "events", ["client_id", "tx", "seq"])
    op.create_index("ix_events_client_user_tx_seq", "events", ["client_id", "user_id", "tx", "seq"])
    op.create_index("ix_events_at", "events", ["at"])


def downgrade() -> None:
    op.drop_index("ix_events_at", table_name="events")
    op.drop_index("ix_events_client_user_tx_seq", table_name="events")
    op.drop_index("ix_events_client_tx_seq", table_name="events")
    op.drop_table("events")
    op.drop_table("scan_cursors")
    op.drop_index("ix_deposits_client_seen", table_name="deposits")
    op.drop_index("ix_deposits_user_seen", table_name="deposits")
    op.drop_index("ix_deposits_unsettled", table_name="deposits")
    op.drop_table("deposits")
    op.drop_table("watched_addresses")
