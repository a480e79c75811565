"""One user per (api client, X-Request-Id) of `/create`.

`users.request_id` keeps the X-Request-Id of the `/create` that made the user, when the
caller sent one, under a unique index per api client (partial: rows without one are not
constrained). A repeated `/create` with the same X-Request-Id then stores nothing and is
answered 409 with the first user's id (docs/decisions.md, "Wallets"). Existing users get
NULL: they predate the rule.

Revision ID: 0003
Revises: 0002
Create Date: 2026-03-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("users", sa.Column("request_id", sa.String(255), nullable=True))
    op.create_index(
        "uq_users_request",
        "users",
        ["client_id", "request_id"],
        unique=True,
        postgresql_where=sa.text("request_id IS NOT NULL"),
        sqlite_where=sa.text("request_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("uq_users_request", table_name="users")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("request_id")
