"""Failed `/auth` counted in place on the api client, never a row per failure.

`api_clients` gets `auth_failures` (the failures since the client's last successful
`/auth`, 0 for the clients already there), `auth_failures_since` (the first of them) and
`auth_failed_at` (the latest failure). A flood of wrong keys then updates one row; an
unknown or malformed client id stores nothing (docs/security.md).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here, not imported, so this revision never changes under later code.
WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    # Plain ADD COLUMNs (a NOT NULL one with its default): no table copy on SQLite, whose
    # `api_clients` the users, wallets and sends refer to.
    op.add_column(
        "api_clients",
        sa.Column("auth_failures", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )
    op.add_column("api_clients", sa.Column("auth_failures_since", WHEN, nullable=True))
    op.add_column("api_clients", sa.Column("auth_failed_at", WHEN, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_clients") as batch:
        batch.drop_column("auth_failed_at")
        batch.drop_column("auth_failures_since")
        batch.drop_column("auth_failures")
