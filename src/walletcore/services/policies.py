"""Withdrawal policies at work: every transfer is checked before any key is unsealed, the
operator sets the rules, operators approve held transfers.

Rules (the rules' meaning: walletcore.domain.policies; docs/policies.md):
- `check` is one decision per transfer, in one write unit under the client's policy lock
  (`PolicyStore.lock`): it reads the version in force, the allowlist, whose the recipient
  is and the velocity windows' usage, then counts the transfer when it is allowed or held,
  and appends the decision's audit entry (`policy.decide`: outcome `ok`, `403`, or `202`
  for held; target the rule; never an amount of another transfer). Concurrent transfers
  of one client are decided one after the other, across processes: they never sum over a
  velocity limit. A refusal is raised after the unit committed, so it stays audited.
- The transfer's own count is left out of its windows, so a retry of one request (its
  X-Request-Id) is never counted twice; `give_back` removes the count of a transfer that
  was not signed after all (a wrong password, too little balance).
- A `require_approval` rule holds the transfer (`AwaitingApproval`, with its `Approval`):
  it is decided again on every retry of its request; once `approvals` distinct operators
  (never its initiator) approved it, the retry is allowed and signed (once: the send
  record). One rejection, or the approval's time running out, refuses it for good. Held
  transfers count against velocity limits until rejected or expired.
- Fiat amounts use the price source's current prices, read before the unit (a unit holds
  no network call); a rule that needs a price that is not there fails closed:
  `503`, nothing signed.
- Policy changes take effect after the delay of the policy they replace
  (`walletcore.domain.policies.effective_at`); allowlist entries after the cooling-off of
  the policy in force (or pending, whichever is longer); removals at once. Every change is
  audited with the operator who made it.
- Operators authenticate with their key (SHA-256 stored, compared in constant time).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from walletcore.domain.assets import Asset, Chain, Fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import (
    DomainError,
    InvalidRequest,
    NotFound,
    PriceUnavailable,
    PricingTimeout,
    ServiceUnavailable,
    Unauthorized,
)
from walletcore.domain.events import EventNote, EventType
from walletcore.domain.ids import new_id
from walletcore.domain.policies import (
    DEFAULT_RULE,
    NO_POLICY,
    OPERATOR_NAME,
    Action,
    AllowlistEntry,
    Approval,
    ApprovalStatus,
    Decision,
    Destination,
    Measure,
    Operator,
    Origin,
    Policy,
    PolicyVersion,
    Rule,
    Transfer,
    Usage,
    WalletKind,
    effective_at,
    in_force,
    pending,
)
from walletcore.domain.times import format_datetime, format_optional_datetime
from walletcore.domain.wallet import WalletOwner
from walletcore.domain.wire import JsonValue
from walletcore.ports import Clock, PriceSource, Storage, UnitOfWork
from walletcore.services.audit import AuditNote, Auditor
from walletcore.services.context import Caller
from walletcore.services.events import parse_limit

log = logging.getLogger("walletcore.policies")

#: The smallest step of a stored time: what separates "in the window" from "left it".
_TICK = timedelta(microseconds=1)
#: Counts older than the longest window a policy may name are pruned.
USAGE_KEPT = timedelta(days=367)


class AwaitingApproval(DomainError):
    """A transfer held for operators' approval: nothing signed yet. Not an error to the
    caller (`/send` answers `202` with the approval); raised so every transfer path stops
    before the key."""

    status = 202

    def __init__(self, approval: Approval) -> None:
        self.approval = approval
        super().__init__(
            f"The transfer waits for {approval.required} operator approval(s) under withdrawal "
            f"policy rule {approval.rule} (approval {approval.id}); retry the same request "
            "to send it once approved"
        )


class PolicyUnavailable(ServiceUnavailable):
    """A rule could not be checked (no usable price): nothing was signed."""


class OperatorRefused(Unauthorized):
    def __init__(self) -> None:
        super().__init__("Unknown operator, disabled operator or wrong operator key")


@dataclass(frozen=True, slots=True)
class Overview:
    """A client's policy as the client and the operator read it."""

    client_id: str
    in_force: PolicyVersion | None
    pending: tuple[PolicyVersion, ...]
    allowlist: tuple[AllowlistEntry, ...]


