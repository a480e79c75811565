"""The served OpenAPI document tells the truth: schemathesis fuzzes every operation.

Checks: no 500, every status documented, every body and header matches its schema,
schema-invalid input is refused (`negative_data_rejection`), and schema-valid input is
accepted (`positive_data_acceptance`) unless a business rule no OpenAPI schema can state
refuses it: `accepted_unless_a_business_rule` with the `BUSINESS_RULES` of
tests/schema_business_rules.py, each with its reason, the list the real-server run
(tests/integration/hardening/test_schema_fuzz_real_server.py) judges by too.

The app is built when this module is collected (schemathesis parametrizes from the schema
it serves; its fixture loader does not work with this pytest), in a temporary home. Its api
client has a platform wallet (the desk) and one user whose wallet holds sandbox ETH, with
trades in each state a trade operation answers differently: an open sell and an open buy
(`/trade/approve`, with or without `password`), a completed sell whose coins wait for the
password (`/trade/collect`), a completed buy (delivered). A generated `/trade*` case whose
`tradeId` is well formed is sent with one of those trades (and its user) in turn, so the
fuzz reaches the approval, the collection and the settlement, not only `404`.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import re
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schema_business_rules import accepted_unless_a_business_rule
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import positive_data_acceptance

from walletcore import Caller
from walletcore.clock import ManualClock
from walletcore.container import create_container
from walletcore.domain.assets import Chain
from walletcore.settings import Settings
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams
from walletcore_litestar import create_app
from walletcore_sandbox.faucet import fund

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


#: (user id, trade id) of the trades the `/trade*` cases are sent with, in turn
_TRADES: list[tuple[str, str]] = []
_TURN = itertools.count()
_TRADE_PATHS = ("/trade", "/trade/approve", "/trade/cancel", "/trade/collect")
_HEX_ID = re.compile("[0-9a-fA-F]{24}")


async def _trades(caller: Caller) -> None:
    """A user with sandbox ETH, and its trades in the states the module docstring names."""
    created = await _CONTAINER.wallets().create(caller, password="fuzz wallet password")
    await fund(
        _CONTAINER.settings(),
        _CONTAINER.gateways(),
        _CONTAINER.catalog(),
        chain="ETHEREUM",
        address=created.addresses[Chain.ETHEREUM],
        asset_id=2,
        amount="5",
    )
    trading, user = _CONTAINER.trading(), str(created.user_id)
    quote = {"user_id": user, "asset_id": 2, "fiat": "USD", "crypto_amount": "0.01"}
    for side, approved in (("sell", False), ("order", False), ("sell", True), ("order", True)):
        trade = await getattr(trading, side)(caller, **quote)
        if approved:
            await trading.approve(caller, user_id=user, trade_id=trade.trade_id)
        _TRADES.append((user, trade.trade_id))


async def _sign_in() -> str:
    issued = await _CONTAINER.auth().create_client("Fuzz")
    await _CONTAINER.wallets().provision_platform(issued.client.client_id)
    await _trades(Caller(issued.client, "fuzz-setup"))
    token = await _CONTAINER.auth().authenticate(issued.client.client_id, issued.api_key, "fuzz")
    return token.token


_TOKEN = asyncio.run(_sign_in())
schema = schemathesis.openapi.from_asgi("/schema/openapi.json", _APP)


def _with_a_trade(case: Any) -> None:
    """A `/trade*` case with a well-formed `tradeId` gets one of the module's trades (and
    its user): still as well formed, or as malformed, as generated."""
    body = case.body
    if case.path not in _TRADE_PATHS or not isinstance(body, dict):
        return
    trade_id = body.get("tradeId")
    if not (isinstance(trade_id, str) and _HEX_ID.fullmatch(trade_id)):
        return
    user_id = body.get("userId")
    if user_id is not None and not (isinstance(user_id, str) and _HEX_ID.fullmatch(user_id)):
        return  # a malformed userId stays with what it was generated with
    # a cancellation is sent the completed trades only: the open ones stay to approve
    trades = _TRADES[2:] if case.path == "/trade/cancel" else _TRADES
    user, trade = trades[next(_TURN) % len(trades)]
    body["tradeId"] = trade
    if "userId" in body:
        body["userId"] = user
    headers = case.headers or {}
    if _HEX_ID.fullmatch(str(headers.get("X-USER-ID", ""))):  # the header wins
        headers["X-USER-ID"] = user


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_operation_keeps_its_schema(case: Any) -> None:
    _with_a_trade(case)
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
