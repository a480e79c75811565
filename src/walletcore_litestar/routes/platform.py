"""Platform wallet endpoints: the api client's own wallet, no `userId`, `X-USER-ID` is a 400.

`/platform/addresses` is here; the platform's wallet operations share their handlers with
the user's (`routes.wallet_ops`)."""

from __future__ import annotations

from typing import Any

from litestar import Request, post

from walletcore.domain.errors import PlatformWalletNotFound
from walletcore_litestar.bodies import require_empty_body
from walletcore_litestar.envelope import request_id_of
from walletcore_litestar.routes._docs import errors
from walletcore_litestar.schemas import AddressesEnvelope, ChainAddresses
from walletcore_litestar.security import caller_of
from walletcore_litestar.services import services_of


@post(
    "/addresses",
    status_code=200,
    summary="The platform wallet's addresses",
    description=(
        "Chain name to address, limited to chains the api client is enabled for. 404 until "
        "the operator provisions the platform wallet (`walletcore platform provision`)."
    ),
    responses=errors(401, 404, examples={404: PlatformWalletNotFound.default_message}),
    tags=["platform"],
)
async def platform_addresses(request: Request[Any, Any, Any]) -> AddressesEnvelope:
    await require_empty_body(request)
    found = await services_of(request.app).wallets.platform_addresses(caller_of(request))
    return AddressesEnvelope(ChainAddresses.of(found), request_id_of(request.scope))
