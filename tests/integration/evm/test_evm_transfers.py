"""The EVM gateway against a real py-evm chain: balances, fees, native and ERC20 transfers,
receipts decoded into rows, history, re-broadcast, and the PLATFORM gas top-up."""

from __future__ import annotations

from eth_abi import decode as abi_decode
from eth_utils import keccak
from evm_support import ELSEWHERE, build, new_wallet, send

from walletcore.ports import MinimumSends
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.evm.devnet import DevnetEvmGateway, token_artifact
from walletcore_chains.evm.fees import NATIVE_GAS

ETH, USDT, USDC = (
    CONTRACT_CATALOG.asset_by_id(2),
    CONTRACT_CATALOG.asset_by_id(21),
    CONTRACT_CATALOG.asset_by_id(22),
)


async def test_tokens_are_deployed_with_the_asset_tables_decimals(chain: DevnetEvmGateway) -> None:
    abi, bytecode = token_artifact()
    assert bytecode and {item.get("name") for item in abi} >= {"transfer", "balanceOf", "Transfer"}
    for asset in (USDT, USDC):
        out = await chain.w3.eth.call(
            {"to": chain.token_address(asset), "data": keccak(b"decimals()")[:4]}
        )
        assert abi_decode(["uint8"], bytes(out))[0] == asset.decimals == 6


async def test_native_transfer_is_mined_decoded_and_listed(chain: DevnetEvmGateway) -> None:
    alice, bob = new_wallet(), new_wallet()
    assert await chain.balance(alice.address, ETH) == 0
    await chain.fund(alice.address, ETH, 10**18)
    quote = await chain.fee(alice.address, bob.address, ETH, 10**17)
    assert quote.native_units > 0 and quote.native_units % NATIVE_GAS == 0

    tx_hash = await send(chain, ETH, alice, bob.address, 10**17)

    row = await chain.lookup(alice.address, ETH, tx_hash)
    assert (row.type, row.amount_units, row.status) == ("send", 10**17, "success")
    assert 0 < row.fee_units <= quote.native_units and row.date is not None
    assert (await chain.lookup(bob.address, ETH, tx_hash)).type == "receive"
    assert await chain.balance(bob.address, ETH) == 10**17
    assert await chain.balance(alice.address, ETH) == 10**18 - 10**17 - row.fee_units
    assert [r.hash for r in await chain.history(bob.address, ETH, 10)] == [tx_hash]
    assert (await chain.history(alice.address, ETH, 10))[0].hash == tx_hash


async def test_one_wei_is_sent_an_evm_chain_has_no_minimum(chain: DevnetEvmGateway) -> None:
    """The gateway declares no minimum send (`MinimumSends`): one wei lands (zero is a 400
    of the amount's parsing, before any gateway)."""
    assert not isinstance(chain, MinimumSends)
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, ETH, 10**17)
    tx_hash = await send(chain, ETH, alice, bob.address, 1)
    assert (await chain.lookup(bob.address, ETH, tx_hash)).amount_units == 1
    assert await chain.balance(bob.address, ETH) == 1


async def test_rebroadcasting_the_same_bytes_never_sends_twice(chain: DevnetEvmGateway) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    signed = await build(chain, ETH, alice, ELSEWHERE, 10**15)
    before = await chain.balance(ELSEWHERE, ETH)
    assert await chain.broadcast(signed) == signed.tx_hash
    assert await chain.broadcast(signed) == signed.tx_hash  # already known: counts as sent
    assert await chain.balance(ELSEWHERE, ETH) == before + 10**15


async def test_token_transfer_moves_the_token_and_pays_gas_in_eth(chain: DevnetEvmGateway) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, USDT, 5_000_000)
    await chain.fund(alice.address, ETH, 10**17)

    tx_hash = await send(chain, USDT, alice, bob.address, 1_250_000)

    assert await chain.balance(bob.address, USDT) == 1_250_000
    assert await chain.balance(alice.address, USDT) == 3_750_000
    sent = await chain.lookup(alice.address, USDT, tx_hash)
    received = await chain.lookup(bob.address, USDT, tx_hash)
    assert (sent.type, sent.amount_units, sent.status) == ("send", 1_250_000, "success")
    assert (received.type, received.amount_units) == ("receive", 1_250_000)
    assert sent.fee_units == 10**17 - await chain.balance(alice.address, ETH)
    assert [r.hash for r in await chain.history(bob.address, USDT, 10)] == [tx_hash]
    assert len(await chain.history(alice.address, USDT, 10)) == 2  # the mint, the send