def initiator_of_client(client_id: str) -> str:
    """The initiator of a transfer an api client asked for (never an operator's name)."""
    return f"client:{client_id}"


#: The initiator of the desk's own transfers.
DESK_INITIATOR = "desk"


class Policies:
    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        catalog: Catalog,
        prices: PriceSource,
        auditor: Auditor,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._catalog = catalog
        self._prices = prices
        self._auditor = auditor

    # -- the decision ----------------------------------------------------------------------
    async def check(
        self,
        client_id: str,
        request_id: str,
        *,
        wallet: WalletKind,
        origin: Origin,
        user_id: str | None,
        asset: Asset,
        amount_units: int,
        recipient: str,
        initiated_by: str,
        note: AuditNote,
    ) -> Decision:
        """Decide a transfer about to be signed (module rules): the decision when it is
        allowed; `PolicyDenied` (403) when refused, `AwaitingApproval` when held."""
        prices = await self._price_table(client_id)
        now = self._clock.now()
        async with self._storage.write() as unit:
            await unit.policies.lock(client_id)
            transfer = await self._transfer(
                unit, client_id, wallet, origin, user_id, asset, amount_units, recipient, now
            )
            current = in_force(await unit.policies.versions(client_id), now)
            decision = await _evaluate(unit, current, transfer, client_id, request_id, now, prices)
            approval, created = None, False
            if decision.action is Action.REQUIRE_APPROVAL:
                assert current is not None  # only a policy's rule holds a transfer
                ttl = timedelta(seconds=current.policy.approval_ttl_seconds)
                decision, approval, created = await self._held(
                    unit, client_id, request_id, transfer, decision, initiated_by, now, ttl
                )
            if decision.action is Action.DENY:
                await unit.policies.uncount(client_id, request_id)
            else:
                await unit.policies.count(_usage(client_id, request_id, transfer, now))
            entry = note.entry(
                action="policy.decide",
                outcome=_OUTCOMES[decision.action],
                user_id=user_id,
                target=decision.rule,
                detail=f"{decision.action}: {decision.reason}",
                at=now,
                event=_held_event(approval) if created else None,
            )
            await unit.audit.append(entry)
        note.carried(entry)
        if decision.action is Action.DENY:
            raise decision.refusal()
        if decision.action is Action.REQUIRE_APPROVAL:
            assert approval is not None
            raise AwaitingApproval(approval)
        return decision

    async def give_back(self, client_id: str, request_id: str) -> None:
        """The transfer was not signed after all: its count goes (best effort)."""
        try:
            async with self._storage.write() as unit:
                await unit.policies.uncount(client_id, request_id)
        except Exception:  # the error that stopped the transfer is the one to report
            log.warning("could not give back the count of %s", request_id, exc_info=True)

    async def evaluate(
        self,
        client_id: str,
        *,
        wallet: WalletKind,
        origin: Origin,
        user_id: str | None,
        asset: Asset,
        amount_units: int,
        recipient: str,
    ) -> tuple[Decision, Transfer]:
        """A dry run: the decision a transfer would get now, writing nothing."""
        prices = await self._price_table(client_id)
        now = self._clock.now()
        async with self._storage.read() as unit:
            transfer = await self._transfer(
                unit, client_id, wallet, origin, user_id, asset, amount_units, recipient, now
            )
            current = in_force(await unit.policies.versions(client_id), now)
            decision = await _evaluate(unit, current, transfer, client_id, "", now, prices)
        return decision, transfer

    async def _held(
        self,
        unit: UnitOfWork,
        client_id: str,
        request_id: str,
        transfer: Transfer,
        decision: Decision,
        initiated_by: str,
        now: datetime,
        ttl: timedelta,
    ) -> tuple[Decision, Approval, bool]:
        """A transfer a `require_approval` rule matched: the decision its approval makes,
        the approval, and whether this decision created it. `ttl`: the approval time of the
        policy in force."""
        approval = await unit.policies.approval(client_id, request_id)
        if approval is None:
            approval = Approval(
                id=f"apr_{new_id()}",
                client_id=client_id,
                request_id=request_id,
                rule=decision.rule,
                required=decision.approvals,
                initiated_by=initiated_by,
                transfer=transfer,
                created_at=now,
                expires_at=now + ttl,
            )
            if not await unit.policies.add_approval(approval):
                raise InvalidRequest("The transfer's approval is being created by another request")
            return decision, approval, True
        status = approval.effective_status(now)
        if status is ApprovalStatus.EXPIRED and approval.status is ApprovalStatus.PENDING:
            expired = approval.expired(now)
            entry = self._expiry_entry(expired, request_id, now)
            if await unit.policies.move_approval(approval, expired, entry=entry):
                approval = expired
        if status is ApprovalStatus.APPROVED and len(approval.approvers) < decision.approvals:
            # The rule in force now asks more approvals than this one gathered (a stricter
            # policy came into force meanwhile): pending again for the rest.
            reopened = approval.reopened(decision.approvals, now + ttl)
            entry = self._auditor.entry(
                "approval.reopen",
                request_id,
                client_id,
                user_id=transfer.user_id,
                target=approval.id,
                detail=(
                    f"rule {decision.rule} now needs {decision.approvals} approval(s); "
                    f"{len(approval.approvers)} given"
                ),
                at=now,
                event=_held_event(reopened),
            )
            if await unit.policies.move_approval(approval, reopened, entry=entry):
                approval = reopened
            return decision, approval, False
        if status is ApprovalStatus.APPROVED:
            approvers = ", ".join(approval.approvers)
            return (
                Decision(
                    Action.ALLOW,
                    decision.rule,
                    f"approved by {approvers} ({approval.id})",
                    version=decision.version,
                ),
                approval,
                False,
            )
        if status in (ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED):
            why = approval.reason or str(status)
            return (
                Decision(
                    Action.DENY,
                    decision.rule,
                    f"approval {approval.id} was {status} ({why})",
                    version=decision.version,
                ),
                approval,
                False,
            )
        return decision, approval, False  # still pending

    async def _transfer(
        self,
        unit: UnitOfWork,
        client_id: str,
        wallet: WalletKind,
        origin: Origin,
        user_id: str | None,
        asset: Asset,
        amount_units: int,
        recipient: str,
        now: datetime,
    ) -> Transfer:
        whose = await unit.deposits.whose(asset.chain, recipient)
        if whose is not None and whose.client_id == client_id:
            destination = Destination.OWN
        else:
            listed = await unit.policies.allowlist(client_id, asset.chain)
            usable = any(e.covers(asset.chain, asset.id, recipient, now) for e in listed)
            destination = Destination.ALLOWLISTED if usable else Destination.OTHER
        return Transfer(
            wallet=wallet,
            origin=origin,
            user_id=user_id,
            chain=asset.chain,
            asset_id=asset.id,
            symbol=asset.symbol,
            decimals=asset.decimals,
            amount_units=amount_units,
            recipient=recipient,
            destination=destination,
        )

    async def _price_table(self, client_id: str) -> _Prices:
        """The prices the client's rules may need, read before any unit (module rules)."""
        async with self._storage.read() as unit:
            versions = await unit.policies.versions(client_id)
        fiats = {
            measure.fiat
            for version in versions
            for rule in version.policy.rules
            for measure in (rule.over, rule.velocity)
            if measure is not None and measure.fiat is not None
        }
        table: dict[tuple[str, Fiat], Decimal] = {}
        for fiat in fiats:
            for symbol in self._catalog.symbols:
                try:
                    price = await self._prices.unit_price(symbol, fiat)
                except (PriceUnavailable, PricingTimeout):
                    continue
                if price > 0:
                    table[(symbol, fiat)] = price
        return _Prices(table, self._catalog)

    # -- the operator's changes ------------------------------------------------------------
    async def set_policy(self, client_id: str, document: Any, *, set_by: str) -> PolicyVersion:
        """A new version of the client's policy, in force after the delay (module rules)."""
        policy = Policy.parse(document)
        self._check_assets(policy)
        now = self._clock.now()
        async with self._storage.write() as unit:
            await _known_client(unit, client_id)
            await unit.policies.lock(client_id)
            versions = await unit.policies.versions(client_id)
            starts = effective_at(versions, now)
            entry = self._auditor.entry(
                "policy.set",
                new_id(),
                client_id,
                target=f"policy {policy.digest()}",
                detail=f"set by {set_by}; in force from {starts.isoformat()}",
                at=now,
            )
            return await unit.policies.add_version(
                client_id, policy, set_at=now, effective_at=starts, set_by=set_by, entry=entry
            )

    async def cancel_policy(self, client_id: str, version: int, *, by: str) -> None:
        now = self._clock.now()
        entry = self._auditor.entry(
            "policy.cancel",
            new_id(),
            client_id,
            target=f"version {version}",
            detail=f"cancelled by {by}",
            at=now,
        )
        async with self._storage.write() as unit:
            if not await unit.policies.cancel_version(client_id, version, now, entry=entry):
                raise NotFound(f"No pending version {version} of the client's policy")

    async def allow_address(
        self,
        client_id: str,
        chain: Chain,
        address: str,
        label: str,
        *,
        asset_id: int | None,
        by: str,
    ) -> AllowlistEntry:
        """Add a destination, usable after the cooling-off (module rules). `address` is
        checked by the caller (the chain's validator)."""
        label = label.strip()
        if not label or len(label) > 100:
            raise InvalidRequest("A destination needs a label of 1 to 100 characters")
        if asset_id is not None and self._catalog.asset_by_id(asset_id).chain != chain:
            raise InvalidRequest(f"Asset {asset_id} is not on {chain}")
        now = self._clock.now()
        async with self._storage.write() as unit:
            await _known_client(unit, client_id)
            versions = await unit.policies.versions(client_id)
            current = in_force(versions, now)
            cooling = max(
                [v.policy.cooling_off_seconds for v in pending(versions, now)]
                + [current.policy.cooling_off_seconds if current is not None else 0]
            )
            item = AllowlistEntry(
                client_id,
                chain,
                address,
                label,
                added_at=now,
                usable_at=now + timedelta(seconds=cooling),
                asset_id=asset_id,
                added_by=by,
            )
            entry = self._auditor.entry(
                "policy.allowlist.add",
                new_id(),
                client_id,
                target=f"{chain}:{address}",
                detail=f"{label!r} added by {by}; usable from {item.usable_at.isoformat()}",
                at=now,
            )
            if not await unit.policies.allow(item, entry=entry):
                raise InvalidRequest(f"{address} is on the client's allowlist already")
        return item

    async def disallow_address(
        self, client_id: str, chain: Chain, address: str, *, asset_id: int | None, by: str
    ) -> None:
        now = self._clock.now()
        entry = self._auditor.entry(
            "policy.allowlist.remove",
            new_id(),
            client_id,
            target=f"{chain}:{address}",
            detail=f"removed by {by}",
            at=now,
        )
        async with self._storage.write() as unit:
            if not await unit.policies.disallow(client_id, chain, address, asset_id, entry=entry):
                raise NotFound(f"{address} is not on the client's allowlist")

    async def overview(self, client_id: str) -> Overview:
        now = self._clock.now()
        async with self._storage.read() as unit:
            versions = await unit.policies.versions(client_id)
            listed = await unit.policies.allowlist(client_id)
        return Overview(
            client_id, in_force(versions, now), tuple(pending(versions, now)), tuple(listed)
        )

    def _check_assets(self, policy: Policy) -> None:
        for rule in policy.rules:
            for asset_id in rule.asset_ids or ():
                self._catalog.asset_by_id(asset_id)  # 400 Unknown assetId
            for measure in (rule.over, rule.velocity):
                if measure is not None and measure.asset_id is not None:
                    self._catalog.asset_by_id(measure.asset_id)

    # -- operators and approvals -----------------------------------------------------------
    async def add_operator(self, name: str) -> tuple[Operator, str]:
        """A new operator and their key (shown once; only its hash is kept)."""
        if not OPERATOR_NAME.match(name):
            raise InvalidRequest("An operator's name: 1 to 64 letters, digits, '.', '_' or '-'")
        key = secrets.token_urlsafe(32)
        now = self._clock.now()
        operator = Operator(name, _key_hash(key), now)
        entry = self._auditor.entry("operator.add", new_id(), None, target=name, at=now)
        async with self._storage.write() as unit:
            if not await unit.policies.add_operator(operator, entry=entry):
                raise InvalidRequest(f"An operator named {name} exists already")
        return operator, key

    async def disable_operator(self, name: str) -> None:
        now = self._clock.now()
        entry = self._auditor.entry("operator.disable", new_id(), None, target=name, at=now)
        async with self._storage.write() as unit:
            if not await unit.policies.disable_operator(name, now, entry=entry):
                raise NotFound(f"No active operator named {name}")

    async def operators(self) -> list[Operator]:
        async with self._storage.read() as unit:
            return await unit.policies.operators()

    async def authenticate(self, name: str, key: str) -> Operator:
        """The operator `name` if `key` is theirs and they are active; `OperatorRefused`."""
        async with self._storage.read() as unit:
            operator = await unit.policies.operator(name)
        given = _key_hash(key)
        stored = operator.key_hash if operator is not None else _key_hash("")
        if not hmac.compare_digest(given, stored) or operator is None or not operator.active:
            raise OperatorRefused()
        return operator

    async def approvals(
        self,
        *,
        client_id: str | None = None,
        statuses: frozenset[ApprovalStatus] | None = None,
        limit: int = 100,
    ) -> list[Approval]:
        """Approvals as they stand now (a pending one past its time shows `expired`)."""
        now = self._clock.now()
        stored = statuses
        if stored is not None and ApprovalStatus.EXPIRED in stored:
            stored = stored | {ApprovalStatus.PENDING}  # stored pending, past its time
        async with self._storage.read() as unit:
            found = await unit.policies.approvals(client_id=client_id, statuses=stored, limit=limit)
        shown = [a if a.effective_status(now) is a.status else a.expired(now) for a in found]
        return [a for a in shown if statuses is None or a.status in statuses][:limit]

    async def approval(self, approval_id: str) -> Approval:
        """One approval as it stands now; `NotFound` when there is none such."""
        now = self._clock.now()
        async with self._storage.read() as unit:
            found = await unit.policies.approval_by_id(approval_id)
        if found is None:
            raise NotFound(f"No approval {approval_id}")
        return found if found.effective_status(now) is found.status else found.expired(now)

    async def client_approvals(
        self, caller: Caller, *, status: JsonValue = None, limit: JsonValue = None
    ) -> list[Approval]:
        """`POST /approvals`: the caller's own held transfers, newest first (of one status)."""
        if status is None:
            statuses = None
        elif isinstance(status, str) and status in _STATUS_NAMES:
            statuses = frozenset({ApprovalStatus(status)})
        else:
            raise InvalidRequest(f"status must be one of {', '.join(_STATUS_NAMES)}")
        return await self.approvals(
            client_id=caller.client_id, statuses=statuses, limit=parse_limit(limit)
        )

    async def approve(self, approval_id: str, operator: Operator) -> Approval:
        return await self._decide_approval(
            approval_id, operator, lambda a, now: a.approved_by(operator.name, now)
        )

    async def reject(self, approval_id: str, operator: Operator, reason: str = "") -> Approval:
        return await self._decide_approval(
            approval_id, operator, lambda a, now: a.rejected_by(operator.name, now, reason)
        )

    async def _decide_approval(
        self,
        approval_id: str,
        operator: Operator,
        move: Callable[[Approval, datetime], Approval],
    ) -> Approval:
        now = self._clock.now()
        async with self._storage.write() as unit:
            current = await unit.policies.approval_by_id(approval_id)
            if current is None:
                raise NotFound(f"No approval {approval_id}")
            new = move(current, now)
            ended = new.status in (ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED)
            event = None
            if new.status is ApprovalStatus.APPROVED:
                event = _approved_event(new)
            elif ended:
                event = _ended_event(new)
            entry = self._auditor.entry(
                "approval.reject" if ended else "approval.approve",
                new_id(),
                current.client_id,
                user_id=current.transfer.user_id,
                target=approval_id,
                detail=(
                    f"by {operator.name}: {len(new.approvers)} of {new.required}"
                    if not ended
                    else new.reason
                ),
                at=now,
                event=event,
            )
            if not await unit.policies.move_approval(current, new, entry=entry):
                raise InvalidRequest(f"Approval {approval_id} was changed meanwhile; look again")
            if ended:
                await unit.policies.uncount(current.client_id, current.request_id)
        return new

    async def expire_due(self, batch: int = 500) -> int:
        """End the pending approvals whose time ran out (the expiry job): each `expired`
        with its entry and `send.rejected`, its count given back, by compare-and-set (a
        retry or an operator that got there first wins); how many this run ended."""
        now = self._clock.now()
        async with self._storage.read() as unit:
            due = await unit.policies.due_approvals(now, batch)
        ended = 0
        for approval in due:
            expired = approval.expired(now)
            entry = self._expiry_entry(expired, f"job-approvals-{approval.id}", now)
            async with self._storage.write() as unit:
                if await unit.policies.move_approval(approval, expired, entry=entry):
                    await unit.policies.uncount(approval.client_id, approval.request_id)
                    ended += 1
        return ended

    def _expiry_entry(self, expired: Approval, request_id: str, now: datetime) -> AuditEntry:
        """`approval.expire`, with its `send.rejected`: a retry or the expiry job ends it."""
        return self._auditor.entry(
            "approval.expire",
            request_id,
            expired.client_id,
            user_id=expired.transfer.user_id,
            target=expired.id,
            detail="expired without its approvals",
            at=now,
            event=_ended_event(expired),
        )

    async def prune(self) -> int:
        """Counts older than any window a policy may name: deleted (the jobs' pruning)."""
        async with self._storage.write() as unit:
            return await unit.policies.prune_usage(self._clock.now() - USAGE_KEPT, 10_000)


