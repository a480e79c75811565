"""A TRON node's refusals and failures read into domain errors (docs/tron.md, "Errors").

A broadcast answers `{"result": false, "code": ..., "message": ...}` (java-tron's
`Return.response_code`; the message is UTF-8 on `broadcasthex`, hex elsewhere). The node's
own words never reach the client: only the code (and a few known phrases) decide.
"""

from __future__ import annotations

from typing import Any

from walletcore.domain.errors import (
    DomainError,
    InsufficientFunds,
    InsufficientGas,
    NodeUnavailable,
    TransferRejected,
)

#: the transaction is known already: it counts as sent
DUPLICATE = "DUP_TRANSACTION_ERROR"
EXPIRED = "TRANSACTION_EXPIRATION_ERROR"


class AlreadyKnown(Exception):
    """The node has the transaction (DUP_TRANSACTION_ERROR): sent."""


class Expired(Exception):
    """The node says the transaction expired: sent only if it landed before."""


def message_of(answer: dict[str, Any]) -> str:
    text = str(answer.get("message", ""))
    try:
        return bytes.fromhex(text).decode()
    except ValueError:
        return text


def is_unreachable(exc: BaseException) -> bool:
    """The request never left: connection refused, DNS failure, connect timeout."""
    import httpx

    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | ConnectionRefusedError)


def read_error(exc: BaseException) -> DomainError:
    """A failed read: 503 either way (unreachable, or an answer that makes no sense)."""
    if isinstance(exc, DomainError):
        return exc
    if is_unreachable(exc):
        return NodeUnavailable("Chain node unreachable; retry with backoff")
    return NodeUnavailable("The chain node could not answer; retry with backoff")


def unreachable_send() -> NodeUnavailable:
    return NodeUnavailable("Chain node unreachable; nothing was sent; retry with backoff")


def broadcast_refusal(answer: dict[str, Any], *, token: bool) -> BaseException:
    """What a `result: false` broadcast answer means: `AlreadyKnown`, `Expired`, or a domain
    error saying what was refused (nothing was sent)."""
    code = str(answer.get("code", ""))
    text = message_of(answer).lower()
    if code == DUPLICATE:
        return AlreadyKnown()
    if code == EXPIRED:
        return Expired()
    if code == "BANDWITH_ERROR":  # java-tron's spelling
        return InsufficientGas(
            "Insufficient TRX for the network fee: the sender's bandwidth and TRX cannot pay "
            "for the transaction (or the new account it creates); nothing was sent"
        )
    if code == "CONTRACT_VALIDATE_ERROR":
        if "balance is not sufficient" in text or "balance is insufficient" in text:
            return InsufficientFunds(
                "Insufficient TRX balance at broadcast: the network refused the transfer; "
                "nothing was sent"
            )
        if "not exist" in text or "no owneraccount" in text:
            return InsufficientFunds(
                "The sending address is not activated on TRON (it never received TRX); "
                "nothing was sent"
            )
        what = "token transfer" if token else "transfer"
        return TransferRejected(
            f"Transfer rejected by the network: invalid {what}; nothing was sent"
        )
    if code == "SIGERROR":
        return TransferRejected("Transfer rejected by the network: bad signature; nothing was sent")
    if code == "TAPOS_ERROR":
        return TransferRejected(
            "Transfer rejected by the network: its reference block is not on the chain; "
            "nothing was sent; retry with a new X-Request-Id"
        )
    if code == "TOO_BIG_TRANSACTION_ERROR":
        return TransferRejected("Transfer rejected by the network: too big; nothing was sent")
    if code in ("SERVER_BUSY", "NO_CONNECTION", "NOT_ENOUGH_EFFECTIVE_CONNECTION"):
        return NodeUnavailable(
            "The chain node cannot take transactions now; nothing was sent; retry with backoff"
        )
    return TransferRejected("Transfer rejected by the network; nothing was sent")


def expired() -> TransferRejected:
    return TransferRejected(
        "Transfer rejected by the network: it expired before it was sent; nothing was sent"
    )


__all__ = [
    "AlreadyKnown",
    "Expired",
    "broadcast_refusal",
    "expired",
    "is_unreachable",
    "message_of",
    "read_error",
    "unreachable_send",
]
