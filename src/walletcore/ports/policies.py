"""`PolicyStore`: withdrawal policies, the allowlist, velocity usage, held transfers'
approvals and the operators who give them (walletcore.domain.policies). On every unit of
work as `unit.policies`.

Rules every adapter keeps (`walletcore.testing.contracts.PolicyStorageContract` checks them):
- `lock` makes the rest of the write unit the only policy decision of that api client
  until the unit ends: PostgreSQL takes a transaction-scoped advisory lock on the client;
  where write units are serial already (SQLite's `BEGIN IMMEDIATE`, memory) nothing. A
  decision reads the usage, then counts the transfer, under it: concurrent transfers
  never sum over a velocity limit, across processes.
- Policy versions are append-only; `add_version` numbers them 1, 2, ... per client.
- Usage is keyed by (client, request id): counting one request again replaces its row.
- An approval moves by compare-and-set on (status, approvers): of two operators racing,
  one wins and the other sees its move refused.
- Every method that takes `entry` appends it in the same unit, only when it changed
  something.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.policies import (
    AllowlistEntry,
    Approval,
    ApprovalStatus,
    Operator,
    Policy,
    PolicyVersion,
    Usage,
    WalletKind,
)


class PolicyStore(Protocol):
    # -- policies ------------------------------------------------------------------------
    async def add_version(
        self,
        client_id: str,
        policy: Policy,
        *,
        set_at: datetime,
        effective_at: datetime,
        set_by: str,
        entry: AuditEntry | None = None,
    ) -> PolicyVersion:
        """Store the next version of the client's policy (its number: the highest stored
        plus one, under the client's lock) and `entry`."""
        ...

    async def versions(self, client_id: str) -> list[PolicyVersion]:
        """Every version of the client's policy, oldest first."""
        ...

    async def cancel_version(
        self, client_id: str, version: int, now: datetime, *, entry: AuditEntry | None = None
    ) -> bool:
        """Remove a version not yet in force (`effective_at` after `now`); False (nothing
        written) when there is none such."""
        ...

    # -- the allowlist -------------------------------------------------------------------
    async def allow(self, item: AllowlistEntry, *, entry: AuditEntry | None = None) -> bool:
        """Add a destination; False (the standing entry kept, its cooling-off too) when
        the client has one for that chain, asset and address already."""
        ...

    async def disallow(
        self,
        client_id: str,
        chain: Chain,
        address: str,
        asset_id: int | None,
        *,
        entry: AuditEntry | None = None,
    ) -> bool:
        """Remove a destination at once; False when there was none."""
        ...

    async def allowlist(self, client_id: str, chain: Chain | None = None) -> list[AllowlistEntry]:
        """The client's destinations (of one chain), by chain, address, asset."""
        ...

    # -- decisions and velocity ----------------------------------------------------------
    async def lock(self, client_id: str) -> None:
        """Serialise the client's policy decisions until this write unit ends (module rules)."""
        ...

    async def count(self, usage: Usage) -> None:
        """Count a transfer against velocity limits (replacing the request's row)."""
        ...

    async def uncount(self, client_id: str, request_id: str) -> bool:
        """Give a transfer's count back (it was not signed); False when none was counted."""
        ...

    async def used(
        self,
        client_id: str,
        since: datetime,
        *,
        wallet: WalletKind | None = None,
        user_id: str | None = None,
    ) -> list[Usage]:
        """The client's counted transfers at or after `since` (of one wallet kind, of one
        user's wallet when `user_id` is given), oldest first."""
        ...

    async def prune_usage(self, before: datetime, limit: int) -> int:
        """Delete at most `limit` counts older than `before`; how many."""
        ...

    # -- approvals -----------------------------------------------------------------------
    async def add_approval(self, approval: Approval, *, entry: AuditEntry | None = None) -> bool:
        """Store a held transfer; False (nothing written) when its request has one."""
        ...

    async def approval(self, client_id: str, request_id: str) -> Approval | None:
        """The approval of a transfer, by its request id."""
        ...

    async def approval_by_id(self, approval_id: str) -> Approval | None: ...

    async def approvals(
        self,
        *,
        client_id: str | None = None,
        statuses: frozenset[ApprovalStatus] | None = None,
        limit: int = 100,
    ) -> list[Approval]:
        """Approvals (of one client, in some statuses), newest first, at most `limit`."""
        ...

    async def due_approvals(self, now: datetime, limit: int) -> list[Approval]:
        """Stored `pending` approvals whose time ran out at or before `now`, the earliest
        expiry first, at most `limit` (the expiry job's batch)."""
        ...

    async def move_approval(
        self, current: Approval, new: Approval, *, entry: AuditEntry | None = None
    ) -> bool:
        """Store `new` if the stored approval still has `current`'s status and approvers
        (compare-and-set), then `entry`."""
        ...

    # -- operators -----------------------------------------------------------------------
    async def add_operator(self, operator: Operator, *, entry: AuditEntry | None = None) -> bool:
        """Store a new operator; False when the name is taken."""
        ...

    async def operator(self, name: str) -> Operator | None: ...

    async def operators(self) -> list[Operator]:
        """Every operator, by name."""
        ...

    async def disable_operator(
        self, name: str, at: datetime, *, entry: AuditEntry | None = None
    ) -> bool:
        """Disable an active operator; False when none such."""
        ...


__all__ = ["PolicyStore"]
