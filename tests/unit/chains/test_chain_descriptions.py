"""The six chains' descriptions say what the core answered per chain before them: default
fee caps, wrong-password answers, `/fee`'s wire shape, hash forms, how a transfer is
replaced; and their sandbox rules play each chain as the sandbox ledger did (fees, hashes,
minimums, what is signed, what the indexer knows)."""

from __future__ import annotations

import hashlib
from decimal import Decimal

import base58
import pytest

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.chains import (
    ChainDescription,
    FeeQuote,
    HashFormat,
    SendMinimum,
    WrongPassword,
)
from walletcore.domain.errors import InvalidCredentials, InvalidPassword, InvalidPasswordBadRequest
from walletcore.testing import CONTRACT_CATALOG
from walletcore.testing.chains import RESIGNING_CHAINS
from walletcore_chains.bitcoin import PLUGIN as BITCOIN_PLUGIN
from walletcore_chains.descriptions import DESCRIPTIONS
from walletcore_chains.evm.plugin import PLUGIN as EVM_PLUGIN
from walletcore_chains.solana.plugin import PLUGIN as SOLANA_PLUGIN
from walletcore_chains.tron import PLUGIN as TRON_PLUGIN

BTC, ETH, USDT_ETH, BNB, USDT_BSC, TRX, USDT_TRX, POL, USDT_POL, SOL, USDT_SOL = (
    CONTRACT_CATALOG.asset_by_id(i) for i in (1, 2, 21, 3, 31, 4, 41, 5, 51, 6, 61)
)
BODY, RAW, SIGNATURE = b'{"v":1}', b'{"body":"x"}', bytes(range(64))


class Book:
    """A ledger as the rules read it: who received what, and balances."""

    def __init__(self, received: set[tuple[str, int]] = frozenset(), balance: int = 0) -> None:  # type: ignore[assignment]
        self.received = set(received)
        self.held = balance

    async def balance(self, address: str, asset: Asset) -> int:
        return self.held

    async def has_received(self, address: str, asset: Asset) -> bool:
        return (address, asset.id) in self.received


def test_the_six_chains_are_described_in_catalog_order_with_their_assets() -> None:
    assert list(DESCRIPTIONS) == list(CONTRACT_CATALOG.chains)
    for chain, description in DESCRIPTIONS.items():
        assert description.assets == CONTRACT_CATALOG.assets_of(chain)
        assert description.native.is_native and not description.memos
        assert description.fee_payers == {"USER", "PLATFORM"}
    assert DESCRIPTIONS[Chain.ETHEREUM].token_standards == {"ERC20"}
    assert DESCRIPTIONS[Chain.BSC].token_standards == {"BEP20"}
    assert DESCRIPTIONS[Chain.BITCOIN].token_standards == frozenset()


@pytest.mark.parametrize(
    ("chain", "cap", "units"),
    [
        (Chain.BITCOIN, Decimal("0.0005"), 50_000),
        (Chain.ETHEREUM, Decimal("0.005"), 5 * 10**15),
        (Chain.BSC, Decimal("0.005"), 5 * 10**15),
        (Chain.POLYGON, Decimal(5), 5 * 10**18),
        (Chain.TRON, Decimal(100), 100_000_000),
        (Chain.SOLANA, Decimal("0.001"), 1_000_000),
    ],
)
def test_the_default_fee_caps(chain: Chain, cap: Decimal, units: int) -> None:
    from walletcore.services.transfers import TransferSettings

    assert DESCRIPTIONS[chain].default_fee_cap == cap
    assert TransferSettings().cap_units(DESCRIPTIONS[chain]) == units
    set_one = TransferSettings(fee_caps={chain: Decimal(2)})
    assert set_one.cap_units(DESCRIPTIONS[chain]) == 2 * 10 ** DESCRIPTIONS[chain].native.decimals


