"""The client's rules under faults injected by the proxy in front of a served sandbox:
a token that expires mid-run, an answer lost on the way back from `/send` and from
`/trade/approve`, the venue's 504 and 502 on approve, wrong secrets, and one `/auth` for
many concurrent calls."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from client_support import PASSWORD, RECIPIENT, Credentials, FaultProxy, Sandbox

from walletcore_client import (
    AsyncClient,
    Client,
    GatewayTimeout,
    InvalidCredentials,
    OrderRejected,
    RetryPolicy,
    SendResult,
    TokenExpired,
    TransportError,
)

FAST = RetryPolicy(base_delay=0.05, max_delay=0.2)


def funded_user(client: Client, sandbox: Sandbox, eth: str = "2") -> str:
    wallet = client.create(PASSWORD)
    sandbox.fund("ETHEREUM", wallet.addresses["ETHEREUM"], 2, eth)
    return wallet.userId


@pytest.fixture
def client(proxy: FaultProxy, credentials: Credentials) -> Client:
    return Client(proxy.url, credentials.client_id, credentials.api_key, retry=FAST)


def test_a_token_expired_mid_run_is_renewed_once_and_the_call_replayed(
    client: Client, proxy: FaultProxy
) -> None:
    assert client.prices()
    proxy.expire["/config"] = 1
    assert client.config().assets
    assert proxy.count("/auth") == 2
    assert proxy.count("/config") == 2
    assert client.prices()  # the new token is cached
    assert proxy.count("/auth") == 2


def test_a_401_on_the_replay_too_is_raised(client: Client, proxy: FaultProxy) -> None:
    proxy.expire["/config"] = 2
    with pytest.raises(TokenExpired) as raised:
        client.config()
    assert raised.value.status == 401 and raised.value.retry_safe
    assert proxy.count("/auth") == 2 and proxy.count("/config") == 2


def test_wrong_credentials_are_never_retried(proxy: FaultProxy, credentials: Credentials) -> None:
    wrong = "wck_" + "x" * 43
    client = Client(proxy.url, credentials.client_id, wrong, retry=FAST)
    with pytest.raises(InvalidCredentials) as raised:
        client.prices()
    assert raised.value.message == "Invalid credentials" and not raised.value.retry_safe
    assert wrong not in str(raised.value) and wrong not in repr(raised.value)
    assert wrong not in repr(client)
    assert proxy.count("/auth") == 1 and proxy.count("/prices") == 0


def test_a_wrong_wallet_password_on_send_is_never_retried(
    client: Client, proxy: FaultProxy, sandbox: Sandbox
) -> None:
    user = funded_user(client, sandbox)
    with pytest.raises(InvalidCredentials) as raised:
        client.send(user, 2, RECIPIENT, "0.5", "not the password")
    assert not raised.value.retry_safe and "not the password" not in str(raised.value)
    assert proxy.count("/send") == 1 and proxy.count("/auth") == 1


def test_a_send_whose_answer_was_lost_is_sent_again_with_its_id_and_debits_once(
    client: Client, proxy: FaultProxy, sandbox: Sandbox
) -> None:
    user = funded_user(client, sandbox)
    proxy.drop["/send"] = 1
    sent = client.send(user, 2, RECIPIENT, Decimal("0.5"), PASSWORD)
    assert isinstance(sent, SendResult)
    ids = proxy.request_ids("/send")
    assert len(ids) == 2 and ids[0] == ids[1] == sent.request_id
    assert [one.answered for one in proxy.seen if one.path == "/send"] == ["dropped", "upstream"]
    assert client.balance(user, 2) == Decimal("1.5")  # debited once
    sends = [t for t in client.transactions(user, 2) if t.type == "send"]
    assert [t.hash for t in sends] == [sent.txHash]


def test_a_given_request_id_is_kept_and_replays_the_first_outcome(
    client: Client, proxy: FaultProxy, sandbox: Sandbox
) -> None:
    user = funded_user(client, sandbox)
    first = client.send(user, 2, RECIPIENT, "0.5", PASSWORD, request_id="order-77-payout")
    again = client.send(user, 2, RECIPIENT, "0.5", PASSWORD, request_id="order-77-payout")
    assert first == again and first.request_id == "order-77-payout"
    assert proxy.request_ids("/send") == ["order-77-payout", "order-77-payout"]
    assert client.balance(user, 2) == Decimal("1.5")


def test_approve_on_the_venues_504_is_sent_once_and_the_trade_polled_to_completed(
    client: Client, proxy: FaultProxy, sandbox: Sandbox
) -> None:
    user = funded_user(client, sandbox)
    quote = client.sell(user, 2, fiat_amount="504")
    with pytest.raises(GatewayTimeout) as raised:
        client.approve(user, quote.tradeId)
    assert raised.value.status == 504 and not raised.value.retry_safe
    assert proxy.count("/trade/approve") == 1
    done = client.wait_for_trade(user, quote.tradeId, timeout=20)
    assert done.status == "completed" and done.fiatAmount == Decimal(504)
    assert proxy.count("/trade/approve") == 1


def test_approve_whose_answer_was_lost_is_not_sent_again(
    client: Client, proxy: FaultProxy, sandbox: Sandbox
) -> None:
    user = funded_user(client, sandbox)
    quote = client.sell(user, 2, crypto_amount="0.1")
    proxy.drop["/trade/approve"] = 1
    with pytest.raises(TransportError) as raised:
        client.approve(user, quote.tradeId)
    assert not raised.value.retry_safe and "never approve" in raised.value.message
    assert proxy.count("/trade/approve") == 1
    assert client.wait_for_trade(user, quote.tradeId, timeout=20).status == "completed"


def test_approve_rejected_by_the_venue_fails_the_trade(
    client: Client, proxy: FaultProxy, sandbox: Sandbox
) -> None:
    user = funded_user(client, sandbox)
    quote = client.sell(user, 2, fiat_amount="502")
    with pytest.raises(OrderRejected) as raised:
        client.approve(user, quote.tradeId)
    assert raised.value.message.startswith("Order rejected:") and not raised.value.retry_safe
    assert proxy.count("/trade/approve") == 1
    failed = client.wait_for_trade(user, quote.tradeId, timeout=10)
    assert failed.status == "failed" and failed.failureReason


def test_a_read_whose_answer_was_lost_is_retried(
    client: Client, proxy: FaultProxy, sandbox: Sandbox
) -> None:
    user = funded_user(client, sandbox, "1.25")
    proxy.drop["/balance"] = 1
    assert client.balance(user, 2) == Decimal("1.25")
    assert proxy.count("/balance") == 2


def test_twenty_concurrent_calls_of_a_fresh_async_client_authenticate_once(
    proxy: FaultProxy, credentials: Credentials
) -> None:
    async def main() -> None:
        async with AsyncClient(proxy.url, credentials.client_id, credentials.api_key) as api:
            answers = await asyncio.gather(*(api.prices() for _ in range(20)))
        assert all("BTC" in answer for answer in answers)

    asyncio.run(main())
    assert proxy.count("/auth") == 1 and proxy.count("/prices") == 20


def test_twenty_threads_on_a_fresh_client_authenticate_once(
    client: Client, proxy: FaultProxy
) -> None:
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: client.config(), range(20)))
    assert len(answers) == 20
    assert proxy.count("/auth") == 1 and proxy.count("/config") == 20


def test_the_async_client_follows_the_same_rules(
    proxy: FaultProxy, credentials: Credentials, sandbox: Sandbox
) -> None:
    async def main() -> None:
        async with AsyncClient(
            proxy.url, credentials.client_id, credentials.api_key, retry=FAST
        ) as api:
            wallet = await api.create(PASSWORD)
            sandbox.fund("ETHEREUM", wallet.addresses["ETHEREUM"], 2, "2")
            proxy.expire["/balance"] = 1
            assert await api.balance(wallet.userId, 2) == Decimal(2)
            proxy.drop["/send"] = 1
            sent = await api.send(wallet.userId, 2, RECIPIENT, "0.5", PASSWORD)
            assert isinstance(sent, SendResult)
            assert proxy.request_ids("/send") == [sent.request_id] * 2
            assert await api.balance(wallet.userId, 2) == Decimal("1.5")
            quote = await api.sell(wallet.userId, 2, fiat_amount="504")
            with pytest.raises(GatewayTimeout):
                await api.approve(wallet.userId, quote.tradeId)
            done = await api.wait_for_trade(wallet.userId, quote.tradeId, timeout=20)
            assert done.status == "completed"

    asyncio.run(main())
    assert proxy.count("/auth") == 2 and proxy.count("/trade/approve") == 1
