"""`TronGateway` against the loopback TRON node over HTTP: sends verified by the node
(txID, signature, bandwidth, energy on py-evm) and by tronweb; fees against what the node
charges; the PLATFORM top-up; lookups and history; refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tron_support import TRX, USDT, Wallet, signed_transfer, tronweb_check

from walletcore.domain.errors import (
    AssetUnavailableOnEndpoint,
    InsufficientFunds,
    InsufficientGas,
    TransactionNotFound,
    TransferRejected,
)
from walletcore.ports import MinimumSends
from walletcore_chains.testing.tron_node import PARAMETERS, TronTestNode
from walletcore_chains.tron import proto
from walletcore_chains.tron.client import API_KEY_HEADER
from walletcore_chains.tron.gateway import RESULT_RESERVE, TronGateway

SUN = 1_000_000
BYTE, ENERGY = PARAMETERS["getTransactionFee"], PARAMETERS["getEnergyFee"]
ACTIVATION = PARAMETERS["getCreateNewAccountFeeInSystemContract"]
CREATE = PARAMETERS["getCreateAccountFee"]


def funded(node: TronTestNode, sun: int = 100 * SUN) -> Wallet:
    wallet = Wallet()
    node.fund(wallet.address, sun)
    return wallet


def bandwidth_of(signed_raw: bytes) -> list[int]:
    return [len(bytes.fromhex(t)) + RESULT_RESERVE for t in json.loads(signed_raw)["txs"]]


async def test_trx_send_lands_verified_and_costs_what_fee_said(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, recipient = funded(node), funded(node, 1)
    node.reset_usage()
    sender_before = node.balance(sender.address)
    # free bandwidth used up: the bandwidth is burned
    node.accounts[proto_raw(sender.address)].free_used = PARAMETERS["getFreeNetLimit"]
    signed, quote = await signed_transfer(gateway, sender, recipient.address, TRX, 5 * SUN)
    assert quote.bandwidth == bandwidth_of(signed.raw)[0]
    assert quote.energy is None
    assert quote.native_units == quote.bandwidth * BYTE
    tx_id = await gateway.broadcast(signed)
    assert tx_id == signed.tx_hash and node.broadcasts == [tx_id]
    info = node.info(tx_id)
    assert info["receipt"] == {"net_fee": quote.native_units}
    assert info["fee"] == quote.native_units
    assert node.balance(recipient.address) == 1 + 5 * SUN
    assert node.balance(sender.address) == sender_before - 5 * SUN - quote.native_units
    assert node.last_headers.get(API_KEY_HEADER) == "test-key"
    row = await gateway.lookup(sender.address, TRX, tx_id)
    assert (row.type, row.amount_units, row.fee_units, row.status) == (
        "send",
        5 * SUN,
        quote.native_units,
        "success",
    )
    assert row.date is not None
    received = await gateway.lookup(recipient.address, TRX, tx_id)
    assert (received.type, received.amount_units) == ("receive", 5 * SUN)


def proto_raw(address: str) -> bytes:
    from walletcore_chains.testing.tron_node import raw21

    return raw21(address)


async def test_free_bandwidth_pays_and_the_quote_says_so(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, recipient = funded(node), funded(node, 1)
    signed, quote = await signed_transfer(gateway, sender, recipient.address, TRX, SUN)
    assert quote.native_units == 0 and quote.bandwidth == bandwidth_of(signed.raw)[0]
    tx_id = await gateway.broadcast(signed)
    assert node.info(tx_id)["receipt"] == {"net_usage": quote.bandwidth}
    assert "fee" not in node.info(tx_id)
    assert node.accounts[proto_raw(sender.address)].free_used == quote.bandwidth


async def test_activation_fee_for_a_new_recipient(node: TronTestNode, gateway: TronGateway) -> None:
    sender, fresh = funded(node), Wallet()
    signed, quote = await signed_transfer(gateway, sender, fresh.address, TRX, 2 * SUN)
    assert quote.native_units == CREATE + ACTIVATION  # 1.1 TRX, free bandwidth never pays it
    before = node.balance(sender.address)
    tx_id = await gateway.broadcast(signed)
    assert node.info(tx_id)["fee"] == quote.native_units
    assert node.balance(sender.address) == before - 2 * SUN - quote.native_units
    assert node.balance(fresh.address) == 2 * SUN
    row = await gateway.lookup(sender.address, TRX, tx_id)
    assert row.fee_units == CREATE + ACTIVATION


async def test_one_sun_activates_a_new_account_tron_has_no_minimum(
    node: TronTestNode, gateway: TronGateway
) -> None:
    """TRX to an account never activated: any amount creates it (the activation is a fee),
    so the gateway declares no minimum send (`MinimumSends`) and the core asks for none."""
    assert not isinstance(gateway, MinimumSends)
    sender, fresh = funded(node), Wallet()
    signed, quote = await signed_transfer(gateway, sender, fresh.address, TRX, 1)
    tx_id = await gateway.broadcast(signed)
    assert node.info(tx_id)["fee"] == quote.native_units == CREATE + ACTIVATION
    assert node.balance(fresh.address) == 1


async def test_user_pays_from_the_amount(node: TronTestNode, gateway: TronGateway) -> None:
    sender, fresh = funded(node, 3 * SUN), Wallet()
    signed, quote = await signed_transfer(
        gateway, sender, fresh.address, TRX, 3 * SUN, fee_from_amount=True
    )
    await gateway.broadcast(signed)
    assert node.balance(sender.address) == 0
    assert node.balance(fresh.address) == 3 * SUN - quote.native_units


async def test_signatures_and_txids_agree_with_tronweb(
    node: TronTestNode, gateway: TronGateway, tronweb: Path
) -> None:
    sender, recipient = funded(node), funded(node, 1)
    node.fund_token(sender.address, 41, 50 * SUN)
    ids = []
    for asset in (TRX, USDT):
        signed, _ = await signed_transfer(gateway, sender, recipient.address, asset, 7 * SUN)
        ids.append(await gateway.broadcast(signed))
    reported = [node._wallet_gettransactionbyid({"value": t, "visible": False}) for t in ids]
    checked = tronweb_check(tronweb, reported)
    for tx, seen in zip(reported, checked, strict=True):
        assert seen["txID"] == tx["txID"]
        assert seen["rawDataHex"] == tx["raw_data_hex"]
        assert seen["signer"] == sender.address
    assert reported[1]["raw_data"]["fee_limit"] > 0


async def test_a_forged_signature_is_refused_nothing_sent(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, other, recipient = funded(node), Wallet(), funded(node, 1)
    quote = await gateway.fee(sender.address, recipient.address, TRX, SUN)
    from walletcore.ports import Transfer

    unsigned = await gateway.prepare(
        Transfer(TRX, sender.address, recipient.address, SUN, sender.address), quote
    )
    forged = gateway.assemble(unsigned, {sender.address: other.sign(unsigned.payload)})
    before = node.balance(sender.address)
    with pytest.raises(TransferRejected, match="bad signature; nothing was sent"):
        await gateway.broadcast(forged)
    assert node.balance(sender.address) == before and not node.landed


async def test_a_retry_resends_the_same_bytes_once(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, recipient = funded(node), funded(node, 1)
    signed, _ = await signed_transfer(gateway, sender, recipient.address, TRX, SUN)
    first = await gateway.broadcast(signed)
    again = await gateway.broadcast(signed)  # DUP_TRANSACTION_ERROR: sent
    assert first == again and node.broadcasts == [first, first] and len(node.landed) == 1
    assert node.balance(recipient.address) == 1 + SUN


async def test_trc20_energy_from_the_estimate_is_what_the_node_charges(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, holder, fresh = funded(node), funded(node, 1), Wallet()
    node.fund_token(sender.address, 41, 100 * SUN)
    node.fund_token(holder.address, 41, 1)
    energies = {}
    for label, to in (("holder", holder.address), ("new holder", fresh.address)):
        before = node.balance(sender.address)
        signed, quote = await signed_transfer(gateway, sender, to, USDT, 10 * SUN)
        tx_id = await gateway.broadcast(signed)
        receipt = node.info(tx_id)["receipt"]
        assert receipt["result"] == "SUCCESS", label
        assert receipt["energy_usage_total"] == quote.energy, label
        assert quote.bandwidth == bandwidth_of(signed.raw)[0], label
        charged = before - node.balance(sender.address)
        # the first transfer's bytes fit the free 600 a day, the second's do not: burned
        net_fee = 0 if label == "holder" else quote.bandwidth * BYTE
        assert receipt.get("net_fee", 0) == net_fee, label
        assert charged == net_fee + quote.energy * ENERGY == node.info(tx_id)["fee"]
        # the quote is the most it can burn: the bytes and the energy with its margin
        assert quote.native_units == net_fee + -(-quote.energy * 12 // 10) * ENERGY
        energies[label] = quote.energy
        row = await gateway.lookup(sender.address, USDT, tx_id)
        assert (row.type, row.amount_units, row.fee_units, row.status) == (
            "send",
            10 * SUN,
            charged,
            "success",
        )
    assert energies["new holder"] > 1.5 * energies["holder"]  # a new balance slot
    assert node.token_balance(fresh.address, 41) == 10 * SUN
    assert await gateway.balance(fresh.address, USDT) == 10 * SUN
    assert await gateway.balance(sender.address, USDT) == 80 * SUN


async def test_staked_energy_and_bandwidth_pay_first(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, holder = funded(node), funded(node, 1)
    node.fund_token(sender.address, 41, 100 * SUN)
    node.fund_token(holder.address, 41, 1)
    node.stake(sender.address, bandwidth=5_000, energy=10_000)
    before = node.balance(sender.address)
    signed, quote = await signed_transfer(gateway, sender, holder.address, USDT, SUN)
    tx_id = await gateway.broadcast(signed)
    receipt = node.info(tx_id)["receipt"]
    assert receipt["energy_usage"] == 10_000
    assert receipt["energy_fee"] == (quote.energy - 10_000) * ENERGY
    assert before - node.balance(sender.address) == receipt["energy_fee"]
    assert receipt["net_usage"] == quote.bandwidth
    assert quote.native_units == (-(-quote.energy * 12 // 10) - 10_000) * ENERGY


async def test_out_of_energy_is_failed_and_its_fee_is_charged(
    node: TronTestNode, gateway: TronGateway
) -> None:
    from walletcore.ports import FeeQuote, Transfer

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
    info = node.info(tx_id)
    assert info["receipt"]["result"] == "OUT_OF_ENERGY" and info["result"] == "FAILED"
    fee_limit = -(-(quote.energy // 3) * 12 // 10) * ENERGY
    assert before - node.balance(sender.address) == fee_limit == info["fee"]
    assert node.token_balance(fresh.address, 41) == 0
    row = await gateway.lookup(sender.address, USDT, tx_id)
    assert (row.type, row.amount_units, row.fee_units, row.status) == (
        "send",
        SUN,
        fee_limit,
        "failed",
    )


async def test_platform_tops_the_sender_up_and_activates_it(
    node: TronTestNode, gateway: TronGateway
) -> None:
    platform, user, holder = funded(node, 500 * SUN), Wallet(), funded(node, 1)
    node.fund_token(user.address, 41, 20 * SUN)  # the user never held TRX: not activated
    node.fund_token(holder.address, 41, 1)
    platform_before = node.balance(platform.address)
    signed, quote = await signed_transfer(
        gateway, user, holder.address, USDT, 5 * SUN, sponsor=platform
    )
    txs = json.loads(signed.raw)["txs"]
    assert len(txs) == 2
    tx_id = await gateway.broadcast(signed)
    topup_id, transfer_id = node.order
    assert transfer_id == tx_id
    topup = node.info(topup_id)
    user_tx = node.info(transfer_id)
    assert user_tx["receipt"]["result"] == "SUCCESS"
    assert node.token_balance(holder.address, 41) == 5 * SUN + 1
    # the platform paid exactly the quote; the user's transfer burned what it used of it
    assert platform_before - node.balance(platform.address) == quote.native_units
    assert topup["fee"] == CREATE + ACTIVATION
    used = user_tx.get("fee", 0)
    assert node.balance(user.address) == quote.native_units - topup["fee"] - used
    assert user_tx["receipt"]["energy_usage_total"] == quote.energy
    assert await gateway.balance(user.address, TRX) == node.balance(user.address)


async def test_platform_trx_send_needs_no_topup_when_free_bandwidth_pays(
    node: TronTestNode, gateway: TronGateway
) -> None:
    platform, user, recipient = funded(node), funded(node, 5 * SUN), funded(node, 1)
    signed, quote = await signed_transfer(
        gateway, user, recipient.address, TRX, 5 * SUN, sponsor=platform
    )
    assert quote.native_units == 0 and len(json.loads(signed.raw)["txs"]) == 1
    await gateway.broadcast(signed)
    assert node.balance(recipient.address) == 5 * SUN + 1 and node.balance(user.address) == 0


async def test_history_and_lookup_agree(node: TronTestNode, gateway: TronGateway) -> None:
    sender, recipient = funded(node), funded(node, 1)
    node.fund_token(sender.address, 41, 100 * SUN)
    sent = []
    for asset, units in ((TRX, SUN), (USDT, 2 * SUN), (TRX, 3 * SUN)):
        signed, _ = await signed_transfer(gateway, sender, recipient.address, asset, units)
        sent.append(await gateway.broadcast(signed))
    trx = await gateway.history(sender.address, TRX, 10)
    assert [r.hash for r in trx] == [sent[2], sent[0]]
    assert [(r.type, r.amount_units, r.status) for r in trx] == [
        ("send", 3 * SUN, "success"),
        ("send", SUN, "success"),
    ]
    for row in trx:
        assert row == await gateway.lookup(sender.address, TRX, row.hash)
    tokens = await gateway.history(recipient.address, USDT, 10)
    assert [(r.hash, r.type, r.amount_units) for r in tokens] == [(sent[1], "receive", 2 * SUN)]
    assert tokens[0] == await gateway.lookup(recipient.address, USDT, sent[1])
    assert await gateway.history(recipient.address, TRX, 1) == [
        await gateway.lookup(recipient.address, TRX, sent[2])
    ]
    with pytest.raises(TransactionNotFound):
        await gateway.lookup(sender.address, USDT, sent[0])  # a TRX transfer, not USDT
    with pytest.raises(TransactionNotFound):
        await gateway.lookup(sender.address, TRX, "ab" * 32)


async def test_pending_until_solidified() -> None:
    from tron_support import make_gateway

    with TronTestNode(auto_solidify=False) as node:
        gateway = make_gateway(node)
        try:
            sender, recipient = funded(node), funded(node, 1)
            signed, _ = await signed_transfer(gateway, sender, recipient.address, TRX, SUN)
            tx_id = await gateway.broadcast(signed)
            row = await gateway.lookup(sender.address, TRX, tx_id)
            assert (row.status, row.date) == ("pending", None)
            assert await gateway.history(sender.address, TRX, 10) == []  # solidified only
            node.solidify()
            row = await gateway.lookup(sender.address, TRX, tx_id)
            assert row.status == "success" and row.date is not None
        finally:
            await gateway.aclose()


async def test_estimate_falls_back_to_a_constant_call(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, holder = funded(node), funded(node, 1)
    node.fund_token(sender.address, 41, 10 * SUN)
    with_estimate = await gateway.fee(sender.address, holder.address, USDT, SUN)
    node.estimate_energy = False
    assert await gateway.fee(sender.address, holder.address, USDT, SUN) == with_estimate
    assert "/wallet/triggerconstantcontract" in node.paths


async def test_refusals_change_nothing(node: TronTestNode, gateway: TronGateway) -> None:
    from walletcore.ports import FeeQuote, Transfer
    from walletcore.testing import CONTRACT_CATALOG

    poor, recipient = funded(node, SUN), funded(node, 1)
    node.accounts[proto_raw(poor.address)].free_used = PARAMETERS["getFreeNetLimit"]
    quote = FeeQuote(10 * SUN, bandwidth=300)
    unsigned = await gateway.prepare(
        Transfer(TRX, poor.address, recipient.address, SUN, poor.address), quote
    )
    signed = gateway.assemble(unsigned, {poor.address: poor.sign(unsigned.payload)})
    with pytest.raises(InsufficientFunds, match="nothing was sent"):
        await gateway.broadcast(signed)  # 1 TRX + bandwidth burn > 1 TRX
    zero = funded(node, 100)
    node.accounts[proto_raw(zero.address)].free_used = PARAMETERS["getFreeNetLimit"]
    unsigned = await gateway.prepare(
        Transfer(TRX, zero.address, recipient.address, 50, zero.address), quote
    )
    signed = gateway.assemble(unsigned, {zero.address: zero.sign(unsigned.payload)})
    with pytest.raises(InsufficientGas, match="nothing was sent"):
        await gateway.broadcast(signed)  # BANDWITH_ERROR
    assert not node.landed and node.balance(poor.address) == SUN
    with pytest.raises(AssetUnavailableOnEndpoint):
        await TronGateway(gateway.client, gateway._validator, tokens={}).balance(poor.address, USDT)
    assert CONTRACT_CATALOG.asset_by_id(42).chain.value == "TRON"
    # the quote binds: a transfer costing more than quoted is refused before signing
    with pytest.raises(TransferRejected, match="request a new fee quote"):
        await gateway.prepare(
            Transfer(TRX, poor.address, recipient.address, SUN, poor.address), FeeQuote(0, 0)
        )


async def test_an_expired_transaction_is_refused_unless_it_landed(
    node: TronTestNode, gateway: TronGateway
) -> None:
    sender, recipient = funded(node), funded(node, 1)
    signed, _ = await signed_transfer(gateway, sender, recipient.address, TRX, SUN)
    node.blocks.append((len(node.blocks), b"\1" * 32, 2**42))  # the chain moved past it
    with pytest.raises(TransferRejected, match="expired before it was sent; nothing was sent"):
        await gateway.broadcast(signed)
    assert not node.landed


async def test_an_unreachable_node_is_503() -> None:
    from walletcore.domain.errors import NodeUnavailable
    from walletcore_chains.tron import validate_address
    from walletcore_chains.tron.client import TronClient

    gateway = TronGateway(TronClient("http://127.0.0.1:1", timeout=2), validate_address, tokens={})
    someone = Wallet().address
    with pytest.raises(NodeUnavailable, match="unreachable; retry with backoff"):
        await gateway.balance(someone, TRX)
    with pytest.raises(NodeUnavailable):
        await gateway.fee(someone, Wallet().address, TRX, 1)
    signed = SignedTransfer_of_nothing()
    with pytest.raises(NodeUnavailable, match="nothing was sent"):
        await gateway.broadcast(signed)
    assert "127.0.0.1" not in repr(gateway) + repr(gateway.client)
    await gateway.aclose()


def SignedTransfer_of_nothing():
    from walletcore.ports import SignedTransfer

    raw = proto.Raw(
        proto.Contract(proto.TRANSFER, b"\x41" + b"\1" * 20, b"\x41" + b"\2" * 20, 1),
        b"\0\0",
        b"\0" * 8,
        2,
        1,
    ).encode()
    tx = proto.signed_bytes(raw, [b"\0" * 65]).hex()
    return SignedTransfer(json.dumps({"txs": [tx]}).encode(), proto.txid(raw))
