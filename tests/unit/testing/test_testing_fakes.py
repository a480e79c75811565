"""`walletcore.testing`: the fakes import without pytest or any chain library, and are
enough for an embedder to create a user and sell and approve a trade."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal

import pytest

from walletcore.domain.assets import Chain, Fiat
from walletcore.domain.errors import PriceUnavailable, WrongWalletPassword
from walletcore.testing import FakeKeyStore, FixedPrices

from ..test_core_boundary import FORBIDDEN

EMBEDDER = """
import asyncio, importlib.abc, json, sys, tempfile, pathlib

FORBIDDEN = set(json.loads(sys.argv[1])) | {"pytest", "_pytest", "pytest_asyncio"}

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            raise ImportError(f"{name} is not for a core-only embedder")
        return None

sys.meta_path.insert(0, Refuse())

from decimal import Decimal
from walletcore import Caller, Settings, create_container
from walletcore.testing import (
    CONTRACT_CATALOG, FakeKeyStore, FixedHoldings, FixedPrices, InMemoryStorage, InstantVenue,
    LocalNonceLeases, ManualClock, autocommit,
)

async def main():
    prices = FixedPrices({"ETH": Decimal("2000")})
    storage = InMemoryStorage()
    container = create_container(
        Settings(home=pathlib.Path(tempfile.mkdtemp())),
        storage=storage,
        nonce_leases=LocalNonceLeases(),
        clock=ManualClock(),
        keystore=FakeKeyStore(),
        prices=prices,
        venue=InstantVenue(prices),
        holdings=FixedHoldings(storage=storage),
        # no chain plugin is installed: the container serves the catalog it is handed
        catalog=CONTRACT_CATALOG,
    )
    issued = await container.auth().create_client("embedder", assets=[2])
    caller = Caller(issued.client, "r-1")
    created = await container.wallets().create(caller, password="correct horse battery")
    trading = container.trading()
    quote = await trading.sell(caller, user_id=created.user_id, asset_id=2, crypto_amount="0.5")
    done = await trading.approve(caller, user_id=created.user_id, trade_id=quote.trade_id)
    audit = await autocommit(storage).audit.newest()
    print(json.dumps({
        "status": done.status.value,
        "fiat": str(done.executed.fiat_amount),
        "addresses": {c.value: a for c, a in created.addresses.items()},
        "audit": [e.action for e in reversed(audit)],
        "modules": sorted(sys.modules),
    }))

asyncio.run(main())
"""


def test_a_core_only_embedder_creates_a_user_and_sells_with_the_fakes() -> None:
    done = subprocess.run(
        [sys.executable, "-c", EMBEDDER, json.dumps(sorted(FORBIDDEN))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == "completed" and Decimal(report["fiat"]) == 1000
    assert report["addresses"] == {"ETHEREUM": report["addresses"]["ETHEREUM"]}
    assert report["addresses"]["ETHEREUM"].startswith("fake-ethereum-")
    assert report["audit"] == [
        "client.create",
        "wallet.create",
        "trade.sell",
        "trade.reserve",  # the sold coins held from the approval (docs/settlement.md)
        "trade.approve",
        "trade.settle",
        "trade.settlement",  # completed: the collection waits for the wallet password
    ]
    loaded = {name.split(".")[0] for name in report["modules"]}
    assert not loaded & (FORBIDDEN | {"pytest", "_pytest"})


async def test_the_fake_keystore_keeps_the_keystore_rules() -> None:
    keystore = FakeKeyStore()
    assert "FAKE" in repr(keystore)
    made = await keystore.create_wallet("pass word 1", [Chain.ETHEREUM, Chain.SOLANA])
    assert made.mnemonic and made.mnemonic.split()[0] == "fake"
    assert set(made.addresses) == {Chain.ETHEREUM, Chain.SOLANA}
    # addresses no chain accepts, the same on every derivation
    assert all(a.startswith("fake-") for a in made.addresses.values())
    derived = await keystore.derive_addresses(made.sealed, "pass word 1", [Chain.ETHEREUM])
    assert derived == {Chain.ETHEREUM: made.addresses[Chain.ETHEREUM]}
    with pytest.raises(WrongWalletPassword):
        await keystore.derive_addresses(made.sealed, "wrong", [])
    with pytest.raises(WrongWalletPassword):
        await keystore.derive_addresses(made.sealed, None, [])  # not a platform wallet
    async with keystore.unseal(made.sealed, "pass word 1", Chain.SOLANA) as signer:
        assert signer.address == made.addresses[Chain.SOLANA]
        assert len(signer.sign(b"message")) == 64
    with pytest.raises(RuntimeError):
        signer.sign(b"after the block")
    platform = await keystore.create_platform_wallet([Chain.BITCOIN])
    assert platform.mnemonic is None
    async with keystore.unseal(platform.sealed, None, Chain.BITCOIN) as signer:
        assert len(signer.sign(bytes(32))) == 65


async def test_fixed_prices() -> None:
    prices = FixedPrices({"BTC": Decimal(50000)}, default=None)
    assert await prices.unit_price("BTC", Fiat.EUR) == Decimal(50000)
    with pytest.raises(PriceUnavailable):
        await prices.unit_price("ETH", Fiat.EUR)
    assert (await prices.price_map())["BTC"]["USD"] == 50000.0
