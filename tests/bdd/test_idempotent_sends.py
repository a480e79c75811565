"""Steps of features/idempotent_sends.feature (the shared ones live in conftest.py).

Sends run through the container's send service with the real sealed KeyStore (production
Argon2id) and the sandbox chains in the scenario's home. "The network" is the sandbox
gateway of the chain: its broadcast can be made to lose its answer or to fail before it
reaches the ledger. "Transfers that left the wallet" are read from the chain's history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pytest
from pytest_bdd import given, parsers, scenarios, then, when

from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.errors import BroadcastTimeout, IdempotencyConflict
from walletcore.domain.money import format_balance
from walletcore.ports import SignedTransfer
from walletcore.services.send_record import SendReceipt
from walletcore.testing import CONTRACT_CATALOG

if TYPE_CHECKING:
    from conftest import ChainTools, World

scenarios("idempotent_sends.feature")

#: Where the users send to: a valid address on each chain, outside every wallet here.
RECIPIENT = {
    Chain.ETHEREUM: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.SOLANA: "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T",
}
SEND = (
    r"the user sends (?P<amount>[0-9.]+) (?P<asset>.+?)"
    r'(?: with the request id "(?P<rid>[^"]*)")?'
    r'(?: and the password "(?P<password>[^"]*)")?'
    r"(?P<again> again)?(?P<anonymous> without a request id)?"
)


@dataclass
class Sending:
    """What this feature's scenarios remember beyond the shared world."""

    password: str = ""
    receipts: list[SendReceipt] = field(default_factory=list)
    outcomes: list[Any] = field(default_factory=list)
    #: The hash a failed attempt had stored (signed, maybe sent) for its retry.
    stored_hash: str | None = None
    fresh: int = 0
    #: the shared helpers of conftest.py (`chain_tools`)
    tools: Any = None


@pytest.fixture
def sending(chain_tools: type[ChainTools]) -> Sending:
    return Sending(tools=chain_tools)


def _send(
    world: World,
    sending: Sending,
    amount: str,
    asset_text: str,
    request_id: str | None,
    password: str | None = None,
) -> None:
    asset = sending.tools.asset_named(asset_text)
    sends = world.container.sends()
    caller = world.caller()

    async def send() -> SendReceipt:
        receipt: SendReceipt = await sends.send(
            caller,
            request_id=request_id,
            user_id=world.user_id(),
            asset_id=asset.id,
            recipient=RECIPIENT[asset.chain],
            amount=amount,
            password=password if password is not None else sending.password,
        )
        return receipt

    receipt = world.attempt(send)
    if receipt is not None:
        sending.receipts.append(receipt)
    elif request_id:
        client_id = world.parties["the api client"].client_id
        record = world.run(world.db.sends.get(client_id, request_id))
        sending.stored_hash = record.tx_hash if record is not None else None


def _sent_from_wallet(world: World, sending: Sending, chain: Chain) -> list[str]:
    """Hashes of the transfers that left the user's wallet on `chain`, any asset."""
    gateway = world.container.gateways()[chain]
    address = sending.tools.wallet_address(world, chain)
    hashes: list[str] = []
    for asset in (a for a in CONTRACT_CATALOG.assets if a.chain == chain):
        rows = world.run(gateway.history(address, asset, 1000))
        hashes += [r.hash for r in rows if r.type == "send"]
    return hashes


def _broadcast_of(world: World, chain: Chain) -> Any:
    return world.container.gateways()[chain]


# -- given ----------------------------------------------------------------------------------
@given(parsers.parse('a user whose wallet was created with the password "{password}"'))
def user_with_wallet(world: World, sending: Sending, password: str) -> None:
    sending.password = password
    created = world.run(world.container.wallets().create(world.caller(), password=password))
    world.users["the user"] = ("the api client", created.user_id)


@given(parsers.parse('the user has sent {amount} {asset} with the request id "{rid}"'))
def has_sent(world: World, sending: Sending, amount: str, asset: str, rid: str) -> None:
    _send(world, sending, amount, asset, rid)
    world.succeeded()


@given("the network's answer to the next transfer will be lost")
def answer_lost(world: World) -> None:
    gateway = _broadcast_of(world, Chain.ETHEREUM)
    real: Callable[[SignedTransfer], Awaitable[str]] = gateway.broadcast

    async def lost(signed: SignedTransfer) -> str:
        await real(signed)  # it reached the network ...
        gateway.broadcast = real  # ... once
        raise BroadcastTimeout()  # ... and the answer never came back

    gateway.broadcast = lost


