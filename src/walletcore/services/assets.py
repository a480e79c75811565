"""Which assets a caller may use where: catalog, environment limits, client, endpoint."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from walletcore.domain.assets import Asset, Chain, parse_asset_id
from walletcore.domain.catalog import Catalog
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import (
    AssetNotEnabled,
    AssetUnavailableOnEndpoint,
    TradingUnavailable,
    UnknownAsset,
)
from walletcore.domain.wire import JsonValue

TRADING_ENDPOINTS = frozenset({"sell", "order", "trade/approve"})


class AssetPolicy:
    """Resolves a raw `assetId` for one endpoint, in the order the errors are checked:

    - malformed id: `400` naming the field;
    - not in the catalog, or limited on this environment: `400 Unknown assetId`;
    - not enabled for the api client: `403` (permanent);
    - flagged unavailable on this endpoint: `503`.

    `catalog`: the served assets (the container's); `limited_assets`: the assets this environment does not offer; `unavailable_assets`:
    endpoint (path without the leading slash) -> the assets answered with 503 there (the
    settings of those names, `WALLETCORE_LIMITED_ASSETS` and `_UNAVAILABLE_ASSETS`, passed
    by the container).
    """

    def __init__(
        self,
        catalog: Catalog,
        limited_assets: Iterable[int] = (),
        unavailable_assets: Mapping[str, Iterable[int]] | None = None,
    ) -> None:
        self.catalog = catalog
        self._limited = frozenset(limited_assets)
        self._unavailable = {k: frozenset(v) for k, v in (unavailable_assets or {}).items()}

    def visible(self, client: ApiClient) -> list[Asset]:
        """Assets the client is enabled for and the environment offers, in catalog order."""
        return [
            a for a in self.catalog.assets if client.is_enabled(a.id) and a.id not in self._limited
        ]

    def enabled_chains(self, client: ApiClient) -> list[Chain]:
        """Chains with at least one visible asset, in the catalog's chain order."""
        chains: list[Chain] = []
        for asset in self.visible(client):
            if asset.chain not in chains:
                chains.append(asset.chain)
        return chains

    def resolve(self, client: ApiClient, raw_asset_id: JsonValue, endpoint: str) -> Asset:
        asset = self.catalog.asset_by_id(parse_asset_id(raw_asset_id))
        if asset.id in self._limited:
            raise UnknownAsset()
        if not client.is_enabled(asset.id):
            raise AssetNotEnabled()
        if asset.id in self._unavailable.get(endpoint, frozenset()):
            if endpoint in TRADING_ENDPOINTS:
                raise TradingUnavailable(
                    f"Trading is unavailable for {asset.symbol} on {asset.chain}"
                )
            raise AssetUnavailableOnEndpoint(
                f"{asset.symbol} on {asset.chain} is not available on /{endpoint}; "
                "contact the operator"
            )
        return asset