@pytest.mark.parametrize(
    ("chain", "answer", "error", "status", "message"),
    [
        (Chain.BITCOIN, WrongPassword.INVALID_PASSWORD_400, InvalidPasswordBadRequest, 400, "Invalid password"),
        (Chain.ETHEREUM, WrongPassword.INVALID_CREDENTIALS, InvalidCredentials, 401, "Invalid credentials"),
        (Chain.BSC, WrongPassword.INVALID_CREDENTIALS, InvalidCredentials, 401, "Invalid credentials"),
        (Chain.TRON, WrongPassword.INVALID_CREDENTIALS, InvalidCredentials, 401, "Invalid credentials"),
        (Chain.POLYGON, WrongPassword.INVALID_CREDENTIALS, InvalidCredentials, 401, "Invalid credentials"),
        (Chain.SOLANA, WrongPassword.INVALID_PASSWORD, InvalidPassword, 401, "Invalid password"),
    ],
)  # fmt: skip
def test_the_wrong_password_answers(
    chain: Chain, answer: WrongPassword, error: type, status: int, message: str
) -> None:
    assert DESCRIPTIONS[chain].wrong_password is answer
    got = answer.error()
    assert type(got) is error and (got.status, got.message) == (status, message)


def test_only_tron_answers_fees_as_resources() -> None:
    wires = {chain: d.fee_wire for chain, d in DESCRIPTIONS.items()}
    assert wires == {c: "resources" if c == Chain.TRON else "decimal" for c in DESCRIPTIONS}


def test_the_hash_forms() -> None:
    forms = {chain: d.hashes for chain, d in DESCRIPTIONS.items()}
    assert forms[Chain.BITCOIN] == forms[Chain.TRON] == HashFormat("hex")
    assert forms[Chain.ETHEREUM] == forms[Chain.BSC] == forms[Chain.POLYGON]
    assert forms[Chain.ETHEREUM] == HashFormat("hex", "0x")
    assert forms[Chain.SOLANA] == HashFormat("base58")
    assert forms[Chain.ETHEREUM].normalise("0xABcd") == "0xabcd"
    assert forms[Chain.SOLANA].normalise("5AbC") == "5AbC"


def test_solana_and_tron_re_sign_the_others_bump_as_their_gateways_and_fakes_do() -> None:
    from walletcore_chains.bitcoin.gateway import BitcoinGateway
    from walletcore_chains.evm.gateway import EvmGateway
    from walletcore_chains.solana.gateway import SolanaGateway
    from walletcore_chains.tron.gateway import TronGateway

    resigning = {c for c, d in DESCRIPTIONS.items() if d.replaces_by == "re-sign"}
    assert resigning == {Chain.SOLANA, Chain.TRON} == RESIGNING_CHAINS
    assert all(d.resigns == (c in resigning) for c, d in DESCRIPTIONS.items())
    assert (SolanaGateway.resigns, TronGateway.resigns) == (True, True)
    assert (BitcoinGateway.resigns, EvmGateway.resigns) == (False, False)


def test_each_plugin_describes_the_chains_it_defines() -> None:
    for plugin in (BITCOIN_PLUGIN, EVM_PLUGIN, TRON_PLUGIN, SOLANA_PLUGIN):
        assert set(plugin.describes) == set(plugin.chains)
        assert all(plugin.describes[c] is DESCRIPTIONS[c] for c in plugin.chains)


def test_a_description_refuses_what_cannot_be() -> None:
    usdt = CONTRACT_CATALOG.asset_by_id(21)
    with pytest.raises(ValueError, match="not on BSC"):
        ChainDescription(
            Chain.BSC, (BNB, usdt), "fee-bump", Decimal(1), WrongPassword.INVALID_CREDENTIALS,
            HashFormat("hex"),
        )  # fmt: skip
    with pytest.raises(ValueError, match="one native coin"):
        ChainDescription(
            Chain.ETHEREUM, (usdt, ETH), "fee-bump", Decimal(1),
            WrongPassword.INVALID_CREDENTIALS, HashFormat("hex"),
        )  # fmt: skip
    with pytest.raises(ValueError, match="fee-bump or re-sign"):
        ChainDescription(
            Chain.ETHEREUM, (ETH,), "replace", Decimal(1),  # type: ignore[arg-type]
            WrongPassword.INVALID_CREDENTIALS, HashFormat("hex"),
        )  # fmt: skip
    with pytest.raises(ValueError, match="positive"):
        ChainDescription(
            Chain.ETHEREUM, (ETH,), "fee-bump", Decimal(0),
            WrongPassword.INVALID_CREDENTIALS, HashFormat("hex"),
        )  # fmt: skip


