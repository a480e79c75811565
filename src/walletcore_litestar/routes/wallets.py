"""User wallets: `/create`, `/extend`, `/addresses`.

Secrets in flight: the password (in) and the mnemonic (out, once). Neither is logged nor
shown in a repr; the `/create` response is marked `Cache-Control: no-store`.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.datastructures import CacheControlHeader
from litestar.params import JSONBody

from walletcore.domain.ids import parse_id
from walletcore_litestar.envelope import request_id_of
from walletcore_litestar.routes._docs import errors
from walletcore_litestar.schemas import (
    CreatedWallet,
    CreatedWalletEnvelope,
    CreateWalletRequest,
    ExtendWalletRequest,
    UserRequest,
    WalletAddresses,
    WalletAddressesEnvelope,
)
from walletcore_litestar.security import caller_of, user_id_of
from walletcore_litestar.services import services_of


@post(
    "/create",
    status_code=200,
    summary="Create a user and its wallet",
    description=(
        "The password seals the wallet's keys and can never be recovered or changed. The "
        "`mnemonic` (seed phrase) is shown in this response only, never again. Addresses "
        "are limited to chains with at least one enabled asset. `X-USER-ID` is ignored here: "
        "the user id is created. With an `X-Request-Id`, at most one wallet is created per "
        "id: a repeat is `409`, naming the user the first one created (its seed phrase is "
        "never shown again)."
    ),
    responses=errors(
        401,
        409,
        examples={
            400: "Invalid request: password is required",
            409: "A wallet was already created for this X-Request-Id (userId "
            "6b7f48e2ce3875d86fc3ca2e); its seed phrase is shown only once",
        },
        meanings={409: "This X-Request-Id already created a wallet: nothing is made again"},
    ),
    cache_control=CacheControlHeader(no_store=True),
    tags=["wallets"],
)
async def create(
    request: Request[Any, Any, Any], data: JSONBody[CreateWalletRequest]
) -> CreatedWalletEnvelope:
    created = await services_of(request.app).wallets.create(
        caller_of(request), password=data.password
    )
    return CreatedWalletEnvelope(CreatedWallet.of(created), request_id_of(request.scope))


@post(
    "/extend",
    status_code=200,
    summary="Derive the user's addresses on chains enabled since creation",
    description="Needs the wallet password; a wrong one is `401 Invalid credentials`.",
    responses=errors(401, 404, examples={400: "Invalid request: password is required"}),
    tags=["wallets"],
)
async def extend(
    request: Request[Any, Any, Any], data: JSONBody[ExtendWalletRequest]
) -> WalletAddressesEnvelope:
    user_id = user_id_of(request, data.userId)
    found = await services_of(request.app).wallets.extend(
        caller_of(request), user_id=user_id, password=data.password
    )
    result = WalletAddresses.of(parse_id(user_id, "userId"), found)
    return WalletAddressesEnvelope(result, request_id_of(request.scope))


@post(
    "/addresses",
    status_code=200,
    summary="The user's addresses",
    responses=errors(401, 404, examples={400: "userId is required"}),
    tags=["wallets"],
)
async def addresses(
    request: Request[Any, Any, Any], data: JSONBody[UserRequest]
) -> WalletAddressesEnvelope:
    user_id = user_id_of(request, data.userId)
    found = await services_of(request.app).wallets.addresses(caller_of(request), user_id=user_id)
    result = WalletAddresses.of(parse_id(user_id, "userId"), found)
    return WalletAddressesEnvelope(result, request_id_of(request.scope))
