"""What a failed exchange request means, in one place: ccxt's errors (and Binance's codes)
read as a `Failure`, and each failure, at each stage of an order, as the port's error.

| failure | pricing (nothing sent) | placing (the order sent) | asking (status, cancel) |
|---|---|---|---|
| refused: balance, filters, closed market, unknown symbol | `PriceUnavailable` | `OrderRejected` | `VenueTimeout` |
| credentials or timestamp refused (the operator is warned) | `OrderRejected` | `OrderRejected` | `VenueTimeout` |
| timeout | `PricingTimeout` | `VenueTimeout` | `VenueTimeout` |
| network error, 5xx, unreadable answer, "status unknown" | `PriceUnavailable` | `VenueTimeout` | `VenueTimeout` |
| no such order | `PriceUnavailable` | `VenueTimeout` | `VenueTimeout` |

- Pricing: nothing was placed, so `PriceUnavailable` is safe to approve again, and a
  refusal of the credentials or the timestamp cannot succeed before the operator acts
  (`OrderRejected`, the trade fails).
- Placing: a refusal placed nothing (`OrderRejected`, with a plain reason and the
  exchange's own message); anything else may have placed it (`VenueTimeout`: the trade
  stays `executing` and a poll settles it by the client order id).
- A lookup by client order id reads "no such order" as no order (None), at every stage.
- Cancelling: a timeout or network error is `VenueTimeout`; anything else (no such order,
  a refusal: it finished, or was never placed) asks what the order became.
- Never shown or logged: a key, a URL, a signature (`ccxt_support.exchange_error`, `scrub`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from enum import StrEnum
from typing import TypeVar

from walletcore.chainplugins import env_name
from walletcore.domain.errors import (
    DomainError,
    OrderRejected,
    PriceUnavailable,
    PricingTimeout,
    VenueTimeout,
)
from walletcore_markets.ccxt_support import ccxt_errors, exchange_error, scrub
from walletcore_markets.exchange.settings import ExchangeSettings

log = logging.getLogger("walletcore.venue.exchange")

T = TypeVar("T")


class Failure(StrEnum):
    """What a failed exchange request means for what it asked."""

    #: the exchange has no such order
    NOT_FOUND = "not found"
    #: the key, signature or permissions were refused: nothing done
    CREDENTIALS = "credentials"
    #: the request's timestamp was outside the exchange's window: nothing done
    TIMESTAMP = "timestamp"
    #: the exchange answered no (balance, filters, market closed...): nothing done
    REFUSED = "refused"
    #: no answer in time: the outcome is unknown
    TIMEOUT = "timeout"
    #: a network error, a 5xx, an answer that could not be read: the outcome is unknown
    UNKNOWN = "unknown"


#: Binance codes: "sent, execution status unknown"; refused credentials; timestamp; no order.
_STATUS_UNKNOWN_CODES = frozenset({"-1006", "-1007"})
_AUTH_CODES = frozenset({"-1002", "-1022", "-2008", "-2014", "-2015"})
_TIMESTAMP_CODE = "-1021"
_NOT_FOUND_CODES = frozenset({"-2011", "-2013"})


def classify(exc: BaseException) -> Failure:
    """What a ccxt (or transport) error means. Binance's codes are read as well as ccxt's
    classes: ccxt maps a code to different classes by host (on `api.binance.com` -1021 and
    -1022 are `BadRequest`, -2011 `OperationRejected`; elsewhere `InvalidNonce`,
    `AuthenticationError`, `OrderNotFound`)."""
    errors = ccxt_errors()
    code, _ = exchange_error(exc)
    if code in _STATUS_UNKNOWN_CODES:
        return Failure.UNKNOWN
    if isinstance(exc, errors.OrderNotFound) or code in _NOT_FOUND_CODES:
        return Failure.NOT_FOUND
    if code == _TIMESTAMP_CODE:
        return Failure.TIMESTAMP
    if isinstance(exc, errors.AuthenticationError) or code in _AUTH_CODES:
        return Failure.CREDENTIALS
    if isinstance(exc, errors.RequestTimeout | TimeoutError):
        return Failure.TIMEOUT
    if isinstance(exc, errors.NetworkError):
        return Failure.UNKNOWN
    if isinstance(exc, errors.ExchangeError):
        return Failure.REFUSED
    return Failure.UNKNOWN


class Stage(StrEnum):
    """Where an order was when a request about it failed."""

    #: before anything is sent: nothing was placed
    PRICING = "pricing"
    #: the order is being sent: it may have been placed
    PLACING = "placing"
    #: `status` and `cancel` of an order sent before
    ASKING = "asking"


#: The port's error of each failure at each stage (the module's table).
PORT_ERRORS: Mapping[Stage, Mapping[Failure, type[DomainError]]] = {
    Stage.PRICING: {
        Failure.REFUSED: PriceUnavailable,
        Failure.CREDENTIALS: OrderRejected,
        Failure.TIMESTAMP: OrderRejected,
        Failure.TIMEOUT: PricingTimeout,
        Failure.UNKNOWN: PriceUnavailable,
        Failure.NOT_FOUND: PriceUnavailable,
    },
    Stage.PLACING: {
        Failure.REFUSED: OrderRejected,
        Failure.CREDENTIALS: OrderRejected,
        Failure.TIMESTAMP: OrderRejected,
        Failure.TIMEOUT: VenueTimeout,
        Failure.UNKNOWN: VenueTimeout,
        Failure.NOT_FOUND: VenueTimeout,
    },
    Stage.ASKING: dict.fromkeys(Failure, VenueTimeout),
}

#: A cancel's failures that leave the outcome unknown; the others ask what the order became.
_CANCEL_UNKNOWN = frozenset({Failure.TIMEOUT, Failure.UNKNOWN})

#: The reason an `OrderRejected` gives for a refusal, by ccxt's error class (first match).
_REFUSALS = (
    (("InsufficientFunds",), "the exchange account's balance does not cover the order"),
    (("MarketClosed",), "the market is closed on the exchange"),
    (("BadSymbol",), "the exchange does not trade this market"),
    (("InvalidOrder", "BadRequest"), "the exchange refused the order's amount or parameters"),
)


class ExchangeErrors:
    """The module's table applied to one venue's requests, its secrets scrubbed from what
    the exchange said."""

    def __init__(self, *secrets: str) -> None:
        self._secrets = secrets

    async def pricing(self, call: Awaitable[T]) -> T:
        """Await an exchange call made before any order is sent: its failures place nothing."""
        try:
            return await call
        except DomainError:
            raise
        except Exception as exc:  # noqa: BLE001 - every ccxt and transport error classified
            raise self.port_error(Stage.PRICING, exc) from None

    async def asking(self, call: Awaitable[T]) -> T:
        """Await an exchange call of `status`/`cancel`: a failure is `VenueTimeout`."""
        try:
            return await call
        except DomainError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self.port_error(Stage.ASKING, exc) from None

    def placing(self, exc: BaseException, trade_id: str, cid: str) -> DomainError:
        """The port's error of a failure while the order `cid` of `trade_id` was sent."""
        return self.port_error(Stage.PLACING, exc, about=f"trade {trade_id}: order {cid}")

    def cancelling(self, exc: BaseException, cid: str) -> None:
        """Raise the port's error of a failed cancel of the order `cid`, or return when the
        order is to be asked what it became (module rules)."""
        failure = classify(exc)
        if failure in _CANCEL_UNKNOWN:
            raise VenueTimeout() from None
        if failure is not Failure.NOT_FOUND:
            log.warning("cancel of %s refused (%s)", cid, self.describe(exc))

    def port_error(self, stage: Stage, exc: BaseException, *, about: str = "") -> DomainError:
        """The port's error of `exc` at `stage` (the module's table), the operator told in
        the log what it needs to know."""
        failure = classify(exc)
        error = PORT_ERRORS[stage][failure]
        if error is OrderRejected:
            return OrderRejected(self.refusal(failure, exc))
        if error is PricingTimeout:
            return PricingTimeout()
        if error is PriceUnavailable:
            log.warning(
                "exchange unavailable while pricing (%s); nothing placed", self.describe(exc)
            )
            return PriceUnavailable(
                "The exchange could not price the order now; retry with backoff"
            )
        if stage is Stage.PLACING:
            log.warning(
                "%s sent, outcome unknown (%s); it stays executing", about, self.describe(exc)
            )
        else:
            log.warning("exchange could not be asked (%s)", self.describe(exc))
        return VenueTimeout()

    def refusal(self, failure: Failure, exc: BaseException) -> str:
        """Why the exchange refused a request (nothing was done): the reason an
        `OrderRejected` carries; refused credentials or timestamp also warn the operator."""
        _, message = exchange_error(exc)
        said = f" ({scrub(message, *self._secrets)})" if message else ""
        if failure is Failure.TIMESTAMP:
            log.warning(
                "the exchange refused the request's timestamp%s: check this host's clock "
                "(or set %s=true); nothing was placed",
                said,
                env_name(ExchangeSettings, "adjust_for_time_difference"),
            )
            return "the exchange refused the request's timestamp; nothing was placed"
        if failure is Failure.CREDENTIALS:
            log.warning(
                "the exchange refused the venue's API credentials%s: check %s and %s, the "
                "key's trading permission and IP whitelist; nothing was placed",
                said,
                env_name(ExchangeSettings, "api_key"),
                env_name(ExchangeSettings, "secret"),
            )
            return "the exchange refused the venue's credentials; nothing was placed"
        errors = ccxt_errors()
        for names, reason in _REFUSALS:
            if isinstance(exc, tuple(getattr(errors, name) for name in names)):
                return f"{reason}{said}"
        return f"the exchange refused the order{said}"

    def describe(self, exc: BaseException) -> str:
        """An error for logs: its class and the exchange's code and message, no URL."""
        code, message = exchange_error(exc)
        detail = f" {code}: {scrub(message or '', *self._secrets)}" if code or message else ""
        return f"{type(exc).__name__}{detail}"


def secrets_of(settings: ExchangeSettings) -> tuple[str, ...]:
    """The settings' secrets, to scrub from what the exchange says."""
    return tuple(
        s.get_secret_value()
        for s in (settings.api_key, settings.secret, settings.password)
        if s is not None
    )


__all__ = ["PORT_ERRORS", "ExchangeErrors", "Failure", "Stage", "classify", "secrets_of"]
