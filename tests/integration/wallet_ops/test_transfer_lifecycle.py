"""The transfer lifecycle in the core (walletcore.services.transfers, docs/transfers.md),
driven through the real send service, the follow job, `/txid`, a `/send` replay and the
operator's commands, over a scripted chain: the sandbox chain's transfers (so keys, seals
and signatures are real) behind a `TransferFollower` whose sightings the test sets.

The chains' own sightings and ladders are proven on their real engines (anvil, bitcoind,
LiteSVM, the loopback Tron node) in tests/integration/{evm,bitcoin,solana,tron}; here the
rules the core keeps on top of them: when a send is stuck, dropped, replaced, re-signed
and settled, that one X-Request-Id stays one transfer, and that a move is stored once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from dependency_injector import providers
from ops_support import PASSWORD, Ops

from walletcore.domain.assets import Chain
from walletcore.domain.errors import InvalidRequest, TransactionNotFound, TransferRejected
from walletcore.domain.sends import ChainStatus
from walletcore.domain.wallet import TxRow
from walletcore.ports import (
    FeeQuote,
    Replacement,
    Sighting,
    SignedTransfer,
    TransferFollower,
    UnsignedTransfer,
)
from walletcore.services.send_record import SignedSend
from walletcore.services.transfers import Transfers, TransferSettings

pytestmark = pytest.mark.asyncio

ETH, SOL = 2, 6
STUCK_AFTER = 60.0


class ScriptedChain(TransferFollower):
    """The sandbox chain's transfers behind a scripted `TransferFollower`.

    Nothing reaches the sandbox ledger after the first broadcast (a ledger has no nonces:
    a rung applied there would be a second transfer); `sightings[hash]` is what the chain
    says of a hash (MISSING when unset), `refuse` the hashes a broadcast refuses."""

    def __init__(self, inner: Any, *, resigns: bool = False, rungs: int = 3) -> None:
        self.inner = inner
        self.chain = inner.chain
        self.resigns = resigns
        self.stuck_after_seconds = STUCK_AFTER
        self.rungs = rungs
        self.sightings: dict[str, Sighting] = {}
        self.refuse: set[str] = set()
        self.broadcasts: list[str] = []
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def broadcast(self, signed: SignedTransfer) -> str:
        self.broadcasts.append(signed.tx_hash)
        if signed.tx_hash in self.refuse:
            raise TransferRejected("Transfer rejected by the network: replacement underpriced")
        self.sightings.setdefault(signed.tx_hash, Sighting.PENDING)
        return signed.tx_hash

    async def sighting(self, sender: str, asset: Any, signed: SignedTransfer) -> Sighting:
        self.asked.append(signed.tx_hash)
        return self.sightings.get(signed.tx_hash, Sighting.MISSING)

    async def lookup(self, address: str, asset: Any, tx_hash: str) -> TxRow:
        seen = self.sightings.get(tx_hash)
        if seen is None or seen is Sighting.MISSING:
            raise TransactionNotFound()
        status = {Sighting.SUCCESS: "success", Sighting.FAILED: "failed"}.get(seen, "pending")
        return TxRow(tx_hash, "send", 1, 21_000, status, None)

    def replacements(self, unsigned: UnsignedTransfer, cap_units: int) -> Sequence[Replacement]:
        body = json.loads(unsigned.body)
        found: list[Replacement] = []
        fee = unsigned.fee.native_units
        for n in range(1, self.rungs + 1):
            fee = fee * 5 // 4 + 1
            if fee > cap_units:
                return found
            found.append(self._rung("bump", unsigned, {**body, "fee": fee, "rung": n}, fee))
        cancel_fee = fee * 5 // 4 + 1
        if cancel_fee <= cap_units:
            cancel = {**body, "to": body["from"], "amount": 0, "fee": cancel_fee, "rung": "c"}
            found.append(self._rung("cancel", unsigned, cancel, cancel_fee))
        return found

    def _rung(
        self, kind: str, unsigned: UnsignedTransfer, body: Mapping[str, Any], fee: int
    ) -> Replacement:
        raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        payload = self.inner._payload(raw)
        rung = UnsignedTransfer(unsigned.transfer, FeeQuote(fee), payload, raw)
        return Replacement(kind, rung, fee)  # type: ignore[arg-type]


def _scripted(ops: Ops, *, resigns: bool = False, **settings: Any) -> dict[Chain, ScriptedChain]:
    scripted = {chain: ScriptedChain(g.inner, resigns=resigns) for chain, g in ops.gateways.items()}
    ops.container.gateways.override(providers.Object(scripted))
    ops.container.transfer_settings.override(providers.Object(TransferSettings(**settings)))
    return scripted


async def _record(ops: Ops, client: Any, request_id: str) -> Any:
    return await ops.db.sends.get(client.client_id, request_id)


async def _signed(ops: Ops, client: Any, request_id: str) -> SignedSend:
    return SignedSend.from_bytes((await _record(ops, client, request_id)).raw_tx)


async def _follow(ops: Ops) -> int:
    settled: int = await ops.container.jobs().follow_sends()
    return settled


async def _audit(ops: Ops, action: str) -> list[Any]:
    entries = await ops.db.audit.newest(1000)
    return [e for e in reversed(entries) if e.action == action]


async def _eth_send(ops: Ops, request_id: str = "pay-1") -> tuple[Any, str, Any]:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], ETH, "2")
    receipt = await ops.send(client, user, ETH, "0.5", request_id=request_id)
    return client, user, receipt


async def test_a_send_is_signed_with_its_ladder_under_the_cap(ops: Ops) -> None:
    chains = _scripted(ops, fee_caps={Chain.ETHEREUM: "0.01"})
    client, _, receipt = await _eth_send(ops)
    signed = await _signed(ops, client, "pay-1")
    assert [r.kind for r in signed.ladder] == ["bump", "bump", "bump", "cancel"]
    fees = [signed.fee_units, *(r.fee_units for r in signed.ladder)]
    assert fees == sorted(fees) and len(set(fees)) == len(fees)
    assert all(r.fee_units <= 10**16 for r in signed.ladder)
    assert all(r.at is None for r in signed.ladder)  # signed, never broadcast
    # each rung carries a valid signature of the sender over its own body
    verify = ops.container.signature_verifier()
    eth = chains[Chain.ETHEREUM].inner
    for rung in signed.ladder:
        envelope = json.loads(rung.raw)
        assert envelope["body"] != json.loads(signed.raw)["body"]
        ((signer, signature),) = envelope["signatures"]
        assert signer == signed.sender
        payload = eth._payload(envelope["body"].encode())
        assert verify(Chain.ETHEREUM, signer, payload, bytes.fromhex(signature))
    assert chains[Chain.ETHEREUM].broadcasts == [receipt.tx_hash]


async def test_a_cap_below_the_first_rung_signs_no_ladder(ops: Ops) -> None:
    _scripted(ops, fee_caps={Chain.ETHEREUM: "0.0000000000000001"})
    client, _, _ = await _eth_send(ops)
    assert (await _signed(ops, client, "pay-1")).ladder == ()


async def test_a_stuck_send_is_bumped_and_one_request_id_stays_one_transfer(
    ops: Ops,
) -> None:
    chains = _scripted(ops)
    eth = chains[Chain.ETHEREUM]
    client, user, first = await _eth_send(ops)
    assert await _follow(ops) == 0
    assert (await _record(ops, client, "pay-1")).chain_status is ChainStatus.PENDING
    ops.clock.advance(STUCK_AFTER + 1)
    await _follow(ops)
    record = await _record(ops, client, "pay-1")
    signed = SignedSend.from_bytes(record.raw_tx)
    assert record.chain_status is ChainStatus.STUCK
    assert (signed.kind, signed.earlier[0].tx_hash) == ("bump", first.tx_hash)
    assert eth.broadcasts == [first.tx_hash, signed.tx_hash]
    assert len(signed.ladder) == 3  # two bumps and the cancel left
    (replaced,) = await _audit(ops, "send.replace")
    assert replaced.target == signed.tx_hash and first.tx_hash in replaced.detail
    # a replay of the send answers the transfer's current hash and fee, sends nothing
    again = await ops.send(client, user, ETH, "0.5", request_id="pay-1")
    assert (again.tx_hash, again.status) == (signed.tx_hash, "pending")
    assert again.fee != first.fee
    assert len(eth.broadcasts) == 2
    # the bump is mined: the transfer succeeds, and /txid of the first hash says so
    eth.sightings[signed.tx_hash] = Sighting.SUCCESS
    eth.sightings[first.tx_hash] = Sighting.CONFLICT
    assert await _follow(ops) == 1
    record = await _record(ops, client, "pay-1")
    assert record.chain_status is ChainStatus.SUCCESS
    found = await ops.reads.txid(
        ops.caller(client), asset_id=ETH, tx_hash=first.tx_hash, user_id=user
    )
    assert (found.row.hash, found.row.status) == (signed.tx_hash, "success")
    final = await ops.send(client, user, ETH, "0.5", request_id="pay-1")
    assert (final.tx_hash, final.status) == (signed.tx_hash, "success")
    (settle,) = await _audit(ops, "send.settle")
    assert settle.detail == "stuck -> success"


async def test_the_first_transaction_mined_after_a_bump_settles_the_transfer(ops: Ops) -> None:
    chains = _scripted(ops)
    eth = chains[Chain.ETHEREUM]
    client, _, first = await _eth_send(ops)
    ops.clock.advance(STUCK_AFTER + 1)
    await _follow(ops)
    bump = (await _signed(ops, client, "pay-1")).tx_hash
    eth.sightings[bump] = Sighting.CONFLICT  # the original won the race
    eth.sightings[first.tx_hash] = Sighting.SUCCESS
    assert await _follow(ops) == 1
    record = await _record(ops, client, "pay-1")
    assert (record.chain_status, record.tx_hash) == (ChainStatus.SUCCESS, first.tx_hash)


async def test_manual_bumping_leaves_a_stuck_send_to_the_operator(ops: Ops) -> None:
    chains = _scripted(ops, fee_bump="manual")
    eth = chains[Chain.ETHEREUM]
    client, _, first = await _eth_send(ops)
    ops.clock.advance(STUCK_AFTER + 1)
    await _follow(ops)
    record = await _record(ops, client, "pay-1")
    assert (record.chain_status, record.tx_hash) == (ChainStatus.STUCK, first.tx_hash)
    assert eth.broadcasts == [first.tx_hash]
    transfers: Transfers = ops.container.transfers()
    shown = await transfers.replace(
        client.client_id, "pay-1", cancel=False, request_id_audit="op-1"
    )
    assert shown["current"]["kind"] == "bump"
    assert shown["earlier"][0]["txHash"] == first.tx_hash
    assert eth.broadcasts == [first.tx_hash, shown["current"]["txHash"]]


async def test_a_dropped_send_is_broadcast_again_then_refilled_by_the_next_rung(
    ops: Ops,
) -> None:
    chains = _scripted(ops)
    eth = chains[Chain.ETHEREUM]
    client, user, first = await _eth_send(ops)
    eth.sightings[first.tx_hash] = Sighting.MISSING  # evicted from the mempool
    await _follow(ops)
    assert eth.broadcasts == [first.tx_hash, first.tx_hash]  # the same bytes again
    assert (await _record(ops, client, "pay-1")).chain_status is ChainStatus.PENDING
    (rebroadcast,) = await _audit(ops, "send.rebroadcast")
    assert rebroadcast.target == first.tx_hash
    # evicted again, and now refused (underpriced): the next bump takes its place
    eth.sightings[first.tx_hash] = Sighting.MISSING
    eth.refuse.add(first.tx_hash)
    await _follow(ops)
    signed = await _signed(ops, client, "pay-1")
    assert signed.kind == "bump"
    assert (await _record(ops, client, "pay-1")).chain_status is ChainStatus.DROPPED
    assert eth.broadcasts[-1] == signed.tx_hash
    # /txid of either hash while the node lacks the bump: the transfer, pending (not 404)
    eth.sightings[signed.tx_hash] = Sighting.MISSING
    found = await ops.reads.txid(
        ops.caller(client), asset_id=ETH, tx_hash=first.tx_hash, user_id=user
    )
    assert (found.row.hash, found.row.status, found.row.type) == (signed.tx_hash, "pending", "send")


async def test_a_dropped_send_with_every_bump_refused_is_cancelled(ops: Ops) -> None:
    chains = _scripted(ops)
    eth = chains[Chain.ETHEREUM]
    client, user, first = await _eth_send(ops)
    ladder = (await _signed(ops, client, "pay-1")).ladder
    eth.refuse.update({first.tx_hash, *(r.tx_hash for r in ladder if r.kind == "bump")})
    eth.sightings[first.tx_hash] = Sighting.MISSING
    for _ in range(5):
        await _follow(ops)
    signed = await _signed(ops, client, "pay-1")
    assert signed.kind == "cancel" and signed.ladder == ()
    eth.sightings[signed.tx_hash] = Sighting.SUCCESS
    await _follow(ops)
    record = await _record(ops, client, "pay-1")
    assert record.chain_status is ChainStatus.FAILED
    found = await ops.reads.txid(
        ops.caller(client), asset_id=ETH, tx_hash=first.tx_hash, user_id=user
    )
    # the transfer's own row: what the recipient was to receive (0.5 less the first fee)
    assert (found.row.status, found.row.amount_units) == ("failed", signed.amount_units)
    assert 0 < signed.amount_units < 5 * 10**17
    (settle,) = await _audit(ops, "send.settle")
    assert "cancelled" in settle.detail
    replay = await ops.send(client, user, ETH, "0.5", request_id="pay-1")
    assert (replay.tx_hash, replay.status) == (signed.tx_hash, "failed")


async def test_a_transfer_whose_place_a_foreign_transaction_took_fails(ops: Ops) -> None:
    chains = _scripted(ops)
    eth = chains[Chain.ETHEREUM]
    client, _, first = await _eth_send(ops)
    eth.sightings[first.tx_hash] = Sighting.CONFLICT
    await _follow(ops)
    assert (await _record(ops, client, "pay-1")).chain_status is ChainStatus.FAILED
    (settle,) = await _audit(ops, "send.settle")
    assert "did not send" in settle.detail


async def test_two_follow_runs_at_once_store_one_replacement(ops: Ops) -> None:
    chains = _scripted(ops)
    eth = chains[Chain.ETHEREUM]
    client, _, first = await _eth_send(ops)
    ops.clock.advance(STUCK_AFTER + 1)
    jobs = ops.container.jobs()
    await asyncio.gather(jobs.follow_sends(), jobs.follow_sends(), jobs.follow_sends())
    assert len(await _audit(ops, "send.replace")) == 1
    signed = await _signed(ops, client, "pay-1")
    assert eth.broadcasts == [first.tx_hash, signed.tx_hash]


async def test_an_expired_user_send_waits_dropped_and_a_replay_with_the_password_resigns(
    ops: Ops,
) -> None:
    chains = _scripted(ops, resigns=True)
    sol = chains[Chain.SOLANA]
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.SOLANA], SOL, "2")
    first = await ops.send(client, user, SOL, "0.5", request_id="sol-1")
    assert (await _signed(ops, client, "sol-1")).ladder == ()  # SOLANA re-signs instead
    sol.sightings[first.tx_hash] = Sighting.EXPIRED
    await _follow(ops)
    record = await _record(ops, client, "sol-1")
    assert (record.chain_status, record.tx_hash) == (ChainStatus.DROPPED, first.tx_hash)
    assert sol.broadcasts == [first.tx_hash]  # never re-signed without the password
    # the replay with a wrong password signs nothing
    with pytest.raises(Exception) as wrong:
        await ops.send(client, user, SOL, "0.5", request_id="sol-1", password="nope nope nope")
    assert getattr(wrong.value, "status", None) == 401
    assert sol.broadcasts == [first.tx_hash]
    again = await ops.send(client, user, SOL, "0.5", request_id="sol-1", password=PASSWORD)
    assert again.tx_hash != first.tx_hash and again.status == "pending"
    signed = await _signed(ops, client, "sol-1")
    assert (signed.kind, signed.tx_hash, signed.earlier[0].tx_hash) == (
        "resign",
        again.tx_hash,
        first.tx_hash,
    )
    assert sol.broadcasts == [first.tx_hash, again.tx_hash]
    assert (await _record(ops, client, "sol-1")).chain_status is ChainStatus.PENDING
    (resigned,) = await _audit(ops, "send.resign")
    assert resigned.user_id == user
    # a second replay while the new one is live re-signs nothing
    third = await ops.send(client, user, SOL, "0.5", request_id="sol-1")
    assert third.tx_hash == again.tx_hash and len(sol.broadcasts) == 2


async def test_a_send_that_may_still_land_is_never_resigned(ops: Ops) -> None:
    chains = _scripted(ops, resigns=True)
    sol = chains[Chain.SOLANA]
    client = await ops.client(platform=True)
    platform = await ops.platform_address(client, Chain.SOLANA)
    await ops.fund(platform, SOL, "2")
    sends = ops.container.sends()
    first = await sends.platform_send(
        ops.caller(client),
        request_id="p-1",
        asset_id=SOL,
        recipient="4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T",
        amount="0.1",
    )
    sol.sightings[first.tx_hash] = Sighting.MISSING  # lost, but its blockhash is live
    transfers: Transfers = ops.container.transfers()
    with pytest.raises(InvalidRequest, match="provably never land"):
        await transfers.replace(client.client_id, "p-1", cancel=False, request_id_audit="op")
    await _follow(ops)
    assert sol.broadcasts == [first.tx_hash, first.tx_hash]  # broadcast again, not re-signed
    # expired: the job re-signs a platform send itself
    sol.sightings[first.tx_hash] = Sighting.EXPIRED
    await _follow(ops)
    signed = await _signed(ops, client, "p-1")
    assert signed.kind == "resign" and sol.broadcasts[-1] == signed.tx_hash
    # an operator's cancel of a live re-signed send is refused; of an expired one, final
    with pytest.raises(InvalidRequest):
        await transfers.replace(client.client_id, "p-1", cancel=True, request_id_audit="op")
    sol.sightings[signed.tx_hash] = Sighting.EXPIRED
    shown = await transfers.replace(client.client_id, "p-1", cancel=True, request_id_audit="op")
    assert (shown["chainStatus"], shown["status"]) == ("failed", "failed")


async def test_the_operator_is_told_when_no_rung_is_left(ops: Ops) -> None:
    _scripted(ops, fee_caps={Chain.ETHEREUM: "0.0000000000000001"})
    client, _, _ = await _eth_send(ops)
    transfers: Transfers = ops.container.transfers()
    with pytest.raises(InvalidRequest, match="no bump left"):
        await transfers.replace(client.client_id, "pay-1", cancel=False, request_id_audit="op")
    shown = await transfers.show(client.client_id, "pay-1")
    assert shown["ladder"] == [] and shown["status"] == "pending"
    assert "raw" not in json.dumps(shown)


async def test_another_users_replaced_hash_is_not_theirs(ops: Ops) -> None:
    chains = _scripted(ops)
    client, _, first = await _eth_send(ops)
    other = await ops.user(client)
    ops.clock.advance(STUCK_AFTER + 1)
    await _follow(ops)
    chains[Chain.ETHEREUM].sightings[first.tx_hash] = Sighting.MISSING
    with pytest.raises(TransactionNotFound):
        await ops.reads.txid(ops.caller(client), asset_id=ETH, tx_hash=first.tx_hash, user_id=other)