# -- evaluation ----------------------------------------------------------------------------
class _Prices:
    def __init__(self, table: Mapping[tuple[str, Fiat], Decimal], catalog: Catalog) -> None:
        self._table = table
        self._catalog = catalog

    def name(self, measure: Measure) -> str | None:
        """How a message names the measure's asset: `ETH on ETHEREUM`."""
        if measure.asset_id is None:
            return None
        asset = self._catalog.asset_by_id(measure.asset_id)
        return f"{asset.symbol} on {asset.chain}"

    def value(self, measure: Measure, asset_id: int, units: int, rule: str) -> Decimal | None:
        """`units` of `asset_id` in the measure's unit; None when the measure is in
        another asset (the rule does not apply to it)."""
        asset = self._catalog.asset_by_id(asset_id)
        amount = Decimal(units).scaleb(-asset.decimals)
        if measure.asset_id is not None:
            return amount if measure.asset_id == asset_id else None
        assert measure.fiat is not None
        price = self._table.get((asset.symbol, measure.fiat))
        if price is None:
            raise PolicyUnavailable(
                f"No usable {asset.symbol} price in {measure.fiat} to check withdrawal "
                f"policy rule {rule}; nothing was sent, try again later"
            )
        return amount * price


async def _evaluate(
    unit: UnitOfWork,
    version: PolicyVersion | None,
    transfer: Transfer,
    client_id: str,
    request_id: str,
    now: datetime,
    prices: _Prices,
) -> Decision:
    if version is None:
        return Decision(Action.ALLOW, NO_POLICY, "the api client has no withdrawal policy")
    window = _Window(unit, version.policy, transfer, client_id, now)
    for rule in version.policy.rules:
        if not rule.selects(transfer):
            continue
        reason = await _conditions(window, rule, transfer, request_id, now, prices)
        if reason is None:
            continue
        return Decision(rule.action, rule.name, reason, rule.approvals or 0, version.version)
    action = Action(version.policy.default)
    return Decision(action, DEFAULT_RULE, "no rule matched the transfer", 0, version.version)


