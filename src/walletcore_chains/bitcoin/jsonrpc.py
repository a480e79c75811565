"""A small async JSON-RPC client for Bitcoin Core (httpx: one call, or a batch of calls in
one request), and HTTP failures read into the backends' errors. Credentials come from the
URL's user info and are sent as HTTP basic auth; the URL never reaches a log, a repr or an
error message."""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from walletcore_chains.bitcoin.backend import (
    BackendError,
    BackendTimeout,
    BackendUnreachable,
)


class RpcError(BackendError):
    """The node answered with a JSON-RPC error: `code` and the node's `message`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"JSON-RPC error {code}")
        self.code = code
        self.message = message


def http_failure(exc: httpx.HTTPError) -> Exception:
    """An httpx failure as a backend error: never reached the server, or timed out."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.UnsupportedProtocol):
        return BackendUnreachable(type(exc).__name__)
    if isinstance(exc, httpx.TimeoutException):
        return BackendTimeout(type(exc).__name__)
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return BackendTimeout(type(exc).__name__)  # the request may have left: unknown
    return BackendError(type(exc).__name__)


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without its user info, and the user info as basic-auth credentials."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    from urllib.parse import unquote

    return clean, (unquote(parts.username), unquote(parts.password or ""))


class JsonRpc:
    def __init__(self, url: str, *, timeout: float) -> None:
        base, auth = split_credentials(url)
        self._client = httpx.AsyncClient(
            base_url=base.rstrip("/"),
            auth=auth,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            headers={"content-type": "application/json"},
        )
        self._ids = 0

    def __repr__(self) -> str:
        return "JsonRpc(<url hidden>)"

    async def call(
        self, method: str, *params: Any, path: str = "", timeout: float | None = None
    ) -> Any:
        self._ids += 1
        body = {"jsonrpc": "1.0", "id": self._ids, "method": method, "params": list(params)}
        try:
            options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
            response = await self._client.post(path or "/", content=json.dumps(body), **options)
        except httpx.HTTPError as exc:
            raise http_failure(exc) from None
        if response.status_code in (401, 403):
            raise BackendError("the node refused the RPC credentials")
        try:
            answer = json.loads(response.content, parse_float=Decimal)
        except ValueError:
            raise BackendError(f"the node answered HTTP {response.status_code}") from None
        if not isinstance(answer, dict):
            raise BackendError("the node answered nonsense")
        error = answer.get("error")
        if error:
            code = int(error.get("code", 0)) if isinstance(error, dict) else 0
            message = str(error.get("message", "")) if isinstance(error, dict) else str(error)
            raise RpcError(code, message)
        return answer.get("result")

    async def batch(
        self, calls: Sequence[tuple[str, Sequence[Any]]], *, path: str = ""
    ) -> list[Any]:
        """Several calls in one HTTP request (a JSON-RPC batch): each call's result, or the
        `RpcError` the node answered it with, in the order of `calls`. A failure of the
        request itself raises, as `call`'s does."""
        if not calls:
            return []
        first = self._ids + 1
        self._ids += len(calls)
        body = [
            {"jsonrpc": "1.0", "id": first + i, "method": method, "params": list(params)}
            for i, (method, params) in enumerate(calls)
        ]
        try:
            response = await self._client.post(path or "/", content=json.dumps(body))
        except httpx.HTTPError as exc:
            raise http_failure(exc) from None
        if response.status_code in (401, 403):
            raise BackendError("the node refused the RPC credentials")
        try:
            answers = json.loads(response.content, parse_float=Decimal)
        except ValueError:
            raise BackendError(f"the node answered HTTP {response.status_code}") from None
        if not isinstance(answers, list) or len(answers) != len(calls):
            raise BackendError("the node answered nonsense")
        results: dict[int, Any] = {}
        for answer in answers:
            if not isinstance(answer, dict) or not isinstance(answer.get("id"), int):
                raise BackendError("the node answered nonsense")
            error = answer.get("error")
            if error:
                code = int(error.get("code", 0)) if isinstance(error, dict) else 0
                message = str(error.get("message", "")) if isinstance(error, dict) else str(error)
                results[answer["id"]] = RpcError(code, message)
            else:
                results[answer["id"]] = answer.get("result")
        if set(results) != set(range(first, first + len(calls))):
            raise BackendError("the node answered nonsense")
        return [results[first + i] for i in range(len(calls))]

    async def aclose(self) -> None:
        await self._client.aclose()


def sats(btc: Any) -> int:
    """BTC as a decimal (never a float) in satoshis."""
    return int((Decimal(str(btc)) * 100_000_000).to_integral_value())


__all__ = ["JsonRpc", "RpcError", "http_failure", "sats", "split_credentials"]
