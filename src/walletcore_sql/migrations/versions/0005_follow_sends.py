"""Following sends on chain: a send's transaction status, for the `follow_sends` job.

`sends` gets `chain_status` (`pending` from the finish of a send the network accepted,
then `success` or `failed` once; NULL: not followed), `chain_checked_at` (when the chain
was last asked; the finish at first) and `chain_final_at`, under a CHECK (only finished
sends are followed; a final status has its instant), and the partial index
`ix_sends_following` (the pending ones, least recently checked first) the job reads.
Sends finished before the upgrade stay NULL: their records (format 1) lack the sender's
address the chain is asked with.

Revision ID: 0005
Revises: 0004
Create Date: 2026-04-15
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here, not imported, so this revision never changes under later code.
WHEN = sa.DateTime(timezone=True)
_PENDING = "chain_status = 'pending'"
_CHECK = (
    "chain_status IS NULL OR (chain_status IN ('pending', 'success', 'failed') "
    "AND state = 'finished' AND chain_checked_at IS NOT NULL "
    "AND (chain_status = 'pending') = (chain_final_at IS NULL))"
)


def upgrade() -> None:
    # SQLite cannot add a CHECK to a table: batch mode copies the table there (and alters
    # it in place on PostgreSQL).
    with op.batch_alter_table("sends") as batch:
        batch.add_column(sa.Column("chain_status", sa.String(16), nullable=True))
        batch.add_column(sa.Column("chain_checked_at", WHEN, nullable=True))
        batch.add_column(sa.Column("chain_final_at", WHEN, nullable=True))
        batch.create_check_constraint(op.f("ck_sends_chain_status"), sa.text(_CHECK))
    op.create_index(
        "ix_sends_following",
        "sends",
        ["chain_checked_at", "created_at", "client_id", "request_id"],
        postgresql_where=sa.text(_PENDING),
        sqlite_where=sa.text(_PENDING),
    )


def downgrade() -> None:
    op.drop_index("ix_sends_following", table_name="sends")
    with op.batch_alter_table("sends") as batch:
        batch.drop_constraint(op.f("ck_sends_chain_status"), type_="check")
        batch.drop_column("chain_final_at")
        batch.drop_column("chain_checked_at")
        batch.drop_column("chain_status")