class _Window:
    """The counted transfers the policy's velocity rules of the transfer's wallet read:
    one read for all of them, of the longest window (every wallet of the client when a
    rule counts per client, else the sending wallet's), made when a rule first asks."""

    def __init__(
        self,
        unit: UnitOfWork,
        policy: Policy,
        transfer: Transfer,
        client_id: str,
        now: datetime,
    ) -> None:
        rules = [r.velocity for r in policy.rules if r.velocity and r.wallet is transfer.wallet]
        longest = max((v.window_seconds for v in rules), default=0)
        self._unit = unit
        self._client_id = client_id
        self._wallet = transfer.wallet
        self._since = now - timedelta(seconds=longest) + _TICK
        self._user_id = None if any(v.per == "client" for v in rules) else transfer.user_id
        self._rows: list[Usage] | None = None

    async def counted(self, since: datetime, user_id: str | None, per: str) -> list[Usage]:
        """The counts at or after `since`: the sending wallet's (`per` user) or all."""
        if self._rows is None:
            self._rows = await self._unit.policies.used(
                self._client_id, self._since, wallet=self._wallet, user_id=self._user_id
            )
        return [
            u for u in self._rows if u.at >= since and (per == "client" or u.user_id == user_id)
        ]


async def _conditions(
    window: _Window,
    rule: Rule,
    transfer: Transfer,
    request_id: str,
    now: datetime,
    prices: _Prices,
) -> str | None:
    """Why the rule's `over` and `velocity` hold for the transfer; None when one does not."""
    reasons = []
    if rule.over is not None:
        value = prices.value(rule.over, transfer.asset_id, transfer.amount_units, rule.name)
        if value is None or value <= rule.over.amount:
            return None
        reasons.append(f"the transfer is over {rule.over.describe(prices.name(rule.over))}")
    if rule.velocity is not None:
        velocity = rule.velocity
        value = prices.value(velocity, transfer.asset_id, transfer.amount_units, rule.name)
        if value is None:
            return None
        # the window is (now - window, now]: a transfer made exactly `windowSeconds` ago
        # has left it (`used` reads from `since` on)
        since = now - timedelta(seconds=velocity.window_seconds) + _TICK
        counted = await window.counted(since, transfer.user_id, velocity.per)
        total = value
        for usage in counted:
            if usage.request_id == request_id or not _counted_by(rule, usage):
                continue
            total += prices.value(velocity, usage.asset_id, usage.amount_units, rule.name) or 0
        if total <= velocity.amount:
            return None
        reasons.append(f"it would take the total over {velocity.describe(prices.name(velocity))}")
    if not reasons:
        reasons.append(f"the rule {_WHAT[rule.action]} such transfers")
    return "; ".join(reasons)


