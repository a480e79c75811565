"""The bounds of a quote's amounts (walletcore.domain.trade_limits) on the core's fakes: both
legs, buy and sell, at, below and above each bound, custom settings, and their checks
against the served catalog where the container builds the limits."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from walletcore.container import check_profile, create_container
from walletcore.domain.errors import DomainError
from walletcore.domain.trade import TradeStatus
from walletcore.domain.trade_limits import (
    DEFAULT_TRADE_MAXIMUMS,
    DEFAULT_TRADE_MINIMUMS,
    DISPLAY_FLOOR,
    TradeLimits,
)
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG, FixedPrices

from ..conftest import Core, CoreFactory

ETH, BTC = 2, 1
#: one ETH at 2,000 of every fiat: the minimum (0.0001 ETH) is 0.20, the maximum 20,000,000
PRICES = FixedPrices({"ETH": Decimal(2000), "BTC": Decimal(50000)})


async def quote(core: Core, side: str, **body: Any) -> Any:
    body.setdefault("asset_id", ETH)
    call = core.trading.sell if side == "sell" else core.trading.order
    return await call(core.caller(), user_id=core.user_id, **body)


async def refused(core: Core, side: str, **body: Any) -> str:
    """The message of the 400 the quote answers; nothing stored, nothing sent."""
    stored = await stored_trades(core)
    with pytest.raises(DomainError) as raised:
        await quote(core, side, **body)
    assert raised.value.status == 400, raised.value
    assert await stored_trades(core) == stored
    assert core.venue.executed == []
    return raised.value.message


async def stored_trades(core: Core) -> list[Any]:
    page = {"side": None, "status": None, "limit": 100}
    return list(await core.db.trades.page(core.client.client_id, core.user_id, **page))


@pytest.fixture
async def core(make_core: CoreFactory) -> Core:
    return await make_core(prices=PRICES)


@pytest.mark.parametrize("side", ["buy", "sell"])
async def test_one_wei_of_eth_is_below_the_minimum(core: Core, side: str) -> None:
    message = await refused(core, side, crypto_amount="0.000000000000000001")
    assert message == "cryptoAmount is below the minimum trade of 0.0001 ETH"


@pytest.mark.parametrize("side", ["buy", "sell"])
async def test_the_crypto_leg_at_and_around_its_bounds(core: Core, side: str) -> None:
    below = await refused(core, side, crypto_amount="0.000099999999999999")
    assert below == "cryptoAmount is below the minimum trade of 0.0001 ETH"
    above = await refused(core, side, crypto_amount="10000.000000000000000001")
    assert above == "cryptoAmount is above the maximum trade of 10000 ETH"
    at_least = await quote(core, side, crypto_amount="0.0001")
    at_most = await quote(core, side, crypto_amount="10000")
    assert (at_least.status, at_least.quote.crypto_amount) == (TradeStatus.OPEN, Decimal("0.0001"))
    assert (at_most.status, at_most.quote.fiat_amount) == (TradeStatus.OPEN, Decimal(20_000_000))


@pytest.mark.parametrize("side", ["buy", "sell"])
async def test_a_fiat_amount_is_held_to_the_bounds_through_the_crypto_it_derives(
    core: Core, side: str
) -> None:
    below = await refused(core, side, fiat_amount="0.19", fiat="EUR")
    assert (
        below == "fiatAmount is below the minimum trade of 0.0001 ETH (0.2 EUR at the quoted price)"
    )
    above = await refused(core, side, fiat_amount="20000000.01")
    assert above == (
        "fiatAmount is above the maximum trade of 10000 ETH (20000000 USD at the quoted price)"
    )
    at_least = await quote(core, side, fiat_amount="0.20")
    at_most = await quote(core, side, fiat_amount="20000000")
    assert at_least.quote.crypto_amount == Decimal("0.0001")
    assert at_most.quote.crypto_amount == Decimal(10000)


async def test_the_fiat_figure_of_a_bound_is_the_amount_that_reaches_it(
    core: Core, make_core: CoreFactory
) -> None:
    """The minimum's fiat is rounded up and the maximum's down, to the fiat's 2 places, so
    the amount the message names is one that passes."""
    message = await refused(core, "buy", asset_id=BTC, fiat_amount="0.49")
    assert message.endswith("minimum trade of 0.00001 BTC (0.5 USD at the quoted price)")
    assert (await quote(core, "buy", asset_id=BTC, fiat_amount="0.5")).status is TradeStatus.OPEN
    odd = await make_core(prices=FixedPrices({"ETH": Decimal("2000.007")}))
    assert (await refused(odd, "buy", fiat_amount="0.2")).endswith("(0.21 USD at the quoted price)")
    assert (await quote(odd, "buy", fiat_amount="0.21")).status is TradeStatus.OPEN
    assert (await refused(odd, "buy", fiat_amount="20000070.01")).endswith(
        "(20000070 USD at the quoted price)"
    )
    assert (await quote(odd, "buy", fiat_amount="20000070")).status is TradeStatus.OPEN


async def test_custom_bounds_replace_the_defaults_of_their_asset_only(
    make_core: CoreFactory,
) -> None:
    core = await make_core(
        prices=PRICES,
        trade_minimums={ETH: Decimal("0.5")},
        trade_maximums={ETH: Decimal("1.5")},
    )
    assert await refused(core, "buy", crypto_amount="0.49") == (
        "cryptoAmount is below the minimum trade of 0.5 ETH"
    )
    assert await refused(core, "sell", crypto_amount="1.500000000000000001") == (
        "cryptoAmount is above the maximum trade of 1.5 ETH"
    )
    assert await refused(core, "sell", fiat_amount="999.99") == (
        "fiatAmount is below the minimum trade of 0.5 ETH (1000 USD at the quoted price)"
    )
    assert (await quote(core, "buy", crypto_amount="0.5")).status is TradeStatus.OPEN
    assert (await quote(core, "sell", fiat_amount="3000")).quote.crypto_amount == Decimal("1.5")
    other = await quote(core, "buy", asset_id=BTC, crypto_amount="0.00001")  # defaults
    assert other.status is TradeStatus.OPEN


async def test_no_leg_is_ever_under_the_display_floor_whatever_the_settings(
    make_core: CoreFactory,
) -> None:
    """A minimum set under 0.000001 counts as 0.000001, and a fiat leg that would read `0`
    at the contract's 6 places is refused too."""
    core = await make_core(
        prices=FixedPrices({"ETH": Decimal("0.0001")}),
        trade_minimums={ETH: Decimal("0.000000000000000001")},
    )
    assert await refused(core, "buy", crypto_amount="0.0000009") == (
        "cryptoAmount is below the minimum trade of 0.000001 ETH"
    )
    assert await refused(core, "buy", crypto_amount="0.001") == (
        "cryptoAmount is worth less than 0.000001 USD at the quoted price, too little to trade"
    )
    fine = await quote(core, "buy", crypto_amount="0.01")  # 0.000001 USD: shows as such
    assert fine.quote.fiat_amount == DISPLAY_FLOOR


