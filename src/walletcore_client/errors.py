"""The errors of the walletcore client: one class per status the contract uses.

`message` is the service's message, which the contract keeps safe to show; no error of
this package ever carries a token, an api key or a wallet password. `retry_safe` says
whether sending the same call again cannot do harm (for a send: with the same
`X-Request-Id`); it is decided by the contract's rules for the operation, the status and
the message, and the client's own retries follow the same rules.
"""

from __future__ import annotations


class WalletcoreError(Exception):
    """Any failure of a call: an error answer of the service, or no answer at all."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        retry_safe: bool = False,
        operation: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        #: the HTTP status, None when no answer arrived
        self.status = status
        #: the `requestId` of the answer (for a send: the `X-Request-Id` the client sent)
        self.request_id = request_id
        #: whether sending the same call again is harmless (see the module's docstring)
        self.retry_safe = retry_safe
        #: the operation's path, e.g. `/send`
        self.operation = operation

    def __str__(self) -> str:
        head = f"{self.status} {self.message}" if self.status is not None else self.message
        where = f" on {self.operation}" if self.operation else ""
        rid = f" (requestId {self.request_id})" if self.request_id else ""
        return f"{head}{where}{rid}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(message={self.message!r}, status={self.status!r}, "
            f"request_id={self.request_id!r}, retry_safe={self.retry_safe!r})"
        )


class BadRequest(WalletcoreError):
    """400: the request is invalid; fix it (a Bitcoin wallet's wrong password is one)."""


class UnknownCursor(BadRequest):
    """400 `Unknown cursor` / `Invalid cursor` on `/events`: a cursor this feed never gave."""


class Unauthorized(WalletcoreError):
    """401: read the subclass (the two meanings of 401)."""


class TokenExpired(Unauthorized):
    """401 `Missing or expired token`: the client authenticates again and replays once;
    raised only when the replay was refused too (then it is a credential problem)."""


class InvalidCredentials(Unauthorized):
    """401 `Invalid credentials` (wrong client id or api key on `/auth`; wrong wallet
    password on `/send`, `/extend`) or `Invalid password` (Solana): stop, never retry."""


class Forbidden(WalletcoreError):
    """403: the asset is not enabled for the api client, or a withdrawal policy refused
    the send (the message names the rule). Permanent."""


class NotFound(WalletcoreError):
    """404: no such user, trade for this user, or platform wallet."""


class Conflict(WalletcoreError):
    """409: the trade is not in a state for this action, or a send with this
    `X-Request-Id` is still in progress (then retry with the same id)."""


class CursorExpired(WalletcoreError):
    """410 on `/events`: the cursor's events are no longer kept; read the feed from its
    start (no cursor) and reconcile with the contract's endpoints."""


class IdempotencyKeyReused(WalletcoreError):
    """422: this `X-Request-Id` was already used with a different request; a client bug."""


class InternalError(WalletcoreError):
    """500: the outcome of a state-changing call is unknown."""


class BadGateway(WalletcoreError):
    """502: no usable price, or the venue rejected the order (`OrderRejected`)."""


class OrderRejected(BadGateway):
    """502 `Order rejected: ...` on `/trade/approve`: nothing traded, the trade is
    `failed`; request a new quote."""


class ServiceUnavailable(WalletcoreError):
    """503: trading or the asset is unavailable; no tight-loop retry."""


class GatewayTimeout(WalletcoreError):
    """504: on `/sell` and `/order` nothing was quoted (retry with back-off); on
    `/trade/approve` the outcome is unknown: poll the trade (`wait_for_trade`), never
    approve again."""


class TransportError(WalletcoreError):
    """No answer: the connection failed, was cut, or timed out. `retry_safe` says whether
    the request could have reached the service and done something."""


class WaitTimeout(WalletcoreError):
    """A `wait_for_*` helper gave up before the awaited state was reached."""


BY_STATUS: dict[int, type[WalletcoreError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: CursorExpired,
    422: IdempotencyKeyReused,
    500: InternalError,
    502: BadGateway,
    503: ServiceUnavailable,
    504: GatewayTimeout,
}
