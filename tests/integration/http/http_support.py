"""Helpers of the HTTP tests (imported by the test modules; fixtures are in conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient

from walletcore.container import Container
from walletcore.services.auth import IssuedKey

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

        repo, now, user_id = self.container.repo(), self.container.clock().now(), new_id()
        await repo.add_user_wallet(
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
