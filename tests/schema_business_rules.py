"""The refusals a schema-valid request can earn: business rules no OpenAPI schema can state.

Shared by both schemathesis runs, so they judge `positive_data_acceptance` alike and cannot
drift: the in-process one (tests/integration/http/test_http_schema_fuzz.py, a fresh app on
the in-memory repo) and the real-server one (tests/integration/hardening/
test_schema_fuzz_real_server.py, `walletcore serve` on PostgreSQL with provisioned clients,
users, trades and sends). Both turn schemathesis's `positive_data_acceptance` off and
`accepted_unless_a_business_rule` on in its place.

The schema is precise enough for that check (patterns for ids, amounts and asset ids, enums,
lengths, each amount's decimals per asset, exactly one amount on a quote), so a schema-valid
request is refused only by a rule in `BUSINESS_RULES`, each with its reason. As in
schemathesis' default, 401, 403, 404, 409, 429 and any 5xx count as acceptance: a schema
says which requests are well formed, not which tokens, assets, users, trades or wallets
exist, nor what state they are in (404 for a well-formed but unknown userId, 409 for a
repeated `/create` X-Request-Id, 503 for an asset flagged on a platform endpoint); each run
still refuses a 500 on its own, and every status must be documented
(`status_code_conformance`). Neither environment limits an asset (a limited one would be
`400 Unknown assetId`).

Imported by name: tests/ is on `sys.path` (its conftest.py is loaded first, in pytest's
default `prepend` import mode).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import positive_data_acceptance

from walletcore_litestar.routes import USER_SCOPED_PATHS


@dataclass(frozen=True)
class BusinessRule:
    """A refusal a schema-valid request can earn: `status` with a message matching
    `message` on one of `paths`, because of `why`."""

    status: int
    paths: tuple[str, ...]
    message: str
    why: str

    def explains(self, path: str, status: int, message: str) -> bool:
        return (
            status == self.status
            and path in self.paths
            and re.match(self.message, message) is not None
        )


_SENDS = ("/send", "/platform/send")
_RECIPIENTS = ("/fee", "/platform/fee", *_SENDS)
_PAGED = ("/events", "/deposits", "/webhooks/deliveries", "/approvals")
BUSINESS_RULES = (
    BusinessRule(
        400,
        _PAGED,
        "Invalid request: numbers must be integers",
        "JSON Schema's `integer` admits `151.0`; the service refuses any number written with "
        "a fraction or an exponent in a body (walletcore_litestar.bodies), so that an amount "
        "can never arrive as a float",
    ),
    BusinessRule(
        400,
        ("/events",),
        "Unknown cursor: ",
        "a well-formed event id that this client's feed never gave: which ids exist is data",
    ),
    BusinessRule(
        410,
        ("/events",),
        "Cursor expired: ",
        "a well-formed event id older than the events the feed still keeps",
    ),
    BusinessRule(
        400,
        USER_SCOPED_PATHS,
        "userId is required$",
        "the end user is the body's `userId` or the X-USER-ID header; OpenAPI cannot require "
        "one of a body field and a header, so both are optional in the document",
    ),
    BusinessRule(
        400,
        _RECIPIENTS,
        "(Invalid (BITCOIN|ETHEREUM|BSC|TRON|POLYGON|SOLANA) address: |A (BITCOIN|ETHEREUM|"
        "BSC|TRON|POLYGON|SOLANA) address is required$)",
        "an address's form follows the chain of the asset named in the same body and carries "
        "a checksum (base58check, bech32, EIP-55) that no pattern can verify; the chain's "
        "check ignores surrounding whitespace, so a recipient of whitespace only (`minLength` "
        'counts it: `{"assetId": 5, "recipient": "\\u00a0"}` on /platform/fee) is no '
        "address at all, `A POLYGON address is required`",
    ),
    BusinessRule(
        400,
        _RECIPIENTS,
        "recipient must differ from ",
        "the wallet's own address is data of this service, not a shape",
    ),
    BusinessRule(
        400,
        _SENDS,
        "(Insufficient .* balance|Not enough .* for the network fee|amount must exceed the "
        "network fee|The (platform )?wallet has no .* address)",
        "balances, fees and a wallet's chains are state of the chain and of the wallet",
    ),
    BusinessRule(
        400,
        _RECIPIENTS,
        "(amount is below the minimum send of |amount must be at least )",
        "a chain's minimum transfer depends on the recipient: its address type (Bitcoin's "
        "dust limit) and whether its account exists (Solana's rent exemption), and on the fee "
        "taken from a USER amount",
    ),
    BusinessRule(
        400,
        ("/send",),
        "Invalid password$",
        "a wrong wallet password on BITCOIN is a 400 (the spec); which password is right is "
        "the keystore's secret",
    ),
    BusinessRule(
        400,
        ("/sell", "/order"),
        "(cryptoAmount|fiatAmount) is (below the minimum|above the maximum) trade of |"
        "cryptoAmount is worth less than ",
        "an asset's trade bounds are settings of the deployment, and a fiat amount meets them "
        "through the crypto it derives at the price of the time",
    ),
    BusinessRule(
        400,
        ("/trade/approve",),
        "password is taken only when approving a sell$",
        "whether the trade is a buy or a sell is state of the trade: only a sell's coins are "
        "collected with the wallet password",
    ),
    BusinessRule(
        400,
        ("/trade/approve", "/trade/collect"),
        "(Invalid password$|The wallet holds .*, less than the .* to sell|Not enough .* for "
        "the network fee of collecting the sold coins)",
        "a wrong wallet password on BITCOIN is a 400 (the /send rules), and the coins a sell "
        "may still reserve are the wallet's balance less its other sells' holds: state",
    ),
    BusinessRule(
        400,
        ("/create",),
        "password must be 8 to 256 characters$",
        "the length counts the NFC form the keystore hashes; JSON Schema counts the code "
        "points as sent (a combining sequence can compose into fewer)",
    ),
    BusinessRule(
        422,
        _SENDS,
        "X-Request-Id was already used with a different request$",
        "an idempotency key's history is state: generated cases may reuse a key with another body",
    ),
)


def unexplained_refusal(ctx: Any, response: Any, case: Any) -> RejectedPositiveData | None:
    """What `positive_data_acceptance` raises for this answer, unless `BUSINESS_RULES`
    explain it (then, or when the check passes, None)."""
    try:
        positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData as refused:
        try:
            body = response.json()
        except ValueError:
            return refused
        message = str(body.get("message", "")) if isinstance(body, dict) else ""
        if any(r.explains(case.path, response.status_code, message) for r in BUSINESS_RULES):
            return None
        return refused
    return None


def accepted_unless_a_business_rule(ctx: Any, response: Any, case: Any) -> bool | None:
    """`positive_data_acceptance`, except for the refusals `BUSINESS_RULES` explain."""
    refused = unexplained_refusal(ctx, response, case)
    if refused is not None:
        raise refused
    return None
