"""The sandbox chains: real signatures checked by the ledger, hashes in each chain's form,
one ledger database shared by every process, the faucet."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from ops_support import ELSEWHERE, Ops, make_ops

from walletcore.clock import ManualClock
from walletcore.container import create_container
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.errors import InvalidRequest, TransferRejected
from walletcore.domain.wallet import WalletOwner
from walletcore.ports import SignedTransfer, Transfer
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile, Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_sandbox.chain import SandboxChainSettings
from walletcore_sandbox.faucet import fund
from walletcore_sandbox.ledger import DATA_FILE

BTC = CONTRACT_CATALOG.asset_by_id(1)
HASH_FORMS = {
    Chain.BITCOIN: r"[0-9a-f]{64}",
    Chain.ETHEREUM: r"0x[0-9a-f]{64}",
    Chain.BSC: r"0x[0-9a-f]{64}",
    Chain.POLYGON: r"0x[0-9a-f]{64}",
    Chain.TRON: r"[0-9a-f]{64}",
    Chain.SOLANA: r"[1-9A-HJ-NP-Za-km-z]{86,88}",
}


@pytest.mark.parametrize("chain", list(CONTRACT_CHAINS))
async def test_sends_are_signed_by_the_wallet_key_and_hashed_in_the_chains_form(
    ops: Ops, chain: Chain
) -> None:
    client = await ops.client()
    user = await ops.user(client)
    native = CONTRACT_CATALOG.native_asset(chain)
    await ops.fund(ops.wallets[user][chain], native.id, "100")
    receipt = await ops.send(client, user, native.id, "1")
    assert re.fullmatch(HASH_FORMS[chain], receipt.tx_hash), receipt.tx_hash


#: regtest recipients of each form the BITCOIN validator accepts: base58 P2PKH and P2SH (the
#: version bytes testnet, testnet4 and signet share), bech32 P2WPKH and P2WSH, bech32m P2TR
REGTEST_RECIPIENTS = {
    "p2pkh": "mqhHoXkt14Dbh9HJ6JGqN3BWvJPDTCPq3b",
    "p2sh": "2N3RZVm6NMPc5Cz8fAxavahKPRBHPus6B2q",
    "p2wpkh": "bcrt1qd7jm808e9qx87p387xave65y37x7p0e8r7jpel",
    "p2wsh": "bcrt1qd7jm808e9qx87p387xave65y37x7p0e8e6nm4m8nvssyruwzhggsyluzge",
    "p2tr": "bcrt1pd7jm808e9qx87p387xave65y37x7p0e8e6nm4m8nvssyruwzhggswguts9",
}


@pytest.mark.parametrize("form", list(REGTEST_RECIPIENTS))
async def test_bitcoin_sends_to_every_recipient_form_on_regtest(
    ops: Ops, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox chain keeps the recipient as the validator returned it (no script is
    built), so every accepted form is sent to, and credited, on the test networks too."""
    monkeypatch.setenv("WALLETCORE_BITCOIN_NETWORK", "regtest")
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.BITCOIN], 1, "1")
    recipient = REGTEST_RECIPIENTS[form]
    receipt = await ops.send(client, user, 1, "0.1", recipient=recipient)
    assert re.fullmatch(HASH_FORMS[Chain.BITCOIN], receipt.tx_hash), receipt.tx_hash
    row = await ops.gateways[Chain.BITCOIN].inner.lookup(recipient, BTC, receipt.tx_hash)
    assert (row.type, row.amount_units) == ("receive", 10**7 - round(Decimal(receipt.fee) * 10**8))


async def _signed_by_the_wrong_key(ops: Ops, chain: Chain) -> tuple[Transfer, SignedTransfer]:
    """A transfer out of a funded wallet, signed with another wallet's key."""
    client = await ops.client()
    victim, thief = await ops.user(client), await ops.user(client)
    native = CONTRACT_CATALOG.native_asset(chain)
    source = ops.wallets[victim][chain]
    await ops.fund(source, native.id, "10")
    gateway = ops.gateways[chain].inner
    transfer = Transfer(native, source, ELSEWHERE[chain], 10**native.decimals, fee_payer=source)
    unsigned = await gateway.prepare(
        transfer, await gateway.fee(source, transfer.recipient, native, None)
    )
    wallet = await ops.db.wallets.get(client.client_id, WalletOwner.USER, thief)
    assert wallet is not None
    async with ops.keystore.unseal(wallet.sealed, "correct horse battery", chain) as key:
        forged = key.sign(unsigned.payload)
    return transfer, gateway.assemble(unsigned, {source: forged})


