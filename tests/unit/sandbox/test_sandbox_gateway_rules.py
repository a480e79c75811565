"""The sandbox gateway plays each chain by its description's `SandboxRules`, and a chain
whose description brings none by the flat default (`FlatRules`)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.assets import Chain
from walletcore.domain.errors import AddressUnknown, TransactionNotFound
from walletcore.ports import FeeQuote, SendMinimum
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.descriptions import DESCRIPTIONS
from walletcore_sandbox.chain import FLAT_FEE_UNITS, FlatRules, SandboxGateway
from walletcore_sandbox.ledger import SandboxLedger

BTC, ETH, USDT_TRX, SOL = (CONTRACT_CATALOG.asset_by_id(i) for i in (1, 2, 41, 6))


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[SandboxLedger]:
    book = SandboxLedger(
        tmp_path / "ledger.db", ManualClock(), lambda *_: True, catalog=CONTRACT_CATALOG
    )
    yield book
    await book.aclose()


def gateway(ledger: SandboxLedger, chain: Chain, *, rules: bool = True) -> SandboxGateway:
    description = DESCRIPTIONS[chain]
    if not rules:
        description = replace(description, sandbox=None)
    return SandboxGateway(description, ledger, lambda _chain, address: address)


async def test_each_chain_pays_its_own_fee(ledger: SandboxLedger) -> None:
    assert await gateway(ledger, Chain.BITCOIN).fee("a", "b", BTC, None) == FeeQuote(1_410)
    sponsored = await gateway(ledger, Chain.BITCOIN).fee("a", "b", BTC, None, fee_payer="c")
    assert sponsored == FeeQuote(2_400)
    assert await gateway(ledger, Chain.ETHEREUM).fee("a", "b", ETH, None) == FeeQuote(
        21_000 * 20 * 10**9
    )
    tron = await gateway(ledger, Chain.TRON).fee("a", "b", USDT_TRX, None)
    assert tron == FeeQuote(345_000 + 130_000 * 210, bandwidth=345, energy=130_000)


async def test_a_chain_without_rules_pays_the_flat_fee_and_has_no_minimum(
    ledger: SandboxLedger,
) -> None:
    flat = gateway(ledger, Chain.SOLANA, rules=False)
    assert await flat.fee("a", "b", SOL, None, fee_payer="c") == FeeQuote(FLAT_FEE_UNITS)
    assert await flat.minimum_send("b", SOL) is None
    assert FlatRules().tx_hash(b"body", b"raw", b"") == hashlib.sha256(b"raw").hexdigest()
    rent = SendMinimum(890_880, "the rent-exempt minimum of a new SOLANA account")
    assert await gateway(ledger, Chain.SOLANA).minimum_send("b", SOL) == rent


async def test_the_indexer_rule_and_the_hash_form(ledger: SandboxLedger) -> None:
    with pytest.raises(AddressUnknown):
        await gateway(ledger, Chain.BITCOIN).balance("bcrt1qnever", BTC)
    assert await gateway(ledger, Chain.BITCOIN, rules=False).balance("bcrt1qnever", BTC) == 0
    eth = gateway(ledger, Chain.ETHEREUM)
    await eth.fund("0xabc", ETH, 5)
    (row,) = await eth.history("0xabc", ETH, 10)
    assert row.hash.startswith("0x") and row.hash == row.hash.lower()
    found = await eth.lookup("0xabc", ETH, row.hash.upper().replace("0X", "0x"))
    assert found.hash == row.hash  # hex: any case
    sol = gateway(ledger, Chain.SOLANA)
    await sol.fund("So1", SOL, 5)
    (credit,) = await sol.history("So1", SOL, 10)
    assert (await sol.lookup("So1", SOL, credit.hash)).hash == credit.hash
    if credit.hash != credit.hash.swapcase():
        with pytest.raises(TransactionNotFound):  # base58: case-sensitive
            await sol.lookup("So1", SOL, credit.hash.swapcase())
