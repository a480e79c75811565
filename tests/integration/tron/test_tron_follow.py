"""`TronGateway` as a `TransferFollower` against the loopback TRON node over HTTP: what the
chain says of one broadcast transaction (pending, in the pool or in a block not yet
solidified; success; failed; missing after a node lost it; expired), re-sending the same
bytes, and re-signing an expired transfer, with the balances proving one transfer only."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tron_support import TRX, USDT, Wallet, make_gateway, signed_transfer, tronweb_check

from walletcore.domain.assets import Chain
from walletcore.domain.errors import NodeUnavailable, TransferRejected
from walletcore.ports import FeeQuote, Sighting, SignedTransfer, Transfer, TransferFollower
from walletcore_chains.testing.tron_node import TronTestNode
from walletcore_chains.tron import proto, validate_address
from walletcore_chains.tron.client import TronClient
from walletcore_chains.tron.gateway import TronGateway

SUN = 1_000_000
#: the gateway's expiration in these tests (seconds after the reference block)
LIFE = 60


@asynccontextmanager
async def chain(**node_options: Any) -> AsyncIterator[tuple[TronTestNode, TronGateway]]:
    with TronTestNode(**node_options) as node:
        gateway = make_gateway(node, expiration_seconds=LIFE)
        try:
            yield node, gateway
        finally:
            await gateway.aclose()


def funded(node: TronTestNode, sun: int = 100 * SUN) -> Wallet:
    wallet = Wallet()
    node.fund(wallet.address, sun)
    return wallet


def expiration_of(signed: SignedTransfer) -> int:
    last = bytes.fromhex(json.loads(signed.raw)["txs"][-1])
    return proto.Raw.decode(proto.split_signed(last)[0]).expiration


def past_expiration(node: TronTestNode, signed: SignedTransfer, *, by: float) -> None:
    """Move the chain's head `by` seconds past `signed`'s expiration."""
    node.advance((expiration_of(signed) - node.head_time()) / 1000 + by)


async def test_the_gateway_follows_transfers_and_resigns_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from walletcore_chains.tron.config import TronSettings, rpc_gateway

    async with chain() as (node, gateway):
        assert isinstance(gateway, TransferFollower)
        assert gateway.resigns is True and gateway.stuck_after_seconds == 60.0
        sender, recipient = funded(node), funded(node, 1)
        transfer = Transfer(TRX, sender.address, recipient.address, SUN, sender.address)
        quote = await gateway.fee(sender.address, recipient.address, TRX, SUN)
        unsigned = await gateway.prepare(transfer, quote)
        assert gateway.replacements(unsigned, 10**12) == []
        assert node.broadcasts == []  # offline: nothing was sent
    monkeypatch.setenv("WALLETCORE_TRON_STUCK_AFTER_SECONDS", "15")
    settings = TronSettings(tron_node_url="http://127.0.0.1:1/tron")
    context = SimpleNamespace(
        chain=Chain.TRON, settings=settings, validate_address=validate_address
    )
    built = rpc_gateway.build(context)  # type: ignore[arg-type]
    assert isinstance(built, TronGateway) and built.stuck_after_seconds == 15.0
    await built.aclose()


async def test_pending_until_solidified_then_success() -> None:
    async with chain(auto_solidify=False) as (node, gateway):
        sender, recipient = funded(node), funded(node, 1)
        signed, _ = await signed_transfer(gateway, sender, recipient.address, TRX, 3 * SUN)
        tx_id = await gateway.broadcast(signed)
        assert tx_id in node.landed  # in a block, not solidified
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.PENDING
        assert (await gateway.lookup(sender.address, TRX, tx_id)).status == "pending"
        node.solidify()
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.SUCCESS
        assert (await gateway.lookup(sender.address, TRX, tx_id)).status == "success"
        # long past its expiration, a landed transaction stays what it is
        past_expiration(node, signed, by=3600)
        node.solidify()
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.SUCCESS


async def test_a_dropped_transaction_is_missing_and_its_same_bytes_land_it_once() -> None:
    async with chain(auto_pack=False) as (node, gateway):
        sender, recipient = funded(node), funded(node, 1)
        before = node.balance(sender.address)
        signed, _ = await signed_transfer(gateway, sender, recipient.address, TRX, 5 * SUN)
        tx_id = await gateway.broadcast(signed)
        assert list(node.pending) == [tx_id] and not node.landed
        # in the pool: pending (gettransactionbyid does not show it; the pool does)
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.PENDING
        assert node.drop_pending() == [tx_id]
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.MISSING
        # within its expiration the same bytes are valid: sent again, and it lands
        assert await gateway.broadcast(signed) == tx_id
        assert await gateway.broadcast(signed) == tx_id  # held already: DUP counts as sent
        assert node.broadcasts == [tx_id] * 3 and list(node.pending) == [tx_id]
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.PENDING
        assert node.pack() == [tx_id]
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.SUCCESS
        assert await gateway.broadcast(signed) == tx_id  # landed: DUP, sent
        assert list(node.landed) == [tx_id] and not node.pending
        fee = node.info(tx_id).get("fee", 0)
        assert node.balance(recipient.address) == 1 + 5 * SUN
        assert node.balance(sender.address) == before - 5 * SUN - fee


async def test_an_expired_transfer_is_refused_and_its_resigned_one_lands_never_both() -> None:
    async with chain(auto_pack=False) as (node, gateway):
        sender, recipient = funded(node), funded(node, 1)
        node.reset_usage()
        before = node.balance(sender.address)
        signed, _ = await signed_transfer(gateway, sender, recipient.address, TRX, 7 * SUN)
        old = await gateway.broadcast(signed)
        node.drop_pending()
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.MISSING
        # the head just past the expiration, within the margin: not yet called expired
        # (docs/tron.md), though the node refuses the bytes already: nothing sent
        past_expiration(node, signed, by=1)
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.MISSING
        with pytest.raises(TransferRejected, match="expired before it was sent; nothing was sent"):
            await gateway.broadcast(signed)
        assert not node.pending and not node.landed
        # past the margin: it can never land, re-signing is safe
        past_expiration(node, signed, by=gateway.options.expiry_margin_seconds + 1)
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.EXPIRED
        # re-signed as the core does it: `prepare` again with a fresh quote
        again, _ = await signed_transfer(gateway, sender, recipient.address, TRX, 7 * SUN)
        assert again.tx_hash != old and expiration_of(again) > node.head_time()
        new = await gateway.broadcast(again)
        assert new == again.tx_hash
        assert await gateway.sighting(sender.address, TRX, again) is Sighting.PENDING
        assert node.pack() == [new]
        assert await gateway.sighting(sender.address, TRX, again) is Sighting.SUCCESS
        # the old bytes can never come back
        with pytest.raises(TransferRejected, match="nothing was sent"):
            await gateway.broadcast(signed)
        assert node.pack() == []
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.EXPIRED
        assert list(node.landed) == [new]
        assert node.balance(recipient.address) == 1 + 7 * SUN
        assert node.balance(sender.address) == before - 7 * SUN - node.info(new).get("fee", 0)


async def test_expired_only_once_the_solidified_head_is_past_it() -> None:
    """A head past the expiration may still be undone (a fork); the solidified one not."""
    async with chain(auto_pack=False, auto_solidify=False) as (node, gateway):
        sender, recipient = funded(node), funded(node, 1)
        signed, _ = await signed_transfer(gateway, sender, recipient.address, TRX, SUN)
        await gateway.broadcast(signed)
        node.drop_pending()
        past_expiration(node, signed, by=gateway.options.expiry_margin_seconds + 600)
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.MISSING
        node.solidify()
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.EXPIRED


async def test_a_node_that_remembers_a_dropped_txid_converges_through_expiry() -> None:
    """java-tron answers DUP to bytes it saw, even evicted (its transactionIdCache): the
    re-send "counts as sent" yet nothing holds it; it reads MISSING until it expired,
    then the re-signed transfer lands, once."""
    async with chain(auto_pack=False) as (node, gateway):
        sender, recipient = funded(node), funded(node, 1)
        signed, _ = await signed_transfer(gateway, sender, recipient.address, TRX, 2 * SUN)
        old = await gateway.broadcast(signed)
        assert node.drop_pending(old, remember=True) == [old]
        assert await gateway.broadcast(signed) == old  # DUP: sent, as far as the node says
        assert not node.pending
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.MISSING
        assert node.pack() == []
        past_expiration(node, signed, by=gateway.options.expiry_margin_seconds + 1)
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.EXPIRED
        again, _ = await signed_transfer(gateway, sender, recipient.address, TRX, 2 * SUN)
        await gateway.broadcast(again)
        assert node.pack() == [again.tx_hash]
        assert await gateway.sighting(sender.address, TRX, again) is Sighting.SUCCESS
        assert node.balance(recipient.address) == 1 + 2 * SUN and list(node.landed) == [
            again.tx_hash
        ]


async def test_a_trc20_send_out_of_energy_reads_failed() -> None:
    async with chain(auto_solidify=False) as (node, gateway):
        sender, fresh = funded(node), Wallet()
        node.fund_token(sender.address, 41, 10 * SUN)
        quote = await gateway.fee(sender.address, fresh.address, USDT, SUN)
        # a quote that underestimates (a holder's energy for a new holder): fee_limit too low
        short = FeeQuote(quote.native_units, bandwidth=quote.bandwidth, energy=quote.energy // 3)
        unsigned = await gateway.prepare(
            Transfer(USDT, sender.address, fresh.address, SUN, sender.address), short
        )
        signed = gateway.assemble(unsigned, {sender.address: sender.sign(unsigned.payload)})
        before = node.balance(sender.address)
        tx_id = await gateway.broadcast(signed)
        assert await gateway.sighting(sender.address, USDT, signed) is Sighting.PENDING
        node.solidify()
        assert await gateway.sighting(sender.address, USDT, signed) is Sighting.FAILED
        info = node.info(tx_id)
        assert info["receipt"]["result"] == "OUT_OF_ENERGY"
        assert before - node.balance(sender.address) == info["fee"] > 0  # the fee is spent
        assert node.token_balance(fresh.address, 41) == 0
        assert (await gateway.lookup(sender.address, USDT, tx_id)).status == "failed"


async def test_a_platform_send_is_followed_by_its_transfer() -> None:
    async with chain(auto_solidify=False) as (node, gateway):
        platform, user, holder = funded(node, 500 * SUN), Wallet(), funded(node, 1)
        node.fund_token(user.address, 41, 20 * SUN)
        node.fund_token(holder.address, 41, 1)
        signed, _ = await signed_transfer(
            gateway, user, holder.address, USDT, 5 * SUN, sponsor=platform
        )
        assert len(json.loads(signed.raw)["txs"]) == 2
        tx_id = await gateway.broadcast(signed)
        _topup, transfer = node.order
        assert transfer == tx_id == signed.tx_hash
        assert await gateway.sighting(user.address, USDT, signed) is Sighting.PENDING
        node.solidify()
        assert await gateway.sighting(user.address, USDT, signed) is Sighting.SUCCESS
        assert node.token_balance(holder.address, 41) == 5 * SUN + 1


async def test_a_resigned_transaction_reads_right_in_tronweb(tronweb: Path) -> None:
    async with chain(auto_pack=False) as (node, gateway):
        sender, recipient = funded(node), funded(node, 1)
        node.fund_token(sender.address, 41, 50 * SUN)
        resigned = []
        for asset in (TRX, USDT):
            signed, _ = await signed_transfer(gateway, sender, recipient.address, asset, SUN)
            await gateway.broadcast(signed)
            node.drop_pending()
            past_expiration(node, signed, by=gateway.options.expiry_margin_seconds + 1)
            assert await gateway.sighting(sender.address, asset, signed) is Sighting.EXPIRED
            again, _ = await signed_transfer(gateway, sender, recipient.address, asset, SUN)
            await gateway.broadcast(again)
            assert node.pack() == [again.tx_hash]
            resigned.append(again.tx_hash)
        reported = [
            node._wallet_gettransactionbyid({"value": t, "visible": False}) for t in resigned
        ]
        for tx, seen in zip(reported, tronweb_check(tronweb, reported), strict=True):
            assert seen["txID"] == tx["txID"]
            assert seen["rawDataHex"] == tx["raw_data_hex"]
            assert seen["signer"] == sender.address


async def test_a_node_error_raises_never_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    async with chain(auto_pack=False) as (node, gateway):
        sender, recipient = funded(node), funded(node, 1)
        signed, _ = await signed_transfer(gateway, sender, recipient.address, TRX, SUN)
        await gateway.broadcast(signed)
        node.drop_pending()
        for path in (
            "/walletsolidity/getnowblock",
            "/walletsolidity/gettransactioninfobyid",
            "/wallet/gettransactioninfobyid",
            "/wallet/gettransactionbyid",
            "/wallet/gettransactionfrompending",
        ):
            node.broken = {path}
            with pytest.raises(NodeUnavailable, match="could not answer"):
                await gateway.sighting(sender.address, TRX, signed)
        node.broken = set()
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.MISSING
        # a provider without the pending-pool API (404): the pool is not seen, no error
        await gateway.broadcast(signed)
        answer = node.answer

        def without_pool(path: str, body: dict[str, Any]) -> dict[str, Any]:
            if path == "/wallet/gettransactionfrompending":
                raise KeyError(path)
            return answer(path, body)

        monkeypatch.setattr(node, "answer", without_pool)
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.MISSING
        monkeypatch.setattr(node, "answer", answer)
        assert await gateway.sighting(sender.address, TRX, signed) is Sighting.PENDING
    unreachable = TronGateway(
        TronClient("http://127.0.0.1:1", timeout=2), validate_address, tokens={}
    )
    with pytest.raises(NodeUnavailable, match="unreachable"):
        await unreachable.sighting(sender.address, TRX, signed)
    await unreachable.aclose()


async def test_bytes_that_are_not_the_followed_hash_are_refused(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, recipient = funded(node), funded(node, 1)
    signed, _ = await signed_transfer(gateway, sender, recipient.address, TRX, SUN)
    with pytest.raises(ValueError, match="not its transaction's txID"):
        await gateway.sighting(sender.address, TRX, SignedTransfer(signed.raw, "ab" * 32))
    with pytest.raises(ValueError, match="not a signed TRON transfer"):
        await gateway.sighting(sender.address, TRX, SignedTransfer(b"{}", signed.tx_hash))
    assert node.broadcasts == []
