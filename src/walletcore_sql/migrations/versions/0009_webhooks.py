"""Signed webhooks: one endpoint per api client, and the log of its delivery attempts.

`webhook_endpoints` holds what the operator set (URL, the secrets sealed under the master
key, paused, disabled by a `410` and why) and how far delivery got (the cursor: the
position of the last event delivered or given up; the head's attempts and next attempt;
the lease of the worker delivering it), with the partial index `ix_webhook_endpoints_due`
the delivery job reads. `webhook_attempts` is the delivery log (status or error, duration,
result; never a secret, never the body). Both empty after the upgrade.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here, not imported, so this revision never changes under later code.
WHEN = sa.DateTime(timezone=True)
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_ACTIVE = "NOT paused AND disabled_reason IS NULL"
_RESULTS = "('delivered', 'retrying', 'given_up', 'disabled')"


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        sa.Column("previous_secret", sa.LargeBinary(), nullable=True),
        sa.Column("previous_until", WHEN, nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("disabled_at", WHEN, nullable=True),
        sa.Column("cursor_tx", sa.BigInteger(), nullable=True),
        sa.Column("cursor_seq", sa.BigInteger(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", WHEN, nullable=True),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_until", WHEN, nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("client_id", name="pk_webhook_endpoints"),
        sa.ForeignKeyConstraint(
            ["client_id"],
            ["api_clients.client_id"],
            name="fk_webhook_endpoints_client_id_api_clients",
        ),
        sa.CheckConstraint(
            "(cursor_tx IS NULL) = (cursor_seq IS NULL)", name=op.f("ck_webhook_endpoints_cursor")
        ),
        sa.CheckConstraint("attempts >= 0", name=op.f("ck_webhook_endpoints_attempts")),
    )
    op.create_index(
        "ix_webhook_endpoints_due",
        "webhook_endpoints",
        ["next_attempt_at", "client_id"],
        postgresql_where=sa.text(_ACTIVE),
        sqlite_where=sa.text(_ACTIVE),
    )
    op.create_table(
        "webhook_attempts",
        sa.Column("attempt_id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(48), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", WHEN, nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(32), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("result", sa.String(16), nullable=False),
        sa.Column("next_attempt_at", WHEN, nullable=True),
        sa.PrimaryKeyConstraint("attempt_id", name="pk_webhook_attempts"),
        sa.CheckConstraint(f"result IN {_RESULTS}", name=op.f("ck_webhook_attempts_result")),
    )
    op.create_index(
        "ix_webhook_attempts_client", "webhook_attempts", ["client_id", "at", "attempt_id"]
    )
    op.create_index(
        "ix_webhook_attempts_event",
        "webhook_attempts",
        ["client_id", "event_id", "at", "attempt_id"],
    )
    op.create_index("ix_webhook_attempts_at", "webhook_attempts", ["at", "attempt_id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_attempts_at", table_name="webhook_attempts")
    op.drop_index("ix_webhook_attempts_event", table_name="webhook_attempts")
    op.drop_index("ix_webhook_attempts_client", table_name="webhook_attempts")
    op.drop_table("webhook_attempts")
    op.drop_index("ix_webhook_endpoints_due", table_name="webhook_endpoints")
    op.drop_table("webhook_endpoints")
