"""The wire shapes of the client's withdrawal policy (`POST /policy`) and of its transfers
held for operators' approval (`POST /approvals`), docs/policies.md.

`/policy` answers `walletcore.services.policies.overview_view`, the view the operator's
`walletcore policies show` prints. An approval is shown to the client without what is the
operators' own: who approved or rejected it (a count instead) and who initiated it.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from walletcore.domain.money import format_balance
from walletcore.domain.policies import Approval, ApprovalStatus
from walletcore.domain.times import format_datetime, format_optional_datetime
from walletcore.services.policies import Overview, overview_view
from walletcore_litestar.wire import (
    DATETIME_PATTERN,
    AssetIdNumber,
    Body,
    DateTime,
    DecimalString,
    Envelope,
    Result,
    doc,
)

ApprovalStatusName = Annotated[
    str,
    doc(
        schema_extra={"enum": [s.value for s in ApprovalStatus]},
        description="`pending` (waiting for operators), `approved` (the same request, sent "
        "again, signs it), `rejected` by an operator, `expired` unapproved in time",
    ),
]

LimitIn = Annotated[int, doc(ge=1, le=1000, description="approvals, default 100")]


class PolicyVersionView(Result):
    """One version of the policy: in force from `effectiveAt`."""

    version: Annotated[int, doc(ge=1, description="1, 2, ... per api client")]
    setAt: DateTime
    effectiveAt: Annotated[
        str,
        doc(
            pattern=DATETIME_PATTERN,
            description="when it takes (took) effect: a change waits the delay of the policy "
            "it replaces",
        ),
    ]
    policy: Annotated[
        dict[str, Any],
        doc(description="the policy document as the operator set it (docs/policies.md)"),
    ]


class AllowlistView(Result):
    """A destination on the client's allowlist."""

    chain: str
    address: str
    assetId: Annotated[int | None, doc(description="null: any asset of the chain")]
    label: str
    addedAt: DateTime
    usableAt: Annotated[
        str,
        doc(
            pattern=DATETIME_PATTERN,
            description="when its cooling-off ends: an allowlisted destination from then",
        ),
    ]


class PolicyView(Result):
    """The client's withdrawal policy: the version in force, the versions set and not yet
    in force, and the allowlist."""

    inForce: Annotated[
        PolicyVersionView | None,
        doc(description="null: no policy, every send is allowed as before policies existed"),
    ]
    pending: list[PolicyVersionView]
    allowlist: list[AllowlistView]

    @classmethod
    def of(cls, overview: Overview) -> PolicyView:
        return msgspec.convert(overview_view(overview, operators=False), cls)


class PolicyEnvelope(Envelope):
    result: PolicyView


class ApprovalsRequest(Body):
    """`/approvals`: the newest held transfers, of one status when `status` is given."""

    status: ApprovalStatusName | None = None
    limit: LimitIn | None = None


class ApprovalView(Result):
    """A transfer a withdrawal policy rule held for operators' approval."""

    id: Annotated[str, doc(description="the approval's id (apr_...)")]
    requestId: Annotated[str, doc(description="the X-Request-Id of the held send")]
    status: ApprovalStatusName
    rule: Annotated[str, doc(description="the rule that held it")]
    required: Annotated[int, doc(ge=1, description="operators who must approve it")]
    approvals: Annotated[
        int, doc(schema_extra={"minimum": 0}, description="operators who approved it so far")
    ]
    assetId: AssetIdNumber
    amount: DecimalString
    recipient: str
    createdAt: DateTime
    expiresAt: DateTime
    #: when it was approved, rejected or expired; null while pending
    decidedAt: DateTime | None

    @classmethod
    def of(cls, approval: Approval) -> ApprovalView:
        transfer = approval.transfer
        return cls(
            approval.id,
            approval.request_id,
            approval.status.value,
            approval.rule,
            approval.required,
            len(approval.approvers),
            transfer.asset_id,
            format_balance(transfer.amount_units, transfer.decimals),
            transfer.recipient,
            format_datetime(approval.created_at),
            format_datetime(approval.expires_at),
            format_optional_datetime(approval.decided_at),
        )


class ApprovalsEnvelope(Envelope):
    result: list[ApprovalView]


__all__ = [
    "AllowlistView",
    "ApprovalView",
    "ApprovalsEnvelope",
    "ApprovalsRequest",
    "PolicyEnvelope",
    "PolicyVersionView",
    "PolicyView",
]
