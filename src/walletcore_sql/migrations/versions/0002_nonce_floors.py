"""Nonce floors: the next nonce each (chain, address) was seen accepted at.

`nonce_floors` backs the cross-process nonce leases (`walletcore_sql.nonces`): a process
that holds the lease of an address (PostgreSQL: a session-level advisory lock; SQLite: a
`flock`ed file beside the database) reads the floor, and raises it when the node accepted
a transaction, so a second process (`walletcore serve --workers N`, another replica)
never takes a nonce already used, even from a node that lags. Only ever raised, never
lowered. Empty after the upgrade: the first send of each address reads the node.

Revision ID: 0002
Revises: 0001
Create Date: 2026-02-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "nonce_floors",
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("address", sa.String(128), nullable=False),
        sa.Column("next_nonce", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("chain", "address", name="pk_nonce_floors"),
        sa.CheckConstraint("next_nonce >= 0", name=op.f("ck_nonce_floors_next_nonce")),
    )


def downgrade() -> None:
    op.drop_table("nonce_floors")