def _counted_by(rule: Rule, usage: Usage) -> bool:
    """A counted transfer the velocity rule's filters select (its destination aside)."""
    return (
        usage.wallet is rule.wallet
        and (rule.origins is None or usage.origin in rule.origins)
        and (rule.chains is None or usage.chain in rule.chains)
        and (rule.asset_ids is None or usage.asset_id in rule.asset_ids)
    )


_WHAT = {
    Action.ALLOW: "allows",
    Action.DENY: "denies",
    Action.REQUIRE_APPROVAL: "holds for approval",
}
_STATUS_NAMES = tuple(s.value for s in ApprovalStatus)
_OUTCOMES = {Action.ALLOW: "ok", Action.DENY: "403", Action.REQUIRE_APPROVAL: "202"}


def _usage(client_id: str, request_id: str, transfer: Transfer, now: datetime) -> Usage:
    return Usage(
        client_id,
        request_id,
        transfer.wallet,
        transfer.origin,
        transfer.user_id,
        transfer.chain,
        transfer.asset_id,
        transfer.amount_units,
        now,
    )


def _transfer_data(approval: Approval) -> dict[str, Any]:
    transfer = approval.transfer
    return {
        "approvalId": approval.id,
        "requestId": approval.request_id,
        "assetId": transfer.asset_id,
        "amount": format(transfer.amount.normalize(), "f"),
        "recipient": transfer.recipient,
        "rule": approval.rule,
        "required": approval.required,
        "approvals": len(approval.approvers),
        "status": str(approval.status),
    }


