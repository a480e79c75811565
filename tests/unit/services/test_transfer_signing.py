"""Signing a transfer on the core's fakes (walletcore.services.transfers.signing,
docs/transfers.md): the fee cap of each chain, the ladder signed under it, and
`sign_transfer`, which signs the transfer and its rungs in one unseal per wallet, with the
key of the stored address only, and answers an unopenable platform wallet as the
operator's problem, never as the user's wrong password."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from walletcore.domain.assets import Chain
from walletcore.domain.errors import ServerError, WrongWalletPassword
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import FeeQuote, Transfer, UnsignedTransfer
from walletcore.services.transfers import TransferSettings, Wallets
from walletcore.services.transfers.signing import (
    PLATFORM_UNOPENABLE,
    FeeCaps,
    ladder,
    sign_transfer,
)
from walletcore.testing import CONTRACT_CATALOG, FakeKeyStore
from walletcore.testing.chains import FakeGateway, FollowedFakeGateway
from walletcore_chains.descriptions import DESCRIPTIONS

from .conftest import ETH, PASSWORD, SOL, WRONG, elsewhere, units

AT = datetime(2026, 1, 1, tzinfo=UTC)
FEE = units(ETH, "0.00042")


def settings(**caps: str) -> TransferSettings:
    """Built, not read from the environment: `caps` by chain name."""
    chosen = {Chain(name): Decimal(cap) for name, cap in caps.items()}
    return TransferSettings.model_construct(fee_bump="auto", fee_caps=chosen)


def caps(**chosen: str) -> FeeCaps:
    """`settings(**chosen)` over the contract's chains' descriptions (their defaults)."""
    return FeeCaps(settings(**chosen), DESCRIPTIONS)


async def wallet(
    keystore: FakeKeyStore, *, password: str | None = PASSWORD, chain: Chain = Chain.ETHEREUM
) -> WalletRecord:
    """A user's wallet (a platform wallet when `password` is None) on `chain`."""
    if password is None:
        made = await keystore.create_platform_wallet([chain])
        return WalletRecord("c", WalletOwner.PLATFORM, None, made.sealed, made.addresses, AT)
    made = await keystore.create_wallet(password, [chain])
    return WalletRecord("c", WalletOwner.USER, "u", made.sealed, made.addresses, AT)


async def prepared(
    gateway: FakeGateway, sender: WalletRecord, sponsor: WalletRecord | None = None
) -> UnsignedTransfer:
    """0.5 of the chain's coin from `sender`, its fee paid by `sponsor` when given."""
    chain = gateway.chain
    asset = CONTRACT_CATALOG.asset_by_id(SOL if chain == Chain.SOLANA else ETH)
    source = sender.addresses[chain]
    payer = source if sponsor is None else sponsor.addresses[chain]
    transfer = Transfer(asset, source, elsewhere(chain), units(asset.id, "0.5"), payer)
    return await gateway.prepare(transfer, FeeQuote(FEE))


# -- the cap ---------------------------------------------------------------------------------
def test_a_chain_left_out_of_the_caps_keeps_its_descriptions_default() -> None:
    chosen = caps(ETHEREUM="0.01")
    assert chosen.units(Chain.ETHEREUM) == units(ETH, "0.01")
    assert chosen.units(Chain.BITCOIN) == 50_000  # 0.0005 BTC in sat
    assert all(chosen.units(chain) > 0 for chain in DESCRIPTIONS)  # every chain has one
    with pytest.raises(ServerError, match="no installed chain plugin describes TRON"):
        FeeCaps(settings(TRON="1"), {}).units(Chain.TRON)  # never a KeyError


def test_fee_bumping_is_automatic_unless_set_to_manual() -> None:
    assert settings().automatic
    assert not TransferSettings.model_construct(fee_bump="manual", fee_caps={}).automatic


# -- the ladder ----------------------------------------------------------------------------
async def test_the_ladder_is_offered_under_the_chains_cap() -> None:
    keystore = FakeKeyStore()
    gateway = FollowedFakeGateway(Chain.ETHEREUM)
    unsigned = await prepared(gateway, await wallet(keystore))
    rungs = ladder(caps(ETHEREUM="0.0007"), gateway, unsigned)
    cap = units(ETH, "0.0007")
    assert gateway.caps == [cap]
    assert [r.kind for r in rungs] == ["bump", "bump"]
    assert all(FEE < r.fee_units <= cap for r in rungs)


