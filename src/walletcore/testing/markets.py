"""A fixed-price `PriceSource` and an instant-fill `TradeVenue`: quotes and approvals with
no network and no surprises, for tests of code that embeds the core."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from walletcore.domain.assets import Asset, Fiat
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import PriceUnavailable, UserNotFound
from walletcore.domain.trade import Accepted, Fill, Order, OrderOutcome, derive_figures
from walletcore.ports.storage import Storage
from walletcore.ports.trading import PriceMap, PriceSource, TradeVenue
from walletcore.testing.catalog import CONTRACT_CATALOG

#: Every symbol at 100 of every fiat, unless told otherwise.
DEFAULT_PRICE = Decimal(100)


class FixedPrices(PriceSource):
    """The same unit price at every call: `FixedPrices({"ETH": Decimal("3000")})`, any
    other symbol at `default` (None: `PriceUnavailable`). The price is the same in every
    fiat."""

    def __init__(
        self,
        prices: Mapping[str, Decimal] | None = None,
        *,
        default: Decimal | None = DEFAULT_PRICE,
        catalog: Catalog = CONTRACT_CATALOG,
    ) -> None:
        #: the coins of the `/prices` map
        self.symbols = catalog.symbols
        self.prices = dict(prices or {})
        self.default = default

    async def price_map(self) -> PriceMap:
        return {
            symbol: {fiat.value: float(price) for fiat in Fiat}
            for symbol in self.symbols
            if (price := self.prices.get(symbol, self.default)) is not None
        }

    async def unit_price(self, symbol: str, fiat: Fiat) -> Decimal:
        price = self.prices.get(symbol, self.default)
        if price is None:
            raise PriceUnavailable()
        return price


class InstantVenue(TradeVenue):
    """Fills every order at once, at the unit price of `prices` (the fixed leg held), and
    remembers the orders it filled (`filled`)."""

    def __init__(self, prices: PriceSource | None = None) -> None:
        self._prices = prices if prices is not None else FixedPrices()
        self.filled: list[Order] = []

    async def execute(self, order: Order) -> Fill | Accepted:
        fill = await self._fill(order)
        self.filled.append(order)
        return fill

    async def status(self, order: Order) -> OrderOutcome:
        return await self._fill(order)

    async def cancel(self, order: Order) -> OrderOutcome:
        return await self._fill(order)  # filled at once: there is nothing left to stop

    async def _fill(self, order: Order) -> Fill:
        price = await self._prices.unit_price(order.symbol, order.fiat)
        figures = derive_figures(order.fixed_leg, order.fixed_amount, price, order.decimals)
        return Fill(figures, reference=f"INSTANT-{order.trade_id[:12].upper()}")


class FixedHoldings:
    """Every user's wallet holds `units` (smallest units) of every asset, or what `by_asset`
    says: `FixedHoldings({1: 0})` holds no BTC. For tests of trades that are not about the
    backing of sells (`walletcore.services.holdings`). With `storage`, a user it does not
    hold is a 404, as the port requires; without, every user reads as existing."""

    def __init__(
        self,
        by_asset: Mapping[int, int] | None = None,
        *,
        units: int = 10**30,
        storage: Storage | None = None,
    ) -> None:
        self.by_asset = dict(by_asset or {})
        self.units_held = units
        self.storage = storage

    async def units(self, client_id: str, user_id: str, asset: Asset) -> int:
        if self.storage is not None:
            async with self.storage.read() as unit:
                if await unit.wallets.get_user(client_id, user_id) is None:
                    raise UserNotFound()
        return self.by_asset.get(asset.id, self.units_held)


__all__ = ["DEFAULT_PRICE", "FixedHoldings", "FixedPrices", "InstantVenue"]
