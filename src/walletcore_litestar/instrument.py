"""Hooks an `Observer` onto the container's adapters: the venue, each chain's gateway and the
nonce leases, so their failures and waits are measured without the core knowing metrics.

The adapters are hooked in place (their port methods wrapped on the instance), not
replaced by proxies: the services already hold them, and callers that ask what an adapter
is (`isinstance(gateway, SandboxGateway)`: the faucet, the CLI, tests) still get the answer.
An adapter whose instance refuses new attributes (`__slots__`) is left unmeasured.

What counts:
- venue: any exception of `execute`, `status`, `cancel`; kind `rejected` (`OrderRejected`),
  `timeout` (`VenueTimeout`, `PricingTimeout`, `TimeoutError`), else `unavailable`;
- node: a gateway call that failed on the node's side: a domain error with a 5xx status
  (`TransferRejected` is `rejected`, a 504 or `TimeoutError` is `timeout`) or any other
  exception (`unavailable`); the caller's own errors (4xx: a bad address, too little
  balance) are not node errors. A gateway calling its own methods counts once;
- sends: `prepare` that built a transaction is a send started; `broadcast` ends it
  `accepted`, `refused` (a 4xx or `TransferRejected`: nothing sent) or `unknown`;
- nonce leases: the time each `acquire` took, whatever it ended with;
- `/auth` refusals, by reason (the auth service tells its `observer`);
- the jobs run in this process (`WALLETCORE_JOBS=inprocess`): the sends still pending on
  chain after each run of `follow_sends`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from walletcore.container import Container
from walletcore.domain.errors import (
    AssetUnavailableOnEndpoint,
    DomainError,
    OrderRejected,
    PricingTimeout,
    TransferRejected,
    VenueTimeout,
)
from walletcore.jobs import JobsMode
from walletcore.ports import Observer

log = logging.getLogger("walletcore.http")

#: Marks a wrapped method, so hooking twice (two apps on one container) measures once.
_HOOKED = "_walletcore_observed"
VENUE_OPERATIONS = ("execute", "status", "cancel")
GATEWAY_OPERATIONS = ("balance", "history", "lookup", "fee", "prepare", "broadcast")
#: The gateway call in progress in this task: inner calls of the same gateway pass through.
_in_gateway: ContextVar[object | None] = ContextVar("walletcore_in_gateway", default=None)

Method = Callable[..., Awaitable[Any]]


def instrument(container: Container, observer: Observer) -> None:
    """Hook `observer` onto the venue, the gateways, the nonce leases and the auth service
    of `container`."""
    venue = container.venue()
    for operation in VENUE_OPERATIONS:
        _hook(venue, operation, _venue_call, operation, observer)
    for chain, gateway in container.gateways().items():
        for operation in GATEWAY_OPERATIONS:
            _hook(gateway, operation, _gateway_call, gateway, chain.value, operation, observer)
    container.auth().observer = observer  # refused /auth, by reason
    if container.jobs_mode() is JobsMode.INPROCESS:  # this process runs the follow job
        container.jobs().observer = observer
    try:
        leases = container.nonce_leases()
    except Exception as exc:  # noqa: BLE001 - a storage without leases: nothing to measure
        log.info("nonce lease waits are not measured (%s)", type(exc).__name__)
        return
    _hook(leases, "acquire", _lease_call, observer)


def _hook(target: object, name: str, wrap: Callable[..., Method], *args: Any) -> None:
    """Replace `target.name` on the instance by `wrap(the method, *args)`."""
    method = getattr(target, name, None)
    if method is None or getattr(method, _HOOKED, False):
        return
    wrapped = functools.wraps(method)(wrap(method, *args))
    setattr(wrapped, _HOOKED, True)
    try:
        setattr(target, name, wrapped)
    except (AttributeError, TypeError):
        log.info("%s.%s is not measured (no new attributes)", type(target).__name__, name)


def venue_error_kind(exc: BaseException) -> str:
    if isinstance(exc, OrderRejected):
        return "rejected"
    if isinstance(exc, VenueTimeout | PricingTimeout | TimeoutError):
        return "timeout"
    return "unavailable"


def node_error_kind(exc: BaseException) -> str | None:
    """The kind of a node error, or None when the failure is the caller's (a 4xx)."""
    if isinstance(exc, TransferRejected):
        return "rejected"
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, DomainError):
        if exc.status < 500 or isinstance(exc, AssetUnavailableOnEndpoint):
            return None  # the caller's input, or this deployment's configuration
        return "timeout" if exc.status == 504 else "unavailable"
    return "unavailable"


def _venue_call(method: Method, operation: str, observer: Observer) -> Method:
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except Exception as exc:
            observer.venue_error(operation, venue_error_kind(exc))
            raise

    return call


def _gateway_call(
    method: Method, gateway: object, chain: str, operation: str, observer: Observer
) -> Method:
    async def call(*args: Any, **kwargs: Any) -> Any:
        if _in_gateway.get() is gateway:  # the gateway's own inner call: counted outside
            return await method(*args, **kwargs)
        token = _in_gateway.set(gateway)
        try:
            found = await method(*args, **kwargs)
        except Exception as exc:
            kind = node_error_kind(exc)
            if kind is not None:
                observer.node_error(chain, operation, kind)
            if operation == "broadcast":
                refused = kind == "rejected" or kind is None
                observer.send_broadcast(chain, "refused" if refused else "unknown")
            raise
        finally:
            _in_gateway.reset(token)
        if operation == "prepare":
            observer.send_started(chain)
        elif operation == "broadcast":
            observer.send_broadcast(chain, "accepted")
        return found

    return call


def _lease_call(method: Method, observer: Observer) -> Method:
    async def call(chain: str, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await method(chain, *args, **kwargs)
        finally:
            observer.nonce_lease_wait(chain, time.perf_counter() - started)

    return call


__all__ = ["instrument", "node_error_kind", "venue_error_kind"]