async def test_a_gateway_that_re_signs_or_has_no_lifecycle_has_no_ladder() -> None:
    keystore = FakeKeyStore()
    solana = FollowedFakeGateway(Chain.SOLANA)  # re-signs an expired transfer instead
    unsigned = await prepared(solana, await wallet(keystore, chain=Chain.SOLANA))
    assert ladder(caps(), solana, unsigned) == []
    assert solana.caps == []  # not even asked
    plain = FakeGateway(Chain.ETHEREUM)
    assert ladder(caps(), plain, await prepared(plain, await wallet(keystore))) == []


async def test_a_rung_over_the_cap_from_a_gateway_is_a_server_error() -> None:
    keystore = FakeKeyStore()
    gateway = FollowedFakeGateway(Chain.ETHEREUM, ignores_cap=True)
    unsigned = await prepared(gateway, await wallet(keystore))
    with pytest.raises(ServerError, match="crosses the cap; nothing was signed"):
        ladder(caps(ETHEREUM="0.0005"), gateway, unsigned)


# -- signing ---------------------------------------------------------------------------------
async def test_the_transfer_and_its_rungs_are_signed_in_one_unseal() -> None:
    keystore = FakeKeyStore()
    gateway = FollowedFakeGateway(Chain.ETHEREUM)
    sender = await wallet(keystore)
    unsigned = await prepared(gateway, sender)
    rungs = ladder(caps(), gateway, unsigned)
    signed, attempts = await sign_transfer(
        keystore, gateway, unsigned, Wallets(sender), PASSWORD, rungs
    )
    assert keystore.unseals == 1
    assert [s.tx_hash for s in gateway.assembled] == [
        signed.tx_hash,
        *(a.tx_hash for a in attempts),
    ]
    assert [(a.kind, a.fee_units, a.at) for a in attempts] == [
        (r.kind, r.fee_units, None) for r in rungs
    ]  # signed, not broadcast
    assert len({signed.tx_hash, *(a.tx_hash for a in attempts)}) == 1 + len(rungs)


async def test_a_sponsored_transfer_is_signed_by_both_wallets() -> None:
    keystore = FakeKeyStore()
    gateway = FollowedFakeGateway(Chain.ETHEREUM)
    sender, sponsor = await wallet(keystore), await wallet(keystore, password=None)
    unsigned = await prepared(gateway, sender, sponsor)
    rungs = ladder(caps(), gateway, unsigned)
    signed, attempts = await sign_transfer(
        keystore, gateway, unsigned, Wallets(sender, sponsor), PASSWORD, rungs
    )
    assert keystore.unseals == 2  # one per wallet, whatever the number of rungs
    assert signed.tx_hash == gateway.assembled[0].tx_hash
    assert len(attempts) == len(rungs) > 0


async def test_a_wrong_user_password_is_the_users_error() -> None:
    keystore = FakeKeyStore()
    gateway = FollowedFakeGateway(Chain.ETHEREUM)
    sender = await wallet(keystore)
    unsigned = await prepared(gateway, sender)
    with pytest.raises(WrongWalletPassword):
        await sign_transfer(keystore, gateway, unsigned, Wallets(sender), WRONG)
    assert gateway.assembled == []


async def test_an_unopenable_platform_wallet_is_the_operators_problem() -> None:
    keystore = FakeKeyStore()
    gateway = FollowedFakeGateway(Chain.ETHEREUM)
    # a platform send (no password) whose wallet the master key cannot open
    sealed_otherwise = await wallet(keystore)
    unsigned = await prepared(gateway, sealed_otherwise)
    with pytest.raises(ServerError) as caught:
        await sign_transfer(keystore, gateway, unsigned, Wallets(sealed_otherwise), None)
    assert caught.value.message == PLATFORM_UNOPENABLE
    # a sponsor that cannot be opened, the user's password right: never a 401
    sender, sponsor = await wallet(keystore), await wallet(keystore)
    unsigned = await prepared(gateway, sender, sponsor)
    with pytest.raises(ServerError) as caught:
        await sign_transfer(keystore, gateway, unsigned, Wallets(sender, sponsor), PASSWORD)
    assert caught.value.message == PLATFORM_UNOPENABLE
    assert gateway.assembled == []


async def test_a_key_that_is_not_the_stored_addresss_signs_nothing() -> None:
    keystore = FakeKeyStore()
    gateway = FollowedFakeGateway(Chain.ETHEREUM)
    sender = await wallet(keystore)
    unsigned = await prepared(gateway, sender)
    other = await wallet(keystore)
    swapped = replace(sender, sealed=other.sealed)  # the record names another key's address
    with pytest.raises(ServerError, match="does not match its stored address"):
        await sign_transfer(keystore, gateway, unsigned, Wallets(swapped), PASSWORD)
    assert gateway.assembled == []
