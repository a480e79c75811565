"""The served OpenAPI document tells the truth: schemathesis fuzzes every operation.

Checks: no 500, every status documented, every body and header matches its schema,
schema-invalid input is refused (`negative_data_rejection`), and schema-valid input is
accepted (`positive_data_acceptance`) unless a business rule no OpenAPI schema can state
refuses it: `accepted_unless_a_business_rule` with the `BUSINESS_RULES` of
tests/schema_business_rules.py, each with its reason, the list the real-server run
(tests/integration/hardening/test_schema_fuzz_real_server.py) judges by too.

The app is built when this module is collected (schemathesis parametrizes from the schema
it serves; its fixture loader does not work with this pytest), in a temporary home.
"""

from __future__ import annotations

import asyncio
import atexit
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

from walletcore.clock import ManualClock
from walletcore.container import create_container
from walletcore.settings import Settings
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams
from walletcore_litestar import create_app

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