@given("the network cannot be reached")
def unreachable(world: World) -> None:
    gateway = _broadcast_of(world, Chain.ETHEREUM)
    gateway.real_broadcast = gateway.broadcast

    async def down(signed: SignedTransfer) -> str:
        raise ConnectionError("unreachable")

    gateway.broadcast = down


@given("the network can be reached again")
def reachable(world: World) -> None:
    gateway = _broadcast_of(world, Chain.ETHEREUM)
    gateway.broadcast = gateway.real_broadcast


@given("the api client pays the network fees of its users")
def platform_pays(world: World) -> None:
    client = world.run(world.db.clients.get(world.parties["the api client"].client_id))
    assert client is not None
    world.run(world.db.clients.update(replace(client, fee_payer=FeePayer.PLATFORM)))


@given("the operator has provisioned the api client's platform wallet")
def provisioned(world: World) -> None:
    client_id = world.parties["the api client"].client_id
    world.run(world.container.wallets().provision_platform(client_id))


# -- when -----------------------------------------------------------------------------------
@when(parsers.re(SEND))
@given(parsers.re(SEND))
def user_sends(
    world: World,
    sending: Sending,
    amount: str,
    asset: str,
    rid: str | None,
    password: str | None,
    again: str | None,
    anonymous: str | None,
) -> None:
    if rid is None and not anonymous:
        sending.fresh += 1
        rid = f"fresh-{sending.fresh:03d}"
    _send(world, sending, amount, asset, None if anonymous else rid, password)


@when(
    parsers.parse(
        '{count:d} copies of a send of {amount} {asset} with the request id "{rid}" arrive at once'
    )
)
def copies_at_once(
    world: World, sending: Sending, count: int, amount: str, asset: str, rid: str
) -> None:
    coin = sending.tools.asset_named(asset)
    sends = world.container.sends()
    caller = world.caller()

    async def all_at_once() -> list[Any]:
        return await asyncio.gather(
            *(
                sends.send(
                    caller,
                    request_id=rid,
                    user_id=world.user_id(),
                    asset_id=coin.id,
                    recipient=RECIPIENT[coin.chain],
                    amount=amount,
                    password=sending.password,
                )
                for _ in range(count)
            ),
            return_exceptions=True,
        )

    sending.outcomes = world.run(all_at_once())


# -- then -----------------------------------------------------------------------------------
@then("both answers name the same transaction")
def same_transaction(sending: Sending) -> None:
    assert len(sending.receipts) == 2
    assert sending.receipts[0] == sending.receipts[1]


@then("exactly one transfer has left the wallet")
def one_transfer(world: World, sending: Sending) -> None:
    sent = [
        *_sent_from_wallet(world, sending, Chain.ETHEREUM),
        *_sent_from_wallet(world, sending, Chain.SOLANA),
    ]
    assert len(sent) == 1, sent


@then("no money has left the wallet")
def nothing_left(world: World, sending: Sending) -> None:
    assert _sent_from_wallet(world, sending, Chain.ETHEREUM) == []


@then("every copy either names the same transaction or is told the send is still in progress")
def copies_agree(sending: Sending) -> None:
    receipts = [o for o in sending.outcomes if isinstance(o, SendReceipt)]
    busy = [o for o in sending.outcomes if isinstance(o, IdempotencyConflict)]
    assert len(receipts) + len(busy) == len(sending.outcomes), sending.outcomes
    assert receipts and len({r.tx_hash for r in receipts}) == 1
    assert all(b.status == 409 for b in busy)


@then("the answer names the transaction that had already been sent")
@then("the answer names the transaction that had already been signed")
def names_stored(world: World, sending: Sending) -> None:
    receipt = world.succeeded()
    assert sending.stored_hash is not None and receipt.tx_hash == sending.stored_hash


@then(parsers.parse("the answer says a fee of {fee} {coin} was paid by the {payer}"))
def fee_paid(world: World, fee: str, coin: str, payer: str) -> None:
    receipt = world.succeeded()
    assert (receipt.fee, receipt.fee_payer.value) == (fee, payer)


@then(parsers.parse("the recipient receives {amount} {asset}"))
def recipient_receives(world: World, sending: Sending, amount: str, asset: str) -> None:
    coin = sending.tools.asset_named(asset)
    world.clock.advance(60)  # past the sandbox confirmation delay
    gateway = world.container.gateways()[coin.chain]
    units = world.run(gateway.balance(RECIPIENT[coin.chain], coin))
    assert format_balance(units, coin.decimals) == amount
