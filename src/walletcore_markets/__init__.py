"""Real markets for walletcore (`pip install 'walletcore[markets]'`, docs/markets.md).

Price sources (`walletcore.price_sources`, `WALLETCORE_PRICES=<name>`):
- `coingecko`: an aggregator over HTTP, CoinGecko's `simple/price` (`walletcore_markets.coingecko`);
- `tickers`: exchange tickers through ccxt, crossed through USD where no direct fiat market
  is listed (`walletcore_markets.tickers`).

Venues (`walletcore.venues`, `WALLETCORE_VENUE=<name>`):
- `exchange`: the api client's own exchange account through ccxt (`walletcore_markets.exchange`).

Loopback servers that speak each provider's real API, for tests: `walletcore_markets.testing`.
"""
