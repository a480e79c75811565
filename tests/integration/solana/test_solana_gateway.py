"""The Solana gateway on LiteSVM, in process and through the JSON-RPC engine over HTTP (the
`chain` fixture runs each test on both): SOL and SPL transfers, associated token accounts
paid by the fee payer, the platform as fee payer, blockhash expiry, re-broadcast, and
refusals."""

from __future__ import annotations

import pytest
from sol_support import RpcSolanaGateway, build, new_wallet, send

from walletcore.domain.errors import InsufficientFunds, TransactionNotFound, TransferRejected
from walletcore.ports import SendMinimum, SignedTransfer
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.solana.gateway import RENT_RULE
from walletcore_chains.solana.node import BLOCKHASH_VALIDITY, LAMPORTS_PER_SIGNATURE

Gateway = DevnetSolanaGateway | RpcSolanaGateway
SOL, USDT, USDC = (
    CONTRACT_CATALOG.asset_by_id(6),
    CONTRACT_CATALOG.asset_by_id(61),
    CONTRACT_CATALOG.asset_by_id(62),
)
RENT = 2_039_280  # a 165-byte token account, rent-exempt


async def test_sol_transfer_lands_and_reads_back(chain: Gateway) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    quote = await chain.fee(alice.address, bob.address, SOL, 10**8)
    assert quote.native_units == LAMPORTS_PER_SIGNATURE

    signature = await send(chain, SOL, alice, bob.address, 10**8)

    assert await chain.balance(bob.address, SOL) == 10**8
    assert await chain.balance(alice.address, SOL) == 10**9 - 10**8 - LAMPORTS_PER_SIGNATURE
    sent = await chain.lookup(alice.address, SOL, signature)
    assert (sent.type, sent.amount_units, sent.fee_units, sent.status) == (
        "send",
        10**8,
        LAMPORTS_PER_SIGNATURE,
        "success",
    )
    assert sent.date is not None
    assert (await chain.lookup(bob.address, SOL, signature)).type == "receive"
    assert [r.hash for r in await chain.history(bob.address, SOL, 10)] == [signature]
    assert [r.type for r in await chain.history(alice.address, SOL, 10)] == ["send", "receive"]


async def test_the_same_signed_bytes_land_once(chain: Gateway) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    bob = new_wallet()
    signed = await build(chain, SOL, alice, bob.address, 10**6)
    assert await chain.broadcast(signed) == signed.tx_hash
    assert await chain.broadcast(signed) == signed.tx_hash
    assert await chain.balance(bob.address, SOL) == 10**6


async def test_spl_transfer_creates_the_recipients_token_account_once(
    chain: Gateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, USDT, 9_000_000)
    await chain.fund(alice.address, SOL, 10**8)
    first_quote = await chain.fee(alice.address, bob.address, USDT, 1)
    assert first_quote.native_units == LAMPORTS_PER_SIGNATURE + RENT

    signature = await send(chain, USDT, alice, bob.address, 4_000_000)

    assert await chain.balance(bob.address, USDT) == 4_000_000
    assert await chain.balance(alice.address, USDT) == 5_000_000
    assert await chain.balance(alice.address, SOL) == 10**8 - first_quote.native_units
    row = await chain.lookup(bob.address, USDT, signature)
    assert (row.type, row.amount_units, row.status) == ("receive", 4_000_000, "success")
    assert (await chain.fee(alice.address, bob.address, USDT, 1)).native_units == (
        LAMPORTS_PER_SIGNATURE  # the account exists now
    )
    await send(chain, USDT, alice, bob.address, 1_000_000)
    assert [r.amount_units for r in await chain.history(bob.address, USDT, 10)] == [
        1_000_000,
        4_000_000,
    ]
    assert [r.type for r in await chain.history(alice.address, USDT, 10)] == [
        "send",
        "send",
        "receive",
    ]
    with pytest.raises(TransactionNotFound):
        await chain.lookup(alice.address, USDC, signature)


