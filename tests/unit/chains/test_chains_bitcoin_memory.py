"""What the Bitcoin backends keep in memory is bounded: the confirmed transactions they
decoded (`ConfirmedViews`, both backends) and the addresses Core's wallet is known to watch.
A worker that serves history and follows sends for years reads millions of transactions
and addresses: each map stays at its bound, the oldest entry forgotten first."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from walletcore_chains.bitcoin import backend as backend_module
from walletcore_chains.bitcoin import core as core_module
from walletcore_chains.bitcoin.backend import ConfirmedViews, TxIn, TxOut, TxView
from walletcore_chains.bitcoin.core import CoreBackend
from walletcore_chains.bitcoin.esplora import EsploraBackend

ADDRESS = "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"


def txid(n: int) -> str:
    return f"{n:064x}"


def view(n: int, height: int | None = 100) -> TxView:
    return TxView(
        txid(n), (TxIn(txid(0), 0, ADDRESS, 5000),), (TxOut(ADDRESS, 4000),), 1000, height
    )


def test_confirmed_views_keep_the_newest_up_to_their_bound() -> None:
    views = ConfirmedViews(size=3)
    for n in range(1, 8):
        views.keep(view(n))
    assert len(views) == 3
    assert [views.get(txid(n)) is not None for n in range(1, 8)] == [False] * 4 + [True] * 3


def test_an_unconfirmed_transaction_is_not_kept() -> None:
    views = ConfirmedViews(size=3)
    views.keep(view(1, height=None))
    assert len(views) == 0 and views.get(txid(1)) is None


def test_the_bound_is_the_modules_by_default() -> None:
    assert ConfirmedViews()._size == backend_module.CONFIRMED_REMEMBERED == 10_000


# -- Esplora -------------------------------------------------------------------------------
def esplora_tx(tid: str) -> dict[str, Any]:
    return {
        "txid": tid,
        "vin": [{"txid": txid(0), "vout": 0, "prevout": {"scriptpubkey_address": ADDRESS,
                                                         "value": 5000}}],
        "vout": [{"scriptpubkey_address": ADDRESS, "value": 4000}],
        "fee": 1000,
        "status": {"confirmed": True, "block_height": 100, "block_time": 1_700_000_000},
    }  # fmt: skip


async def test_esplora_keeps_at_most_its_bound_of_confirmed_transactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(backend_module, "CONFIRMED_REMEMBERED", 3)
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        tid = request.url.path.rsplit("/", 1)[1]
        asked.append(tid)
        return httpx.Response(200, json=esplora_tx(tid))

    backend = EsploraBackend("http://esplora.invalid")
    await backend.aclose()
    backend._client = httpx.AsyncClient(
        base_url="http://esplora.invalid", transport=httpx.MockTransport(answer)
    )
    try:
        for n in range(1, 11):
            assert (await backend.transaction(txid(n))).txid == txid(n)  # type: ignore[union-attr]
        assert len(backend._confirmed) == 3
        asked.clear()
        await backend.transaction(txid(10))  # among the newest: no request
        assert asked == []
        await backend.transaction(txid(1))  # forgotten: read again
        assert asked == [txid(1)]
    finally:
        await backend.aclose()


# -- Bitcoin Core --------------------------------------------------------------------------
class FakeRpc:
    """The JSON-RPC calls the Core backend makes here, answered as a node would."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def call(self, method: str, *params: Any, path: str | None = None,
                   timeout: float | None = None) -> Any:  # fmt: skip
        self.calls.append(method)
        if method == "listwallets":
            return ["walletcore-watch"]
        if method == "getaddressinfo":
            return {"ismine": False, "iswatchonly": True}
        if method == "getblockcount":
            return 200
        if method == "getrawtransaction":
            return {
                "txid": params[0],
                "vin": [{"txid": txid(0), "vout": 0, "sequence": 0xFFFFFFFF,
                         "prevout": {"value": 0.00005, "scriptPubKey": {"address": ADDRESS}}}],
                "vout": [{"value": 0.00004, "scriptPubKey": {"address": ADDRESS}}],
                "confirmations": 6,
                "blocktime": 1_700_000_000,
            }  # fmt: skip
        raise AssertionError(f"unexpected call {method}")

    async def aclose(self) -> None:
        pass


def core_backend() -> tuple[CoreBackend, FakeRpc]:
    backend = CoreBackend("http://user:pass@127.0.0.1:1")
    rpc = FakeRpc()
    backend._rpc = rpc  # type: ignore[assignment]
    return backend, rpc


async def test_core_keeps_at_most_its_bound_of_confirmed_transactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(backend_module, "CONFIRMED_REMEMBERED", 3)
    backend, rpc = core_backend()
    for n in range(1, 11):
        found = await backend.transaction(txid(n))
        assert found is not None and found.height == 195
    assert len(backend._confirmed) == 3
    rpc.calls.clear()
    await backend.transaction(txid(10))
    assert rpc.calls == []
    await backend.transaction(txid(1))
    assert "getrawtransaction" in rpc.calls


async def test_core_remembers_at_most_its_bound_of_watched_addresses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(core_module, "WATCHED_REMEMBERED", 3)
    backend, rpc = core_backend()
    addresses = [f"{ADDRESS[:-2]}{n:02d}" for n in range(10)]
    for address in addresses:
        await backend.watch(address)
    assert list(backend._watched) == addresses[-3:]
    rpc.calls.clear()
    await backend.watch(addresses[-1])  # known: no call
    assert rpc.calls == []
    await backend.watch(addresses[0])  # forgotten: the node's wallet is asked again
    assert rpc.calls == ["getaddressinfo"]
