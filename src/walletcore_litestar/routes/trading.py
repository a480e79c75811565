"""Trading: `/sell`, `/order`, `/trade/approve`, `/trade/collect`, `/trade/cancel`, `/trade`,
`/trades`.

Bodies are passed to the core as raw values; the core validates them (400s with clear
messages). `X-USER-ID` overrides the body's `userId`.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.params import JSONBody

from walletcore.domain.errors import TradeNotFound
from walletcore.domain.trade import Trade
from walletcore_litestar.envelope import request_id_of
from walletcore_litestar.routes._docs import errors
from walletcore_litestar.schemas import (
    ApproveRequest,
    CollectRequest,
    QuoteRequest,
    TradeEnvelope,
    TradeRequest,
    TradesEnvelope,
    TradesRequest,
)
from walletcore_litestar.security import caller_of, user_id_of
from walletcore_litestar.services import services_of

_QUOTE_ERRORS = errors(401, 403, 404, 502, 503, 504)
#: A trade id that names no trade of this user.
_NO_TRADE = {404: TradeNotFound.default_message}


def _answer(request: Request[Any, Any, Any], trade: Trade) -> TradeEnvelope:
    return TradeEnvelope(services_of(request.app).trade_view(trade), request_id_of(request.scope))


@post(
    "/sell",
    status_code=200,
    summary="Quote a sell (nothing is sold)",
    description=(
        "An open sell quote, valid about one minute. Exactly one of `cryptoAmount` and "
        "`fiatAmount`; `fiat` defaults to USD. The price that binds is confirmed at approval."
    ),
    responses=_QUOTE_ERRORS,
    tags=["trading"],
)
async def sell(request: Request[Any, Any, Any], data: JSONBody[QuoteRequest]) -> TradeEnvelope:
    trade = await services_of(request.app).trading.sell(
        caller_of(request),
        user_id=user_id_of(request, data.userId),
        asset_id=data.assetId,
        fiat=data.fiat,
        crypto_amount=data.cryptoAmount,
        fiat_amount=data.fiatAmount,
    )
    return _answer(request, trade)


@post(
    "/order",
    status_code=200,
    summary="Quote a buy (nothing is bought)",
    description="The mirror of /sell: an open buy quote, same body, same rules and errors.",
    responses=_QUOTE_ERRORS,
    tags=["trading"],
)
async def order(request: Request[Any, Any, Any], data: JSONBody[QuoteRequest]) -> TradeEnvelope:
    trade = await services_of(request.app).trading.order(
        caller_of(request),
        user_id=user_id_of(request, data.userId),
        asset_id=data.assetId,
        fiat=data.fiat,
        crypto_amount=data.cryptoAmount,
        fiat_amount=data.fiatAmount,
    )
    return _answer(request, trade)


@post(
    "/trade/approve",
    status_code=200,
    summary="Approve an open quote: price again holding the fixed leg, and execute",
    description=(
        "200 with the trade settled (`completed`) or accepted (`approved`/`executing`). "
        "409 when not approvable or the quote lapsed. 502 `Order rejected: ...` means nothing "
        "traded and the trade is `failed`. 504: outcome unknown, the trade stays `executing`: "
        "poll /trade, never approve again. A sell's coins are reserved in the wallet from "
        "its approval (400 when they are not free); with `password` (a sell only, the /send "
        "rules: checked before anything trades) they are collected to the desk as soon as "
        "it completes, else with /trade/collect. `settlement` follows the coins."
    ),
    responses=errors(400, 401, 403, 404, 409, 502, 503, 504, examples=_NO_TRADE),
    tags=["trading"],
)
async def approve(request: Request[Any, Any, Any], data: JSONBody[ApproveRequest]) -> TradeEnvelope:
    trade = await services_of(request.app).trading.approve(
        caller_of(request),
        user_id=user_id_of(request, data.userId),
        trade_id=data.tradeId,
        password=data.password,
    )
    return _answer(request, trade)


@post(
    "/trade/collect",
    status_code=200,
    summary="Collect a completed sell's coins to the desk, with the wallet password",
    description=(
        "For a sell approved without `password`: its reserved coins move from the user's "
        "wallet to the api client's platform wallet (the desk), as a transfer followed to "
        "its end (`settlement`). The password follows the /send rules. Asked again, the "
        "collection already made is answered as it stands. 409 when the sell has not "
        "completed, did not complete, or there is nothing to collect."
    ),
    responses=errors(400, 401, 404, 409, 502, 503, 504, examples=_NO_TRADE),
    tags=["trading"],
)
async def collect(request: Request[Any, Any, Any], data: JSONBody[CollectRequest]) -> TradeEnvelope:
    trade = await services_of(request.app).trading.collect(
        caller_of(request),
        user_id=user_id_of(request, data.userId),
        trade_id=data.tradeId,
        password=data.password,
    )
    return _answer(request, trade)


@post(
    "/trade/cancel",
    status_code=200,
    summary="Cancel an open quote (idempotent on a cancelled one)",
    responses=errors(401, 404, 409, examples=_NO_TRADE),
    tags=["trading"],
)
async def cancel(request: Request[Any, Any, Any], data: JSONBody[TradeRequest]) -> TradeEnvelope:
    trade = await services_of(request.app).trading.cancel(
        caller_of(request), user_id=user_id_of(request, data.userId), trade_id=data.tradeId
    )
    return _answer(request, trade)


@post(
    "/trade",
    status_code=200,
    summary="One trade (poll it while approved or executing)",
    description="Another user's trade is a 404, indistinguishable from none.",
    responses=errors(401, 404, examples=_NO_TRADE),
    tags=["trading"],
)
async def get_trade(request: Request[Any, Any, Any], data: JSONBody[TradeRequest]) -> TradeEnvelope:
    trade = await services_of(request.app).trading.get(
        caller_of(request), user_id=user_id_of(request, data.userId), trade_id=data.tradeId
    )
    return _answer(request, trade)


@post(
    "/trades",
    status_code=200,
    summary="The user's trades, newest first, one page (10 by default)",
    responses=errors(401, 404),
    tags=["trading"],
)
async def list_trades(
    request: Request[Any, Any, Any], data: JSONBody[TradesRequest]
) -> TradesEnvelope:
    trades = await services_of(request.app).trading.list(
        caller_of(request),
        user_id=user_id_of(request, data.userId),
        side=data.side,
        status=data.status,
    )
    view = services_of(request.app).trade_view
    return TradesEnvelope([view(t) for t in trades], request_id_of(request.scope))
