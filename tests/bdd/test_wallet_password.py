"""Steps of features/wallet_password.feature (the shared ones live in conftest.py).

The wallets run through the container with the real sealed KeyStore at its production
Argon2id parameters. "A transfer is attempted" does what a send does first: unlock the
chain's key with the password (a wrong one answered per chain by `password_error_for`) and
sign. "The api client sends ... from the wallet" is the whole `/send` (the send service on
the sandbox chains, funded through the faucet).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pytest
from pytest_bdd import given, parsers, scenarios, then, when

from walletcore.domain.assets import Chain
from walletcore.domain.errors import WrongWalletPassword
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.services.wallets import password_error_for
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.signatures import verify_signature

if TYPE_CHECKING:
    from conftest import World

scenarios("wallet_password.feature")

TRANSFER_DIGEST = hashlib.sha256(b"a transfer").digest()


@dataclass
class Story:
    """What this feature's scenarios remember beyond the shared world."""

    passwords: list[str] = field(default_factory=list)
    mnemonic: str | None = None
    created: dict[Chain, str] = field(default_factory=dict)
    platform: dict[Chain, str] = field(default_factory=dict)
    signature: bytes | None = None
    signer_address: str | None = None
    answers: list[Any] = field(default_factory=list)
    #: the send under way: amount, asset, request id
    send_request: Any = None


@pytest.fixture
def story(caplog: pytest.LogCaptureFixture) -> Story:
    caplog.set_level(logging.DEBUG)  # every log line of the scenario is scanned for secrets
    return Story()


def chain_list(text: str) -> list[Chain]:
    """`BITCOIN, ETHEREUM and TRON` -> the chains, in the order written."""
    names = text.replace(" and ", ", ").split(", ")
    return [Chain(name.strip()) for name in names if name.strip()]


def native_assets(text: str) -> list[int]:
    """`SOL`, `SOL and TRX`: chains' own coins, by symbol."""
    symbols = text.replace(" and ", ", ").split(", ")
    return [a.id for a in CONTRACT_CATALOG.assets if a.is_native and a.symbol in symbols]


def password_from(text: str) -> object:
    """The password a step names, as the request would carry it."""
    if text.startswith('the password "') and text.endswith('"'):
        return text[len('the password "') : -1]
    lengths = {"a password of 257 characters": 257, "a password of 256 characters": 256}
    if text in lengths:
        return "p" * lengths[text]
    if text == "no password":
        return None
    if text == "a number instead of a password":
        return 12345678
    raise AssertionError(f"cannot read the password in {text!r}")


def _create(world: World, story: Story, password: object) -> None:
    if isinstance(password, str):
        story.passwords.append(password)
    wallets = world.container.wallets()
    caller = world.caller()
    created = world.attempt(lambda: wallets.create(caller, password=password))
    if created is not None:
        story.mnemonic = created.mnemonic
        story.created = dict(created.addresses)
        story.answers.append(created)
        world.users["the user"] = ("the api client", created.user_id)


def _stored_wallet(world: World) -> WalletRecord:
    party, user_id = world.users["the user"]
    wallet = world.run(
        world.db.wallets.get(world.parties[party].client_id, WalletOwner.USER, user_id)
    )
    assert wallet is not None
    return wallet


# -- given ----------------------------------------------------------------------------------
@given(parsers.parse('a wallet created with the password "{password}"'))
def given_wallet(world: World, story: Story, password: str) -> None:
    _create(world, story, password)
    world.succeeded()


@given(parsers.parse("the operator enables {assets} for the api client"))
def operator_enables(world: World, assets: str) -> None:
    client = world.run(world.db.clients.get(world.parties["the api client"].client_id))
    assert client is not None
    wanted = (
        set(CONTRACT_CATALOG.asset_ids) if assets == "every asset" else set(native_assets(assets))
    )
    enabled = tuple(
        a for a in CONTRACT_CATALOG.asset_ids if a in wanted or a in client.enabled_assets
    )
    world.run(world.db.clients.update(replace(client, enabled_assets=enabled)))


@given("the operator has provisioned the api client's platform wallet")
def provisioned(world: World, story: Story) -> None:
    client_id = world.parties["the api client"].client_id
    story.platform = dict(world.run(world.container.wallets().provision_platform(client_id)))


# -- when -----------------------------------------------------------------------------------
@when(parsers.parse("the api client creates a wallet with {password}"))
def create_wallet(world: World, story: Story, password: str) -> None:
    _create(world, story, password_from(password))


@when("the api client asks for the wallet's addresses")
def ask_addresses(world: World, story: Story) -> None:
    wallets = world.container.wallets()
    caller = world.caller()
    story.answers.append(world.attempt(lambda: wallets.addresses(caller, user_id=world.user_id())))


@when(
    parsers.re(
        r"the (?P<party>api client|other api client) extends the wallet with the password "
        r'"(?P<password>.*)"'
    )
)
def extend_wallet(world: World, story: Story, party: str, password: str) -> None:
    story.passwords.append(password)
    wallets = world.container.wallets()
    caller = world.caller("another api client" if party == "other api client" else "the api client")
    story.answers.append(
        world.attempt(lambda: wallets.extend(caller, user_id=world.user_id(), password=password))
    )


@when(parsers.parse('a transfer on {chain} is attempted with the password "{password}"'))
def attempt_transfer(world: World, story: Story, chain: str, password: str) -> None:
    story.passwords.append(password)
    on = Chain(chain)
    keystore = world.container.keystore()
    sealed = _stored_wallet(world).sealed

    async def transfer() -> None:
        try:
            async with keystore.unseal(sealed, password, on) as signer:
                story.signer_address = signer.address
                story.signature = signer.sign(TRANSFER_DIGEST)
        except WrongWalletPassword:
            raise password_error_for(world.container.descriptions()[on]) from None

    world.attempt(transfer)


