"""`iter_events` over the served feed, and the cursor errors mapped to their classes."""

from __future__ import annotations

import asyncio

import pytest
from client_support import PASSWORD, Credentials, FaultProxy, Sandbox

from walletcore_client import (
    AsyncClient,
    Client,
    CursorExpired,
    Polling,
    UnknownCursor,
    WalletcoreError,
    models,
)


@pytest.fixture
def client(proxy: FaultProxy, credentials: Credentials) -> Client:
    return Client(proxy.url, credentials.client_id, credentials.api_key)


def a_completed_sell(client: Client, sandbox: Sandbox) -> tuple[str, str]:
    wallet = client.create(PASSWORD)
    sandbox.fund("ETHEREUM", wallet.addresses["ETHEREUM"], 2, "1")
    quote = client.sell(wallet.userId, 2, crypto_amount="0.2")
    client.approve(wallet.userId, quote.tradeId)
    return wallet.userId, quote.tradeId


def test_iter_events_yields_a_flows_events_in_order_and_resumes_from_a_cursor(
    client: Client, sandbox: Sandbox
) -> None:
    user, trade_id = a_completed_sell(client, sandbox)
    events = list(client.iter_events(user_id=user, limit=2, stop_when_idle=True))
    about_trade = [e.type for e in events if e.data.get("tradeId") == trade_id]
    assert about_trade.index("trade.approved") < about_trade.index("trade.completed")
    assert all(isinstance(e, models.Event) and e.userId == user for e in events)
    assert len({e.id for e in events}) == len(events)  # never twice, across pages of 2
    middle = events[len(events) // 2].id
    rest = list(client.iter_events(middle, user_id=user, stop_when_idle=True))
    assert rest == events[len(events) // 2 + 1 :]


def test_iter_events_waits_with_back_off_for_new_events(
    proxy: FaultProxy, credentials: Credentials, sandbox: Sandbox
) -> None:
    async def main() -> None:
        async with AsyncClient(
            proxy.url, credentials.client_id, credentials.api_key, polling=Polling(0.05, 0.2)
        ) as api:
            wallet = await api.create(PASSWORD)
            feed = api.iter_events(user_id=wallet.userId)
            waiting = asyncio.ensure_future(anext(feed))
            await asyncio.sleep(0.5)
            assert not waiting.done()  # nothing yet: the iterator polls
            await asyncio.to_thread(
                sandbox.fund, "ETHEREUM", wallet.addresses["ETHEREUM"], 2, "0.3"
            )
            first = await asyncio.wait_for(waiting, 20)
            assert first.type == "deposit.seen" and first.userId == wallet.userId
            await feed.aclose()

    asyncio.run(main())
    assert proxy.count("/events") >= 3


def test_an_unknown_cursor_is_unknown_cursor(client: Client, sandbox: Sandbox) -> None:
    a_completed_sell(client, sandbox)  # the feed has events: a later made-up one is unknown
    with pytest.raises(UnknownCursor) as raised:
        next(client.iter_events("evt_0_999999999"))
    assert raised.value.status == 400 and not raised.value.retry_safe


def test_a_cursor_the_feed_no_longer_keeps_is_cursor_expired(
    proxy: FaultProxy, sandbox: Sandbox
) -> None:
    created = sandbox.cli("clients", "create", "--name", "Empty feed")
    client = Client(proxy.url, created["clientId"], created["apiKey"])
    with pytest.raises(CursorExpired) as raised:
        client.events("evt_0_1")  # older than anything this feed keeps (it keeps nothing)
    assert raised.value.status == 410 and not raised.value.retry_safe
    assert raised.value.message.startswith("Cursor expired:")
    assert isinstance(raised.value, WalletcoreError)
