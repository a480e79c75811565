"""Helpers of the HTTP tests (imported by the test modules; fixtures are in conftest.py).

`judge_responses` makes a test client hold every response it receives to the served
OpenAPI document: the status must be documented for the operation, and the body and the
`X-Request-Id` header must validate against the documented schemas (JSON Schema 2020-12,
as OpenAPI 3.1 says). A mismatch fails the test that made the request, so every HTTP test
also proves the document true.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import jsonschema_rs
from litestar import Litestar
from litestar.testing import AsyncTestClient, TestClient

from walletcore.container import Container
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.services.auth import IssuedKey
from walletcore_sql.engine import sqlite_url

if TYPE_CHECKING:
    from walletcore_chains.testing.bitcoind import Bitcoind

PASSWORD = "correct horse battery"


@dataclass
class Api:
    """A signed-in api client: its key, its token, and helpers to call the API."""

    http: AsyncTestClient[Litestar]
    container: Container
    issued: IssuedKey
    token: str

    @property
    def client_id(self) -> str:
        return self.issued.client.client_id

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def post(self, path: str, body: Any = None, **headers: str) -> Any:
        merged = {**self.headers, **{k.replace("_", "-"): v for k, v in headers.items()}}
        if body is None:
            return await self.http.post(path, headers=merged)
        return await self.http.post(path, json=body, headers=merged)

    async def new_user(self) -> str:
        from walletcore.domain.clients import User
        from walletcore.domain.ids import new_id
        from walletcore.domain.wallet import WalletOwner, WalletRecord

        now, user_id = self.container.clock().now(), new_id()
        async with self.container.storage().write() as unit:
            await unit.wallets.add_user(
                User(user_id=user_id, client_id=self.client_id, created_at=now),
                WalletRecord(self.client_id, WalletOwner.USER, user_id, b"", {}, now),
            )
        return user_id


async def sign_in(http: AsyncTestClient[Litestar], container: Container, **client: Any) -> Api:
    issued = await container.auth().create_client(client.pop("name", "Acme Pay"), **client)
    answer = await http.post(
        "/auth", headers={"x-client-id": issued.client.client_id, "x-api-key": issued.api_key}
    )
    assert answer.status_code == 200, answer.text
    return Api(http, container, issued, answer.json()["result"]["token"])


def assert_error(response: Any, status: int, message: str | None = None) -> dict[str, Any]:
    """An error envelope with this status (and message, when given)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"message", "error", "requestId"}, body
    assert body["error"] == str(status)
    assert body["requestId"] == response.headers["x-request-id"]
    if message is not None:
        assert body["message"] == message
    return body  # type: ignore[no-any-return]


def assert_ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"result", "requestId"}, body
    assert body["requestId"] == response.headers["x-request-id"]
    return body["result"]


# -- the served document as the judge of every response ------------------------------------
DOCUMENT_PATH = "/schema/openapi.json"
#: An undocumented path or method is answered with the error envelope (404 or 405).
_UNDOCUMENTED: dict[str, Any] = {
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}},
}


class DocumentMismatch(AssertionError):
    """A response the served OpenAPI document does not describe."""


@dataclass
class ServedDocument:
    """The OpenAPI document an app serves, compiled to judge its responses."""

    document: dict[str, Any]
    _validators: dict[str, Any] = field(default_factory=dict)

    def validator(self, schema: dict[str, Any]) -> Any:
        """A JSON Schema 2020-12 validator of `schema`, whose `$ref`s point into the document."""
        key = json.dumps(schema, sort_keys=True)
        found = self._validators.get(key)
        if found is None:
            rooted = {**schema, "components": self.document.get("components", {})}
            found = self._validators[key] = jsonschema_rs.Draft202012Validator(rooted)
        return found

    def response_spec(self, method: str, path: str, status: int) -> dict[str, Any]:
        operation = self.document["paths"].get(path, {}).get(method.lower())
        if operation is None:
            if status not in (404, 405):
                raise DocumentMismatch(f"{method} {path}: undocumented, answered {status}")
            return _UNDOCUMENTED
        responses: dict[str, Any] = operation["responses"]
        if str(status) not in responses:
            raise DocumentMismatch(
                f"{method} {path}: status {status} is not documented (only {sorted(responses)})"
            )
        return responses[str(status)]  # type: ignore[no-any-return]

    def check(self, method: str, path: str, response: httpx.Response) -> None:
        spec = self.response_spec(method, path, response.status_code)
        where = f"{method} {path} -> {response.status_code}"
        if not response.headers.get("content-type", "").startswith("application/json"):
            raise DocumentMismatch(f"{where}: not JSON ({response.headers.get('content-type')})")
        schema = spec["content"]["application/json"]["schema"]
        problems = [
            f"{'/'.join(map(str, e.instance_path)) or '(body)'}: {e.message}"
            for e in self.validator(schema).iter_errors(response.json())
        ]
        if problems:
            raise DocumentMismatch(f"{where}: the body does not match its schema: {problems}")
        request_id = response.headers.get("x-request-id")
        if request_id is None:
            raise DocumentMismatch(f"{where}: no X-Request-Id header")
        header = spec.get("headers", {}).get("X-Request-Id")
        if header is not None and not self.validator(header["schema"]).is_valid(request_id):
            raise DocumentMismatch(f"{where}: X-Request-Id {request_id!r} does not match")


