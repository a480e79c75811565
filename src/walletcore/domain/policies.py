"""Withdrawal policies: the rules an api client's transfers pass before any key is unsealed.

A `Policy` is a document the operator writes (JSON, `walletcore policies set`), one per
api client, versioned: a new version takes effect `changeDelaySeconds` (of the version in
force) after it is set, so a stolen operator credential cannot loosen a policy and drain
in the same minute. The first version of a client takes effect at once (there was none
to loosen). A client without a policy is not guarded: every transfer is allowed (the
rule `(no policy)`), as before policies existed.

Rules are ordered; the first rule whose every condition holds decides: `allow`, `deny`, or
`require_approval` (`approvals` distinct operators must approve before it is signed). A
transfer no rule matches gets the policy's `default` (`deny` unless the document says
otherwise). Conditions (all optional but `wallet`):
- `wallet`: `user` (a user's wallet) or `platform` (the api client's platform wallet):
  the two wallets have separate rules;
- `origins`: what made the transfer: `send` (/send), `platform_send` (/platform/send),
  `delivery` (the desk delivering a buy), `collection` (the desk collecting a sell);
- `chains`, `assetIds`: the transfer's chain and asset;
- `destinations`: `allowlisted` (on the client's allowlist and out of its cooling-off),
  `own` (an address of a wallet of the same api client), `other` (neither);
- `over`: the transfer is larger than `amount` (in `assetId` units, or in `fiat` at the
  current price): a per-transfer limit, or the threshold of an approval;
- `velocity`: the transfer would take the total of the window (the last `windowSeconds`,
  rolling) over `amount`: counted per `user` (the sending wallet) or per `client`
  (every wallet of the api client), over the transfers the rule's other filters
  (wallet, origins, chains, assets) select, of one asset when the limit is in an asset's
  units (`assetId`) or of all of them at the current price when it is in a `fiat`.

The allowlist is kept beside the policy (entries per chain, optionally per asset, with a
label): an entry is usable `coolingOffSeconds` after it was added; removing one is at once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    model_validator,
)

from walletcore.domain.assets import Chain, Fiat
from walletcore.domain.errors import ClientError, InvalidRequest


class PolicyDenied(ClientError):
    """A transfer a policy refused: nothing was signed. The message names the rule."""

    status = 403


class Action(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    REQUIRE_APPROVAL = "require_approval"


class Origin(StrEnum):
    SEND = "send"
    PLATFORM_SEND = "platform_send"
    DELIVERY = "delivery"
    COLLECTION = "collection"


#: SendRequest.endpoint -> the origin a rule names
ORIGIN_OF_ENDPOINT: Mapping[str, Origin] = {
    "send": Origin.SEND,
    "platform/send": Origin.PLATFORM_SEND,
    "trade/delivery": Origin.DELIVERY,
    "trade/collection": Origin.COLLECTION,
}


class WalletKind(StrEnum):
    USER = "user"
    PLATFORM = "platform"


class Destination(StrEnum):
    ALLOWLISTED = "allowlisted"
    OWN = "own"
    OTHER = "other"


#: The longest window, delay and cooling-off a policy may name: a year.
MAX_SECONDS = 366 * 24 * 3600
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_Amount = Annotated[Decimal, Field(gt=0, max_digits=38, decimal_places=18)]
_Seconds = Annotated[int, Field(ge=0, le=MAX_SECONDS)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Measure(_Model):
    """An amount in one asset's units (`assetId`) or in a fiat at the current price."""

    amount: _Amount
    asset_id: int | None = Field(default=None, alias="assetId")
    fiat: Fiat | None = None

    @model_validator(mode="after")
    def _one_unit(self) -> Measure:
        if (self.asset_id is None) == (self.fiat is None):
            raise ValueError("give exactly one of assetId and fiat")
        return self

    def describe(self, asset_name: str | None = None) -> str:
        """`0.2 ETH on ETHEREUM` (`asset_name`: how to name the measure's asset), `100 USD`."""
        if self.fiat is not None:
            unit = str(self.fiat)
        else:
            unit = asset_name or f"of asset {self.asset_id}"
        return f"{_plain(self.amount)} {unit}"


class Velocity(Measure):
    window_seconds: Annotated[int, Field(gt=0, le=MAX_SECONDS)] = Field(alias="windowSeconds")
    per: Literal["user", "client"] = "user"

    def describe(self, asset_name: str | None = None) -> str:
        return f"{super().describe(asset_name)} per {self.per} in {self.window_seconds} s"