def _held_event(approval: Approval | None) -> EventNote | None:
    if approval is None:
        return None
    return EventNote(EventType.SEND_AWAITING_APPROVAL, _transfer_data(approval))


def _approved_event(approval: Approval) -> EventNote:
    return EventNote(EventType.SEND_APPROVED, _transfer_data(approval))


def _ended_event(approval: Approval) -> EventNote:
    return EventNote(EventType.SEND_REJECTED, _transfer_data(approval))


def _key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


async def _known_client(unit: UnitOfWork, client_id: str) -> None:
    if await unit.clients.get(client_id) is None:
        raise NotFound(f"No api client {client_id}")


def wallet_kind(owner: WalletOwner) -> WalletKind:
    return WalletKind.PLATFORM if owner is WalletOwner.PLATFORM else WalletKind.USER


def approval_view(approval: Approval) -> dict[str, Any]:
    """An approval as the operator's commands show it (no secret in it)."""
    transfer = approval.transfer
    return {
        "id": approval.id,
        "clientId": approval.client_id,
        "requestId": approval.request_id,
        "status": str(approval.status),
        "rule": approval.rule,
        "required": approval.required,
        "approvers": list(approval.approvers),
        "initiatedBy": approval.initiated_by,
        "wallet": str(transfer.wallet),
        "origin": str(transfer.origin),
        "userId": transfer.user_id,
        "assetId": transfer.asset_id,
        "amount": format(transfer.amount.normalize(), "f"),
        "symbol": transfer.symbol,
        "recipient": transfer.recipient,
        "destination": str(transfer.destination),
        "createdAt": format_datetime(approval.created_at),
        "expiresAt": format_datetime(approval.expires_at),
        "decidedAt": format_optional_datetime(approval.decided_at),
        "reason": approval.reason,
    }


