"""The served OpenAPI document tells the truth: schemathesis fuzzes every operation.

Checks: no 500, every status documented, every body and header matches its schema,
schema-invalid input is refused (`negative_data_rejection`), and schema-valid input is
accepted (`positive_data_acceptance`). The schema is precise enough for that last one
(patterns for ids, amounts and asset ids, enums, lengths, each amount's decimals per asset,
exactly one amount on a quote), so a schema-valid request is refused only by a rule no
OpenAPI schema can state; those rules are `BUSINESS_RULES`, each with its reason. As in
schemathesis' default, 401, 403, 404, 409 and a documented 5xx count as acceptance: a
schema says which requests are well formed, not which tokens, assets, users, trades or
wallets exist, nor what state they are in (404 for a well-formed but unknown userId, 409
for a repeated `/create` X-Request-Id, 503 for an asset flagged on a platform endpoint).
This environment limits no asset (a limited one would be `400 Unknown assetId`).

The app is built when this module is collected (schemathesis parametrizes from the schema
it serves; its fixture loader does not work with this pytest), in a temporary home.
"""

from __future__ import annotations

import asyncio
import atexit
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import positive_data_acceptance

from walletcore.clock import ManualClock
from walletcore.container import create_container
from walletcore.settings import Settings
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams
from walletcore_litestar import create_app
from walletcore_litestar.routes import USER_SCOPED_PATHS

_HOME = Path(tempfile.mkdtemp(prefix="walletcore-fuzz-"))
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
_CONTAINER = create_container(
    Settings(home=_HOME / "home", repo="memory"),
    clock=ManualClock(),
    keystore=SealedKeyStore(
        secrets.token_bytes(32), kdf=KdfParams(opslimit=1, memlimit=64 * 1024), allow_weak_kdf=True
    ),
)
_APP = create_app(_CONTAINER)


async def _sign_in() -> str:
    issued = await _CONTAINER.auth().create_client("Fuzz")
    await _CONTAINER.wallets().provision_platform(issued.client.client_id)
    token = await _CONTAINER.auth().authenticate(issued.client.client_id, issued.api_key, "fuzz")
    return token.token


_TOKEN = asyncio.run(_sign_in())
schema = schemathesis.openapi.from_asgi("/schema/openapi.json", _APP)


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
BUSINESS_RULES = (
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
        "Invalid (BITCOIN|ETHEREUM|BSC|TRON|POLYGON|SOLANA) address: ",
        "an address's form follows the chain of the asset named in the same body and carries "
        "a checksum (base58check, bech32, EIP-55) that no pattern can verify",
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
        ("/send",),
        "Invalid password$",
        "a wrong wallet password on BITCOIN is a 400 (the spec); which password is right is "
        "the keystore's secret",
    ),
    BusinessRule(
        400,
        ("/sell", "/order"),
        "fiatAmount is too small to buy or sell any ",
        "whether a fiat amount buys anything depends on the price at the time",
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


def accepted_unless_a_business_rule(ctx: Any, response: Any, case: Any) -> bool | None:
    """`positive_data_acceptance`, except for the refusals `BUSINESS_RULES` explain."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        message = str(response.json().get("message", ""))
        if any(r.explains(case.path, response.status_code, message) for r in BUSINESS_RULES):
            return None
        raise


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_operation_keeps_its_schema(case: Any) -> None:
    headers = {} if case.path == "/auth" else {"Authorization": f"Bearer {_TOKEN}"}
    # A documented 5xx is an answer, not a crash: the platform endpoints answer 503 for the
    # assets flagged on them (42, 51, 61), as the contract says. Every status must still be
    # documented (status_code_conformance); a 500 must never happen.
    response = case.call_and_validate(
        headers=headers,
        excluded_checks=[positive_data_acceptance, not_a_server_error],
        additional_checks=[accepted_unless_a_business_rule],
    )
    assert response.status_code != 500, response.text