class Rule(_Model):
    name: str
    wallet: WalletKind
    action: Action
    approvals: Annotated[int, Field(ge=1, le=20)] | None = None
    origins: frozenset[Origin] | None = None
    chains: frozenset[Chain] | None = None
    asset_ids: frozenset[int] | None = Field(default=None, alias="assetIds")
    destinations: frozenset[Destination] | None = None
    over: Measure | None = None
    velocity: Velocity | None = None

    @field_serializer("origins", "chains", "asset_ids", "destinations")
    def _sorted(self, value: frozenset[Any] | None) -> list[Any] | None:
        """A set as a sorted list: the document (and its digest) is the same in every
        process, whatever order the set iterates in."""
        if value is None:
            return None
        return sorted(value, key=lambda item: getattr(item, "value", item))

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        if not _NAME.match(self.name):
            raise ValueError(f"rule name {self.name!r}: 1 to 64 letters, digits, '.', '_' or '-'")
        if (self.action is Action.REQUIRE_APPROVAL) != (self.approvals is not None):
            raise ValueError(
                f"rule {self.name}: 'approvals' (how many operators) goes with "
                "require_approval, and only with it"
            )
        for name in ("origins", "chains", "asset_ids", "destinations"):
            value = getattr(self, name)
            if value is not None and not value:
                raise ValueError(f"rule {self.name}: {name} is empty (leave it out to match all)")
        return self

    def selects(self, transfer: Transfer) -> bool:
        """The rule's filters (all but `over` and `velocity`) hold for `transfer`."""
        return (
            self.wallet is transfer.wallet
            and (self.origins is None or transfer.origin in self.origins)
            and (self.chains is None or transfer.chain in self.chains)
            and (self.asset_ids is None or transfer.asset_id in self.asset_ids)
            and (self.destinations is None or transfer.destination in self.destinations)
        )


class Policy(_Model):
    """One api client's withdrawal policy (module rules)."""

    rules: tuple[Rule, ...] = ()
    default: Literal["allow", "deny"] = "deny"
    change_delay_seconds: _Seconds = Field(default=86_400, alias="changeDelaySeconds")
    cooling_off_seconds: _Seconds = Field(default=86_400, alias="coolingOffSeconds")
    #: how long a transfer waits for its approvals before it is refused
    approval_ttl_seconds: Annotated[int, Field(gt=0, le=MAX_SECONDS)] = Field(
        default=86_400, alias="approvalTtlSeconds"
    )

    @model_validator(mode="after")
    def _unique_names(self) -> Policy:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise ValueError(f"two rules are named {rule.name}")
            seen.add(rule.name)
        return self

    @classmethod
    def parse(cls, document: Any) -> Policy:
        """The policy of a JSON document (a mapping); `InvalidRequest` naming what is wrong."""
        try:
            return cls.model_validate(document)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or 'policy'}: {error['msg']}"
                for error in exc.errors(include_url=False, include_input=False)
            )
            raise InvalidRequest(f"Invalid policy: {problems}") from None

    def document(self) -> dict[str, Any]:
        """The policy as JSON, as the operator writes it (aliases, no defaults left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def digest(self) -> str:
        """A short fingerprint of the document, to name a version in the audit log."""
        import json

        canonical = json.dumps(self.document(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


#: What decides for a client that has no policy.
NO_POLICY = "(no policy)"
#: What decides when no rule matched.
DEFAULT_RULE = "(default)"


@dataclass(frozen=True, slots=True)
class PolicyVersion:
    """A version of a client's policy: in force from `effective_at` until a later version's
    `effective_at`; `set_by` names the operator (or `cli`)."""

    client_id: str
    version: int
    policy: Policy
    set_at: datetime
    effective_at: datetime
    set_by: str


def in_force(versions: Sequence[PolicyVersion], now: datetime) -> PolicyVersion | None:
    """The version in force at `now`: the latest one already effective."""
    current = None
    for version in versions:
        if version.effective_at <= now and (current is None or version.version > current.version):
            current = version
    return current


def pending(versions: Sequence[PolicyVersion], now: datetime) -> list[PolicyVersion]:
    """The versions set and not yet in force, oldest first."""
    return sorted((v for v in versions if v.effective_at > now), key=lambda v: v.version)


def effective_at(versions: Sequence[PolicyVersion], now: datetime) -> datetime:
    """When a version set at `now` takes effect: after the delay of the newest version set
    (in force or pending, so a pending shorter delay cannot be used to skip the current
    one), at once for a client's first policy."""
    if not versions:
        return now
    delay = max(
        v.policy.change_delay_seconds
        for v in versions
        if v.effective_at > now or v is in_force(versions, now)
    )
    return now + timedelta(seconds=delay)


@dataclass(frozen=True, slots=True)
class AllowlistEntry:
    """A destination an api client may send to: on `chain` (of one asset, or any of the
    chain's when `asset_id` is None), usable from `usable_at` (its cooling-off ended)."""

    client_id: str
    chain: Chain
    address: str
    label: str
    added_at: datetime
    usable_at: datetime
    asset_id: int | None = None
    added_by: str = "cli"

    def covers(self, chain: Chain, asset_id: int, address: str, now: datetime) -> bool:
        return (
            self.chain == chain
            and (self.asset_id is None or self.asset_id == asset_id)
            and same_address(chain, self.address, address)
            and self.usable_at <= now
        )


def same_address(chain: Chain, a: str, b: str) -> bool:
    """Two addresses of `chain` are one: hex ones (EVM) regardless of case."""
    if a.startswith("0x") and b.startswith("0x"):
        return a.lower() == b.lower()
    return a == b