def version_view(version: PolicyVersion, *, operators: bool = True) -> dict[str, Any]:
    """A version of a policy; who set it only in the operator's view (`operators`)."""
    shown = {
        "version": version.version,
        "setAt": format_datetime(version.set_at),
        "effectiveAt": format_datetime(version.effective_at),
        "policy": version.policy.document(),
    }
    if operators:
        shown["setBy"] = version.set_by
    return shown


def allowlist_view(entry: AllowlistEntry) -> dict[str, Any]:
    return {
        "chain": str(entry.chain),
        "address": entry.address,
        "assetId": entry.asset_id,
        "label": entry.label,
        "addedAt": format_datetime(entry.added_at),
        "usableAt": format_datetime(entry.usable_at),
    }


def overview_view(overview: Overview, *, operators: bool = True) -> dict[str, Any]:
    """A client's policy as `walletcore policies show` answers it, and `/policy` without
    the operators' names (`operators=False`)."""
    current = overview.in_force
    return {
        "inForce": None if current is None else version_view(current, operators=operators),
        "pending": [version_view(v, operators=operators) for v in overview.pending],
        "allowlist": [allowlist_view(e) for e in overview.allowlist],
    }


def decision_view(decision: Decision, transfer: Transfer | None = None) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "action": str(decision.action),
        "rule": decision.rule,
        "reason": decision.reason,
        "version": decision.version,
    }
    if decision.action is Action.REQUIRE_APPROVAL:
        shown["approvals"] = decision.approvals
    if transfer is not None:
        shown["destination"] = str(transfer.destination)
    return shown


__all__ = [
    "DESK_INITIATOR",
    "AwaitingApproval",
    "OperatorRefused",
    "Overview",
    "Policies",
    "PolicyUnavailable",
    "initiator_of_client",
]
