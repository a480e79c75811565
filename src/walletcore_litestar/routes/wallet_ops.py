"""Wallet operations: `/balance`, `/info`, `/transactions`, `/txid`, `/fee`, `/send` for a user
(`userId`; `X-USER-ID` overrides it) and the same under `/platform/` for the api client's
platform wallet (no `userId`; `X-USER-ID` is a 400, checked by the platform router).

Each operation is one implementation; `wallet_routes` makes its two handlers, which differ
only in their body type, their documentation and whose wallet they name. Bodies go to the
core as raw values; the core checks them (400s with clear messages). `/send` and
`/platform/send` need `X-Request-Id`: it is the idempotency key.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from litestar import Request, Response, post
from litestar.handlers import HTTPRouteHandler
from litestar.params import JSONBody

from walletcore.domain.errors import PlatformWalletNotFound
from walletcore.domain.money import format_balance
from walletcore.domain.wire import JsonValue
from walletcore.services.sends import HeldReceipt
from walletcore_litestar.envelope import request_id_of
from walletcore_litestar.routes._docs import WALLET, accepted, errors
from walletcore_litestar.security import caller_of, user_id_of
from walletcore_litestar.services import services_of
from walletcore_litestar.wallet_ops_schemas import (
    BalanceEnvelope,
    FeeEnvelope,
    HeldEnvelope,
    HeldResult,
    PlatformAssetRequest,
    PlatformFeeRequest,
    PlatformSendRequest,
    PlatformTxRequest,
    SendEnvelope,
    SendResult,
    TransactionEnvelope,
    TransactionRow,
    TransactionsEnvelope,
    TronFee,
    WalletAssetRequest,
    WalletFeeRequest,
    WalletInfo,
    WalletInfoEnvelope,
    WalletSendRequest,
    WalletTxRequest,
    fee_result,
    transaction_rows,
)
from walletcore_litestar.wire import Body, Envelope

_READ = (401, 403, 404, 503)
_SEND = (401, 403, 404, 409, 422, 502, 503, 504)

AnyRequest = Request[Any, Any, Any]


@dataclass(frozen=True, slots=True)
class Owner:
    """Whose wallet: a user's (`user_id` as sent), or the api client's platform wallet."""

    platform: bool
    user_id: JsonValue = None


def _idempotency_key(request: AnyRequest) -> str | None:
    """The inbound X-Request-Id, if one was sent (the middleware has checked its form)."""
    return request.headers.get("x-request-id") or None


# -- the operations, one implementation each --------------------------------------------------
async def _balance(request: AnyRequest, data: PlatformAssetRequest, owner: Owner) -> str:
    reads = services_of(request.app).wallet_reads
    held = await reads.balance(
        caller_of(request), asset_id=data.assetId, user_id=owner.user_id, platform=owner.platform
    )
    return format_balance(held.units, held.asset.decimals)


async def _info(request: AnyRequest, data: PlatformAssetRequest, owner: Owner) -> WalletInfo:
    reads = services_of(request.app).wallet_reads
    found = await reads.info(
        caller_of(request), asset_id=data.assetId, user_id=owner.user_id, platform=owner.platform
    )
    return WalletInfo.of(found)


async def _transactions(
    request: AnyRequest, data: PlatformAssetRequest, owner: Owner
) -> list[TransactionRow]:
    reads = services_of(request.app).wallet_reads
    page = await reads.transactions(
        caller_of(request), asset_id=data.assetId, user_id=owner.user_id, platform=owner.platform
    )
    return transaction_rows(page.rows, page.asset, page.native)


async def _txid(request: AnyRequest, data: PlatformTxRequest, owner: Owner) -> TransactionRow:
    reads = services_of(request.app).wallet_reads
    found = await reads.txid(
        caller_of(request),
        asset_id=data.assetId,
        tx_hash=data.txHash,
        user_id=owner.user_id,
        platform=owner.platform,
    )
    return TransactionRow.of(found.row, found.asset, found.native)


async def _fee(
    request: AnyRequest, data: PlatformFeeRequest | WalletFeeRequest, owner: Owner
) -> str | TronFee:
    # A platform send pays its own fee on top of the amount: its fee takes no amount.
    amount = data.amount if isinstance(data, WalletFeeRequest) else None
    services = services_of(request.app)
    answer = await services.wallet_reads.fee(
        caller_of(request),
        asset_id=data.assetId,
        recipient=data.recipient,
        amount=amount,
        user_id=owner.user_id,
        platform=owner.platform,
    )
    fee_wire = services.descriptions[answer.asset.chain].fee_wire
    return fee_result(answer.quote, answer.asset, answer.native, fee_wire)


async def _send(
    request: AnyRequest, data: PlatformSendRequest, owner: Owner
) -> SendResult | HeldResult:
    sends, caller = services_of(request.app).sends, caller_of(request)
    key = _idempotency_key(request)
    if isinstance(data, WalletSendRequest):  # a user's: the wallet opens with its password
        receipt = await sends.send(
            caller,
            request_id=key,
            user_id=owner.user_id,
            asset_id=data.assetId,
            recipient=data.recipient,
            amount=data.amount,
            password=data.password,
        )
    else:
        receipt = await sends.platform_send(
            caller,
            request_id=key,
            asset_id=data.assetId,
            recipient=data.recipient,
            amount=data.amount,
        )
    if isinstance(receipt, HeldReceipt):  # the withdrawal policy holds it: a 202
        return HeldResult.of(receipt)
    return SendResult.of(receipt)


#: What the withdrawal policy adds to a send (docs/policies.md).
_POLICY = (
    "The api client's withdrawal policy decides every send before anything is signed: "
    "403 when a rule refuses it (the message names the rule), 202 with the approval when a "
    "rule holds it for operators' approval; the same X-Request-Id sent again answers 202 "
    "while it waits, and signs and sends it (200) once it is approved."
)
_SEND_MEANINGS = {
    403: (
        "Asset not enabled for the api client, or the withdrawal policy refused the send "
        "(the message names the rule); nothing was sent, do not retry"
    ),
    503: (
        "Asset not available on this endpoint (permanent), or a withdrawal policy rule could "
        "not be checked (no usable price: nothing was sent, retry later); the message says "
        "which"
    ),
}
_HELD = (
    "Held by the withdrawal policy for operators' approval: nothing is signed; send the "
    "same request (X-Request-Id) again once approved"
)


# -- their routes ------------------------------------------------------------------------------
Run = Callable[[AnyRequest, Any, Owner], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    run: Run
    #: The user's body and the platform's.
    bodies: tuple[type[Body], type[Body]]
    envelope: type[Envelope]
    statuses: tuple[int, ...]
    #: `{whose}`: "user's" or "platform wallet's"; `{wallet}`: "user's wallet" or "platform
    #: wallet".
    summary: str
    description: str | None = None
    platform_description: str | None = None
    #: The envelope of a `202` (a send held for operators' approval), if it can answer one.
    held: type[Envelope] | None = None
    #: What a status means here, where the `WALLET` table's meaning is not all of it.
    meanings: Mapping[int, str] | None = None


OPERATIONS = (
    Operation(
        "balance",
        _balance,
        (WalletAssetRequest, PlatformAssetRequest),
        BalanceEnvelope,
        _READ,
        "The {whose} balance of an asset",
    ),
    Operation(
        "info",
        _info,
        (WalletAssetRequest, PlatformAssetRequest),
        WalletInfoEnvelope,
        _READ,
        "The {whose} address, balance and recent transactions of an asset",
        "`transactions` is also `[]` when history is unavailable.",
    ),
    Operation(
        "transactions",
        _transactions,
        (WalletAssetRequest, PlatformAssetRequest),
        TransactionsEnvelope,
        _READ,
        "The {whose} recent transactions of an asset, newest first (one page)",
        None,
        "The same page size as /transactions.",
    ),
    Operation(
        "txid",
        _txid,
        (WalletTxRequest, PlatformTxRequest),
        TransactionEnvelope,
        _READ,
        "One transaction of the {wallet} (poll it until `status` leaves `pending`)",
    ),
    Operation(
        "fee",
        _fee,
        (WalletFeeRequest, PlatformFeeRequest),
        FeeEnvelope,
        _READ,
        "The network fee of the send from the {wallet} that would follow",
        "A decimal string in the chain's native coin; on TRON `{bandwidth, energy?}` "
        "(energy for TRC20 only). The fee payer rule of the asset applies.",
        "The recipient must differ from the platform wallet's own address (400). A `sender` "
        "field is ignored. On TRON the answer is `{bandwidth, energy?}`.",
    ),
    Operation(
        "send",
        _send,
        (WalletSendRequest, PlatformSendRequest),
        SendEnvelope,
        _SEND,
        "Send from the {wallet} (X-Request-Id required: the idempotency key)",
        "Answers `{txHash, status, fee, feePayer}`. The same X-Request-Id replays the first "
        "answer and never sends twice; 409 while it is in progress; 422 for another request. "
        "USER pays the fee from a native amount (the recipient gets amount - fee) or in "
        "native coin for a token; PLATFORM falls back to USER when the platform wallet "
        "cannot pay. " + _POLICY,
        "The platform wallet pays its own fee, on top of the amount. Same idempotency rules "
        "as /send. " + _POLICY,
        held=HeldEnvelope,
        meanings=_SEND_MEANINGS,
    ),
)


def wallet_route(operation: Operation, *, platform: bool) -> HTTPRouteHandler:
    """The handler of `operation` for a user's wallet, or for the platform wallet."""
    body = operation.bodies[1 if platform else 0]
    envelope, run, held = operation.envelope, operation.run, operation.held

    async def handler(request: AnyRequest, data: Any) -> Any:
        owner = Owner(True) if platform else Owner(False, user_id_of(request, data.userId))
        result = await run(request, data, owner)
        if isinstance(result, HeldResult):
            assert held is not None
            return Response(held(result, request_id_of(request.scope)), status_code=202)
        return envelope(result, request_id_of(request.scope))

    # Litestar reads the body type and the response from the signature.
    json_body: Any = JSONBody  # an alias applied to a variable: beyond a static type checker
    handler.__annotations__ = {"request": AnyRequest, "data": json_body[body], "return": envelope}
    handler.__name__ = handler.__qualname__ = (
        f"platform_{operation.name}" if platform else operation.name
    )
    description = operation.description
    if platform and operation.platform_description is not None:
        description = operation.platform_description
    return post(
        f"/{operation.name}",
        status_code=200,
        summary=operation.summary.format(
            whose="platform wallet's" if platform else "user's",
            wallet="platform wallet" if platform else "user's wallet",
        ),
        description=description,
        responses={
            **errors(
                *operation.statuses,
                table=WALLET,
                examples={404: PlatformWalletNotFound.default_message} if platform else None,
                meanings=operation.meanings,
            ),
            **({} if held is None else {202: accepted(held, _HELD)}),
        },
        tags=["platform" if platform else "wallet"],
    )(handler)


#: Registered by `routes.build_routes`: the user routes, and those under `/platform`.
USER_ROUTES = [wallet_route(op, platform=False) for op in OPERATIONS]
PLATFORM_ROUTES = [wallet_route(op, platform=True) for op in OPERATIONS]
USER_PATHS = tuple(f"/{op.name}" for op in OPERATIONS)
#: Paths on which `X-Request-Id` is required: it is the idempotency key of a send.
IDEMPOTENT_PATHS = ("/send", "/platform/send")