@dataclass(frozen=True, slots=True)
class Transfer:
    """What a rule is matched against: one transfer about to be signed."""

    wallet: WalletKind
    origin: Origin
    #: the sending wallet's user (None: the platform wallet)
    user_id: str | None
    chain: Chain
    asset_id: int
    symbol: str
    decimals: int
    amount_units: int
    recipient: str
    destination: Destination

    @property
    def amount(self) -> Decimal:
        return Decimal(self.amount_units).scaleb(-self.decimals)


@dataclass(frozen=True, slots=True)
class Usage:
    """A transfer counted against velocity limits: allowed (or held for approval) and not
    given back. Keyed by (client, request id), so a retry of one request counts once."""

    client_id: str
    request_id: str
    wallet: WalletKind
    origin: Origin
    user_id: str | None
    chain: Chain
    asset_id: int
    amount_units: int
    at: datetime


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of a policy for one transfer: the action, and the rule that decided."""

    action: Action
    rule: str
    reason: str
    approvals: int = 0
    #: the version of the policy that decided (0: no policy)
    version: int = 0

    @property
    def allowed(self) -> bool:
        return self.action is Action.ALLOW

    def refusal(self) -> PolicyDenied:
        if self.rule == DEFAULT_RULE:
            return PolicyDenied(
                f"Transfer refused by the withdrawal policy's default (deny): {self.reason}"
            )
        return PolicyDenied(
            f"Transfer refused by withdrawal policy rule {self.rule}: {self.reason}"
        )


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Approval:
    """A transfer held by a `require_approval` rule until `required` distinct operators
    approve it (none of them its initiator); one operator's rejection ends it. Keyed by
    the transfer's request id: the transfer is signed on the first replay of that request
    after it is approved, once (its send record)."""

    id: str
    client_id: str
    request_id: str
    rule: str
    required: int
    initiated_by: str
    transfer: Transfer
    created_at: datetime
    expires_at: datetime
    status: ApprovalStatus = ApprovalStatus.PENDING
    approvers: tuple[str, ...] = ()
    decided_at: datetime | None = None
    #: the operator who rejected it, or why it ended without approval
    reason: str | None = None

    def effective_status(self, now: datetime) -> ApprovalStatus:
        if self.status is ApprovalStatus.PENDING and now >= self.expires_at:
            return ApprovalStatus.EXPIRED
        return self.status

    def approved_by(self, operator: str, now: datetime) -> Approval:
        if self.effective_status(now) is not ApprovalStatus.PENDING:
            raise InvalidRequest(f"Approval {self.id} is {self.effective_status(now)}, not pending")
        if operator == self.initiated_by:
            raise InvalidRequest("An operator never approves a transfer they initiated")
        if operator in self.approvers:
            raise InvalidRequest(f"{operator} has approved {self.id} already")
        approvers = (*self.approvers, operator)
        done = len(approvers) >= self.required
        return _replace(
            self,
            approvers=approvers,
            status=ApprovalStatus.APPROVED if done else ApprovalStatus.PENDING,
            decided_at=now if done else None,
        )

    def rejected_by(self, operator: str, now: datetime, reason: str) -> Approval:
        if self.effective_status(now) is not ApprovalStatus.PENDING:
            raise InvalidRequest(f"Approval {self.id} is {self.effective_status(now)}, not pending")
        return _replace(
            self,
            status=ApprovalStatus.REJECTED,
            decided_at=now,
            reason=f"rejected by {operator}" + (f": {reason}" if reason else ""),
        )

    def expired(self, now: datetime) -> Approval:
        return _replace(self, status=ApprovalStatus.EXPIRED, decided_at=now, reason="expired")

    def reopened(self, required: int, expires_at: datetime) -> Approval:
        """Approved, but the rule in force now asks more approvals than it gathered: pending
        again for the rest, its approvals kept, until the later of its expiry and
        `expires_at`."""
        return _replace(
            self,
            required=required,
            status=ApprovalStatus.PENDING,
            decided_at=None,
            expires_at=max(self.expires_at, expires_at),
        )


def _replace(approval: Approval, **changes: Any) -> Approval:
    from dataclasses import replace

    return replace(approval, **changes)


@dataclass(frozen=True, slots=True)
class Operator:
    """A person who approves held transfers: a name and the SHA-256 of their key (the key
    is shown once, at `walletcore operators add`)."""

    name: str
    key_hash: str
    created_at: datetime
    disabled_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.disabled_at is None


OPERATOR_NAME = _NAME


def _plain(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text


__all__ = [
    "DEFAULT_RULE",
    "NO_POLICY",
    "Action",
    "AllowlistEntry",
    "Approval",
    "ApprovalStatus",
    "Decision",
    "Destination",
    "Measure",
    "Operator",
    "Origin",
    "Policy",
    "PolicyDenied",
    "PolicyVersion",
    "Rule",
    "Transfer",
    "Usage",
    "Velocity",
    "WalletKind",
    "effective_at",
    "in_force",
    "pending",
    "same_address",
]
