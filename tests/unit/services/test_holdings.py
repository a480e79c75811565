"""`WalletHoldings`: the balance is read from the chain every time; the wallet's address is
read from the storage once per process and chain (addresses never change; `/extend` adds
chains), and a user unknown to the storage is still a 404."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from walletcore.domain.assets import Chain
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import UserNotFound
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.services.holdings import WalletHoldings
from walletcore.testing import CONTRACT_CATALOG, InMemoryStorage, autocommit

pytestmark = pytest.mark.asyncio
T0 = datetime(2026, 1, 1, tzinfo=UTC)
ETH, BTC = CONTRACT_CATALOG.asset_by_id(2), CONTRACT_CATALOG.asset_by_id(1)


class CountingStorage:
    """The in-memory storage, counting read units."""

    def __init__(self, inner: InMemoryStorage) -> None:
        self.inner = inner
        self.reads = 0

    def read(self) -> Any:
        self.reads += 1
        return self.inner.read()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Chain_:
    def __init__(self) -> None:
        self.balances: dict[str, int] = {}
        self.asked = 0

    async def balance(self, address: str, asset: Any) -> int:
        self.asked += 1
        return self.balances.get(address, 0)


async def test_the_address_is_read_once_the_balance_every_time() -> None:
    inner = InMemoryStorage()
    db = autocommit(inner)
    await db.clients.add(ApiClient("c1", "Acme", "00" * 32))
    wallet = WalletRecord("c1", WalletOwner.USER, "u1", b"", {Chain.ETHEREUM: "0xabc"}, T0)
    await db.wallets.add_user(User("u1", "c1", T0), wallet)
    storage, eth = CountingStorage(inner), Chain_()
    holdings = WalletHoldings(storage, {Chain.ETHEREUM: eth, Chain.BITCOIN: Chain_()})  # type: ignore[arg-type, dict-item]
    eth.balances["0xabc"] = 5
    assert await holdings.units("c1", "u1", ETH) == 5
    eth.balances["0xabc"] = 2  # spent meanwhile: the next read sees it
    assert await holdings.units("c1", "u1", ETH) == 2
    assert (storage.reads, eth.asked) == (1, 2)
    # a chain the wallet has no address on yet is read again (until /extend adds it)
    assert await holdings.units("c1", "u1", BTC) == 0
    assert await holdings.units("c1", "u1", BTC) == 0
    assert storage.reads == 3
    with pytest.raises(UserNotFound):
        await holdings.units("c1", "nobody", ETH)
    with pytest.raises(UserNotFound):  # another client's user
        await holdings.units("c2", "u1", ETH)


async def test_the_remembered_addresses_are_bounded() -> None:
    inner = InMemoryStorage()
    db = autocommit(inner)
    await db.clients.add(ApiClient("c1", "Acme", "00" * 32))
    for n in range(5):
        wallet = WalletRecord("c1", WalletOwner.USER, f"u{n}", b"", {Chain.ETHEREUM: f"0x{n}"}, T0)
        await db.wallets.add_user(User(f"u{n}", "c1", T0), wallet)
    holdings = WalletHoldings(inner, {Chain.ETHEREUM: Chain_()}, remembered=3)  # type: ignore[dict-item]
    for n in range(5):
        await holdings.units("c1", f"u{n}", ETH)
    assert len(holdings._addresses) <= 3
