"""`PolicyStore` on SQL: the versions of each api client's withdrawal policy, its allowlist,
the transfers counted against velocity limits, held transfers' approvals and the operators.

- `lock` is a transaction-scoped advisory lock on PostgreSQL
  (`pg_advisory_xact_lock`, its key a stable 64-bit hash of `walletcore.policy:<client
  id>`: `policy_lock_key`), released when the unit ends; on SQLite nothing: a write unit
  holds the database's write lock from its first statement to its end.
- `add_version` reads the client's highest version and inserts the next (under `lock`: two
  racing additions without it fail one unit on the primary key, never store one number
  twice). `cancel_version` is one `DELETE` of the version if it is not in force yet.
- `allow`, `add_approval` and `add_operator` are one `INSERT ... ON CONFLICT DO NOTHING`:
  the standing row is kept, and only the insert that stored appends its entry. The
  allowlist's key (client, chain, address, asset) is two partial unique indexes (one for
  an asset, one for any of the chain's), so the insert names no conflict target.
- `count` is one upsert on (client, request id): counting a request again replaces its row.
- `move_approval` is a compare-and-set: an `UPDATE` whose `WHERE` holds the expected
  status and approvers (their JSON text); a loser matches no row, writes nothing and
  appends no entry. `disable_operator` is one `UPDATE` of an active operator.
- Statuses are filtered with a fixed list of binds (padded with the first), never an
  expanding `IN`, so every statement can run in a write unit on the fast path.
- The allowlist and the operators are sorted here, as Python sorts strings, whatever the
  database's collation (a client's destinations and the operators are few).
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import BigInteger, bindparam, delete, func, select, tuple_, update

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
from walletcore.ports.policies import PolicyStore
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import (
    allowlist,
    operators,
    policy_usage,
    policy_versions,
    transfer_approvals,
)

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

#: What a policy lock's key is derived from, before the client id.
LOCK_SCOPE = "walletcore.policy:"


def policy_lock_key(client_id: str) -> int:
    """The advisory lock key of a client's policy decisions: a signed 64-bit integer, the
    same in every process and release."""
    digest = hashlib.sha256((LOCK_SCOPE + client_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


_V = policy_versions.c
_VERSIONS = select(policy_versions).where(_V.client_id == bind("client_id")).order_by(_V.version)
_HIGHEST = select(func.max(_V.version).label("highest")).where(_V.client_id == bind("client_id"))
_ADD_VERSION = policy_versions.insert()
_CANCEL = delete(policy_versions).where(
    _V.client_id == bind("client_id"),
    _V.version == bind("version"),
    _V.effective_at > bind("now"),
)

_A = allowlist.c
_DESTINATION = (
    _A.client_id == bind("client_id"),
    _A.chain == bind("chain"),
    _A.address == bind("address"),
)
_DISALLOW_ASSET = delete(allowlist).where(*_DESTINATION, _A.asset_id == bind("asset_id"))
_DISALLOW_CHAIN = delete(allowlist).where(*_DESTINATION, _A.asset_id.is_(None))
_ALLOWLIST = select(allowlist).where(_A.client_id == bind("client_id"))
_ALLOWLIST_OF_CHAIN = _ALLOWLIST.where(_A.chain == bind("chain"))

#: The lock of a client's decisions until the unit ends (PostgreSQL; `lock`).
_LOCK = select(func.pg_advisory_xact_lock(bindparam("b_key", type_=BigInteger())))

_U = policy_usage.c
_USAGE_KEY = (_U.client_id == bind("client_id"), _U.request_id == bind("request_id"))
_UNCOUNT = delete(policy_usage).where(*_USAGE_KEY)
_OLDEST_USAGE = (
    select(_U.client_id, _U.request_id)
    .where(_U.at < bind("before"))
    .order_by(_U.at, _U.client_id, _U.request_id)
    .limit(bind("limit"))
)
_PRUNE = delete(policy_usage).where(tuple_(_U.client_id, _U.request_id).in_(_OLDEST_USAGE))


def _used(by_wallet: bool, by_user: bool) -> Any:
    query = select(policy_usage).where(_U.client_id == bind("client_id"), _U.at >= bind("since"))
    if by_wallet:
        query = query.where(_U.wallet == bind("wallet"))
    if by_user:
        query = query.where(_U.user_id == bind("user_id"))
    return query.order_by(_U.at, _U.request_id)


#: (by wallet kind, by user) -> the windows' query.
_USED = {(w, u): _used(w, u) for w in (False, True) for u in (False, True)}

_T = transfer_approvals.c
_APPROVAL = select(transfer_approvals).where(
    _T.client_id == bind("client_id"), _T.request_id == bind("request_id")
)
_APPROVAL_BY_ID = select(transfer_approvals).where(_T.id == bind("id"))
_MOVE_APPROVAL = update(transfer_approvals).where(
    _T.id == bind("id"),
    _T.status == bind("expected_status"),
    _T.approvers == bind("expected_approvers"),
)
_DUE_APPROVALS = (
    select(transfer_approvals)
    .where(_T.status == bind("status"), _T.expires_at <= bind("now"))
    .order_by(_T.expires_at, _T.id)
    .limit(bind("limit"))
)
#: The binds of a statuses filter: one per status, padded with the first.
_STATUS_BINDS = tuple(f"status_{n}" for n in range(len(ApprovalStatus)))


def _approvals(by_client: bool, by_status: bool) -> Any:
    query = select(transfer_approvals)
    if by_client:
        query = query.where(_T.client_id == bind("client_id"))
    if by_status:
        query = query.where(_T.status.in_([bind(name) for name in _STATUS_BINDS]))
    return query.order_by(_T.created_at.desc(), _T.id.desc()).limit(bind("limit"))


#: (by client, by status) -> the listing's query.
_APPROVALS = {(c, s): _approvals(c, s) for c in (False, True) for s in (False, True)}

_O = operators.c
_OPERATOR = select(operators).where(_O.name == bind("name"))
_OPERATORS = select(operators)
_DISABLE = update(operators).where(_O.name == bind("name"), _O.disabled_at.is_(None))


def _allow_insert(database: Database) -> Any:
    # no conflict target: the key is two partial unique indexes (module rules)
    return database.insert(allowlist).on_conflict_do_nothing()


def _usage_upsert(database: Database) -> Any:
    insert = database.insert(policy_usage)
    return insert.on_conflict_do_update(
        index_elements=["client_id", "request_id"],
        set_={
            c.name: insert.excluded[c.name]
            for c in policy_usage.columns
            if c.name not in ("client_id", "request_id")
        },
    )


def _approval_insert(database: Database) -> Any:
    # no conflict target: the id and the (client, request id) are both keys
    return database.insert(transfer_approvals).on_conflict_do_nothing()


def _operator_insert(database: Database) -> Any:
    return database.insert(operators).on_conflict_do_nothing(index_elements=["name"])


class SqlPolicies(PolicyStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

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
        self._unit.writer()
        row = await self._unit.one(_HIGHEST, {"b_client_id": client_id})
        highest = 0 if row is None or row["highest"] is None else int(row["highest"])
        version = PolicyVersion(client_id, highest + 1, policy, set_at, effective_at, set_by)
        await self._unit.run(_ADD_VERSION, rows.policy_version_values(version))
        if entry is not None:
            await self._unit.audit.append(entry)
        return version

    async def versions(self, client_id: str) -> list[PolicyVersion]:
        found = await self._unit.all(_VERSIONS, {"b_client_id": client_id})
        return [rows.policy_version_from(row) for row in found]

    async def cancel_version(
        self, client_id: str, version: int, now: datetime, *, entry: AuditEntry | None = None
    ) -> bool:
        self._unit.writer()
        params = {"b_client_id": client_id, "b_version": version, "b_now": now}
        removed = (await self._unit.run(_CANCEL, params)).rowcount == 1
        if removed and entry is not None:
            await self._unit.audit.append(entry)
        return bool(removed)

    # -- the allowlist -------------------------------------------------------------------
    async def allow(self, item: AllowlistEntry, *, entry: AuditEntry | None = None) -> bool:
        self._unit.writer()
        statement = self._unit.upsert(_allow_insert)
        stored = (await self._unit.run(statement, rows.allowlist_values(item))).rowcount == 1
        if stored and entry is not None:
            await self._unit.audit.append(entry)
        return bool(stored)

    async def disallow(
        self,
        client_id: str,
        chain: Chain,
        address: str,
        asset_id: int | None,
        *,
        entry: AuditEntry | None = None,
    ) -> bool:
        self._unit.writer()
        params: dict[str, Any] = {
            "b_client_id": client_id,
            "b_chain": Chain(chain).value,
            "b_address": address,
        }
        if asset_id is None:
            statement = _DISALLOW_CHAIN
        else:
            statement, params["b_asset_id"] = _DISALLOW_ASSET, asset_id
        removed = (await self._unit.run(statement, params)).rowcount == 1
        if removed and entry is not None:
            await self._unit.audit.append(entry)
        return bool(removed)

    async def allowlist(self, client_id: str, chain: Chain | None = None) -> list[AllowlistEntry]:
        if chain is None:
            found = await self._unit.all(_ALLOWLIST, {"b_client_id": client_id})
        else:
            params = {"b_client_id": client_id, "b_chain": Chain(chain).value}
            found = await self._unit.all(_ALLOWLIST_OF_CHAIN, params)
        return sorted((rows.allowlist_from(row) for row in found), key=_allowlist_order)

    # -- decisions and velocity ----------------------------------------------------------
    async def lock(self, client_id: str) -> None:
        self._unit.writer()
        if not self._unit.database.is_sqlite:
            await self._unit.one(_LOCK, {"b_key": policy_lock_key(client_id)})

    async def count(self, usage: Usage) -> None:
        self._unit.writer()
        await self._unit.run(self._unit.upsert(_usage_upsert), rows.usage_values(usage))

    async def uncount(self, client_id: str, request_id: str) -> bool:
        self._unit.writer()
        params = {"b_client_id": client_id, "b_request_id": request_id}
        return bool((await self._unit.run(_UNCOUNT, params)).rowcount == 1)

    async def used(
        self,
        client_id: str,
        since: datetime,
        *,
        wallet: WalletKind | None = None,
        user_id: str | None = None,
    ) -> list[Usage]:
        params: dict[str, Any] = {"b_client_id": client_id, "b_since": since}
        if wallet is not None:
            params["b_wallet"] = WalletKind(wallet).value
        if user_id is not None:
            params["b_user_id"] = user_id
        query = _USED[wallet is not None, user_id is not None]
        return [rows.usage_from(row) for row in await self._unit.all(query, params)]

    async def prune_usage(self, before: datetime, limit: int) -> int:
        self._unit.writer()
        result = await self._unit.run(_PRUNE, {"b_before": before, "b_limit": max(limit, 0)})
        return int(result.rowcount)

    # -- approvals -----------------------------------------------------------------------
    async def add_approval(self, approval: Approval, *, entry: AuditEntry | None = None) -> bool:
        self._unit.writer()
        statement = self._unit.upsert(_approval_insert)
        stored = (await self._unit.run(statement, rows.approval_values(approval))).rowcount == 1
        if stored and entry is not None:
            await self._unit.audit.append(entry)
        return bool(stored)

    async def approval(self, client_id: str, request_id: str) -> Approval | None:
        params = {"b_client_id": client_id, "b_request_id": request_id}
        row = await self._unit.one(_APPROVAL, params)
        return None if row is None else rows.approval_from(row)

    async def approval_by_id(self, approval_id: str) -> Approval | None:
        row = await self._unit.one(_APPROVAL_BY_ID, {"b_id": approval_id})
        return None if row is None else rows.approval_from(row)

    async def approvals(
        self,
        *,
        client_id: str | None = None,
        statuses: frozenset[ApprovalStatus] | None = None,
        limit: int = 100,
    ) -> list[Approval]:
        if statuses is not None and not statuses:
            return []
        params: dict[str, Any] = {"b_limit": max(limit, 0)}
        if client_id is not None:
            params["b_client_id"] = client_id
        if statuses is not None:
            wanted = sorted(ApprovalStatus(s).value for s in statuses)
            padded = wanted + [wanted[0]] * (len(_STATUS_BINDS) - len(wanted))
            params.update({f"b_{name}": value for name, value in zip(_STATUS_BINDS, padded)})
        query = _APPROVALS[client_id is not None, statuses is not None]
        return [rows.approval_from(row) for row in await self._unit.all(query, params)]

    async def due_approvals(self, now: datetime, limit: int) -> list[Approval]:
        params = {
            "b_status": ApprovalStatus.PENDING.value,
            "b_now": now,
            "b_limit": max(limit, 0),
        }
        return [rows.approval_from(row) for row in await self._unit.all(_DUE_APPROVALS, params)]

    async def move_approval(
        self, current: Approval, new: Approval, *, entry: AuditEntry | None = None
    ) -> bool:
        if (new.id, new.client_id, new.request_id) != (
            current.id,
            current.client_id,
            current.request_id,
        ):
            raise ValueError("an approval moves within its own transfer")
        self._unit.writer()
        values = rows.approval_move_values(new)
        values.update(
            b_id=current.id,
            b_expected_status=ApprovalStatus(current.status).value,
            b_expected_approvers=rows.approvers_text(current.approvers),
        )
        moved = (await self._unit.run(_MOVE_APPROVAL, values)).rowcount == 1
        if moved and entry is not None:
            await self._unit.audit.append(entry)
        return bool(moved)

    # -- operators -----------------------------------------------------------------------
    async def add_operator(self, operator: Operator, *, entry: AuditEntry | None = None) -> bool:
        self._unit.writer()
        statement = self._unit.upsert(_operator_insert)
        stored = (await self._unit.run(statement, rows.operator_values(operator))).rowcount == 1
        if stored and entry is not None:
            await self._unit.audit.append(entry)
        return bool(stored)

    async def operator(self, name: str) -> Operator | None:
        row = await self._unit.one(_OPERATOR, {"b_name": name})
        return None if row is None else rows.operator_from(row)

    async def operators(self) -> list[Operator]:
        found = [rows.operator_from(row) for row in await self._unit.all(_OPERATORS, {})]
        return sorted(found, key=lambda o: o.name)

    async def disable_operator(
        self, name: str, at: datetime, *, entry: AuditEntry | None = None
    ) -> bool:
        self._unit.writer()
        params = {"b_name": name, "disabled_at": at}
        disabled = (await self._unit.run(_DISABLE, params)).rowcount == 1
        if disabled and entry is not None:
            await self._unit.audit.append(entry)
        return bool(disabled)


def _allowlist_order(entry: AllowlistEntry) -> tuple[str, str, bool, int]:
    """By chain, address, asset (the chain's every asset first): as the memory store sorts."""
    return (entry.chain.value, entry.address, entry.asset_id is not None, entry.asset_id or 0)


__all__ = ["LOCK_SCOPE", "SqlPolicies", "policy_lock_key"]
