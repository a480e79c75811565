"""Market: the `/prices` map and the client's `/config`."""

from __future__ import annotations

from dataclasses import dataclass

from walletcore.domain.assets import Asset, FeePayer
from walletcore.domain.clients import ApiClient
from walletcore.ports import PriceMap, PriceSource
from walletcore.services.assets import AssetPolicy


@dataclass(frozen=True, slots=True)
class ConfigAsset:
    asset: Asset
    fee_payer: FeePayer


@dataclass(frozen=True, slots=True)
class ClientConfig:
    fee_payer: FeePayer
    assets: tuple[ConfigAsset, ...]


class MarketService:
    def __init__(self, prices: PriceSource, policy: AssetPolicy) -> None:
        self._prices = prices
        self._policy = policy

    async def prices(self) -> PriceMap:
        """Indicative prices, typically minutes old; last known values while a refresh fails."""
        return await self._prices.price_map()

    def config(self, client: ApiClient) -> ClientConfig:
        """Rules:
        - `assets` lists every asset the client is enabled for, in catalog order, less the
          assets limited on this environment;
        - top-level `feePayer` is PLATFORM when at least one listed asset is PLATFORM.
        """
        assets = tuple(
            ConfigAsset(a, client.fee_payer_for(a.id)) for a in self._policy.visible(client)
        )
        platform = any(a.fee_payer is FeePayer.PLATFORM for a in assets)
        return ClientConfig(FeePayer.PLATFORM if platform else FeePayer.USER, assets)
