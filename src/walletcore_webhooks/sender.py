"""`HttpxSender`: posts one Standard Webhooks v1 message, signed with `standardwebhooks`.

Rules:
- Headers: `webhook-id` (the event's id), `webhook-timestamp` (Unix seconds),
  `webhook-signature` (`v1,<base64>` per live secret, space separated: during a rotation
  the receiver's verifier accepts either), `content-type: application/json`.
- Timeouts: 5 s to connect, 15 s in all (resolution, connection, TLS, request and
  answer). No redirect is followed (a 3xx is a failed attempt, like a 5xx); at most
  `RESPONSE_CAP` bytes of the answer are read, then the connection is dropped.
- The target is checked at each connection, not only when the URL was set (DNS
  rebinding): the host is resolved here, every address it resolves to is held to the URL
  rules (`walletcore.domain.webhooks.address_refusal`: no loopback, private, link-local,
  multicast, reserved or unspecified address, IPv4 inside IPv6 included) unless private
  targets are allowed, and the connection goes to an address so checked (the name still
  drives TLS: SNI and the certificate check). A refused target is the outcome
  `forbidden_address`: nothing is sent.
- No proxy from the environment (a proxy would connect where this check cannot see).
- Never raises for what the network or the endpoint did; never logs the body, a secret or
  the URL's path and query.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import httpcore
import httpx
from standardwebhooks.webhooks import Webhook

from walletcore.domain.webhooks import DeliveryError, WebhookSecret, address_refusal
from walletcore.ports.webhooks import SendOutcome, WebhookMessage, WebhookSender

CONNECT_TIMEOUT = 5.0
TOTAL_TIMEOUT = 15.0
#: The most of an answer read (then the connection is dropped).
RESPONSE_CAP = 4096
USER_AGENT = "walletcore-webhooks/1"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
#: `(host, port) -> the addresses it resolves to`: the system's resolver by default.
Resolver = Callable[[str, int], Awaitable[list[str]]]


class TargetRefused(Exception):
    """The host resolved to an address the URL rules refuse."""


class HostUnresolved(Exception):
    """The host did not resolve."""


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, resolving each host itself and connecting only to
    addresses the URL rules allow (module rules)."""

    def __init__(
        self,
        *,
        allow_private: bool,
        resolver: Resolver | None = None,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ):
        self.allow_private = allow_private
        self._resolver = resolver or system_resolver
        self._inner = inner or httpcore.AnyIOBackend()

    async def resolve(self, host: str, port: int) -> list[Address]:
        """Every address of `host`, each allowed, in the resolver's order."""
        try:
            found: list[Address] = [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            try:
                names = await self._resolver(host, port)
                found = list(dict.fromkeys(ipaddress.ip_address(n.split("%")[0]) for n in names))
            except (OSError, UnicodeError, ValueError):
                raise HostUnresolved() from None
            if not found:
                raise HostUnresolved()
        if not self.allow_private:
            for address in found:
                if address_refusal(address) is not None:
                    raise TargetRefused()
        return found

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        failure: Exception | None = None
        for address in await self.resolve(host, port):
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("webhooks connect over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system's resolver gives `host` (`getaddrinfo`)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool on `CheckedBackend`. (httpx passes no
    network backend through: its pool, `_pool`, is built again here with one.)"""

    def __init__(
        self,
        *,
        allow_private: bool,
        ssl_context: ssl.SSLContext | None = None,
        resolver: Resolver | None = None,
    ):
        super().__init__(trust_env=False)
        self.backend = CheckedBackend(allow_private=allow_private, resolver=resolver)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(trust_env=False),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=self.backend,
        )


def signature_header(message: WebhookMessage, secrets: Sequence[WebhookSecret]) -> str:
    """`webhook-signature`: one `v1,<base64>` per secret, space separated."""
    return " ".join(
        Webhook(secret.raw).sign(message.msg_id, message.timestamp, message.body)
        for secret in secrets
    )


def signed_headers(message: WebhookMessage, secrets: Sequence[WebhookSecret]) -> dict[str, str]:
    if not secrets:
        raise ValueError("a webhook is signed with at least one secret")
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": message.msg_id,
        "webhook-timestamp": str(math.floor(message.timestamp.timestamp())),
        "webhook-signature": signature_header(message, secrets),
    }


class HttpxSender(WebhookSender):
    """The `WebhookSender` on httpx (module rules). `ssl_context` (the CAs trusted) and
    `resolver`: tests, and deployments with CAs or a resolver of their own."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        connect_timeout: float = CONNECT_TIMEOUT,
        total_timeout: float = TOTAL_TIMEOUT,
        ssl_context: ssl.SSLContext | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.total_timeout = total_timeout
        transport = CheckedTransport(
            allow_private=allow_private, ssl_context=ssl_context, resolver=resolver
        )
        self._client = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(total_timeout, connect=connect_timeout),
            follow_redirects=False,
            trust_env=False,
        )

    def __repr__(self) -> str:
        return f"HttpxSender(allow_private={self.allow_private})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def post(
        self, url: str, message: WebhookMessage, secrets: Sequence[WebhookSecret]
    ) -> SendOutcome:
        started = time.monotonic()

        def outcome(status: int | None, error: DeliveryError | None) -> SendOutcome:
            return SendOutcome(status, error, time.monotonic() - started)

        headers = signed_headers(message, secrets)
        try:
            async with asyncio.timeout(self.total_timeout):
                request = self._client.build_request(
                    "POST", url, content=message.body, headers=headers
                )
                response = await self._client.send(request, stream=True)
                try:
                    await _read_capped(response)
                finally:
                    await response.aclose()
                return outcome(response.status_code, None)
        except (TimeoutError, httpx.TimeoutException):
            return outcome(None, DeliveryError.TIMEOUT)
        except TargetRefused:
            return outcome(None, DeliveryError.FORBIDDEN_ADDRESS)
        except HostUnresolved:
            return outcome(None, DeliveryError.DNS)
        except httpx.ConnectError as exc:
            return outcome(None, DeliveryError.TLS if _is_tls(exc) else DeliveryError.CONNECT)
        except (httpx.RemoteProtocolError, httpx.LocalProtocolError, httpx.DecodingError):
            return outcome(None, DeliveryError.PROTOCOL)
        except (httpx.ReadError, httpx.WriteError, ConnectionError):
            return outcome(None, DeliveryError.CONNECT)
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError):
            return outcome(None, DeliveryError.OTHER)


async def _read_capped(response: httpx.Response) -> None:
    """Read at most `RESPONSE_CAP` bytes of the answer (and nothing of it is kept)."""
    read = 0
    async for chunk in response.aiter_raw(1024):
        read += len(chunk)
        if read >= RESPONSE_CAP:
            return


def _is_tls(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def build(*, allow_private: bool = False, **_: Any) -> HttpxSender:
    """Entry point `walletcore.webhook_senders: httpx`."""
    return HttpxSender(allow_private=allow_private)


__all__ = [
    "CONNECT_TIMEOUT",
    "RESPONSE_CAP",
    "TOTAL_TIMEOUT",
    "CheckedBackend",
    "CheckedTransport",
    "HttpxSender",
    "build",
    "signed_headers",
]
