"""The initial schema: api clients, users, wallets, trades, sends, the audit log.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Types spelled out here, not imported, so this revision never changes under later code.
MONEY = sa.Numeric(78, 18).with_variant(sa.String(80), "sqlite")  # exact text on SQLite
WHEN = sa.DateTime(timezone=True)
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ID = 64

# Append-only: UPDATE and DELETE of an audit row fail (TRUNCATE stays an operator's tool).
_APPEND_ONLY_PG = (
    (
        "CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION 'audit_log is append-only'; END $$"
    ),
    (
        "CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log "
        "FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()"
    ),
)
_APPEND_ONLY_SQLITE = (
    (
        "CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log "
        "BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END"
    ),
    (
        "CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log "
        "BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END"
    ),
)


def upgrade() -> None:
    op.create_table(
        "api_clients",
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("key_hash", sa.String(128), nullable=False),
        sa.Column("enabled_assets", sa.JSON(), nullable=False),
        sa.Column("fee_payer", sa.String(16), nullable=False),
        sa.Column("asset_fee_payers", sa.JSON(), nullable=False),
        sa.Column("disabled", sa.Boolean(), nullable=False),
        sa.Column("key_generation", sa.Integer(), nullable=False),
        sa.Column("created_at", WHEN, nullable=True),
        sa.PrimaryKeyConstraint("client_id", name="pk_api_clients"),
    )
    op.create_table(
        "users",
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("user_id", sa.String(ID), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("client_id", "user_id", name="pk_users"),
        sa.ForeignKeyConstraint(
            ["client_id"], ["api_clients.client_id"], name="fk_users_client_id_api_clients"
        ),
    )
    op.create_table(
        "wallets",
        sa.Column("wallet_id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("owner", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(ID), nullable=True),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.Column("addresses", sa.JSON(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=True),
        sa.PrimaryKeyConstraint("wallet_id", name="pk_wallets"),
        sa.ForeignKeyConstraint(
            ["client_id"], ["api_clients.client_id"], name="fk_wallets_client_id_api_clients"
        ),
        sa.ForeignKeyConstraint(
            ["client_id", "user_id"],
            ["users.client_id", "users.user_id"],
            name="fk_wallets_client_id_user_id_users",
        ),
        sa.CheckConstraint("owner IN ('user', 'platform')", name=op.f("ck_wallets_owner")),
        sa.CheckConstraint(
            "(owner = 'user') = (user_id IS NOT NULL)", name=op.f("ck_wallets_owner_user")
        ),
    )
    op.create_index(
        "uq_wallets_user",
        "wallets",
        ["client_id", "user_id"],
        unique=True,
        postgresql_where=sa.text("owner = 'user'"),
        sqlite_where=sa.text("owner = 'user'"),
    )
    op.create_index(
        "uq_wallets_platform",
        "wallets",
        ["client_id"],
        unique=True,
        postgresql_where=sa.text("owner = 'platform'"),
        sqlite_where=sa.text("owner = 'platform'"),
    )
    op.create_table(
        "trades",
        sa.Column("trade_id", sa.String(ID), nullable=False),
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("user_id", sa.String(ID), nullable=False),
        sa.Column("side", sa.String(8), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("asset_id", sa.Integer(), nullable=False),
        sa.Column("symbol", sa.String(16), nullable=False),
        sa.Column("fiat", sa.String(8), nullable=False),
        sa.Column("fixed_leg", sa.String(8), nullable=False),
        sa.Column("quote_crypto_amount", MONEY, nullable=True),
        sa.Column("quote_fiat_amount", MONEY, nullable=True),
        sa.Column("quote_price", MONEY, nullable=False),
        sa.Column("quote_expires_at", WHEN, nullable=False),
        sa.Column("approved_crypto_amount", MONEY, nullable=True),
        sa.Column("approved_fiat_amount", MONEY, nullable=True),
        sa.Column("approved_price", MONEY, nullable=True),
        sa.Column("executed_crypto_amount", MONEY, nullable=True),
        sa.Column("executed_fiat_amount", MONEY, nullable=True),
        sa.Column("executed_price", MONEY, nullable=True),
        sa.Column("reference", sa.Text(), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("approved_at", WHEN, nullable=True),
        sa.Column("completed_at", WHEN, nullable=True),
        sa.PrimaryKeyConstraint("trade_id", name="pk_trades"),
        sa.ForeignKeyConstraint(
            ["client_id", "user_id"],
            ["users.client_id", "users.user_id"],
            name="fk_trades_client_id_user_id_users",
        ),
        sa.CheckConstraint("side IN ('buy', 'sell')", name=op.f("ck_trades_side")),
        sa.CheckConstraint(
            "status IN ('open', 'approved', 'executing', 'completed', 'failed', 'expired',"
            " 'cancelled')",
            name=op.f("ck_trades_status"),
        ),
        sa.CheckConstraint("fixed_leg IN ('crypto', 'fiat')", name=op.f("ck_trades_fixed_leg")),
    )
    op.create_index(
        "ix_trades_user_created",
        "trades",
        ["client_id", "user_id", sa.text("created_at DESC"), sa.text("trade_id DESC")],
    )
    op.create_index(
        "ix_trades_user_side_status_created",
        "trades",
        [
            "client_id",
            "user_id",
            "side",
            "status",
            sa.text("created_at DESC"),
            sa.text("trade_id DESC"),
        ],
    )
    op.create_index(
        "ix_trades_open_expiry",
        "trades",
        ["client_id", "user_id", "quote_expires_at"],
        postgresql_where=sa.text("status = 'open'"),
        sqlite_where=sa.text("status = 'open'"),
    )
    op.create_table(
        "sends",
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("request_id", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("locked_until", WHEN, nullable=True),
        sa.Column("tx_hash", sa.Text(), nullable=True),
        sa.Column("raw_tx", sa.LargeBinary(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("client_id", "request_id", name="pk_sends"),
        sa.ForeignKeyConstraint(
            ["client_id"], ["api_clients.client_id"], name="fk_sends_client_id_api_clients"
        ),
        sa.CheckConstraint(
            "state IN ('started', 'signed', 'broadcast', 'finished')", name=op.f("ck_sends_state")
        ),
    )
    op.create_table(
        "audit_log",
        sa.Column("entry_id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("at", WHEN, nullable=False),
        sa.Column("client_id", sa.String(ID), nullable=True),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(ID), nullable=True),
        sa.Column("target", sa.Text(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("entry_id", name="pk_audit_log"),
    )
    postgres = op.get_context().dialect.name == "postgresql"
    for statement in _APPEND_ONLY_PG if postgres else _APPEND_ONLY_SQLITE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log")
        op.execute("DROP FUNCTION IF EXISTS audit_log_append_only()")
    op.drop_table("audit_log")
    op.drop_table("sends")
    op.drop_index("ix_trades_open_expiry", table_name="trades")
    op.drop_index("ix_trades_user_side_status_created", table_name="trades")
    op.drop_index("ix_trades_user_created", table_name="trades")
    op.drop_table("trades")
    op.drop_index("uq_wallets_platform", table_name="wallets")
    op.drop_index("uq_wallets_user", table_name="wallets")
    op.drop_table("wallets")
    op.drop_table("users")
    op.drop_table("api_clients")
