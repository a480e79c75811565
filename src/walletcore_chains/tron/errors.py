"""A TRON node's refusals and failures read into domain errors (docs/tron.md, "Errors").

A broadcast answers `{"result": false, "code": ..., "message": ...}` (java-tron's
`Return.response_code`; the message is UTF-8 on `broadcasthex`, hex elsewhere). The node's
own words never reach the client: only the code (and a few known phrases) decide: `refusals`, the table read as every
chain's is (`walletcore_chains.errors`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from walletcore.domain.errors import (
    DomainError,
    InsufficientFunds,
    InsufficientGas,
    NodeUnavailable,
    TransferRejected,
)
from walletcore_chains.errors import AlreadyKnown, Refusals, Says, Transport, unreachable_send

#: the transaction is known already: it counts as sent
DUPLICATE = "DUP_TRANSACTION_ERROR"
EXPIRED = "TRANSACTION_EXPIRATION_ERROR"
_INVALID = "CONTRACT_VALIDATE_ERROR"


class Expired(Exception):
    """The node says the transaction expired: sent only if it landed before."""


def message_of(answer: dict[str, Any]) -> str:
    text = str(answer.get("message", ""))
    try:
        return bytes.fromhex(text).decode()
    except ValueError:
        return text


def _transport() -> tuple[type[BaseException], ...]:
    import httpx

    return (httpx.ConnectError, httpx.ConnectTimeout, ConnectionRefusedError)


#: the request never left: connection refused, DNS failure, connect timeout
TRANSPORT = Transport(_transport)


def is_unreachable(exc: BaseException) -> bool:
    """The request never left: connection refused, DNS failure, connect timeout."""
    return TRANSPORT.unreachable(exc)


def read_error(exc: BaseException) -> DomainError:
    """A failed read: 503 either way (unreachable, or an answer that makes no sense)."""
    return TRANSPORT.read_error(exc)


@cache
def refusals(*, token: bool) -> Refusals:
    """What a broadcast's code (and, for an invalid contract, its message) means; `token`:
    a TRC20 transfer (its refusal says so)."""
    what = "token transfer" if token else "transfer"
    return Refusals(
        (
            Says(AlreadyKnown, codes=(DUPLICATE,)),
            Says(Expired, codes=(EXPIRED,)),
            Says(
                lambda: InsufficientGas(
                    "Insufficient TRX for the network fee: the sender's bandwidth and TRX cannot "
                    "pay for the transaction (or the new account it creates); nothing was sent"
                ),
                codes=("BANDWITH_ERROR",),  # java-tron's spelling
            ),
            Says(
                lambda: InsufficientFunds(
                    "Insufficient TRX balance at broadcast: the network refused the transfer; "
                    "nothing was sent"
                ),
                ("balance is not sufficient", "balance is insufficient"),
                codes=(_INVALID,),
            ),
            Says(
                lambda: InsufficientFunds(
                    "The sending address is not activated on TRON (it never received TRX); "
                    "nothing was sent"
                ),
                ("not exist", "no owneraccount"),
                codes=(_INVALID,),
            ),
            Says(
                lambda: TransferRejected(
                    f"Transfer rejected by the network: invalid {what}; nothing was sent"
                ),
                codes=(_INVALID,),
            ),
            Says(
                lambda: TransferRejected(
                    "Transfer rejected by the network: bad signature; nothing was sent"
                ),
                codes=("SIGERROR",),
            ),
            Says(
                lambda: TransferRejected(
                    "Transfer rejected by the network: its reference block is not on the chain; "
                    "nothing was sent; retry with a new X-Request-Id"
                ),
                codes=("TAPOS_ERROR",),
            ),
            Says(
                lambda: TransferRejected(
                    "Transfer rejected by the network: too big; nothing was sent"
                ),
                codes=("TOO_BIG_TRANSACTION_ERROR",),
            ),
            Says(
                lambda: NodeUnavailable(
                    "The chain node cannot take transactions now; nothing was sent; retry with "
                    "backoff"
                ),
                codes=("SERVER_BUSY", "NO_CONNECTION", "NOT_ENOUGH_EFFECTIVE_CONNECTION"),
            ),
        )
    )


def broadcast_refusal(answer: dict[str, Any], *, token: bool) -> BaseException:
    """What a `result: false` broadcast answer means: `AlreadyKnown`, `Expired`, or a domain
    error saying what was refused (nothing was sent)."""
    return refusals(token=token).read(message_of(answer), str(answer.get("code", "")))


def expired() -> TransferRejected:
    return TransferRejected(
        "Transfer rejected by the network: it expired before it was sent; nothing was sent"
    )


__all__ = [
    "TRANSPORT",
    "AlreadyKnown",
    "Expired",
    "broadcast_refusal",
    "expired",
    "is_unreachable",
    "message_of",
    "read_error",
    "refusals",
    "unreachable_send",
]
