"""`Caller.request_id_given`: set only when the client sent an X-Request-Id (the binding
generates one otherwise), so only a sent one is an idempotency key (`/create`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from walletcore.domain.clients import ApiClient
from walletcore.domain.ids import new_id
from walletcore_litestar.envelope import REQUEST_ID_KEY
from walletcore_litestar.security import CLIENT_KEY, caller_of


def _connection(headers: list[tuple[bytes, bytes]], request_id: str) -> Any:
    client = ApiClient(new_id(), "Acme", "00" * 32)
    scope = {"headers": headers, "state": {CLIENT_KEY: client, REQUEST_ID_KEY: request_id}}
    return SimpleNamespace(scope=scope)


@pytest.mark.parametrize(
    ("headers", "given"),
    [
        ([(b"x-request-id", b"create-1")], True),
        ([], False),
        ([(b"x-request-id", b"")], False),  # empty: the middleware generated one
        ([(b"x-user-id", b"abc")], False),
    ],
)
def test_the_caller_knows_whether_the_request_id_was_sent(
    headers: list[tuple[bytes, bytes]], given: bool
) -> None:
    caller = caller_of(_connection(headers, "create-1" if given else new_id()))
    assert caller.request_id_given is given
    if given:
        assert caller.request_id == "create-1"
