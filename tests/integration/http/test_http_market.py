"""`/prices` and `/config`."""

from __future__ import annotations

from typing import Any

import pytest
from http_support import Api, assert_ok, sign_in

from walletcore.container import Container
from walletcore.domain.assets import FeePayer

SYMBOLS = {"BNB", "BTC", "ETH", "POL", "SOL", "TRX", "USDC", "USDT"}


async def test_prices_map_symbols_to_four_fiat_numbers(api: Api) -> None:
    result = assert_ok(await api.post("/prices"))
    assert set(result) == SYMBOLS
    for quote in result.values():
        assert set(quote) == {"USD", "EUR", "GBP", "CAD"}
        assert all(isinstance(v, float) and v > 0 for v in quote.values())


async def test_config_lists_every_enabled_asset_in_catalog_order(api: Api) -> None:
    result = assert_ok(await api.post("/config"))
    assert result["feePayer"] == "USER"
    assert [a["assetId"] for a in result["assets"]] == [
        1,
        2,
        21,
        22,
        3,
        31,
        32,
        4,
        41,
        42,
        5,
        51,
        52,
        6,
        61,
        62,
    ]
    btc, usdt = result["assets"][0], result["assets"][2]
    assert btc == {
        "assetId": 1,
        "chain": "BITCOIN",
        "symbol": "BTC",
        "kind": "NATIVE",
        "decimals": 8,
        "feePayer": "USER",
    }
    assert usdt["standard"] == "ERC20" and usdt["kind"] == "TOKEN"


async def test_config_fee_payer_is_platform_when_any_asset_is(
    api: Api, container: Container
) -> None:
    other = await sign_in(
        api.http, container, name="Beta", assets=[1, 4], asset_fee_payers={4: FeePayer.PLATFORM}
    )
    result = assert_ok(await other.post("/config"))
    assert result["feePayer"] == "PLATFORM"
    assert [(a["assetId"], a["feePayer"]) for a in result["assets"]] == [
        (1, "USER"),
        (4, "PLATFORM"),
    ]
    # The first client's view is unchanged (views are kept per asset setting).
    assert assert_ok(await api.post("/config"))["feePayer"] == "USER"


class TestLimitedAssets:
    @pytest.fixture
    def settings_overrides(self) -> dict[str, Any]:
        return {"limited_assets": [42, 61]}

    async def test_a_limited_asset_is_absent(self, api: Api) -> None:
        ids = [a["assetId"] for a in assert_ok(await api.post("/config"))["assets"]]
        assert 42 not in ids and 61 not in ids and 41 in ids
