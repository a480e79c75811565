"""The exchange venue: approved orders execute as MARKET orders on the operator's own
exchange account through ccxt (`WALLETCORE_VENUE=exchange`, settings `WALLETCORE_EXCHANGE_*`,
docs/markets.md).

One module per reason to change, each with its rules:
- `venue`: the port (`ExchangeVenue`: approve, status, cancel) and the entry point `build`;
- `markets`: which market an order trades on, and the rate its quote is crossed at;
- `book`: the order priced again on the order book, cut to the market's lot and minimums;
- `orders`: the requests about an order by its client order id (place, find, wait, cancel);
- `outcomes`: what an order at the exchange comes to (fill, accepted, rejected) and its
  figures and fees;
- `errors`: ccxt's errors as the port's, per stage of an order, in one table;
- `settings`: `ExchangeSettings`.
"""

from walletcore_markets.exchange.markets import Rate, Route, rate_from_fx, rate_from_prices
from walletcore_markets.exchange.settings import ExchangeSettings
from walletcore_markets.exchange.venue import ExchangeVenue, build, exchange_for

__all__ = [
    "ExchangeSettings",
    "ExchangeVenue",
    "Rate",
    "Route",
    "build",
    "exchange_for",
    "rate_from_fx",
    "rate_from_prices",
]