@when("the api client asks for its platform wallet's addresses")
def ask_platform(world: World) -> None:
    wallets = world.container.wallets()
    caller = world.caller()
    world.attempt(lambda: wallets.platform_addresses(caller))


@when("the operator provisions it again")
def provision_again(world: World) -> None:
    client_id = world.parties["the api client"].client_id
    wallets = world.container.wallets()
    world.attempt(lambda: wallets.provision_platform(client_id, request_id="again"))


# -- then -----------------------------------------------------------------------------------
@then(parsers.parse("the answer shows a seed phrase of {count:d} words"))
def seed_phrase_shown(world: World, story: Story, count: int) -> None:
    world.succeeded()
    assert story.mnemonic is not None and len(story.mnemonic.split()) == count


@then(parsers.parse("the answer has addresses for {chains}, in that order"))
def answer_chains(world: World, chains: str) -> None:
    answer = world.succeeded()
    addresses = answer.addresses if hasattr(answer, "addresses") else answer
    assert list(addresses) == chain_list(chains)


@then("the answer has the addresses shown at creation")
def same_as_creation(world: World, story: Story) -> None:
    assert dict(world.succeeded()) == story.created


@then("the addresses shown at creation are unchanged")
def creation_unchanged(world: World, story: Story) -> None:
    answer = world.succeeded()
    assert {c: answer[c] for c in story.created} == story.created


@then(parsers.parse("the wallet still has addresses for {chains} only"))
def still_has(world: World, story: Story, chains: str) -> None:
    stored = dict(_stored_wallet(world).addresses)
    assert list(stored) == chain_list(chains)
    assert stored == story.created


@then("no answer, log line or audit entry since creation holds the seed phrase or the password")
def no_secret_leaks(world: World, story: Story, caplog: pytest.LogCaptureFixture) -> None:
    assert story.mnemonic is not None
    audit = world.run(world.db.audit.newest())
    # pytest-bdd logs the step text itself (which quotes the password); the service's and
    # the libraries' own lines are what must stay clean.
    logged = [
        record.getMessage() for record in caplog.records if not record.name.startswith("pytest_bdd")
    ]
    texts = [*logged, *map(repr, story.answers), *map(str, story.answers), *map(repr, audit)]
    texts.append(repr(_stored_wallet(world)))
    for secret in [story.mnemonic, *story.passwords]:
        assert all(secret not in text for text in texts)


@then("nothing was signed")
def nothing_signed(story: Story) -> None:
    assert story.signature is None and story.signer_address is None


@then(parsers.parse("the transfer is signed by the key of the wallet's {chain} address"))
def signed_by_wallet_key(world: World, story: Story, chain: str) -> None:
    world.succeeded()
    address = _stored_wallet(world).addresses[Chain(chain)]
    assert story.signer_address == address and story.signature is not None
    assert verify_signature(Chain(chain), address, TRANSFER_DIGEST, story.signature)


@then("the addresses are the same as the first time")
def provisioned_same(world: World, story: Story) -> None:
    assert dict(world.succeeded()) == story.platform


@then(parsers.parse("the api client's platform wallet shows them for {chains}"))
def platform_shows(world: World, story: Story, chains: str) -> None:
    shown = world.run(world.container.wallets().platform_addresses(world.caller()))
    assert list(shown) == chain_list(chains)
    assert dict(shown) == story.platform


# -- sends (the /send path) -----------------------------------------------------------------
#: A valid address on each chain, outside every wallet here.
RECIPIENTS = {
    Chain.BITCOIN: "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
    Chain.ETHEREUM: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.BSC: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.POLYGON: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.TRON: "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7",
    Chain.SOLANA: "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T",
}


def _send(world: World, story: Story, password: str) -> None:
    story.passwords.append(password)
    amount, coin, request_id = story.send_request
    sends = world.container.sends()
    caller = world.caller()
    send = sends.send(
        caller,
        request_id=request_id,
        user_id=world.user_id(),
        asset_id=coin.id,
        recipient=RECIPIENTS[coin.chain],
        amount=amount,
        password=password,
    )
    story.answers.append(world.attempt(lambda: send))


@when(
    parsers.parse(
        'the api client sends {amount} {coin} from the wallet with the password "{password}"'
    )
)
def send_from_wallet(
    world: World, story: Story, chain_tools: Any, amount: str, coin: str, password: str
) -> None:
    asset = chain_tools.asset_named(coin)
    story.send_request = (amount, asset, f"send-{asset.symbol}-{asset.chain}")
    _send(world, story, password)


@when(
    parsers.parse(
        'the api client sends it again, under the same request id, with the password "{password}"'
    )
)
def send_again(world: World, story: Story, password: str) -> None:
    _send(world, story, password)


def _sent(world: World, story: Story) -> list[str]:
    _, coin, _ = story.send_request
    address = _stored_wallet(world).addresses[coin.chain]
    rows = world.run(world.container.gateways()[coin.chain].history(address, coin, 100))
    return [r.hash for r in rows if r.type == "send"]


@then("nothing has left the wallet")
def nothing_left(world: World, story: Story) -> None:
    assert _sent(world, story) == []


@then("one transfer has left the wallet")
def one_transfer_left(world: World, story: Story) -> None:
    sent = _sent(world, story)
    assert len(sent) == 1 and sent[0] == world.succeeded().tx_hash
