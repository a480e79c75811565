"""The storage promises of withdrawal policies (`PolicyStore`, walletcore.ports.policies):
versions numbered per client and read oldest first, only a version not in force cancelled;
one allowlist entry per (client, chain, address, asset), the first kept; usage keyed by
request, counted again in place, read by window, wallet and user, pruned oldest first;
one approval per request, moved by compare-and-set on (status, approvers); operators
added once and disabled once; every entry appended only with its change; nothing written
from a read unit or a unit that raised; and a client's decisions under `lock` one after
the other. Part of `StorageContract` (its base class)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.ids import new_id
from walletcore.domain.policies import (
    AllowlistEntry,
    Approval,
    ApprovalStatus,
    Destination,
    Operator,
    Origin,
    Policy,
    Transfer,
    Usage,
    WalletKind,
)
from walletcore.ports.storage import Storage
from walletcore.testing.contracts.deposits import HUGE, _client
from walletcore.testing.storage import autocommit

A0 = datetime(2026, 4, 1, 10, 0, 0, 375000, tzinfo=UTC)
ETH, USDT, BTC = 2, 21, 1
ETHEREUM, BITCOIN, TRON = Chain.ETHEREUM, Chain.BITCOIN, Chain.TRON
Status = ApprovalStatus

#: A document with every kind of condition (walletcore.domain.policies).
DOCUMENT: dict[str, Any] = {
    "rules": [
        {
            "name": "big-eth-held",
            "wallet": "user",
            "action": "require_approval",
            "approvals": 2,
            "origins": ["send", "delivery"],
            "chains": ["ETHEREUM"],
            "assetIds": [ETH],
            "destinations": ["other"],
            "over": {"amount": "0.500000000000000001", "assetId": ETH},
        },
        {
            "name": "daily-usd",
            "wallet": "platform",
            "action": "deny",
            "velocity": {
                "amount": "10000.25",
                "fiat": "USD",
                "windowSeconds": 86400,
                "per": "client",
            },
        },
        {"name": "own-ok", "wallet": "user", "action": "allow", "destinations": ["own"]},
    ],
    "default": "deny",
    "changeDelaySeconds": 3600,
    "coolingOffSeconds": 7200,
    "approvalTtlSeconds": 600,
}


def _at(seconds: float) -> datetime:
    return A0 + timedelta(seconds=seconds)


def _entry(client_id: str | None, action: str) -> AuditEntry:
    return AuditEntry(A0, client_id, action, f"req-{new_id()}", "ok", target=action)


async def _actions(storage: Storage, client_id: str | None) -> list[str]:
    newest = await autocommit(storage).audit.newest(limit=100)
    return [e.action for e in reversed(newest) if e.client_id == client_id]


def _policy(**changes: Any) -> Policy:
    return Policy.parse({**DOCUMENT, **changes})


def _destination(
    client_id: str,
    address: str = "0x" + "ab" * 20,
    *,
    chain: Chain = ETHEREUM,
    asset_id: int | None = None,
    label: str = "Treasury cold wallet: é",
) -> AllowlistEntry:
    return AllowlistEntry(
        client_id,
        chain,
        address,
        label,
        added_at=A0,
        usable_at=_at(7200),
        asset_id=asset_id,
        added_by="alice",
    )


def _usage(
    client_id: str,
    request_id: str | None = None,
    *,
    at: datetime = A0,
    wallet: WalletKind = WalletKind.USER,
    user_id: str | None = "u1",
    units: int = 10**17,
    asset_id: int = ETH,
) -> Usage:
    return Usage(
        client_id,
        request_id or f"req-{new_id()}",
        wallet,
        Origin.SEND if wallet is WalletKind.USER else Origin.PLATFORM_SEND,
        user_id if wallet is WalletKind.USER else None,
        BITCOIN if asset_id == BTC else ETHEREUM,
        asset_id,
        units,
        at,
    )


def _approval(
    client_id: str,
    request_id: str | None = None,
    *,
    created_at: datetime = A0,
    status: ApprovalStatus = Status.PENDING,
    user_id: str | None = "u1",
) -> Approval:
    transfer = Transfer(
        wallet=WalletKind.USER if user_id else WalletKind.PLATFORM,
        origin=Origin.SEND if user_id else Origin.PLATFORM_SEND,
        user_id=user_id,
        chain=ETHEREUM,
        asset_id=ETH,
        symbol="ETH",
        decimals=18,
        amount_units=HUGE,
        recipient="0x" + "cd" * 20,
        destination=Destination.OTHER,
    )
    return Approval(
        id=f"apr_{new_id()}",
        client_id=client_id,
        request_id=request_id or f"req-{new_id()}",
        rule="big-eth-held",
        required=2,
        initiated_by=f"client:{client_id}",
        transfer=transfer,
        created_at=created_at,
        expires_at=created_at + timedelta(seconds=600),
        status=status,
    )


class PolicyStorageContract:
    """Withdrawal policies, the allowlist, usage, approvals and operators (module docstring)."""

    # -- versions ---------------------------------------------------------------------------
    async def test_policy_versions_are_numbered_per_client_and_read_oldest_first(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        other = await _client(storage)
        first, second = _policy(), _policy(default="allow", rules=[])
        async with storage.write() as unit:
            assert await unit.policies.versions(client_id) == []
            v1 = await unit.policies.add_version(
                client_id,
                first,
                set_at=A0,
                effective_at=A0,
                set_by="cli",
                entry=_entry(client_id, "policy.set"),
            )
            v2 = await unit.policies.add_version(
                client_id,
                second,
                set_at=_at(10),
                effective_at=_at(3610),
                set_by="alice",
                entry=_entry(client_id, "policy.set.2"),
            )
            # the unit reads its own versions
            assert await unit.policies.versions(client_id) == [v1, v2]
        async with storage.write() as unit:
            w1 = await unit.policies.add_version(
                other, second, set_at=_at(20), effective_at=_at(20), set_by="bob"
            )
        assert (v1.version, v2.version, w1.version) == (1, 2, 1)
        assert (v1.client_id, v1.set_by, v2.set_by) == (client_id, "cli", "alice")
        db = autocommit(storage)
        stored = await db.policies.versions(client_id)
        assert stored == [v1, v2]
        # the document round-trips: the same policy, its exact amounts and its digest
        assert stored[0].policy == first and stored[0].policy.document() == first.document()
        assert stored[0].policy.digest() == first.digest()
        assert stored[1].effective_at == _at(3610) and stored[1].effective_at.tzinfo is not None
        assert await db.policies.versions(other) == [w1]
        assert await db.policies.versions(new_id()) == []
        assert await _actions(storage, client_id) == ["policy.set", "policy.set.2"]
        async with storage.write() as unit:
            v3 = await unit.policies.add_version(
                client_id, first, set_at=_at(30), effective_at=_at(3630), set_by="cli"
            )
        assert v3.version == 3
        assert [v.version for v in await db.policies.versions(client_id)] == [1, 2, 3]

    async def test_only_a_policy_version_not_in_force_is_cancelled(self, storage: Storage) -> None:
        client_id = await _client(storage)
        async with storage.write() as unit:
            v1 = await unit.policies.add_version(
                client_id, _policy(), set_at=A0, effective_at=A0, set_by="cli"
            )
            v2 = await unit.policies.add_version(
                client_id, _policy(default="allow"), set_at=A0, effective_at=_at(60), set_by="cli"
            )
        db = autocommit(storage)
        # in force: never cancelled; unknown: nothing; neither appends its entry
        assert not await db.policies.cancel_version(
            client_id, 1, _at(30), entry=_entry(client_id, "policy.cancel.1")
        )
        assert not await db.policies.cancel_version(
            client_id, 7, _at(30), entry=_entry(client_id, "policy.cancel.7")
        )
        # in force from `effective_at` on: too late at that very instant
        assert not await db.policies.cancel_version(client_id, 2, _at(60))
        assert not await db.policies.cancel_version(await _client(storage), 2, _at(30))
        assert await db.policies.cancel_version(
            client_id, 2, _at(59), entry=_entry(client_id, "policy.cancel")
        )
        assert await db.policies.versions(client_id) == [v1]
        assert not await db.policies.cancel_version(
            client_id, 2, _at(30), entry=_entry(client_id, "policy.cancel.again")
        )
        assert await _actions(storage, client_id) == ["policy.cancel"]
        assert v2.version == 2

    # -- the allowlist ----------------------------------------------------------------------
    async def test_the_allowlist_keeps_the_first_entry_of_a_destination(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        first = _destination(client_id)
        assert await db.policies.allow(first, entry=_entry(client_id, "allowlist.add"))
        again = dataclasses.replace(
            first, label="another", usable_at=_at(1), added_at=_at(1), added_by="bob"
        )
        assert not await db.policies.allow(again, entry=_entry(client_id, "allowlist.again"))
        (stored,) = await db.policies.allowlist(client_id)
        assert stored == first and stored.usable_at.tzinfo is not None
        # read back, it still covers its destination (a chain of another instance, the
        # address in another case) once its cooling-off ended
        assert stored.covers(
            Chain("ETHEREUM"), USDT, first.address.upper().replace("X", "x"), _at(7200)
        )
        assert not stored.covers(Chain("ETHEREUM"), USDT, first.address, _at(7199))
        # the key is (client, chain, address, asset): any asset of the chain, or one asset
        one_asset = _destination(client_id, asset_id=USDT, label="USDT only")
        assert await db.policies.allow(one_asset, entry=_entry(client_id, "allowlist.usdt"))
        assert not await db.policies.allow(dataclasses.replace(one_asset, label="again"))
        assert await db.policies.allow(_destination(client_id, asset_id=ETH))
        assert await db.policies.allow(_destination(client_id, chain=Chain.POLYGON))
        assert await db.policies.allow(_destination(client_id, "0x" + "ab" * 19 + "ac"))
        other = await _client(storage)
        assert await db.policies.allow(_destination(other))
        assert len(await db.policies.allowlist(client_id)) == 5
        assert await db.policies.allowlist(other) == [_destination(other)]
        assert await _actions(storage, client_id) == ["allowlist.add", "allowlist.usdt"]

    async def test_disallow_removes_one_allowlist_entry_at_once_and_once(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        any_asset, one_asset = _destination(client_id), _destination(client_id, asset_id=USDT)
        assert await db.policies.allow(any_asset)
        assert await db.policies.allow(one_asset)
        address = any_asset.address
        # the entry of any asset, not the one of USDT
        assert await db.policies.disallow(
            client_id, ETHEREUM, address, None, entry=_entry(client_id, "allowlist.remove")
        )
        assert await db.policies.allowlist(client_id) == [one_asset]
        assert not await db.policies.disallow(
            client_id, ETHEREUM, address, None, entry=_entry(client_id, "allowlist.again")
        )
        assert not await db.policies.disallow(client_id, ETHEREUM, address, ETH)
        assert not await db.policies.disallow(client_id, TRON, address, USDT)
        assert not await db.policies.disallow(await _client(storage), ETHEREUM, address, USDT)
        assert await db.policies.disallow(client_id, ETHEREUM, address, USDT)
        assert await db.policies.allowlist(client_id) == []
        assert await _actions(storage, client_id) == ["allowlist.remove"]
        # allowed again after a removal
        assert await db.policies.allow(any_asset)
        assert await db.policies.allowlist(client_id) == [any_asset]

    async def test_the_allowlist_is_listed_by_chain_address_and_asset(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        added = [
            _destination(client_id, "TXyz", chain=TRON, asset_id=USDT),
            _destination(client_id, "0xbb", asset_id=USDT),
            _destination(client_id, "0xbb"),
            _destination(client_id, "0xaa", asset_id=ETH),
            _destination(client_id, "bc1qz", chain=BITCOIN),
            _destination(client_id, "0xbb", asset_id=ETH),
            _destination(client_id, "0xB0"),
        ]
        for item in added:
            assert await db.policies.allow(item)
        listed = await db.policies.allowlist(client_id)
        assert [(e.chain, e.address, e.asset_id) for e in listed] == [
            (BITCOIN, "bc1qz", None),
            (ETHEREUM, "0xB0", None),
            (ETHEREUM, "0xaa", ETH),
            (ETHEREUM, "0xbb", None),
            (ETHEREUM, "0xbb", ETH),
            (ETHEREUM, "0xbb", USDT),
            (TRON, "TXyz", USDT),
        ]
        ethereum = await db.policies.allowlist(client_id, Chain("ETHEREUM"))
        assert ethereum == [e for e in listed if e.chain == ETHEREUM]
        assert await db.policies.allowlist(client_id, Chain.SOLANA) == []

    # -- usage ------------------------------------------------------------------------------
    async def test_usage_is_counted_once_per_request_and_given_back(self, storage: Storage) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        counted = _usage(client_id, "send-1", units=HUGE)
        await db.policies.count(counted)
        assert await db.policies.used(client_id, A0) == [counted]
        # counted again: the request's row replaced, never a second one
        replaced = dataclasses.replace(counted, amount_units=7, at=_at(5), asset_id=USDT)
        await db.policies.count(replaced)
        assert await db.policies.used(client_id, A0) == [replaced]
        # another client's request of the same id is another row
        other = await _client(storage)
        await db.policies.count(_usage(other, "send-1"))
        assert await db.policies.uncount(client_id, "send-1")
        assert await db.policies.used(client_id, A0) == []
        assert not await db.policies.uncount(client_id, "send-1")
        assert not await db.policies.uncount(client_id, "never")
        assert [u.request_id for u in await db.policies.used(other, A0)] == ["send-1"]
        # counted again after it was given back
        await db.policies.count(counted)
        (stored,) = await db.policies.used(client_id, A0)
        assert stored == counted and stored.amount_units == HUGE and stored.at.tzinfo is not None

    async def test_usage_is_read_by_window_wallet_and_user_oldest_first(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        before = _usage(client_id, at=_at(-1))
        alice_1 = _usage(client_id, at=_at(0), user_id="alice")
        platform = _usage(client_id, at=_at(10), wallet=WalletKind.PLATFORM, asset_id=BTC)
        bob = _usage(client_id, at=_at(20), user_id="bob")
        alice_2 = _usage(client_id, at=_at(30), user_id="alice", asset_id=USDT)
        for usage in (alice_2, before, bob, platform, alice_1):
            await db.policies.count(usage)
        await db.policies.count(_usage(await _client(storage), at=_at(5), user_id="alice"))
        # at or after `since`, oldest first
        assert await db.policies.used(client_id, A0) == [alice_1, platform, bob, alice_2]
        assert await db.policies.used(client_id, _at(-1)) == [
            before,
            alice_1,
            platform,
            bob,
            alice_2,
        ]
        assert await db.policies.used(client_id, _at(31)) == []
        assert await db.policies.used(client_id, A0, wallet=WalletKind.USER) == [
            alice_1,
            bob,
            alice_2,
        ]
        assert await db.policies.used(client_id, A0, wallet=WalletKind.PLATFORM) == [platform]
        assert await db.policies.used(client_id, A0, user_id="alice") == [alice_1, alice_2]
        assert await db.policies.used(
            client_id, _at(1), wallet=WalletKind.USER, user_id="alice"
        ) == [alice_2]
        assert (
            await db.policies.used(client_id, A0, wallet=WalletKind.PLATFORM, user_id="bob") == []
        )
        # a unit reads its own counts
        async with storage.write() as unit:
            late = _usage(client_id, at=_at(40), user_id="alice")
            await unit.policies.count(late)
            assert await unit.policies.used(client_id, _at(31)) == [late]

    async def test_prune_usage_deletes_the_oldest_counts_first_at_most_limit(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        other = await _client(storage)
        db = autocommit(storage)
        old = [
            _usage(client_id, at=_at(-30)),
            _usage(other, at=_at(-20)),
            _usage(client_id, at=_at(-10)),
        ]
        kept = [_usage(client_id, at=A0), _usage(client_id, at=_at(10))]
        for usage in kept + old:
            await db.policies.count(usage)
        assert await db.policies.prune_usage(A0, 2) == 2
        assert await db.policies.used(other, _at(-100)) == []
        assert await db.policies.used(client_id, _at(-100)) == [old[2], *kept]
        assert await db.policies.prune_usage(A0, 0) == 0
        assert await db.policies.prune_usage(A0, 10) == 1
        assert await db.policies.prune_usage(A0, 10) == 0
        assert await db.policies.used(client_id, _at(-100)) == kept

    # -- approvals --------------------------------------------------------------------------
    async def test_an_approval_round_trips_and_is_added_once_per_request(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        held = _approval(client_id, "send-big")
        assert await db.policies.add_approval(held, entry=_entry(client_id, "approval.add"))
        stored = await db.policies.approval(client_id, "send-big")
        assert stored == held and stored.transfer.amount_units == HUGE
        assert stored.created_at.tzinfo is not None and stored.expires_at == _at(600)
        assert await db.policies.approval_by_id(held.id) == held
        # the request's second approval, and one of a taken id: nothing written
        second = _approval(client_id, "send-big")
        assert not await db.policies.add_approval(second, entry=_entry(client_id, "again"))
        assert await db.policies.approval_by_id(second.id) is None
        taken = dataclasses.replace(_approval(client_id), id=held.id)
        assert not await db.policies.add_approval(taken, entry=_entry(client_id, "taken"))
        assert await db.policies.approval(client_id, taken.request_id) is None
        assert await db.policies.approval(client_id, "send-big") == held
        # keyed by the client's request: another client's request of that id is another
        other = await _client(storage)
        platform = _approval(other, "send-big", user_id=None)
        assert await db.policies.add_approval(platform)
        assert await db.policies.approval(other, "send-big") == platform
        assert await db.policies.approval(client_id, "unknown") is None
        assert await db.policies.approval_by_id("apr_unknown") is None
        assert await _actions(storage, client_id) == ["approval.add"]

    async def test_an_approval_moves_by_compare_and_set_on_status_and_approvers(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        held = _approval(client_id)
        assert await db.policies.add_approval(held)
        by_alice = held.approved_by("alice", _at(1))
        assert await db.policies.move_approval(
            held, by_alice, entry=_entry(client_id, "approval.alice")
        )
        assert await db.policies.approval_by_id(held.id) == by_alice
        # a stale mover (it read the approval before alice's move) loses: same status,
        # other approvers
        stale_bob = held.approved_by("bob", _at(2))
        assert not await db.policies.move_approval(
            held, stale_bob, entry=_entry(client_id, "approval.stale")
        )
        stale_reject = held.rejected_by("carol", _at(2), "no")
        assert not await db.policies.move_approval(held, stale_reject)
        assert await db.policies.approval_by_id(held.id) == by_alice
        approved = by_alice.approved_by("bob", _at(3))
        assert approved.status is Status.APPROVED
        assert await db.policies.move_approval(
            by_alice, approved, entry=_entry(client_id, "approval.bob")
        )
        stored = await db.policies.approval(client_id, held.request_id)
        assert stored == approved and stored.approvers == ("alice", "bob")
        assert stored.decided_at == _at(3)
        # reopened for a third approval: its count and expiry move, the rule and the
        # transfer stay as stored
        tampered = dataclasses.replace(approved.reopened(3, _at(9999)), rule="other")
        assert await db.policies.move_approval(approved, tampered)
        stored = await db.policies.approval_by_id(held.id)
        assert stored is not None
        assert (stored.status, stored.required, stored.expires_at, stored.decided_at) == (
            Status.PENDING,
            3,
            _at(9999),
            None,
        )
        assert (stored.rule, stored.approvers, stored.transfer) == (
            "big-eth-held",
            ("alice", "bob"),
            held.transfer,
        )
        assert await db.policies.move_approval(stored, stored.expired(_at(4)))
        stored = await db.policies.approval_by_id(held.id)
        assert stored is not None
        assert (stored.status, stored.reason, stored.decided_at) == (
            Status.EXPIRED,
            "expired",
            _at(4),
        )
        # a move of another approval's, and of one never stored
        with pytest.raises(ValueError):
            await db.policies.move_approval(stored, dataclasses.replace(stored, id="apr_x"))
        missing = _approval(client_id)
        assert not await db.policies.move_approval(missing, missing.expired(_at(1)))
        assert await db.policies.approval_by_id(missing.id) is None
        assert await _actions(storage, client_id) == ["approval.alice", "approval.bob"]

    async def test_of_two_racing_approval_moves_one_wins(self, storage: Storage) -> None:
        client_id = await _client(storage)
        held = _approval(client_id)
        assert await autocommit(storage).policies.add_approval(held)

        async def approve(operator: str) -> bool:
            async with storage.write() as unit:
                new = held.approved_by(operator, _at(1))
                return await unit.policies.move_approval(
                    held, new, entry=_entry(client_id, f"approval.{operator}")
                )

        won = await asyncio.gather(approve("alice"), approve("bob"))
        assert sorted(won) == [False, True]
        winner = "alice" if won[0] else "bob"
        stored = await autocommit(storage).policies.approval_by_id(held.id)
        assert stored is not None and stored.approvers == (winner,)
        assert await _actions(storage, client_id) == [f"approval.{winner}"]

    async def test_due_approvals_are_the_pending_ones_past_their_time_earliest_first(
        self, storage: Storage
    ) -> None:
        client_id, other = await _client(storage), await _client(storage)
        db = autocommit(storage)
        late = _approval(client_id, created_at=_at(100))  # runs out at 700
        early = _approval(other, created_at=_at(0))  # at 600
        young = _approval(client_id, created_at=_at(500))  # at 1100
        ended = _approval(client_id, created_at=_at(0), status=Status.REJECTED)
        for approval in (late, early, young, ended):
            assert await db.policies.add_approval(approval)
        assert await db.policies.due_approvals(_at(599), 10) == []
        assert [a.id for a in await db.policies.due_approvals(_at(600), 10)] == [early.id]
        assert [a.id for a in await db.policies.due_approvals(_at(800), 10)] == [
            early.id,
            late.id,
        ]
        assert [a.id for a in await db.policies.due_approvals(_at(800), 1)] == [early.id]
        assert await db.policies.move_approval(early, early.expired(_at(800)))
        assert [a.id for a in await db.policies.due_approvals(_at(2000), 10)] == [
            late.id,
            young.id,
        ]

    async def test_approvals_are_listed_newest_first_by_client_and_status(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        other = await _client(storage)
        db = autocommit(storage)
        oldest = _approval(client_id, created_at=_at(0))
        rejected = _approval(client_id, created_at=_at(10))
        newest = _approval(client_id, created_at=_at(20))
        theirs = _approval(other, created_at=_at(15))
        for approval in (rejected, theirs, newest, oldest):
            assert await db.policies.add_approval(approval)
        moved = rejected.rejected_by("alice", _at(11), "unknown counterparty")
        assert await db.policies.move_approval(rejected, moved)
        assert await db.policies.approvals(client_id=client_id) == [newest, moved, oldest]
        assert await db.policies.approvals(client_id=client_id, limit=2) == [newest, moved]
        assert await db.policies.approvals(client_id=client_id, limit=0) == []
        everyone = await db.policies.approvals()
        assert [a.id for a in everyone if a.id in {theirs.id, newest.id, oldest.id, moved.id}] == [
            newest.id,
            theirs.id,
            moved.id,
            oldest.id,
        ]
        pending = frozenset({Status.PENDING})
        assert await db.policies.approvals(client_id=client_id, statuses=pending) == [
            newest,
            oldest,
        ]
        ended = frozenset({Status.REJECTED, Status.EXPIRED, Status.APPROVED})
        assert await db.policies.approvals(client_id=client_id, statuses=ended) == [moved]
        assert await db.policies.approvals(client_id=other, statuses=ended) == []
        assert await db.policies.approvals(client_id=client_id, statuses=frozenset()) == []
        assert await db.policies.approvals(client_id=new_id()) == []
        # ties on the creation time: by id, newest first as well
        twin = dataclasses.replace(_approval(client_id, created_at=_at(20)), id=newest.id + "z")
        assert await db.policies.add_approval(twin)
        listed = await db.policies.approvals(client_id=client_id, limit=2)
        assert listed == [twin, newest]
        # in a write unit as well (the status filter is one a write unit can send)
        async with storage.write() as unit:
            found = await unit.policies.approvals(client_id=client_id, statuses=ended)
        assert found == [moved]

    # -- operators --------------------------------------------------------------------------
    async def test_operators_are_added_once_listed_by_name_and_disabled_once(
        self, storage: Storage
    ) -> None:
        db = autocommit(storage)
        suffix = new_id()[:8]
        bob = Operator(f"bob-{suffix}", "ab" * 32, A0)
        alice = Operator(f"alice-{suffix}", "cd" * 32, _at(1))
        upper = Operator(f"Zed-{suffix}", "ef" * 32, _at(2))
        for operator in (bob, alice, upper):
            assert await db.policies.add_operator(operator, entry=_entry(None, operator.name))
        taken = Operator(bob.name, "00" * 32, _at(5))
        assert not await db.policies.add_operator(taken, entry=_entry(None, "taken"))
        assert await db.policies.operator(bob.name) == bob
        assert await db.policies.operator(f"nobody-{suffix}") is None
        mine = [o for o in await db.policies.operators() if o.name.endswith(suffix)]
        assert mine == [upper, alice, bob]  # by name, as Python sorts it
        assert await db.policies.disable_operator(
            bob.name, _at(9), entry=_entry(None, f"disable-{suffix}")
        )
        disabled = await db.policies.operator(bob.name)
        assert disabled == dataclasses.replace(bob, disabled_at=_at(9))
        assert disabled is not None and not disabled.active
        assert disabled.disabled_at is not None and disabled.disabled_at.tzinfo is not None
        assert not await db.policies.disable_operator(
            bob.name, _at(10), entry=_entry(None, f"again-{suffix}")
        )
        assert not await db.policies.disable_operator(f"nobody-{suffix}", _at(10))
        assert (await db.policies.operator(bob.name)) == disabled
        assert [a for a in await _actions(storage, None) if a.endswith(suffix)] == [
            bob.name,
            alice.name,
            upper.name,
            f"disable-{suffix}",
        ]

    # -- units --------------------------------------------------------------------------------
    async def test_a_read_unit_cannot_write_policies_and_a_unit_that_raised_writes_nothing(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        operator = Operator(f"op-{new_id()[:8]}", "ab" * 32, A0)
        async with storage.read() as unit:
            writes = [
                unit.policies.add_version(
                    client_id, _policy(), set_at=A0, effective_at=A0, set_by="cli"
                ),
                unit.policies.cancel_version(client_id, 1, A0),
                unit.policies.allow(_destination(client_id)),
                unit.policies.disallow(client_id, ETHEREUM, "0xab", None),
                unit.policies.lock(client_id),
                unit.policies.count(_usage(client_id)),
                unit.policies.uncount(client_id, "r"),
                unit.policies.prune_usage(A0, 10),
                unit.policies.add_approval(_approval(client_id)),
                unit.policies.add_operator(operator),
                unit.policies.disable_operator(operator.name, A0),
            ]
            for write in writes:
                with pytest.raises(RuntimeError):
                    await write
        held = _approval(client_id)
        with pytest.raises(LookupError):
            async with storage.write() as unit:
                await unit.policies.lock(client_id)
                await unit.policies.add_version(
                    client_id,
                    _policy(),
                    set_at=A0,
                    effective_at=A0,
                    set_by="cli",
                    entry=_entry(client_id, "policy.set"),
                )
                assert await unit.policies.allow(_destination(client_id))
                await unit.policies.count(_usage(client_id, "r1"))
                assert await unit.policies.add_approval(held)
                assert await unit.policies.add_operator(operator)
                raise LookupError("rolled back")
        db = autocommit(storage)
        assert await db.policies.versions(client_id) == []
        assert await db.policies.allowlist(client_id) == []
        assert await db.policies.used(client_id, _at(-1)) == []
        assert await db.policies.approval_by_id(held.id) is None
        assert await db.policies.operator(operator.name) is None
        assert await _actions(storage, client_id) == []
        # and the removals and moves of a unit that raised are undone as well
        async with storage.write() as unit:
            await unit.policies.add_version(
                client_id, _policy(), set_at=A0, effective_at=_at(60), set_by="cli"
            )
            assert await unit.policies.allow(_destination(client_id))
            await unit.policies.count(_usage(client_id, "r1"))
            assert await unit.policies.add_approval(held)
            assert await unit.policies.add_operator(operator)
        with pytest.raises(LookupError):
            async with storage.write() as unit:
                assert await unit.policies.cancel_version(client_id, 1, A0)
                assert await unit.policies.disallow(
                    client_id, ETHEREUM, _destination(client_id).address, None
                )
                assert await unit.policies.uncount(client_id, "r1")
                assert await unit.policies.prune_usage(_at(1), 10) == 0
                assert await unit.policies.move_approval(held, held.expired(_at(1)))
                assert await unit.policies.disable_operator(operator.name, _at(1))
                raise LookupError("rolled back")
        assert [v.version for v in await db.policies.versions(client_id)] == [1]
        assert await db.policies.allowlist(client_id) == [_destination(client_id)]
        assert [u.request_id for u in await db.policies.used(client_id, _at(-1))] == ["r1"]
        assert await db.policies.approval_by_id(held.id) == held
        assert await db.policies.operator(operator.name) == operator

    async def test_policy_lock_makes_the_decisions_of_a_client_one_at_a_time(
        self, storage: Storage
    ) -> None:
        """Two write units each count a transfer only if the window's total stays within a
        limit, each under `lock`: the second decides after the first committed, and sees
        its count."""
        client_id = await _client(storage)
        locked = asyncio.Event()
        limit = 15 * 10**16

        async def decide(first: bool) -> bool:
            async with storage.write() as unit:
                await unit.policies.lock(client_id)
                used = await unit.policies.used(client_id, _at(-60))
                if sum(u.amount_units for u in used) + 10**17 > limit:
                    return False
                if first:
                    locked.set()
                    await asyncio.sleep(0.2)  # the other unit is deciding meanwhile
                await unit.policies.count(_usage(client_id, f"first-{first}"))
                return True

        async def second() -> bool:
            await locked.wait()
            return await decide(False)

        assert list(await asyncio.gather(decide(True), second())) == [True, False]
        used = await autocommit(storage).policies.used(client_id, _at(-60))
        assert [u.request_id for u in used] == ["first-True"]
        with pytest.raises(RuntimeError):
            async with storage.read() as unit:
                await unit.policies.lock(client_id)