@pytest.mark.parametrize("chain", [Chain.BITCOIN, Chain.ETHEREUM, Chain.TRON, Chain.SOLANA])
async def test_a_wrong_key_never_moves_sandbox_funds(ops: Ops, chain: Chain) -> None:
    transfer, signed = await _signed_by_the_wrong_key(ops, chain)
    with pytest.raises(TransferRejected, match="signature does not match"):
        await ops.gateways[chain].inner.broadcast(signed)
    balance = await ops.gateways[chain].inner.balance(transfer.sender, transfer.asset)
    assert balance == 10 * 10**transfer.asset.decimals


async def test_a_tampered_transaction_is_refused(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    chain, native = Chain.ETHEREUM, CONTRACT_CATALOG.native_asset(Chain.ETHEREUM)
    source = ops.wallets[user][chain]
    await ops.fund(source, native.id, "10")
    gateway = ops.gateways[chain].inner
    transfer = Transfer(native, source, ELSEWHERE[chain], 10**18, fee_payer=source)
    unsigned = await gateway.prepare(
        transfer, await gateway.fee(source, transfer.recipient, native, None)
    )
    wallet = await ops.db.wallets.get(client.client_id, WalletOwner.USER, user)
    assert wallet is not None
    async with ops.keystore.unseal(wallet.sealed, "correct horse battery", chain) as key:
        signed = gateway.assemble(unsigned, {source: key.sign(unsigned.payload)})
    envelope = json.loads(signed.raw)
    body = json.loads(envelope["body"])
    body["amount"] = 9 * 10**18  # more than was signed for
    envelope["body"] = json.dumps(body, sort_keys=True, separators=(",", ":"))
    raw = json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode()
    with pytest.raises(TransferRejected):
        await gateway.broadcast(SignedTransfer(raw, signed.tx_hash))
    # The genuine bytes go through, once, however often they are broadcast.
    assert await gateway.broadcast(signed) == signed.tx_hash
    assert await gateway.broadcast(signed) == signed.tx_hash
    rows = await gateway.history(source, native, 10)
    assert [r.type for r in rows] == ["send", "receive"]


async def test_the_ledger_is_shared_by_every_process_on_the_home(
    settings: Settings, clock: ManualClock
) -> None:
    server = make_ops(settings, clock)
    client = await server.client()
    user = await server.user(client)
    # The operator CLI runs as another process: another container over the same home.
    cli = create_container(settings, clock=clock)
    answer = await fund(
        cli.settings(),
        cli.gateways(),
        cli.catalog(),
        chain="solana",
        address=server.wallets[user][Chain.SOLANA],
        asset_id="6",
        amount="2.5",
    )
    assert answer == {
        "chain": "SOLANA",
        "address": server.wallets[user][Chain.SOLANA],
        "assetId": 6,
        "symbol": "SOL",
        "balance": "2.5",
    }
    assert await server.balance(client, user, 6) == "2.5"
    assert (Path(settings.home) / DATA_FILE).exists()


async def test_a_zero_confirmation_delay_confirms_at_once(
    settings: Settings, clock: ManualClock
) -> None:
    ops = make_ops(
        settings, clock, chain_settings={"sandbox": SandboxChainSettings(sandbox_confirm_seconds=0)}
    )
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.BSC], 3, "1")
    receipt = await ops.send(client, user, 3, "0.5")
    found = await ops.reads.txid(
        ops.caller(client), asset_id=3, user_id=user, tx_hash=receipt.tx_hash
    )
    assert found.row.status == "success" and found.row.date == clock.now()


@pytest.mark.parametrize(
    ("chain", "address", "asset_id", "amount", "message"),
    [
        ("DOGE", ELSEWHERE[Chain.ETHEREUM], 2, "1", "chain must be one of"),
        ("ETHEREUM", ELSEWHERE[Chain.ETHEREUM], 4, "1", "is on TRON, not ETHEREUM"),
        ("ETHEREUM", "0x12", 2, "1", "Invalid ETHEREUM address"),
        ("BITCOIN", "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", 1, "1", "testnet"),
        ("ETHEREUM", ELSEWHERE[Chain.ETHEREUM], 21, "0.0000001", "more than 6 decimal places"),
        ("ETHEREUM", ELSEWHERE[Chain.ETHEREUM], 2, "-1", "plain positive decimal"),
    ],
)
async def test_the_faucet_checks_what_it_is_given(
    ops: Ops, chain: str, address: str, asset_id: int, amount: str, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        await fund(
            ops.container.settings(),
            {c: g.inner for c, g in ops.gateways.items()},
            ops.container.catalog(),
            chain=chain,
            address=address,
            asset_id=asset_id,
            amount=amount,
        )


async def test_production_refuses_the_sandbox_chains(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, profile=Profile.PRODUCTION)
    with pytest.raises(ConfigurationError):
        await fund(
            settings, {}, CONTRACT_CATALOG, chain="ETHEREUM", address="x", asset_id=2, amount="1"
        )
    with pytest.raises(ConfigurationError, match="production profile refuses"):
        create_container(settings).gateways()
    assert CONTRACT_CATALOG.asset_by_id(2).chain == Chain.ETHEREUM
