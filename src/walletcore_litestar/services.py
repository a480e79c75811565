"""The core's services as the binding reaches them: resolved once from the container."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import msgspec

from walletcore.container import Container
from walletcore.domain.assets import Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.chains import ChainDescription
from walletcore.domain.clients import ApiClient
from walletcore.domain.trade import Trade
from walletcore.plugins import AdapterNotFound
from walletcore.ports import PriceMap
from walletcore.services.auth import AuthService
from walletcore.services.events import EventFeed
from walletcore.services.health import HealthService
from walletcore.services.market import MarketService
from walletcore.services.policies import Policies
from walletcore.services.sends import SendService
from walletcore.services.trading import TradingService
from walletcore.services.wallet_reads import WalletReads
from walletcore.services.wallets import WalletService
from walletcore.services.webhooks import Webhooks
from walletcore_litestar.metrics import PrometheusObserver
from walletcore_litestar.operations import OperationsSettings
from walletcore_litestar.schemas import (
    ClientConfig,
    FiatPrices,
    SettlementView,
    TradeView,
    price_map,
)

log = logging.getLogger("walletcore.http")

#: Key of the `Services` in the Litestar app's state.
STATE_KEY = "walletcore"
#: Key of the `Operations` (health, metrics) in the Litestar app's state.
OPERATIONS_KEY = "walletcore_operations"
#: Distinct client configurations whose `/config` view is kept.
CONFIG_CACHE_SIZE = 1024
#: Views of trades in a terminal status kept (the oldest dropped first; about 1.2 KB each,
#: some 56 MB of a worker at the bound: docs/performance.md, "Memory per worker").
TERMINAL_VIEWS_SIZE = 50_000


class Services:
    """Lazily resolved singletons, so a route never pays for dependency resolution."""

    def __init__(self, container: Container) -> None:
        self.container = container
        self._config_views: dict[tuple[Any, ...], ClientConfig] = {}
        self._prices: tuple[PriceMap | None, dict[str, FiatPrices]] = (None, {})
        self._terminal_views: OrderedDict[tuple[str, str, str], TradeView] = OrderedDict()

    def warm_up(self) -> None:
        """Resolve the services at start-up rather than on a first request."""
        _ = self.auth, self.market, self.trading
        try:
            _ = self.wallets
        except AdapterNotFound as exc:  # no keystore installed: the wallet routes answer 500
            log.warning("wallet service unavailable: %s", exc)

    async def prices_view(self) -> dict[str, FiatPrices]:
        """`/prices`'s result, built again only when the source answers a new map (a
        refreshing source keeps one until its next refresh)."""
        found = await self.market.prices()
        source, view = self._prices
        if found is not source:
            view = price_map(found)
            self._prices = (found, view)
        return view

    def config_view(self, client: ApiClient) -> ClientConfig:
        """`/config`'s result: a function of the client's asset settings (and the
        environment's, fixed for this app), so it is built once per distinct setting."""
        key = (
            client.enabled_assets,
            client.fee_payer,
            tuple(sorted(client.asset_fee_payers.items())),
        )
        view = self._config_views.get(key)
        if view is None:
            if len(self._config_views) >= CONFIG_CACHE_SIZE:
                self._config_views.clear()
            view = self._config_views[key] = ClientConfig.of(self.market.config(client))
        return view

    def trade_view(self, trade: Trade) -> TradeView:
        """A trade's wire view; a trade in a terminal status is formatted once.

        A completed, failed, expired or cancelled trade never changes again: the domain
        moves a trade only out of `open`, `approved` and `executing`, and every store
        writes a move as a compare-and-set on the stored status. So its view (six figures
        cut to six places, three dates) is built once per process, not on every `/trades`
        page that shows it (formatting was a third of a page's cost; docs/performance.md,
        "Caches, and why each is safe"). Keyed by trade, client and user; the oldest views
        go past `TERMINAL_VIEWS_SIZE`. A trade in any other status is formatted every
        time.
        """
        if not trade.status.is_terminal:
            return self._with_settlement(TradeView.of(trade), trade)
        key = (trade.trade_id, trade.client_id, trade.user_id)
        views = self._terminal_views
        view = views.get(key)
        if view is None:
            view = views[key] = TradeView.of(trade)
            if len(views) > TERMINAL_VIEWS_SIZE:
                views.popitem(last=False)
        return self._with_settlement(view, trade)

    def _with_settlement(self, view: TradeView, trade: Trade) -> TradeView:
        """The view with the trade's settlement, which moves after the trade stopped
        moving: never part of a cached view."""
        settlement = trade.settlement
        if settlement is None:
            return view
        decimals = self.container.catalog().asset_by_id(settlement.asset_id).decimals
        return msgspec.structs.replace(view, settlement=SettlementView.of(settlement, decimals))

    @cached_property
    def auth(self) -> AuthService:
        return self.container.auth()

    @cached_property
    def market(self) -> MarketService:
        return self.container.market()

    @cached_property
    def trading(self) -> TradingService:
        return self.container.trading()

    @cached_property
    def wallet_reads(self) -> WalletReads:
        return self.container.wallet_reads()

    @cached_property
    def sends(self) -> SendService:
        return self.container.sends()

    @cached_property
    def wallets(self) -> WalletService:
        # Resolved on first use too, so the rest of the API runs without a keystore adapter.
        return self.container.wallets()

    @cached_property
    def descriptions(self) -> Mapping[Chain, ChainDescription]:
        """Each defined chain's description (`/fee`'s wire shape)."""
        return self.container.descriptions()

    @cached_property
    def events(self) -> EventFeed:
        return self.container.event_feed()

    @cached_property
    def webhooks(self) -> Webhooks:
        return self.container.webhooks()

    @cached_property
    def policies(self) -> Policies:
        return self.container.policies()

    @cached_property
    def catalog(self) -> Catalog:
        return self.container.catalog()

    @cached_property
    def health(self) -> HealthService:
        return self.container.health()


@dataclass(frozen=True, slots=True)
class Operations:
    """What the operations endpoints use: their settings and the app's metrics."""

    settings: OperationsSettings
    observer: PrometheusObserver


def services_of(app: Any) -> Services:
    services: Services = app.state[STATE_KEY]
    return services


def operations_of(app: Any) -> Operations:
    operations: Operations = app.state[OPERATIONS_KEY]
    return operations
