"""WalletService: create, extend, addresses, platform wallets, password rules, the audit."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.errors import (
    ApiClientNotFound,
    InvalidCredentials,
    InvalidPassword,
    InvalidPasswordBadRequest,
    InvalidRequest,
    PlatformWalletNotFound,
    UserNotFound,
    WrongWalletPassword,
)
from walletcore.domain.ids import new_id
from walletcore.domain.wallet import WalletOwner
from walletcore.services.wallets import CreatedWallet, password_error_for
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains import hd, sealing
from walletcore_chains.descriptions import DESCRIPTIONS

if TYPE_CHECKING:
    from conftest import Wallets

PASSWORD = "correct horse battery staple"
BTC, ETH, USDT_ETH, BNB, TRX, USDT_TRON, POL, SOL, USDC_SOL = 1, 2, 21, 3, 4, 41, 5, 6, 62


async def _stored(wallets: Wallets, client_id: str, user_id: str) -> dict[Chain, str]:
    wallet = await wallets.db.wallets.get(client_id, WalletOwner.USER, user_id)
    assert wallet is not None
    return dict(wallet.addresses)


# -- /create ------------------------------------------------------------------------------
async def test_create_makes_a_user_and_a_wallet_for_the_enabled_chains(wallets: Wallets) -> None:
    client = await wallets.client(SOL, USDT_TRON, BTC)
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    assert isinstance(created, CreatedWallet)
    assert re.fullmatch(r"[0-9a-f]{24}", created.user_id)
    assert list(created.addresses) == [Chain.BITCOIN, Chain.TRON, Chain.SOLANA]  # catalog order
    assert len(created.mnemonic.split()) == 24
    seed = hd.seed_from_mnemonic(created.mnemonic)
    assert hd.derive_addresses(seed, list(created.addresses)) == created.addresses
    assert await wallets.db.wallets.get_user(client.client_id, created.user_id) is not None
    assert await _stored(wallets, client.client_id, created.user_id) == created.addresses
    assert created.mnemonic not in repr(created)
    [entry] = await wallets.db.audit.newest()
    assert (entry.action, entry.outcome, entry.user_id) == ("wallet.create", "ok", created.user_id)


async def test_evm_chains_share_the_address(wallets: Wallets) -> None:
    client = await wallets.client(ETH, BNB, POL)
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    assert list(created.addresses) == [Chain.ETHEREUM, Chain.BSC, Chain.POLYGON]
    assert len(set(created.addresses.values())) == 1


async def test_every_wallet_is_new(wallets: Wallets) -> None:
    client = await wallets.client(BTC)
    caller = await wallets.caller(client)
    first = await wallets.service.create(caller, password=PASSWORD)
    second = await wallets.service.create(caller, password=PASSWORD)
    assert first.user_id != second.user_id
    assert first.mnemonic != second.mnemonic
    assert first.addresses != second.addresses


@pytest.mark.parametrize(
    ("password", "message"),
    [
        (None, "password is required"),
        ("", "password is required"),
        ("seven77", "password must be 8 to 256 characters"),
        ("x" * 257, "password must be 8 to 256 characters"),
        ("e\u0301" * 4, "password must be 8 to 256 characters"),  # 4 characters once composed
        (12345678, "password must be a string"),
        (b"bytes password", "password must be a string"),
        (["a list"], "password must be a string"),
        ("abc\ud800defgh", "password must be valid Unicode text"),
    ],
)
async def test_create_refuses_a_password_outside_the_rules(
    wallets: Wallets, password: object, message: str
) -> None:
    client = await wallets.client(BTC)
    with pytest.raises(InvalidRequest) as caught:
        await wallets.service.create(await wallets.caller(client), password=password)
    assert caught.value.status == 400
    assert caught.value.message == message
    [entry] = await wallets.db.audit.newest()
    assert (entry.action, entry.outcome, entry.user_id) == ("wallet.create", "400", None)


@pytest.mark.parametrize("password", ["8 chars!", "y" * 256, "\u00e9" * 8, "pass word  "])
async def test_create_accepts_passwords_at_the_bounds(wallets: Wallets, password: str) -> None:
    client = await wallets.client(ETH)
    created = await wallets.service.create(await wallets.caller(client), password=password)
    extended = await wallets.service.extend(
        await wallets.caller(client), user_id=created.user_id, password=password
    )
    assert extended == created.addresses


async def test_a_client_with_no_enabled_chain_gets_an_empty_map(wallets: Wallets) -> None:
    client = await wallets.client()
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    assert created.addresses == {}


# -- /addresses -----------------------------------------------------------------------------
async def test_addresses_follow_the_enabled_chains(wallets: Wallets) -> None:
    client = await wallets.client(BTC, TRX, SOL)
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    addresses = await wallets.service.addresses(
        await wallets.caller(client), user_id=created.user_id.upper()
    )
    assert addresses == created.addresses

    await wallets.db.clients.update(replace(client, enabled_assets=(BTC, SOL)))
    addresses = await wallets.service.addresses(
        await wallets.caller(client), user_id=created.user_id
    )
    assert list(addresses) == [Chain.BITCOIN, Chain.SOLANA]

    await wallets.db.clients.update(replace(client, enabled_assets=(BTC, TRX, SOL, ETH)))
    addresses = await wallets.service.addresses(
        await wallets.caller(client), user_id=created.user_id
    )
    assert list(addresses) == [Chain.BITCOIN, Chain.TRON, Chain.SOLANA]  # ETH needs /extend


async def test_an_environment_limit_hides_a_chain(wallets: Wallets) -> None:
    from walletcore.services.assets import AssetPolicy
    from walletcore.settings import DEFAULT_UNAVAILABLE

    client = await wallets.client(BTC, SOL)
    wallets.service._policy = AssetPolicy(CONTRACT_CATALOG, [SOL], DEFAULT_UNAVAILABLE)
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    assert list(created.addresses) == [Chain.BITCOIN]


@pytest.mark.parametrize(
    ("user_id", "error"),
    [(None, InvalidRequest), ("nope", InvalidRequest), ("ab" * 12, UserNotFound)],
)
async def test_addresses_of_an_unknown_user(wallets: Wallets, user_id: object, error: type) -> None:
    client = await wallets.client(BTC)
    with pytest.raises(error):
        await wallets.service.addresses(await wallets.caller(client), user_id=user_id)


async def test_another_clients_user_is_not_found(wallets: Wallets) -> None:
    mine, theirs = await wallets.client(BTC, ETH), await wallets.client(BTC, ETH)
    created = await wallets.service.create(await wallets.caller(theirs), password=PASSWORD)
    caller = await wallets.caller(mine)
    with pytest.raises(UserNotFound) as caught:
        await wallets.service.addresses(caller, user_id=created.user_id)
    assert caught.value.status == 404
    with pytest.raises(UserNotFound):
        await wallets.service.extend(caller, user_id=created.user_id, password=PASSWORD)


# -- /extend --------------------------------------------------------------------------------
async def test_extend_adds_the_chains_enabled_since_creation(wallets: Wallets) -> None:
    client = await wallets.client(BTC, TRX)
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    await wallets.db.clients.update(replace(client, enabled_assets=(BTC, USDT_ETH, TRX, USDC_SOL)))
    wallets.clock.advance(60)
    extended = await wallets.service.extend(
        await wallets.caller(client, "req-2"), user_id=created.user_id, password=PASSWORD
    )
    assert list(extended) == [Chain.BITCOIN, Chain.ETHEREUM, Chain.TRON, Chain.SOLANA]
    assert {c: extended[c] for c in created.addresses} == created.addresses
    seed = hd.seed_from_mnemonic(created.mnemonic)
    assert hd.derive_addresses(seed, list(extended)) == extended
    wallet = await wallets.db.wallets.get(client.client_id, WalletOwner.USER, created.user_id)
    assert wallet is not None and dict(wallet.addresses) == extended
    assert wallet.updated_at == wallets.clock.now()
    entry = (await wallets.db.audit.newest())[0]
    assert (entry.action, entry.outcome, entry.target) == ("wallet.extend", "ok", "ETHEREUM,SOLANA")
    assert (
        await wallets.service.addresses(await wallets.caller(client), user_id=created.user_id)
        == extended
    )


async def test_extend_with_a_wrong_password_changes_nothing(wallets: Wallets) -> None:
    client = await wallets.client(BTC)
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    before = await wallets.db.wallets.get(client.client_id, WalletOwner.USER, created.user_id)
    await wallets.db.clients.update(replace(client, enabled_assets=(BTC, ETH)))
    for wrong in (PASSWORD.upper(), PASSWORD + " ", "x"):
        with pytest.raises(InvalidCredentials) as caught:
            await wallets.service.extend(
                await wallets.caller(client), user_id=created.user_id, password=wrong
            )
        assert type(caught.value) is InvalidCredentials  # translated, not the internal error
        assert (caught.value.status, caught.value.message) == (401, "Invalid credentials")
    after = await wallets.db.wallets.get(client.client_id, WalletOwner.USER, created.user_id)
    assert after == before
    entry = (await wallets.db.audit.newest())[0]
    assert (entry.action, entry.outcome, entry.detail) == (
        "wallet.extend",
        "401",
        "Invalid credentials",
    )


async def test_extend_checks_the_password_even_with_nothing_to_add(wallets: Wallets) -> None:
    client = await wallets.client(BTC)
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    with pytest.raises(InvalidCredentials):
        await wallets.service.extend(
            await wallets.caller(client), user_id=created.user_id, password="wrong password"
        )
    assert (
        await wallets.service.extend(
            await wallets.caller(client), user_id=created.user_id, password=PASSWORD
        )
        == created.addresses
    )


@pytest.mark.parametrize(
    ("password", "message"),
    [
        (None, "password is required"),
        ("x" * 257, "password must be at most 256 characters"),
        (42, "password must be a string"),
    ],
)
async def test_extend_refuses_a_malformed_password(
    wallets: Wallets, password: object, message: str
) -> None:
    client = await wallets.client(BTC)
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    with pytest.raises(InvalidRequest) as caught:
        await wallets.service.extend(
            await wallets.caller(client), user_id=created.user_id, password=password
        )
    assert caught.value.message == message


async def test_a_short_password_on_extend_is_just_a_wrong_password(wallets: Wallets) -> None:
    """The length rule is for choosing a password; opening tries any string."""
    client = await wallets.client(BTC)
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    with pytest.raises(InvalidCredentials):
        await wallets.service.extend(
            await wallets.caller(client), user_id=created.user_id, password="abc"
        )


async def test_extend_of_an_unknown_user(wallets: Wallets) -> None:
    client = await wallets.client(BTC)
    with pytest.raises(UserNotFound):
        await wallets.service.extend(
            await wallets.caller(client), user_id=new_id(), password=PASSWORD
        )


# -- platform wallets ---------------------------------------------------------------------
async def test_platform_addresses_are_404_until_provisioned(wallets: Wallets) -> None:
    client = await wallets.client(BTC, SOL)
    with pytest.raises(PlatformWalletNotFound) as caught:
        await wallets.service.platform_addresses(await wallets.caller(client))
    assert caught.value.status == 404


async def test_provisioning_is_idempotent(wallets: Wallets) -> None:
    client = await wallets.client(BTC, SOL)
    first = await wallets.service.provision_platform(client.client_id)
    assert list(first) == [Chain.BITCOIN, Chain.SOLANA]
    stored = await wallets.db.wallets.get(client.client_id, WalletOwner.PLATFORM, None)
    assert stored is not None and list(stored.addresses) == list(CONTRACT_CHAINS)
    assert sealing.scheme_of(stored.sealed) == sealing.SCHEME_OPERATOR
    again = await wallets.service.provision_platform(client.client_id, request_id="req-9")
    assert again == first
    assert await wallets.db.wallets.get(client.client_id, WalletOwner.PLATFORM, None) == stored
    assert await wallets.service.platform_addresses(await wallets.caller(client)) == first
    actions = [(e.action, e.request_id, e.outcome) for e in await wallets.db.audit.newest()]
    assert actions == [
        ("wallet.provision_platform", "req-9", "replay"),  # nothing to do: changed nothing
        ("wallet.provision_platform", "operator", "ok"),
    ]


async def test_concurrent_provisioning_gives_one_wallet(wallets: Wallets) -> None:
    client = await wallets.client(BTC, ETH, TRX, SOL)
    answers = await asyncio.gather(
        *(wallets.service.provision_platform(client.client_id) for _ in range(4))
    )
    assert all(answer == answers[0] for answer in answers)
    assert await wallets.service.platform_addresses(await wallets.caller(client)) == answers[0]


async def test_platform_addresses_follow_the_enabled_chains(wallets: Wallets) -> None:
    client = await wallets.client(BTC)
    await wallets.service.provision_platform(client.client_id)
    await wallets.db.clients.update(replace(client, enabled_assets=(BTC, TRX, POL)))
    addresses = await wallets.service.platform_addresses(await wallets.caller(client))
    assert list(addresses) == [Chain.BITCOIN, Chain.TRON, Chain.POLYGON]


async def test_provisioning_fills_in_chains_an_older_wallet_lacks(wallets: Wallets) -> None:
    client = await wallets.client(BTC, SOL)
    await wallets.service.provision_platform(client.client_id)
    stored = await wallets.db.wallets.get(client.client_id, WalletOwner.PLATFORM, None)
    assert stored is not None
    await wallets.db.wallets.update(
        replace(stored, addresses={Chain.BITCOIN: stored.addresses[Chain.BITCOIN]})
    )
    again = await wallets.service.provision_platform(client.client_id)
    assert again == {c: stored.addresses[c] for c in (Chain.BITCOIN, Chain.SOLANA)}
    refilled = await wallets.db.wallets.get(client.client_id, WalletOwner.PLATFORM, None)
    assert refilled is not None and dict(refilled.addresses) == dict(stored.addresses)


@pytest.mark.parametrize("client_id", ["ab" * 12, "not an id", ""])
async def test_provisioning_an_unknown_client(wallets: Wallets, client_id: str) -> None:
    with pytest.raises(ApiClientNotFound):
        await wallets.service.provision_platform(client_id)


async def test_user_and_platform_wallets_are_separate(wallets: Wallets) -> None:
    client = await wallets.client(BTC)
    created = await wallets.service.create(await wallets.caller(client), password=PASSWORD)
    platform = await wallets.service.provision_platform(client.client_id)
    assert platform[Chain.BITCOIN] != created.addresses[Chain.BITCOIN]


# -- the wrong-password answer per chain ----------------------------------------------------
@pytest.mark.parametrize(
    ("chain", "error", "status", "message"),
    [
        (Chain.BITCOIN, InvalidPasswordBadRequest, 400, "Invalid password"),
        (Chain.ETHEREUM, InvalidCredentials, 401, "Invalid credentials"),
        (Chain.BSC, InvalidCredentials, 401, "Invalid credentials"),
        (Chain.TRON, InvalidCredentials, 401, "Invalid credentials"),
        (Chain.POLYGON, InvalidCredentials, 401, "Invalid credentials"),
        (Chain.SOLANA, InvalidPassword, 401, "Invalid password"),
    ],
)
def test_password_error_for(chain: Chain, error: type, status: int, message: str) -> None:
    answer = password_error_for(DESCRIPTIONS[chain])
    assert type(answer) is error
    assert (answer.status, answer.message) == (status, message)
    assert not isinstance(answer, WrongWalletPassword)
