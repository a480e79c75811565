"""Settings of the exchange venue: `WALLETCORE_EXCHANGE_` + the field's name."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.domain.assets import Fiat


class ExchangeSettings(BaseSettings):
    """Settings of the exchange venue (`WALLETCORE_EXCHANGE_` + the field's name)."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_EXCHANGE_", extra="ignore")

    #: ccxt's id of the exchange
    id: str = "binance"
    api_key: SecretStr | None = None
    secret: SecretStr | None = None
    #: some exchanges' API passphrase
    password: SecretStr | None = None
    #: another scheme and host for every API URL of the exchange (a testnet, a proxy, a
    #: loopback server); each URL keeps its path
    url: str | None = None
    #: ccxt's sandbox (testnet) URLs of the exchange
    sandbox: bool = False
    #: trade fiat -> the quote currency it trades against (e.g. `{"EUR": "EUR", "GBP":
    #: "USDT"}`); unset: the fiat when `SYMBOL/FIAT` is listed, else `usd_quote`
    fiat_markets: dict[Fiat, str] = Field(default_factory=dict)
    #: the USD stable quote a fiat without a direct market crosses through
    usd_quote: str = "USDT"
    #: `prices` (the container's price source prices one quote unit in the fiat) or an
    #: FxSource: `coingecko` or `module:factory` (the quote counted at par with USD)
    fx: str = "prices"
    #: how long one exchange request may take
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    #: how long approve waits for a working order to finish before answering `approved`
    order_wait_seconds: float = Field(default=5.0, ge=0, le=300)
    #: order book levels read to price an order
    book_depth: int = Field(default=100, ge=5, le=5000)
    #: an order still not found this long after its approval was never placed
    lost_order_seconds: float = Field(default=120.0, gt=0)
    client_order_prefix: str = Field(default="wc-", max_length=8, pattern=r"^[.A-Za-z0-9:/_-]*$")
    #: ask the exchange's clock once and sign with its time (ccxt `adjustForTimeDifference`)
    adjust_for_time_difference: bool = True
    #: ccxt's client-side throttle, milliseconds per unit of request weight (binance: 50,
    #: i.e. 1200 weight a minute; its spot limit is 6000); unset: ccxt's; 0: off
    rate_limit_ms: float | None = Field(default=None, ge=0)


__all__ = ["ExchangeSettings"]