async def test_the_platform_signs_as_fee_payer_and_pays_fee_and_rent(
    chain: Gateway,
) -> None:
    user, platform, bob = new_wallet(), new_wallet(), new_wallet()
    await chain.fund(user.address, USDC, 3_000_000)  # no SOL at all
    await chain.fund(platform.address, SOL, 10**9)
    quote = await chain.fee(user.address, bob.address, USDC, 3_000_000, fee_payer=platform.address)
    assert quote.native_units == 2 * LAMPORTS_PER_SIGNATURE + RENT

    signature = await send(chain, USDC, user, bob.address, 3_000_000, sponsor=platform)

    assert await chain.balance(bob.address, USDC) == 3_000_000
    assert await chain.balance(user.address, SOL) == 0
    assert await chain.balance(platform.address, SOL) == 10**9 - quote.native_units
    row = await chain.lookup(user.address, USDC, signature)
    assert (row.type, row.amount_units, row.fee_units) == (
        "send",
        3_000_000,
        2 * LAMPORTS_PER_SIGNATURE,
    )


async def test_refusals_are_clear_400s_and_send_nothing(chain: Gateway) -> None:
    alice, bob, broke = new_wallet(), new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**7)
    await chain.fund(broke.address, USDT, 1_000_000)
    with pytest.raises(InsufficientFunds) as funds:
        await send(chain, SOL, alice, bob.address, 10**9)
    assert funds.value.status == 400 and "nothing was sent" in funds.value.message
    with pytest.raises(InsufficientFunds):
        await send(chain, USDT, alice, bob.address, 1)  # no USDT account
    with pytest.raises(InsufficientFunds) as fee:
        await send(chain, USDT, broke, bob.address, 1)  # tokens, no SOL for the fee
    assert "fee" in fee.value.message
    assert await chain.balance(bob.address, SOL) == 0
    assert await chain.balance(alice.address, SOL) == 10**7


async def test_a_new_account_must_receive_its_rent_exempt_minimum(chain: Gateway) -> None:
    """The runtime refuses a SOL transfer that leaves a new account below rent exemption,
    once it is signed and sent (`InsufficientFundsForRent`): `minimum_send` tells the core
    before; an account that exists, and a token transfer, have no minimum."""
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**8)
    rent = await chain.node.rent_exempt(0)
    assert rent == 890_880
    assert await chain.minimum_send(bob.address, SOL) == SendMinimum(rent, RENT_RULE)
    assert await chain.minimum_send(bob.address, USDC) is None
    with pytest.raises(InsufficientFunds):
        await send(chain, SOL, alice, bob.address, rent - 1)
    assert await chain.balance(bob.address, SOL) == 0
    await send(chain, SOL, alice, bob.address, rent)
    assert await chain.minimum_send(bob.address, SOL) is None
    await send(chain, SOL, alice, bob.address, 1)
    assert await chain.balance(bob.address, SOL) == rent + 1


async def test_an_expired_blockhash_never_lands_and_a_landed_one_stays_sent(
    chain: Gateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    landed = await build(chain, SOL, alice, bob.address, 10**6)
    await chain.broadcast(landed)
    stale = await build(chain, SOL, alice, bob.address, 2 * 10**6)  # another message
    svm = chain.svm if isinstance(chain, RpcSolanaGateway) else chain.node.svm
    svm.warp_to_slot(svm.get_clock().slot + BLOCKHASH_VALIDITY + 1)
    svm.expire_blockhash()
    with pytest.raises(TransferRejected, match="expired"):
        await chain.broadcast(stale)
    assert await chain.broadcast(landed) == landed.tx_hash  # landed before: still sent
    assert await chain.balance(bob.address, SOL) == 10**6
    with pytest.raises(TransferRejected):
        await chain.broadcast(SignedTransfer(b"{}", "x"))


async def test_two_equal_transfers_under_one_blockhash_both_land(
    chain: Gateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    first = await build(chain, SOL, alice, bob.address, 10**6)
    second = await build(chain, SOL, alice, bob.address, 10**6)
    assert first.tx_hash != second.tx_hash
    await chain.broadcast(first)
    await chain.broadcast(second)
    assert await chain.balance(bob.address, SOL) == 2 * 10**6