# -- the sandbox ledger's rules, per chain ---------------------------------------------------
def rules(chain: Chain):  # type: ignore[no-untyped-def]
    found = DESCRIPTIONS[chain].sandbox
    assert found is not None
    return found


async def test_bitcoin_pays_vbytes_and_refuses_dust() -> None:
    btc = rules(Chain.BITCOIN)
    assert await btc.fee(Book(), "bc1q", BTC, sponsored=False) == FeeQuote(1_410)
    assert await btc.fee(Book(), "bc1q", BTC, sponsored=True) == FeeQuote(2_400)
    minimum = await btc.minimum_send(Book(), "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", BTC)
    assert minimum == SendMinimum(294, "the dust limit of its address type")
    p2pkh = await btc.minimum_send(Book(), "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", BTC)
    assert p2pkh is not None and p2pkh.units == 546
    double = hashlib.sha256(hashlib.sha256(RAW).digest()).digest()[::-1].hex()
    assert btc.tx_hash(BODY, RAW, SIGNATURE) == double
    assert btc.signs_digest and btc.seen_addresses_only


@pytest.mark.parametrize(
    ("chain", "native", "token", "gwei"),
    [(Chain.ETHEREUM, ETH, USDT_ETH, 20), (Chain.BSC, BNB, USDT_BSC, 3), (Chain.POLYGON, POL, USDT_POL, 30)],
)  # fmt: skip
async def test_evm_chains_pay_gas_at_their_price(
    chain: Chain, native: Asset, token: Asset, gwei: int
) -> None:
    evm = rules(chain)
    for sponsored in (False, True):
        got = await evm.fee(Book(), "0x", native, sponsored=sponsored)
        assert got == FeeQuote(21_000 * gwei * 10**9)
    assert await evm.fee(Book(), "0x", token, sponsored=False) == FeeQuote(65_000 * gwei * 10**9)
    assert await evm.minimum_send(Book(), "0x", native) is None
    assert evm.tx_hash(BODY, RAW, SIGNATURE) == "0x" + hashlib.sha3_256(RAW).hexdigest()
    assert evm.signs_digest and not evm.seen_addresses_only


async def test_tron_burns_bandwidth_and_energy() -> None:
    tron = rules(Chain.TRON)
    assert await tron.fee(Book(), "T1", TRX, sponsored=False) == FeeQuote(268_000, 268)
    new_holder = await tron.fee(Book(), "T1", USDT_TRX, sponsored=False)
    assert new_holder == FeeQuote(345_000 + 130_000 * 210, 345, 130_000)
    holder = await tron.fee(Book({("T1", 41)}), "T1", USDT_TRX, sponsored=False)
    assert holder == FeeQuote(345_000 + 65_000 * 210, 345, 65_000)
    assert await tron.minimum_send(Book(), "T1", TRX) is None
    assert tron.tx_hash(BODY, RAW, SIGNATURE) == hashlib.sha256(BODY).hexdigest()
    assert tron.signs_digest and not tron.seen_addresses_only


async def test_solana_pays_signatures_and_rent() -> None:
    sol = rules(Chain.SOLANA)
    assert await sol.fee(Book(), "So1", SOL, sponsored=False) == FeeQuote(5_000)
    assert await sol.fee(Book(), "So1", SOL, sponsored=True) == FeeQuote(10_000)
    assert await sol.fee(Book(), "So1", USDT_SOL, sponsored=False) == FeeQuote(2_044_280)
    held = Book({("So1", 61)})
    assert await sol.fee(held, "So1", USDT_SOL, sponsored=False) == FeeQuote(5_000)
    rent = SendMinimum(890_880, "the rent-exempt minimum of a new SOLANA account")
    assert await sol.minimum_send(Book(balance=0), "So1", SOL) == rent
    assert await sol.minimum_send(Book(balance=1), "So1", SOL) is None
    assert await sol.minimum_send(Book(balance=0), "So1", USDT_SOL) is None
    assert sol.tx_hash(BODY, RAW, SIGNATURE) == base58.b58encode(SIGNATURE).decode("ascii")
    assert not sol.signs_digest and not sol.seen_addresses_only
