"""Trading over HTTP: every endpoint, every status the spec lists for it, `X-USER-ID`."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from http_support import Api, assert_error, assert_ok, judge_responses, sign_in
from litestar.testing import AsyncTestClient

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Fiat
from walletcore.domain.errors import PriceUnavailable, PricingTimeout
from walletcore.domain.ids import new_id
from walletcore.ports import PriceMap
from walletcore.settings import Settings
from walletcore.testing import autocommit
from walletcore_litestar import create_app

DECIMAL = re.compile(r"\A[0-9]+(\.[0-9]{1,6})?\Z")
DATETIME = re.compile(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")
TRADE_FIELDS = {
    "tradeId",
    "side",
    "status",
    "assetId",
    "symbol",
    "fiat",
    "cryptoAmount",
    "fiatAmount",
    "price",
    "quote",
    "createdAt",
    "approvedAt",
    "completedAt",
}


async def quote(api: Api, user_id: str, path: str = "/sell", **body: Any) -> dict[str, Any]:
    payload = {"userId": user_id, "assetId": 1, "cryptoAmount": "0.5", **body}
    return assert_ok(await api.post(path, payload))  # type: ignore[no-any-return]


def assert_trade_shape(trade: dict[str, Any]) -> None:
    assert TRADE_FIELDS <= set(trade) <= TRADE_FIELDS | {"reference", "failureReason"}
    for name in ("cryptoAmount", "fiatAmount", "price"):
        assert DECIMAL.match(trade[name]), trade[name]
    assert DATETIME.match(trade["createdAt"]) and DATETIME.match(trade["quote"]["expiresAt"])


# -- /sell and /order ---------------------------------------------------------------------
async def test_sell_quotes_an_open_trade(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id, fiat="EUR")
    assert_trade_shape(trade)
    assert (trade["side"], trade["status"], trade["assetId"], trade["symbol"], trade["fiat"]) == (
        "sell",
        "open",
        1,
        "BTC",
        "EUR",
    )
    assert trade["cryptoAmount"] == "0.5" and trade["approvedAt"] is None
    assert trade["completedAt"] is None and trade["quote"]["cryptoAmount"] == "0.5"


async def test_order_quotes_a_buy_by_fiat_amount(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id, "/order", assetId="2", cryptoAmount=None, fiatAmount="100")
    assert (trade["side"], trade["assetId"], trade["fiatAmount"]) == ("buy", 2, "100")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"cryptoAmount": None}, "Exactly one of cryptoAmount and fiatAmount is required"),
        ({"fiatAmount": "10"}, "Exactly one of cryptoAmount and fiatAmount is required"),
        ({"assetId": 999}, "Unknown assetId"),
        ({"assetId": "abc"}, None),
        ({"cryptoAmount": "-1"}, None),
        ({"cryptoAmount": "0.123456789"}, "cryptoAmount has more than 8 decimal places"),
        ({"fiat": "XYZ"}, None),
        ({"userId": "not-an-id"}, "userId must be a 24-character hex string"),
    ],
)
async def test_sell_refuses_bad_values_with_400(
    api: Api, user_id: str, body: dict[str, Any], message: str | None
) -> None:
    payload = {"userId": user_id, "assetId": 1, "cryptoAmount": "0.5", **body}
    assert_error(await api.post("/sell", payload), 400, message)


async def test_sell_of_an_asset_not_enabled_is_403(api: Api, container: Container) -> None:
    narrow = await sign_in(api.http, container, name="Narrow", assets=[2])
    user = await narrow.new_user()
    assert_error(
        await narrow.post("/sell", {"userId": user, "assetId": 1, "cryptoAmount": "1"}), 403
    )


async def test_sell_for_an_unknown_user_is_404(api: Api) -> None:
    body = {"userId": new_id(), "assetId": 1, "cryptoAmount": "1"}
    assert_error(await api.post("/sell", body), 404, "User not found")


class FailingPrices:
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def price_map(self) -> PriceMap:
        return {}

    async def unit_price(self, symbol: str, fiat: Fiat) -> Decimal:
        raise self.error


@pytest.mark.parametrize(("error", "status"), [(PriceUnavailable(), 502), (PricingTimeout(), 504)])
async def test_sell_without_a_price_is_502_or_504(
    settings: Settings, clock: ManualClock, error: Exception, status: int
) -> None:
    container = create_container(settings, clock=clock, prices=FailingPrices(error))
    async with AsyncTestClient(create_app(container)) as http:
        api = await sign_in(await judge_responses(http), container)
        body = {"userId": await api.new_user(), "assetId": 1, "cryptoAmount": "1"}
        assert_error(await api.post("/sell", body), status)


class TestTradingUnavailable:
    @pytest.fixture
    def settings_overrides(self) -> dict[str, Any]:
        return {"unavailable_assets": {"sell": [1], "trade/approve": [2]}}

    async def test_sell_of_a_flagged_asset_is_503(self, api: Api, user_id: str) -> None:
        body = {"userId": user_id, "assetId": 1, "cryptoAmount": "1"}
        assert_error(await api.post("/sell", body), 503)


# -- X-USER-ID ----------------------------------------------------------------------------
async def test_user_header_overrides_the_body(api: Api, user_id: str) -> None:
    body = {"userId": new_id(), "assetId": 1, "cryptoAmount": "1"}
    trade = assert_ok(await api.post("/sell", body, X_USER_ID=user_id))
    assert_ok(await api.post("/trade", {"tradeId": trade["tradeId"]}, X_USER_ID=user_id))
    listed = assert_ok(await api.post("/trades", {"userId": "junk"}, X_USER_ID=user_id))
    assert [t["tradeId"] for t in listed] == [trade["tradeId"]]


async def test_user_header_naming_another_user_hides_the_trade(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id)
    other = await api.new_user()
    response = await api.post(
        "/trade", {"userId": user_id, "tradeId": trade["tradeId"]}, X_USER_ID=other
    )
    assert_error(response, 404)


async def test_a_bad_user_header_is_a_400(api: Api) -> None:
    body = {"assetId": 1, "cryptoAmount": "1"}
    assert_error(await api.post("/sell", body, X_USER_ID="nope"), 400)


# -- /trade/approve -------------------------------------------------------------------------
async def test_approve_settles_and_replays(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id)
    ids = {"userId": user_id, "tradeId": trade["tradeId"]}
    done = assert_ok(await api.post("/trade/approve", ids))
    assert done["status"] == "completed" and DATETIME.match(done["approvedAt"])
    assert done["quote"] == trade["quote"] and done["reference"].startswith("SBX-")
    assert assert_ok(await api.post("/trade/approve", ids)) == done


async def test_approve_of_a_lapsed_quote_is_409_and_expires_it(
    api: Api, user_id: str, clock: ManualClock
) -> None:
    trade = await quote(api, user_id)
    clock.advance(seconds=61)
    ids = {"userId": user_id, "tradeId": trade["tradeId"]}
    assert_error(await api.post("/trade/approve", ids), 409)
    assert assert_ok(await api.post("/trade", ids))["status"] == "expired"


async def test_approve_rejected_by_the_venue_is_502_and_failed(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id, cryptoAmount="502")
    ids = {"userId": user_id, "tradeId": trade["tradeId"]}
    body = assert_error(await api.post("/trade/approve", ids), 502)
    assert body["message"].startswith("Order rejected:")
    after = assert_ok(await api.post("/trade", ids))
    assert after["status"] == "failed" and after["failureReason"]
    assert_error(await api.post("/trade/approve", ids), 409)


async def test_approve_timeout_is_504_and_stays_executing(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id, cryptoAmount="504")
    ids = {"userId": user_id, "tradeId": trade["tradeId"]}
    assert_error(await api.post("/trade/approve", ids), 504)
    assert_error(await api.post("/trade/approve", ids), 409)  # executing: never again
    assert assert_ok(await api.post("/trade", ids))["status"] == "completed"  # the poll settles


async def test_approve_accepted_is_approved_then_completed(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id, cryptoAmount="202")
    ids = {"userId": user_id, "tradeId": trade["tradeId"]}
    assert assert_ok(await api.post("/trade/approve", ids))["status"] == "approved"
    assert assert_ok(await api.post("/trade", ids))["status"] == "completed"


class TestClientChangedBehindTheService:
    """The client is changed in storage directly (as another process would): with the
    client cache off, the next request sees it."""

    @pytest.fixture
    def settings_overrides(self) -> dict[str, Any]:
        return {"client_cache_seconds": 0}

    async def test_approve_of_an_asset_no_longer_enabled_is_403(
        self, api: Api, user_id: str, container: Container
    ) -> None:
        trade = await quote(api, user_id)
        import dataclasses

        client = await autocommit(container.storage()).clients.get(api.client_id)
        assert client is not None
        await autocommit(container.storage()).clients.update(
            dataclasses.replace(client, enabled_assets=(2,))
        )
        ids = {"userId": user_id, "tradeId": trade["tradeId"]}
        assert_error(await api.post("/trade/approve", ids), 403)


async def test_approve_of_someone_elses_trade_is_404(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id)
    other = await api.new_user()
    assert_error(
        await api.post("/trade/approve", {"userId": other, "tradeId": trade["tradeId"]}), 404
    )


@pytest.mark.parametrize("body", [{"tradeId": "x"}, {"userId": "a" * 24}, {}])
async def test_approve_with_bad_ids_is_400(api: Api, body: dict[str, Any]) -> None:
    assert_error(await api.post("/trade/approve", body), 400)


class TestApproveUnavailable:
    @pytest.fixture
    def settings_overrides(self) -> dict[str, Any]:
        return {"unavailable_assets": {"trade/approve": [1]}}

    async def test_approve_of_a_flagged_asset_is_503(self, api: Api, user_id: str) -> None:
        trade = await quote(api, user_id)
        response = await api.post(
            "/trade/approve", {"userId": user_id, "tradeId": trade["tradeId"]}
        )
        assert_error(response, 503)


# -- /trade/cancel --------------------------------------------------------------------------
async def test_cancel_is_idempotent(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id)
    ids = {"userId": user_id, "tradeId": trade["tradeId"]}
    first = assert_ok(await api.post("/trade/cancel", ids))
    assert first["status"] == "cancelled" and first["completedAt"]
    assert assert_ok(await api.post("/trade/cancel", ids)) == first


async def test_cancel_of_a_completed_trade_is_409(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id)
    ids = {"userId": user_id, "tradeId": trade["tradeId"]}
    assert_ok(await api.post("/trade/approve", ids))
    assert_error(await api.post("/trade/cancel", ids), 409)


async def test_cancel_errors(api: Api, user_id: str) -> None:
    assert_error(await api.post("/trade/cancel", {"userId": user_id, "tradeId": new_id()}), 404)
    assert_error(await api.post("/trade/cancel", {"userId": user_id, "tradeId": 7}), 400)


# -- /trade and /trades -----------------------------------------------------------------------
async def test_trade_of_another_user_or_none_is_404(api: Api, user_id: str) -> None:
    trade = await quote(api, user_id)
    other = await api.new_user()
    assert_error(await api.post("/trade", {"userId": other, "tradeId": trade["tradeId"]}), 404)
    assert_error(await api.post("/trade", {"userId": user_id, "tradeId": new_id()}), 404)


async def test_trade_of_another_api_client_is_404(
    api: Api, user_id: str, container: Container
) -> None:
    trade = await quote(api, user_id)
    other = await sign_in(api.http, container, name="Other")
    assert_error(await other.post("/trade", {"userId": user_id, "tradeId": trade["tradeId"]}), 404)


async def test_trades_lists_newest_first_with_filters(
    api: Api, user_id: str, clock: ManualClock
) -> None:
    assert assert_ok(await api.post("/trades", {"userId": user_id})) == []
    first = await quote(api, user_id)
    clock.advance(seconds=1)
    second = await quote(api, user_id, "/order")
    listed = assert_ok(await api.post("/trades", {"userId": user_id}))
    assert [t["tradeId"] for t in listed] == [second["tradeId"], first["tradeId"]]
    for trade in listed:
        assert_trade_shape(trade)
    sells = assert_ok(await api.post("/trades", {"userId": user_id, "side": "sell"}))
    assert [t["tradeId"] for t in sells] == [first["tradeId"]]
    assert assert_ok(await api.post("/trades", {"userId": user_id, "status": "completed"})) == []


async def test_trades_page_is_ten(api: Api, user_id: str, clock: ManualClock) -> None:
    for _ in range(12):
        await quote(api, user_id)
        clock.advance(seconds=1)
    assert len(assert_ok(await api.post("/trades", {"userId": user_id}))) == 10


@pytest.mark.parametrize(
    ("body", "message"),
    [({"side": "hold"}, "side must be one of buy, sell"), ({"status": "done"}, None)],
)
async def test_trades_with_a_bad_filter_is_400(
    api: Api, user_id: str, body: dict[str, Any], message: str | None
) -> None:
    assert_error(await api.post("/trades", {"userId": user_id, **body}), 400, message)


async def test_trades_of_an_unknown_user_is_404(api: Api) -> None:
    assert_error(await api.post("/trades", {"userId": new_id()}), 404, "User not found")
