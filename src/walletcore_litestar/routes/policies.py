"""The api client's withdrawal policy (`/policy`) and its transfers held for operators'
approval (`/approvals`), docs/policies.md: read only, the client's own. The operator sets
policies and operators approve with `walletcore policies ...` and `walletcore approvals ...`.

They act for the api client, never for a user: `X-USER-ID` is a 400, as on the platform
endpoints.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.params import JSONBody

from walletcore_litestar.bodies import require_empty_body
from walletcore_litestar.envelope import request_id_of
from walletcore_litestar.policies_schemas import (
    ApprovalsEnvelope,
    ApprovalsRequest,
    ApprovalView,
    PolicyEnvelope,
    PolicyView,
)
from walletcore_litestar.routes._docs import GENERAL, errors
from walletcore_litestar.security import caller_of, require_client_caller
from walletcore_litestar.services import services_of

_APPROVALS = {
    **GENERAL,
    400: (
        "Invalid request: an unknown status, a bad limit, X-USER-ID sent",
        "status must be one of pending, approved, rejected, expired",
    ),
}


@post(
    "/policy",
    status_code=200,
    summary="The api client's withdrawal policy and allowlist",
    description=(
        "The policy every send of the client passes before anything is signed (set by the "
        "operator): the version in force (`inForce`, null when there is none: every send is "
        "allowed), the versions set and waiting for their delay (`pending`), and the "
        "allowlisted destinations with the time each becomes usable (`usableAt`)."
    ),
    responses=errors(401),
    tags=["policy"],
    before_request=require_client_caller,
)
async def read_policy(request: Request[Any, Any, Any]) -> PolicyEnvelope:
    await require_empty_body(request)
    policies = services_of(request.app).policies
    overview = await policies.overview(caller_of(request).client_id)
    return PolicyEnvelope(PolicyView.of(overview), request_id_of(request.scope))


@post(
    "/approvals",
    status_code=200,
    summary="The sends held for operators' approval, newest first",
    description=(
        "Every send of the client a withdrawal policy rule held (`202` on /send): `pending` "
        "until enough operators approve it (`approvals` of `required`), then `approved`: the "
        "same request (`requestId`), sent again, signs and sends it once. `rejected` or "
        "`expired` ones are refused for good. `status` keeps one status."
    ),
    responses=errors(401, table=_APPROVALS),
    tags=["policy"],
    before_request=require_client_caller,
)
async def list_approvals(
    request: Request[Any, Any, Any], data: JSONBody[ApprovalsRequest]
) -> ApprovalsEnvelope:
    policies = services_of(request.app).policies
    found = await policies.client_approvals(
        caller_of(request), status=data.status, limit=data.limit
    )
    return ApprovalsEnvelope([ApprovalView.of(a) for a in found], request_id_of(request.scope))


POLICY_ROUTES = [read_policy, list_approvals]
POLICY_PATHS = ("/policy", "/approvals")

__all__ = ["POLICY_PATHS", "POLICY_ROUTES"]
