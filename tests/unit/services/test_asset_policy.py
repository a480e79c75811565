"""AssetPolicy: the order in which an assetId is refused, and what /config lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import (
    AssetNotEnabled,
    AssetUnavailableOnEndpoint,
    DomainError,
    InvalidRequest,
    TradingUnavailable,
    UnknownAsset,
)
from walletcore.services.assets import AssetPolicy
from walletcore.services.market import ClientConfig, MarketService
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_litestar.schemas import ClientConfig as ConfigShape


def config_view(config: ClientConfig) -> Any:
    """`/config`'s result as the HTTP API answers it."""
    return msgspec.to_builtins(ConfigShape.of(config))


def client(*enabled: int, **kwargs: object) -> ApiClient:
    return ApiClient(
        "c" * 24,
        "Acme",
        key_hash="0" * 64,
        enabled_assets=enabled or CONTRACT_CATALOG.asset_ids,
        **kwargs,
    )  # type: ignore[arg-type]


def policy(tmp_path: Path, **kwargs: object) -> AssetPolicy:
    settings = Settings(home=tmp_path, **kwargs)  # type: ignore[arg-type]
    return AssetPolicy(CONTRACT_CATALOG, settings.limited_assets, settings.unavailable_assets)


def refusal(policy: AssetPolicy, api_client: ApiClient, raw: object, endpoint: str) -> DomainError:
    with pytest.raises(DomainError) as raised:
        policy.resolve(api_client, raw, endpoint)
    return raised.value


def test_resolve_gives_the_asset(tmp_path: Path) -> None:
    assert policy(tmp_path).resolve(client(), "21", "sell").symbol == "USDT"


def test_the_order_of_checks(tmp_path: Path) -> None:
    """Malformed (400) > unknown or limited (400 Unknown assetId) > not enabled (403) >
    unavailable on the endpoint (503): each refusal wins over every later one."""
    strict = policy(
        tmp_path,
        limited_assets=[42],
        unavailable_assets={"sell": [22, 42], "platform/balance": [22]},
    )
    only_btc = client(1)

    malformed = refusal(strict, only_btc, "4.2", "sell")
    assert type(malformed) is InvalidRequest and malformed.status == 400

    unknown = refusal(strict, only_btc, 7, "sell")
    assert isinstance(unknown, UnknownAsset) and unknown.message == "Unknown assetId"

    limited = refusal(strict, only_btc, 42, "sell")  # limited, not enabled and unavailable too
    assert isinstance(limited, UnknownAsset) and (limited.status, limited.message) == (
        400,
        "Unknown assetId",
    )

    not_enabled = refusal(strict, only_btc, 22, "sell")  # not enabled and unavailable too
    assert isinstance(not_enabled, AssetNotEnabled) and not_enabled.status == 403

    unavailable = refusal(strict, client(), 22, "sell")
    assert isinstance(unavailable, TradingUnavailable) and unavailable.status == 503

    on_platform = refusal(strict, client(), 22, "platform/balance")
    assert isinstance(on_platform, AssetUnavailableOnEndpoint) and on_platform.status == 503
    assert "/platform/balance" in on_platform.message

    assert strict.resolve(client(), 22, "order").id == 22  # other endpoints are not affected


@pytest.mark.parametrize("endpoint", ["sell", "order", "trade/approve"])
def test_trading_endpoints_say_trading_is_unavailable(tmp_path: Path, endpoint: str) -> None:
    flagged = policy(tmp_path, unavailable_assets={endpoint: [2]})
    assert isinstance(refusal(flagged, client(), 2, endpoint), TradingUnavailable)


def test_by_default_42_51_61_are_unavailable_on_platform_endpoints_only(tmp_path: Path) -> None:
    default = policy(tmp_path)
    for asset_id in (42, 51, 61):
        assert default.resolve(client(), asset_id, "sell").id == asset_id
        assert refusal(default, client(), asset_id, "platform/info").status == 503


def test_visible_assets_and_chains(tmp_path: Path) -> None:
    limited = policy(tmp_path, limited_assets=[3, 31])
    api_client = client(62, 1, 31, 3, 32, 4)
    assert [a.id for a in limited.visible(api_client)] == [1, 32, 4, 62]  # catalog order
    assert limited.enabled_chains(api_client) == [
        Chain.BITCOIN,
        Chain.BSC,
        Chain.TRON,
        Chain.SOLANA,
    ]
    assert limited.enabled_chains(client(32)) == [Chain.BSC]  # a token alone enables its chain


def test_config_lists_enabled_assets_and_the_fee_payer_rule(tmp_path: Path) -> None:
    market = MarketService(prices=None, policy=policy(tmp_path, limited_assets=[62]))  # type: ignore[arg-type]
    user_pays = config_view(market.config(client(1, 21, 62)))
    assert user_pays == {
        "feePayer": "USER",
        "assets": [
            {
                "assetId": 1,
                "chain": "BITCOIN",
                "symbol": "BTC",
                "kind": "NATIVE",
                "decimals": 8,
                "feePayer": "USER",
            },
            {
                "assetId": 21,
                "chain": "ETHEREUM",
                "symbol": "USDT",
                "kind": "TOKEN",
                "decimals": 6,
                "feePayer": "USER",
                "standard": "ERC20",
            },
        ],
    }
    one_platform = client(1, 21, asset_fee_payers={21: FeePayer.PLATFORM})
    view = config_view(market.config(one_platform))
    assert view["feePayer"] == "PLATFORM"
    assert [a["feePayer"] for a in view["assets"]] == ["USER", "PLATFORM"]
    # a PLATFORM asset that is not listed does not make the client PLATFORM
    hidden = client(1, 62, asset_fee_payers={62: FeePayer.PLATFORM})
    assert config_view(market.config(hidden))["feePayer"] == "USER"
