"""Domain errors: each carries the HTTP status of the spec and a message safe for clients."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every error the core raises on purpose.

    `message` is shown to the api client verbatim, so it never carries a secret or an
    internal detail. `status` is the HTTP status the spec gives for it.
    """

    status: int = 500
    default_message: str = "Internal error"

    def __init__(self, message: str | None = None) -> None:
        self.message = message if message is not None else self.default_message
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, message={self.message!r})"


class ClientError(DomainError):
    status = 400


class ServerError(DomainError):
    status = 500


# 400 -----------------------------------------------------------------------------------
class InvalidRequest(ClientError):
    status = 400
    default_message = "Invalid request"


class UnknownAsset(InvalidRequest):
    default_message = "Unknown assetId"


class UserHeaderNotAllowed(InvalidRequest):
    default_message = "X-USER-ID is not accepted on platform endpoints"


class InsufficientFunds(InvalidRequest):
    """A send the wallet cannot pay for (amount, or the network fee); the message says how much
    is needed and of which coin."""

    default_message = "Insufficient balance"


class InvalidPasswordBadRequest(InvalidRequest):
    """Bitcoin's wrong wallet password: a 400, per the spec."""

    default_message = "Invalid password"


# 401 -----------------------------------------------------------------------------------
class Unauthorized(ClientError):
    status = 401
    default_message = "Invalid credentials"


class InvalidCredentials(Unauthorized):
    default_message = "Invalid credentials"


class MissingOrExpiredToken(Unauthorized):
    default_message = "Missing or expired token"


class InvalidPassword(Unauthorized):
    """Solana's wrong wallet password."""

    default_message = "Invalid password"


class WrongWalletPassword(InvalidCredentials):
    """Raised by a `KeyStore` when the wallet password does not open the sealed seed.

    Internal: the wallet use cases translate it with `password_error_for(description)` (the
    chain's `ChainDescription.wrong_password`), since the spec answers a wrong password
    differently per chain. Left untranslated it reads as the EVM/TRON answer,
    `401 Invalid credentials`.
    """


# 403 -----------------------------------------------------------------------------------
class AssetNotEnabled(ClientError):
    status = 403
    default_message = "Asset not enabled for this api client"


# 404 -----------------------------------------------------------------------------------
class NotFound(ClientError):
    status = 404
    default_message = "Not found"


class UserNotFound(NotFound):
    default_message = "User not found"


class TradeNotFound(NotFound):
    default_message = "Trade not found"


class PlatformWalletNotFound(NotFound):
    default_message = "No platform wallet for this api client; the operator provisions it"


class TransactionNotFound(NotFound):
    default_message = "Transaction not found for this wallet and asset"


class AddressUnknown(NotFound):
    """Bitcoin: an indexer knows no address without transactions (spec: `/balance` 404)."""

    default_message = "Address unknown to the indexer: it has no transactions yet"


class ApiClientNotFound(NotFound):
    default_message = "Api client not found"


# 409 -----------------------------------------------------------------------------------
class Conflict(ClientError):
    status = 409
    default_message = "Conflict"


class TradeNotApprovable(Conflict):
    default_message = "Trade is not in an approvable state"


class QuoteLapsed(TradeNotApprovable):
    default_message = "Quote has lapsed; request a new quote"


class TradeNotCancellable(Conflict):
    default_message = "Only an open quote can be cancelled"


class IdempotencyConflict(Conflict):
    """A request with the same X-Request-Id is still being worked (its lease is live)."""

    default_message = "A request with this X-Request-Id is still in progress"


# 422 -----------------------------------------------------------------------------------
class CursorExpired(ClientError):
    """An event feed cursor older than what the feed keeps (its retention): the events
    after it may be gone. Read from the start again (no `after`) and reconcile."""

    status = 410
    default_message = (
        "Cursor expired: the events after it are no longer kept; "
        "read the feed from its start (no after) and reconcile"
    )


class IdempotencyKeyReused(ClientError):
    """The X-Request-Id of a send was used before with a different request.

    422 as in the IETF Idempotency-Key draft: the key is fine, the payload does not match.
    """

    status = 422
    default_message = "X-Request-Id was already used with a different request"


# 5xx -----------------------------------------------------------------------------------
class PriceUnavailable(ServerError):
    status = 502
    default_message = "No usable price; retry with backoff"


class OrderRejected(ServerError):
    status = 502
    default_message = "Order rejected: the venue refused the order"

    def __init__(self, reason: str | None = None) -> None:
        self.reason = reason or "the venue refused the order"
        super().__init__(f"Order rejected: {self.reason}")


class TradingUnavailable(ServerError):
    status = 503
    default_message = "Trading is unavailable for this asset"


class AssetUnavailableOnEndpoint(ServerError):
    status = 503
    default_message = "Asset not available on this endpoint; contact the operator"


class ServiceUnavailable(ServerError):
    status = 503
    default_message = "Service temporarily unavailable; retry with backoff"


class HistoryUnavailable(ServiceUnavailable):
    """Transaction history could not be read now (transient)."""

    default_message = "Transaction history could not be read now; retry with backoff"


class TransferRejected(ServerError):
    """The network refused a signed transfer outright: nothing was sent."""

    status = 502
    default_message = "Transfer rejected by the network; nothing was sent"


class BroadcastTimeout(ServerError):
    """A broadcast whose outcome is unknown: the signed transfer is kept, and a retry with
    the same X-Request-Id sends the same transaction again (never a second one)."""

    status = 504
    default_message = (
        "Broadcast outcome unknown; retry with the same X-Request-Id: the same signed "
        "transaction is sent again, never a new one"
    )


class PricingTimeout(ServerError):
    status = 504
    default_message = "Pricing timed out; nothing was quoted; retry with backoff"


class VenueTimeout(ServerError):
    status = 504
    default_message = "Order outcome unknown; the trade stays executing; poll /trade"


# storage (raised by Storage adapters in place of their driver's exceptions) -------------
class StorageError(ServerError):
    """The storage failed in a way a retry will not fix (a constraint, a bug, bad data)."""

    default_message = "Internal error"


class StorageUnavailable(ServiceUnavailable):
    """The storage cannot be reached now (connection refused or lost, pool exhausted)."""

    default_message = "Storage temporarily unavailable; retry with backoff"


class InvalidSendTransition(ServerError):
    """A send record asked to move to a state its recovery points do not allow (a bug)."""

    default_message = "Internal error"


# chains (raised by ChainGateway adapters in place of their RPC library's exceptions) -----
class InsufficientGas(InvalidRequest):
    """The gas limit cannot cover the transfer, or the fee payer's native coin cannot pay
    it: the network refused it; nothing was sent."""

    default_message = "Insufficient gas: the network refused the transfer's gas; nothing was sent"


class NodeUnavailable(ServiceUnavailable):
    """The chain's node cannot be reached now; nothing was sent."""

    default_message = "Chain node unreachable; nothing was sent; retry with backoff"


class AddressBusy(ServiceUnavailable):
    """Another send from the same address held its turn (its nonce) for too long; nothing
    was sent."""

    default_message = (
        "Another send from this address is still in progress; nothing was sent; retry with backoff"
    )
