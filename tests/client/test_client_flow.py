"""Every method of the client over real HTTP against a served sandbox, with `AsyncClient`
and with `Client`: one flow (a wallet funded on the sandbox chain, a sell collected, a buy,
a cancelled quote, a send followed to the chain, the platform wallet, the feed, the
policy) that must call every operation of `_core.OPERATIONS` at least once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from client_support import PASSWORD, RECIPIENT, Credentials, FaultProxy, Sandbox

from walletcore_client import AsyncClient, Client, HeldSend, SendResult, models
from walletcore_client._core import OPERATIONS


class Recording:
    """Wraps a client: every method is awaitable (a `Client`'s too) and its name recorded."""

    def __init__(self, client: Client | AsyncClient) -> None:
        self.client = client
        self.called: set[str] = set()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.called.add(name)
            outcome = method(*args, **kwargs)
            if hasattr(outcome, "__await__"):
                outcome = await outcome
            return outcome

        return call


async def run_flow(api: Recording, sandbox: Sandbox) -> None:
    token = await api.auth()
    assert isinstance(token.expiresAt, datetime) and token.expiresAt.tzinfo is not None
    prices = await api.prices()
    assert isinstance(prices["ETH"].USD, Decimal) and prices["ETH"].USD > 0
    config = await api.config()
    assert 2 in {asset.assetId for asset in config.assets}

    wallet = await api.create(PASSWORD)
    user = wallet.userId
    assert (await api.addresses(user)).addresses == wallet.addresses
    assert (await api.extend(user, PASSWORD)).userId == user
    eth = wallet.addresses["ETHEREUM"]
    sandbox.fund("ETHEREUM", eth, 2, "3")
    assert await api.balance(user, 2) == Decimal(3)

    # a sell, approved and collected; a buy; a quote cancelled
    sell = await api.sell(user, 2, crypto_amount=Decimal("0.25"))
    assert sell.status == "open" and sell.cryptoAmount == Decimal("0.25")
    approved = await api.approve(user, sell.tradeId)
    assert approved.status == "completed" and approved.settlement is not None
    collected = await api.collect(user, sell.tradeId, PASSWORD)
    assert collected.settlement is not None
    assert collected.settlement.status in ("sent", "settled")
    buy = await api.order(user, 2, fiat_amount="100")
    assert buy.side == "buy" and buy.fiatAmount == Decimal(100)
    assert (await api.approve(user, buy.tradeId)).status == "completed"
    dropped = await api.sell(user, 2, fiat_amount="50", fiat="EUR")
    assert (await api.cancel(user, dropped.tradeId)).status == "cancelled"
    assert (await api.trade(user, dropped.tradeId)).status == "cancelled"
    listed = await api.trades(user, side="sell")
    assert [t.tradeId for t in listed] == [dropped.tradeId, sell.tradeId]
    done = await api.wait_for_trade(user, sell.tradeId, timeout=10)
    assert done.status == "completed"

    # a send, followed until it leaves pending
    fee = await api.fee(user, 2, RECIPIENT, "0.5")
    assert isinstance(fee, Decimal) and fee > 0
    sent = await api.send(user, 2, RECIPIENT, Decimal("0.5"), PASSWORD)
    assert isinstance(sent, SendResult) and sent.request_id and sent.fee == fee
    row = await api.wait_for_transaction(user, 2, sent.txHash, timeout=20)
    assert row.status == "success" and row.type == "send"
    assert (await api.txid(user, 2, sent.txHash)).hash == sent.txHash
    assert row.amount is not None and row.amount + row.fee == Decimal("0.5")  # USER pays
    info = await api.info(user, 2)
    assert sent.txHash in {t.hash for t in info.transactions}
    assert sent.txHash in {t.hash for t in await api.transactions(user, 2)}

    # the platform wallet
    platform = await api.platform_addresses()
    sandbox.fund("ETHEREUM", platform["ETHEREUM"], 2, "1")
    assert await api.platform_balance(2) >= Decimal(1)
    assert isinstance(await api.platform_fee(2, RECIPIENT), Decimal)
    out = await api.platform_send(2, RECIPIENT, "0.1")
    assert isinstance(out, SendResult) and not isinstance(out, HeldSend)
    assert (await api.wait_for_transaction(None, 2, out.txHash, timeout=20)).status == "success"
    assert (await api.platform_txid(2, out.txHash)).hash == out.txHash
    assert out.txHash in {t.hash for t in await api.platform_transactions(2)}
    assert (await api.platform_info(2)).address == platform["ETHEREUM"]

    # the feed, deposits, webhooks, policies
    page = await api.events(user_id=user, limit=1000)
    kinds = [event.type for event in page.events]
    assert "trade.completed" in kinds and "send.pending" in kinds
    assert all(isinstance(e.timestamp, datetime) for e in page.events)
    deposits = await api.deposits(user)
    assert any(d.amount == Decimal(3) and d.address == eth for d in deposits)
    assert await api.webhook_deliveries(limit=5) == ()  # no endpoint is set
    assert (await api.policy()).inForce is None
    assert await api.approvals(status="pending") == ()


def test_every_method_with_the_async_client(
    proxy: FaultProxy, sandbox: Sandbox, credentials: Credentials
) -> None:
    import asyncio

    async def main() -> set[str]:
        async with AsyncClient(proxy.url, credentials.client_id, credentials.api_key) as client:
            api = Recording(client)
            await run_flow(api, sandbox)
            return api.called

    called = asyncio.run(main())
    assert {op.method for op in OPERATIONS.values()} <= called


def test_every_method_with_the_sync_client(
    proxy: FaultProxy, sandbox: Sandbox, credentials: Credentials
) -> None:
    import asyncio

    with Client(proxy.url, credentials.client_id, credentials.api_key) as client:
        api = Recording(client)
        asyncio.run(run_flow(api, sandbox))
    assert {op.method for op in OPERATIONS.values()} <= api.called
    # the client's own token served the whole flow: /auth once (the flow's explicit call)
    assert proxy.count("/auth") == 1


@pytest.mark.parametrize("amount", [Decimal("0.1"), "0.1", 1])
def test_amounts_are_sent_as_decimal_strings(amount: Any) -> None:
    from walletcore_client._core import amount_text

    assert amount_text(amount) in ("0.1", "1")


def test_the_models_are_frozen() -> None:
    import dataclasses

    row = models.TronFee(bandwidth=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.bandwidth = 2  # type: ignore[misc]
