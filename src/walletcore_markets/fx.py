"""Foreign-exchange rates: how a price source or venue crosses a USD price into a fiat with
no direct market.

An `FxSource` answers units of each fiat per US dollar. The implementation used by default is
CoinGecko's `exchange_rates` (`walletcore_markets.coingecko.CoinGeckoFx`): one call covers all
ten trade fiats, AED included.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Protocol

from walletcore.domain.assets import Fiat


class FxSource(Protocol):
    async def per_usd(self) -> Mapping[Fiat, Decimal]:
        """Units of each fiat for one US dollar (USD itself is 1); a fiat it cannot price is
        absent. Raises on an upstream failure (the caller keeps its last values)."""
        ...
