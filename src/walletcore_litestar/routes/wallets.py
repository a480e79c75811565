"""User wallets: `/create`, `/extend`, `/addresses`.

Secrets in flight: the password (in) and the mnemonic (out, once). Neither is logged; the
`/create` response is marked `Cache-Control: no-store`.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post
from litestar.datastructures import CacheControlHeader
from litestar.params import JSONBody

from walletcore.domain.ids import parse_id
from walletcore.views import addresses_view
from walletcore_litestar.envelope import ok
from walletcore_litestar.routes._docs import errors
from walletcore_litestar.schemas import (
    CreatedWalletEnvelope,
    CreateWalletRequest,
    ExtendWalletRequest,
    UserRequest,
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
        "the user id is created."
    ),
    responses=errors(401),
    cache_control=CacheControlHeader(no_store=True),
    tags=["wallets"],
)
async def create(
    request: Request[Any, Any, Any], data: JSONBody[CreateWalletRequest]
) -> Response[CreatedWalletEnvelope]:
    created = await services_of(request.app).wallets.create(
        caller_of(request), password=data.password
    )
    return ok(
        request,
        {
            "userId": created.user_id,
            "addresses": addresses_view(created.addresses),
            "mnemonic": created.mnemonic,
        },
    )


@post(
    "/extend",
    status_code=200,
    summary="Derive the user's addresses on chains enabled since creation",
    description="Needs the wallet password; a wrong one is `401 Invalid credentials`.",
    responses=errors(401, 404),
    tags=["wallets"],
)
async def extend(
    request: Request[Any, Any, Any], data: JSONBody[ExtendWalletRequest]
) -> Response[WalletAddressesEnvelope]:
    user_id = user_id_of(request, data.userId)
    found = await services_of(request.app).wallets.extend(
        caller_of(request), user_id=user_id, password=data.password
    )
    return ok(request, {"userId": parse_id(user_id, "userId"), "addresses": addresses_view(found)})


@post(
    "/addresses",
    status_code=200,
    summary="The user's addresses",
    responses=errors(401, 404),
    tags=["wallets"],
)
async def addresses(
    request: Request[Any, Any, Any], data: JSONBody[UserRequest]
) -> Response[WalletAddressesEnvelope]:
    user_id = user_id_of(request, data.userId)
    found = await services_of(request.app).wallets.addresses(caller_of(request), user_id=user_id)
    return ok(request, {"userId": parse_id(user_id, "userId"), "addresses": addresses_view(found)})
