"""Sells are backed over HTTP: a sell quote or approval for more than the user's wallet
holds on its chain (the sandbox ledger here, read through the real holdings) is a `400`
that stores and trades nothing."""

from __future__ import annotations

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, sign_in
from test_http_wallet_ops import OUTSIDE, give, wallet

from walletcore.container import Container
from walletcore.domain.assets import Chain
from walletcore.testing import CONTRACT_CATALOG

ETH = CONTRACT_CATALOG.native_asset(Chain.ETHEREUM).id


@pytest.fixture
def real_holdings() -> bool:
    return True


async def test_a_sell_over_the_balance_is_refused_until_the_wallet_is_funded(
    api: Api, container: Container
) -> None:
    user_id, addresses, _ = await wallet(api)
    body = {"userId": user_id, "assetId": ETH, "cryptoAmount": "0.5"}
    assert_error(
        await api.post("/sell", body), 400, "The wallet holds 0 ETH, less than the 0.5 ETH to sell"
    )
    listed = assert_ok(await api.post("/trades", {"userId": user_id}))
    assert listed == []  # nothing was stored

    await give(container, addresses["ETHEREUM"], ETH, "1")
    quote = assert_ok(await api.post("/sell", body))
    assert quote["status"] == "open" and quote["cryptoAmount"] == "0.5"
    done = assert_ok(
        await api.post("/trade/approve", {"userId": user_id, "tradeId": quote["tradeId"]})
    )
    assert done["status"] == "completed"

    too_much = assert_error(
        await api.post("/sell", {"userId": user_id, "assetId": ETH, "fiatAmount": "1000000"}),
        400,
    )
    # the 0.5 ETH sold are held until collected: not free to sell again
    assert too_much["message"].startswith("The wallet holds 1 ETH, of which 0.5 ETH are free")
    assert done["settlement"]["status"] == "awaiting_password"


async def test_an_approval_the_wallet_no_longer_covers_is_refused_and_the_quote_stays_open(
    api: Api, container: Container
) -> None:
    user_id, addresses, _ = await wallet(api)
    await give(container, addresses["ETHEREUM"], ETH, "1")
    quote = assert_ok(
        await api.post("/sell", {"userId": user_id, "assetId": ETH, "cryptoAmount": "0.8"})
    )
    sent = await api.post(
        "/send",
        {
            "userId": user_id,
            "assetId": ETH,
            "recipient": OUTSIDE[Chain.ETHEREUM],
            "amount": "0.5",
            "password": PASSWORD,
        },
        X_Request_Id="send-away-1",
    )
    assert_ok(sent)
    ids = {"userId": user_id, "tradeId": quote["tradeId"]}
    refused = assert_error(await api.post("/trade/approve", ids), 400)
    assert refused["message"].endswith("less than the 0.8 ETH to sell")
    assert assert_ok(await api.post("/trade", ids))["status"] == "open"


async def test_a_user_of_another_client_is_still_a_404(api: Api) -> None:
    user_id, _, _ = await wallet(api)
    other = await sign_in(api.http, api.container, name="Other")
    body = {"userId": user_id, "assetId": ETH, "cryptoAmount": "0.5"}
    assert_error(await other.post("/sell", body), 404)
