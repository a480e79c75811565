"""The transfer lifecycle (docs/transfers.md): a followed send may be `stuck` or `dropped`
on the way to `success` or `failed`, and a replaced send keeps every hash it had.

- `sends.chain_status` takes `stuck` and `dropped` (CHECK), and `ix_sends_following` covers
  the three states that are not final;
- `ix_sends_tx_hash` (client id, tx hash): `/txid` of a send's current hash;
- `send_hashes`: (client id, hash) -> X-Request-Id for every hash of a replaced send, so
  `/txid` of a replaced hash answers the transfer's outcome.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here, not imported, so this revision never changes under later code.
_OLD_PENDING = "chain_status = 'pending'"
_OLD_CHECK = (
    "chain_status IS NULL OR (chain_status IN ('pending', 'success', 'failed') "
    "AND state = 'finished' AND chain_checked_at IS NOT NULL "
    "AND (chain_status = 'pending') = (chain_final_at IS NULL))"
)
_FOLLOWED = "chain_status IN ('pending', 'stuck', 'dropped')"
_CHECK = (
    "chain_status IS NULL OR (chain_status IN ('pending', 'stuck', 'dropped', 'success', "
    "'failed') AND state = 'finished' AND chain_checked_at IS NOT NULL "
    "AND (chain_status IN ('pending', 'stuck', 'dropped')) = (chain_final_at IS NULL))"
)
_FOLLOWING = ["chain_checked_at", "created_at", "client_id", "request_id"]


def upgrade() -> None:
    op.drop_index("ix_sends_following", table_name="sends")
    with op.batch_alter_table("sends") as batch:
        batch.drop_constraint(op.f("ck_sends_chain_status"), type_="check")
        batch.create_check_constraint(op.f("ck_sends_chain_status"), sa.text(_CHECK))
    op.create_index(
        "ix_sends_following",
        "sends",
        _FOLLOWING,
        postgresql_where=sa.text(_FOLLOWED),
        sqlite_where=sa.text(_FOLLOWED),
    )
    op.create_index("ix_sends_tx_hash", "sends", ["client_id", "tx_hash"])
    op.create_table(
        "send_hashes",
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("tx_hash", sa.Text(), nullable=False),
        sa.Column("request_id", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["client_id", "request_id"],
            ["sends.client_id", "sends.request_id"],
            name=op.f("fk_send_hashes_client_id_sends"),
        ),
        sa.PrimaryKeyConstraint("client_id", "tx_hash", name=op.f("pk_send_hashes")),
    )


def downgrade() -> None:
    op.drop_table("send_hashes")
    op.drop_index("ix_sends_tx_hash", table_name="sends")
    op.drop_index("ix_sends_following", table_name="sends")
    # a send stuck or dropped reads as pending again
    op.execute(
        "UPDATE sends SET chain_status = 'pending' WHERE chain_status IN ('stuck', 'dropped')"
    )
    with op.batch_alter_table("sends") as batch:
        batch.drop_constraint(op.f("ck_sends_chain_status"), type_="check")
        batch.create_check_constraint(op.f("ck_sends_chain_status"), sa.text(_OLD_CHECK))
    op.create_index(
        "ix_sends_following",
        "sends",
        _FOLLOWING,
        postgresql_where=sa.text(_OLD_PENDING),
        sqlite_where=sa.text(_OLD_PENDING),
    )