async def test_token_lookup_without_a_transfer_log_has_no_type_or_amount(
    chain: DevnetEvmGateway,
) -> None:
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**17)  # gas, but no token: the call reverts
    tx_hash = await send(chain, USDC, alice, ELSEWHERE, 10)
    row = await chain.lookup(alice.address, USDC, tx_hash)
    assert (row.type, row.amount_units, row.status) == (None, None, "failed")
    assert row.fee_units > 0


async def test_lookup_of_another_wallets_or_unknown_transaction_is_not_found(
    chain: DevnetEvmGateway,
) -> None:
    import pytest

    from walletcore.domain.errors import TransactionNotFound

    alice, stranger = new_wallet(), new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    tx_hash = await send(chain, ETH, alice, ELSEWHERE, 10**15)
    with pytest.raises(TransactionNotFound):
        await chain.lookup(stranger.address, ETH, tx_hash)
    with pytest.raises(TransactionNotFound):
        await chain.lookup(alice.address, ETH, "0x" + "ab" * 32)
    with pytest.raises(TransactionNotFound):
        await chain.lookup(alice.address, USDT, tx_hash)  # not a USDT transaction


async def test_confirmation_depth_keeps_a_row_pending(chain: DevnetEvmGateway) -> None:
    from dataclasses import replace

    from walletcore_chains.addresses import validate_address
    from walletcore_chains.evm.gateway import EvmGateway

    deep = EvmGateway(
        replace(chain.config, confirmations=3),
        chain.w3,
        validate_address,
        tokens={USDT.id: chain.token_address(USDT)},
        nonces=chain.nonces,
    )
    alice = new_wallet()
    await chain.fund(alice.address, ETH, 10**18)
    tx_hash = await send(deep, ETH, alice, ELSEWHERE, 10**15)
    row = await deep.lookup(alice.address, ETH, tx_hash)
    assert (row.status, row.date) == ("pending", None)
    chain.mine(2)
    assert (await deep.lookup(alice.address, ETH, tx_hash)).status == "success"


async def test_platform_fee_payer_tops_up_just_the_gas_then_the_token_moves(
    chain: DevnetEvmGateway,
) -> None:
    user, platform, bob = new_wallet(), new_wallet(), new_wallet()
    await chain.fund(user.address, USDT, 2_000_000)  # no ETH at all
    await chain.fund(platform.address, ETH, 10**18)
    quote = await chain.fee(user.address, bob.address, USDT, 2_000_000, fee_payer=platform.address)

    tx_hash = await send(chain, USDT, user, bob.address, 2_000_000, sponsor=platform)

    assert await chain.balance(bob.address, USDT) == 2_000_000
    row = await chain.lookup(user.address, USDT, tx_hash)
    assert (row.type, row.amount_units, row.status) == ("send", 2_000_000, "success")
    platform_spent = 10**18 - await chain.balance(platform.address, ETH)
    assert platform_spent <= quote.native_units
    top_up = (await chain.history(platform.address, ETH, 10))[0]
    assert (top_up.type, top_up.status) == ("send", "success")
    assert platform_spent == top_up.amount_units + top_up.fee_units
    # just enough: the top-up is the transfer's most gas cost; the user keeps only the rest
    assert top_up.amount_units >= row.fee_units
    assert await chain.balance(user.address, ETH) == top_up.amount_units - row.fee_units
    received = (await chain.history(user.address, ETH, 10))[0]
    assert (received.hash, received.type) == (top_up.hash, "receive")


async def test_a_token_transfer_is_no_row_of_the_native_coin(chain: DevnetEvmGateway) -> None:
    import pytest

    from walletcore.domain.errors import TransactionNotFound

    alice = new_wallet()
    await chain.fund(alice.address, USDT, 1_000)
    await chain.fund(alice.address, ETH, 10**17)
    tx_hash = await send(chain, USDT, alice, ELSEWHERE, 1_000)
    with pytest.raises(TransactionNotFound):
        await chain.lookup(alice.address, ETH, tx_hash)
    assert tx_hash not in [r.hash for r in await chain.history(alice.address, ETH, 10)]