_COMPILED: dict[bytes, ServedDocument] = {}


def served_document(raw: bytes) -> ServedDocument:
    """One compiled judge per distinct document (every app of the suite serves the same)."""
    found = _COMPILED.get(raw)
    if found is None:
        found = _COMPILED[raw] = ServedDocument(json.loads(raw))
    return found


def _judged(request: httpx.Request) -> bool:
    return not request.url.path.startswith("/schema")


async def judge_responses(client: AsyncTestClient[Litestar]) -> AsyncTestClient[Litestar]:
    """Fail on any response of `client` that its app's served document does not describe."""
    fetched = await client.get(DOCUMENT_PATH)
    assert fetched.status_code == 200, fetched.text
    document = served_document(fetched.content)

    async def judge(response: httpx.Response) -> None:
        if _judged(response.request):
            await response.aread()
            document.check(response.request.method, response.request.url.path, response)

    client.event_hooks = {
        **client.event_hooks,
        "response": [*client.event_hooks["response"], judge],
    }
    return client


def judge_responses_sync(client: TestClient[Litestar]) -> TestClient[Litestar]:
    """`judge_responses` for the synchronous test client."""
    fetched = client.get(DOCUMENT_PATH)
    assert fetched.status_code == 200, fetched.text
    document = served_document(fetched.content)

    def judge(response: httpx.Response) -> None:
        if _judged(response.request):
            response.read()
            document.check(response.request.method, response.request.url.path, response)

    client.event_hooks = {
        **client.event_hooks,
        "response": [*client.event_hooks["response"], judge],
    }
    return client


def rpc_env(home: Path, *on_rpc: Chain) -> dict[str, str]:
    """The settings of a service on the SQL storage (SQLite under `home`) whose chains
    `on_rpc` run on their `rpc` gateways and every other chain on the sandbox; the test
    adds each chain's node settings."""
    return {
        "WALLETCORE_HOME": str(home),
        "WALLETCORE_REPO": "sql",
        "WALLETCORE_DATABASE_URL": sqlite_url(home / "walletcore.db"),
        "WALLETCORE_CHAINS": "rpc",
        **{f"WALLETCORE_CHAIN_{c.value}": "sandbox" for c in CONTRACT_CHAINS if c not in on_rpc},
    }


def regtest_bitcoind() -> Iterator[Bitcoind]:
    """A regtest bitcoind with 101 blocks mined (the first coinbase spendable), stopped
    after; the test is skipped where there is none. A module's fixture:
    `node = pytest.fixture(scope="module")(regtest_bitcoind)`."""
    import pytest

    from walletcore_chains.testing.bitcoind import Bitcoind, find_bitcoind

    binary = find_bitcoind()
    if binary is None:
        pytest.skip(
            "no bitcoind: run `python3 dev.py test` (it installs one) or set WALLETCORE_BITCOIND"
        )
    started = Bitcoind(binary).start()
    started.mine(101)
    try:
        yield started
    finally:
        started.stop()


def served_cli(capsys: Any, *argv: str) -> Any:
    """One operator command (`walletcore ...`) run in this process beside a served app:
    it must succeed; its JSON answer."""
    from walletcore_cli import main

    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def until(read: Callable[[], Any], done: Callable[[Any], bool], seconds: float = 20.0) -> Any:
    """`read()` every 0.1 s until `done` says yes of what it read, or `seconds` passed;
    what it read last (the test asserts on it)."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        found = read()
        if done(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def served_home(tmp_path: Path, monkeypatch: Any, *fast_jobs: str) -> Path:
    """A `WALLETCORE_HOME` for a served sandbox (the default storage: SQLite in it) whose
    deposit scan and the named jobs (`"FOLLOW"`, `"WEBHOOK"`: `WALLETCORE_JOBS_<NAME>_SECONDS`)
    run every 0.2 s, so a test sees them work within a second."""
    folder = tmp_path / "home"
    monkeypatch.setenv("WALLETCORE_HOME", str(folder))
    monkeypatch.delenv("WALLETCORE_REPO", raising=False)
    for job in ("DEPOSITS", *fast_jobs):
        monkeypatch.setenv(f"WALLETCORE_JOBS_{job}_SECONDS", "0.2")
    return folder
