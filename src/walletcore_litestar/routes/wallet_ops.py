"""Wallet operations: `/balance`, `/info`, `/transactions`, `/txid`, `/fee`, `/send` for a user
(`userId`; `X-USER-ID` overrides it) and the same under `/platform/` for the api client's
platform wallet (no `userId`; `X-USER-ID` is a 400, checked by the platform router).

Bodies go to the core as raw values; the core checks them (400s with clear messages).
`/send` and `/platform/send` need `X-Request-Id`: it is the idempotency key.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post
from litestar.params import JSONBody

from walletcore.services.send_record import SendReceipt
from walletcore.services.wallet_reads import TxPage
from walletcore.views import balance_view, fee_view, tx_row_view
from walletcore_litestar.envelope import ok
from walletcore_litestar.security import caller_of, user_id_of
from walletcore_litestar.services import services_of
from walletcore_litestar.wallet_ops_schemas import (
    BalanceEnvelope,
    FeeEnvelope,
    PlatformAssetRequest,
    PlatformFeeRequest,
    PlatformSendRequest,
    PlatformTxRequest,
    SendEnvelope,
    TransactionEnvelope,
    TransactionsEnvelope,
    WalletAssetRequest,
    WalletFeeRequest,
    WalletInfoEnvelope,
    WalletSendRequest,
    WalletTxRequest,
    wallet_errors,
)

_READ = (401, 403, 404, 503)
_SEND = (401, 403, 404, 409, 422, 502, 503, 504)


def _reads(request: Request[Any, Any, Any]) -> Any:
    return services_of(request.app).wallet_reads


def _sends(request: Request[Any, Any, Any]) -> Any:
    return services_of(request.app).sends


def _idempotency_key(request: Request[Any, Any, Any]) -> str | None:
    """The inbound X-Request-Id, if one was sent (the middleware has checked its form)."""
    return request.headers.get("x-request-id") or None


def _page(page: TxPage) -> list[dict[str, Any]]:
    return [tx_row_view(row, page.asset) for row in page.rows]


def _receipt(receipt: SendReceipt) -> dict[str, str]:
    return receipt.as_result()


# -- a user's wallet -----------------------------------------------------------------------
@post(
    "/balance",
    status_code=200,
    summary="The user's balance of an asset",
    responses=wallet_errors(*_READ),
    tags=["wallet"],
)
async def balance(
    request: Request[Any, Any, Any], data: JSONBody[WalletAssetRequest]
) -> Response[BalanceEnvelope]:
    user_id = user_id_of(request, data.userId)
    held = await _reads(request).balance(caller_of(request), asset_id=data.assetId, user_id=user_id)
    return ok(request, balance_view(held.units, held.asset))


@post(
    "/info",
    status_code=200,
    summary="The user's address, balance and recent transactions for an asset",
    description="`transactions` is also `[]` when history is unavailable.",
    responses=wallet_errors(*_READ),
    tags=["wallet"],
)
async def info(
    request: Request[Any, Any, Any], data: JSONBody[WalletAssetRequest]
) -> Response[WalletInfoEnvelope]:
    user_id = user_id_of(request, data.userId)
    found = await _reads(request).info(caller_of(request), asset_id=data.assetId, user_id=user_id)
    return ok(request, _info(found))


@post(
    "/transactions",
    status_code=200,
    summary="The user's recent transactions of an asset, newest first (one page)",
    responses=wallet_errors(*_READ),
    tags=["wallet"],
)
async def transactions(
    request: Request[Any, Any, Any], data: JSONBody[WalletAssetRequest]
) -> Response[TransactionsEnvelope]:
    user_id = user_id_of(request, data.userId)
    page = await _reads(request).transactions(
        caller_of(request), asset_id=data.assetId, user_id=user_id
    )
    return ok(request, _page(page))


@post(
    "/txid",
    status_code=200,
    summary="One transaction of the user's wallet (poll it until `status` leaves `pending`)",
    responses=wallet_errors(*_READ),
    tags=["wallet"],
)
async def txid(
    request: Request[Any, Any, Any], data: JSONBody[WalletTxRequest]
) -> Response[TransactionEnvelope]:
    user_id = user_id_of(request, data.userId)
    found = await _reads(request).txid(
        caller_of(request), asset_id=data.assetId, user_id=user_id, tx_hash=data.txHash
    )
    return ok(request, tx_row_view(found.row, found.asset))


@post(
    "/fee",
    status_code=200,
    summary="The network fee of the send that would follow",
    description="A decimal string in the chain's native coin; on TRON `{bandwidth, energy?}` "
    "(energy for TRC20 only). The fee payer rule of the asset applies.",
    responses=wallet_errors(*_READ),
    tags=["wallet"],
)
async def fee(
    request: Request[Any, Any, Any], data: JSONBody[WalletFeeRequest]
) -> Response[FeeEnvelope]:
    user_id = user_id_of(request, data.userId)
    answer = await _reads(request).fee(
        caller_of(request),
        asset_id=data.assetId,
        user_id=user_id,
        recipient=data.recipient,
        amount=data.amount,
    )
    return ok(request, fee_view(answer.quote, answer.asset))


@post(
    "/send",
    status_code=200,
    summary="Send from the user's wallet (X-Request-Id required: the idempotency key)",
    description=(
        "Answers `{txHash, status, fee, feePayer}`. The same X-Request-Id replays the first "
        "answer and never sends twice; 409 while it is in progress; 422 for another request. "
        "USER pays the fee from a native amount (the recipient gets amount - fee) or in native "
        "coin for a token; PLATFORM falls back to USER when the platform wallet cannot pay."
    ),
    responses=wallet_errors(*_SEND),
    tags=["wallet"],
)
async def send(
    request: Request[Any, Any, Any], data: JSONBody[WalletSendRequest]
) -> Response[SendEnvelope]:
    receipt = await _sends(request).send(
        caller_of(request),
        request_id=_idempotency_key(request),
        user_id=user_id_of(request, data.userId),
        asset_id=data.assetId,
        recipient=data.recipient,
        amount=data.amount,
        password=data.password,
    )
    return ok(request, _receipt(receipt))


# -- the platform wallet (mounted under /platform) -------------------------------------------
@post(
    "/balance",
    status_code=200,
    summary="The platform wallet's balance of an asset",
    responses=wallet_errors(*_READ),
    tags=["platform"],
)
async def platform_balance(
    request: Request[Any, Any, Any], data: JSONBody[PlatformAssetRequest]
) -> Response[BalanceEnvelope]:
    held = await _reads(request).balance(caller_of(request), asset_id=data.assetId, platform=True)
    return ok(request, balance_view(held.units, held.asset))


@post(
    "/info",
    status_code=200,
    summary="The platform wallet's address, balance and recent transactions",
    description="`transactions` is also `[]` when history is unavailable.",
    responses=wallet_errors(*_READ),
    tags=["platform"],
)
async def platform_info(
    request: Request[Any, Any, Any], data: JSONBody[PlatformAssetRequest]
) -> Response[WalletInfoEnvelope]:
    found = await _reads(request).info(caller_of(request), asset_id=data.assetId, platform=True)
    return ok(request, _info(found))


@post(
    "/transactions",
    status_code=200,
    summary="The platform wallet's recent transactions (same page size as /transactions)",
    responses=wallet_errors(*_READ),
    tags=["platform"],
)
async def platform_transactions(
    request: Request[Any, Any, Any], data: JSONBody[PlatformAssetRequest]
) -> Response[TransactionsEnvelope]:
    page = await _reads(request).transactions(
        caller_of(request), asset_id=data.assetId, platform=True
    )
    return ok(request, _page(page))


@post(
    "/txid",
    status_code=200,
    summary="One transaction of the platform wallet (poll it after a platform send)",
    responses=wallet_errors(*_READ),
    tags=["platform"],
)
async def platform_txid(
    request: Request[Any, Any, Any], data: JSONBody[PlatformTxRequest]
) -> Response[TransactionEnvelope]:
    found = await _reads(request).txid(
        caller_of(request), asset_id=data.assetId, tx_hash=data.txHash, platform=True
    )
    return ok(request, tx_row_view(found.row, found.asset))


@post(
    "/fee",
    status_code=200,
    summary="The network fee of a platform send",
    description="The recipient must differ from the platform wallet's own address (400). "
    "A `sender` field is ignored. On TRON the answer is `{bandwidth, energy?}`.",
    responses=wallet_errors(*_READ),
    tags=["platform"],
)
async def platform_fee(
    request: Request[Any, Any, Any], data: JSONBody[PlatformFeeRequest]
) -> Response[FeeEnvelope]:
    answer = await _reads(request).fee(
        caller_of(request), asset_id=data.assetId, recipient=data.recipient, platform=True
    )
    return ok(request, fee_view(answer.quote, answer.asset))


@post(
    "/send",
    status_code=200,
    summary="Send from the platform wallet (X-Request-Id required: the idempotency key)",
    description="The platform wallet pays its own fee, on top of the amount. Same "
    "idempotency rules as /send.",
    responses=wallet_errors(*_SEND),
    tags=["platform"],
)
async def platform_send(
    request: Request[Any, Any, Any], data: JSONBody[PlatformSendRequest]
) -> Response[SendEnvelope]:
    receipt = await _sends(request).platform_send(
        caller_of(request),
        request_id=_idempotency_key(request),
        asset_id=data.assetId,
        recipient=data.recipient,
        amount=data.amount,
    )
    return ok(request, _receipt(receipt))


def _info(found: Any) -> dict[str, Any]:
    return {
        "address": found.address,
        "balance": balance_view(found.units, found.asset),
        "transactions": [tx_row_view(row, found.asset) for row in found.transactions],
    }


#: Registered by `routes.build_routes`: the user routes, and those under `/platform`.
USER_ROUTES = [balance, info, transactions, txid, fee, send]
PLATFORM_ROUTES = [
    platform_balance,
    platform_info,
    platform_transactions,
    platform_txid,
    platform_fee,
    platform_send,
]
USER_PATHS = ("/balance", "/info", "/transactions", "/txid", "/fee", "/send")
