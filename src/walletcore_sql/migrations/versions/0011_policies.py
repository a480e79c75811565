"""Withdrawal policies (walletcore.domain.policies, docs/policies.md).

- `policy_versions`: the versions of each api client's policy, keyed by (client, version),
  the document as JSON;
- `allowlist`: the destinations an api client may send to, one per (client, chain,
  address, asset) by two partial unique indexes (`uq_allowlist_asset` for an asset,
  `uq_allowlist_chain` for any asset of the chain: a NULL asset is distinct in a unique
  index on both databases);
- `policy_usage`: the transfers counted against velocity limits, keyed by (client,
  request id), read by client and time (`ix_policy_usage_client_at`) and pruned oldest
  first (`ix_policy_usage_at`);
- `transfer_approvals`: transfers held for operators' approval, one per (client, request
  id), with the listings' indexes;
- `operators`: who approves, by name, with the SHA-256 of their key.

Nothing is dropped or rewritten: an upgrade only adds, and the new tables start empty (a
client without a policy is not guarded, as before).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here, not imported, so this revision never changes under later code.
WHEN = sa.DateTime(timezone=True)
UNITS = sa.Numeric(78, 0).with_variant(sa.String(79), "sqlite")  # exact text on SQLite
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite's rowid
ID = 64
_APPROVAL_STATUSES = "('pending', 'approved', 'rejected', 'expired')"
_WALLET_KINDS = "('user', 'platform')"


def _client_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["client_id"], ["api_clients.client_id"], name=f"fk_{table}_client_id_api_clients"
    )


def upgrade() -> None:
    op.create_table(
        "policy_versions",
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("set_at", WHEN, nullable=False),
        sa.Column("effective_at", WHEN, nullable=False),
        sa.Column("set_by", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("client_id", "version", name="pk_policy_versions"),
        _client_fk("policy_versions"),
        sa.CheckConstraint("version >= 1", name=op.f("ck_policy_versions_version")),
    )

    op.create_table(
        "allowlist",
        sa.Column("entry_id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("chain", sa.String(24), nullable=False),
        sa.Column("address", sa.String(128), nullable=False),
        sa.Column("asset_id", sa.Integer(), nullable=True),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("added_at", WHEN, nullable=False),
        sa.Column("usable_at", WHEN, nullable=False),
        sa.Column("added_by", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("entry_id", name="pk_allowlist"),
        _client_fk("allowlist"),
    )
    op.create_index(
        "uq_allowlist_asset",
        "allowlist",
        ["client_id", "chain", "address", "asset_id"],
        unique=True,
        postgresql_where=sa.text("asset_id IS NOT NULL"),
        sqlite_where=sa.text("asset_id IS NOT NULL"),
    )
    op.create_index(
        "uq_allowlist_chain",
        "allowlist",
        ["client_id", "chain", "address"],
        unique=True,
        postgresql_where=sa.text("asset_id IS NULL"),
        sqlite_where=sa.text("asset_id IS NULL"),
    )

    op.create_table(
        "policy_usage",
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("request_id", sa.String(255), nullable=False),
        sa.Column("wallet", sa.String(16), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(ID), nullable=True),
        sa.Column("chain", sa.String(24), nullable=False),
        sa.Column("asset_id", sa.Integer(), nullable=False),
        sa.Column("amount_units", UNITS, nullable=False),
        sa.Column("at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("client_id", "request_id", name="pk_policy_usage"),
        sa.CheckConstraint(f"wallet IN {_WALLET_KINDS}", name=op.f("ck_policy_usage_wallet")),
    )
    op.create_index("ix_policy_usage_client_at", "policy_usage", ["client_id", "at"])
    op.create_index("ix_policy_usage_at", "policy_usage", ["at"])

    op.create_table(
        "transfer_approvals",
        sa.Column("id", sa.String(ID), nullable=False),
        sa.Column("client_id", sa.String(ID), nullable=False),
        sa.Column("request_id", sa.String(255), nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("required", sa.Integer(), nullable=False),
        sa.Column("initiated_by", sa.Text(), nullable=False),
        sa.Column("wallet", sa.String(16), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(ID), nullable=True),
        sa.Column("chain", sa.String(24), nullable=False),
        sa.Column("asset_id", sa.Integer(), nullable=False),
        sa.Column("symbol", sa.String(16), nullable=False),
        sa.Column("decimals", sa.Integer(), nullable=False),
        sa.Column("amount_units", UNITS, nullable=False),
        sa.Column("recipient", sa.String(128), nullable=False),
        sa.Column("destination", sa.String(16), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("expires_at", WHEN, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("approvers", sa.Text(), nullable=False),
        sa.Column("decided_at", WHEN, nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_transfer_approvals"),
        _client_fk("transfer_approvals"),
        sa.UniqueConstraint(
            "client_id", "request_id", name="uq_transfer_approvals_client_id_request_id"
        ),
        sa.CheckConstraint(
            f"status IN {_APPROVAL_STATUSES}", name=op.f("ck_transfer_approvals_status")
        ),
        sa.CheckConstraint(f"wallet IN {_WALLET_KINDS}", name=op.f("ck_transfer_approvals_wallet")),
        sa.CheckConstraint("required >= 1", name=op.f("ck_transfer_approvals_required")),
    )
    op.create_index(
        "ix_transfer_approvals_listing",
        "transfer_approvals",
        ["client_id", "status", sa.text("created_at DESC"), sa.text("id DESC")],
    )
    op.create_index(
        "ix_transfer_approvals_created",
        "transfer_approvals",
        [sa.text("created_at DESC"), sa.text("id DESC")],
    )

    op.create_table(
        "operators",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("key_hash", sa.String(128), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("disabled_at", WHEN, nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_operators"),
    )


def downgrade() -> None:
    op.drop_table("operators")
    op.drop_index("ix_transfer_approvals_created", table_name="transfer_approvals")
    op.drop_index("ix_transfer_approvals_listing", table_name="transfer_approvals")
    op.drop_table("transfer_approvals")
    op.drop_index("ix_policy_usage_at", table_name="policy_usage")
    op.drop_index("ix_policy_usage_client_at", table_name="policy_usage")
    op.drop_table("policy_usage")
    op.drop_index("uq_allowlist_chain", table_name="allowlist")
    op.drop_index("uq_allowlist_asset", table_name="allowlist")
    op.drop_table("allowlist")
    op.drop_table("policy_versions")