@pytest.mark.parametrize("asset_id", CONTRACT_CATALOG.asset_ids)
@pytest.mark.parametrize("amount", ["502", "504", "202", "203"])
async def test_the_sandbox_trigger_amounts_stay_quotable_on_every_asset(
    make_core: CoreFactory, asset_id: int, amount: str
) -> None:
    """docs/sandbox.md: the venue's triggers are fixed-leg amounts, crypto or fiat; at the
    sandbox prices each is inside every asset's default bounds."""
    core = await make_core()  # the sandbox prices
    as_crypto = await quote(core, "buy", asset_id=asset_id, crypto_amount=amount)
    as_fiat = await quote(core, "buy", asset_id=asset_id, fiat_amount=amount)
    assert as_crypto.status is as_fiat.status is TradeStatus.OPEN


async def test_approve_does_not_check_the_bounds_again(make_core: CoreFactory) -> None:
    """The venue re-prices holding the fixed leg: the derived leg may end a little past a
    bound (here under the minimum, the price up 1 %, inside the 2 % slippage limit), and
    the trade completes on the quote's check (docs/decisions.md)."""
    prices = FixedPrices({"ETH": Decimal(2000)})
    core = await make_core(prices=prices)
    trade = await quote(core, "buy", fiat_amount="0.20")
    prices.prices["ETH"] = Decimal(2020)
    done = await core.trading.approve(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
    assert done.status is TradeStatus.COMPLETED
    assert done.figures.crypto_amount < DEFAULT_TRADE_MINIMUMS[ETH]


def test_every_default_minimum_shows_and_is_under_its_maximum() -> None:
    limits = TradeLimits(CONTRACT_CATALOG)
    for asset_id, asset in ((a.id, a) for a in CONTRACT_CATALOG.assets):
        bounds = limits.bounds(asset)
        assert DISPLAY_FLOOR <= bounds.minimum < bounds.maximum, asset
        assert bounds.minimum == DEFAULT_TRADE_MINIMUMS[asset_id]
        assert bounds.maximum == DEFAULT_TRADE_MAXIMUMS[asset_id] >= 504


def test_the_settings_read_the_bounds_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WALLETCORE_TRADE_MINIMUMS", '{"2": "0.001", "41": "5"}')
    monkeypatch.setenv("WALLETCORE_TRADE_MAXIMUMS", '{"2": "50"}')
    settings = Settings()
    assert settings.trade_minimums == {2: Decimal("0.001"), 41: Decimal(5)}
    assert settings.trade_maximums == {2: Decimal(50)}


@pytest.mark.parametrize(
    ("minimums", "maximums", "message"),
    [
        ({7: "1"}, {}, "unknown asset id: 7"),
        ({2: "0"}, {}, "asset 2: a trade bound is a positive amount"),
        ({}, {1: "-1"}, "asset 1: a trade bound is a positive amount"),
        ({1: "0.000000001"}, {}, "asset 1: 0.000000001 has more than the 8 decimal places of BTC"),
        ({2: "20"}, {2: "10"}, "asset 2: the minimum trade 20 is above the maximum 10"),
        ({}, {1: "0.000001"}, "asset 1: the minimum trade 0.00001 is above the maximum 0.000001"),
        ({2: "20000"}, {}, "asset 2: the minimum trade 20000 is above the maximum 10000"),
    ],
)
def test_bounds_that_cannot_hold_are_refused_at_start(
    minimums: dict[int, str], maximums: dict[int, str], message: str, tmp_path: Any
) -> None:
    settings = Settings(
        trade_minimums=minimums,
        trade_maximums=maximums,
        master_key="ab" * 32,
        home=tmp_path,
        repo="memory",
    )
    with pytest.raises(ValueError, match=message):
        TradeLimits(CONTRACT_CATALOG, settings.trade_minimums, settings.trade_maximums)
    with pytest.raises(ConfigurationError, match=message) as raised:
        check_profile(create_container(settings))  # the catalog served: the contract's
    assert "ab" * 32 not in str(raised.value)  # the bounds' problem names no other setting


def test_an_asset_a_plugin_adds_is_bounded_by_the_floor_until_set() -> None:
    from walletcore.domain.assets import Asset, AssetKind, Chain
    from walletcore.domain.catalog import Catalog
    from walletcore.domain.trade_limits import DEFAULT_MAXIMUM, TradeBounds

    coin = Asset(8453, Chain("BASECHAIN"), "ETH", AssetKind.NATIVE, None, 18)
    catalog = Catalog.of((*CONTRACT_CATALOG.assets, coin))
    assert TradeLimits(catalog).bounds(coin) == TradeBounds(DISPLAY_FLOOR, DEFAULT_MAXIMUM)
    set_ = TradeLimits(catalog, {8453: Decimal("0.01")}, {8453: Decimal(5)}).bounds(coin)
    assert (set_.minimum, set_.maximum) == (Decimal("0.01"), Decimal(5))
    with pytest.raises(ValueError, match="unknown asset id: 8453"):
        TradeLimits(CONTRACT_CATALOG, {8453: Decimal(1)})
