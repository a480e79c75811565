"""A Solana node's refusals and failures read into domain errors (docs/chains.md), as
every chain's are (`walletcore_chains.errors`).

A refusal's text is LiteSVM's error, or a JSON-RPC node's simulation error and logs; the
runtime's names are case-sensitive (`InsufficientFundsForFee` is not `InsufficientFunds`),
so the table reads them as they are.
"""

from __future__ import annotations

import re

from walletcore.domain.errors import InsufficientFunds, TransferRejected
from walletcore_chains.errors import AlreadyKnown, Refusals, Says, Transport


def _transport() -> tuple[type[BaseException], ...]:
    import socket

    import httpx2

    return (httpx2.ConnectError, httpx2.ConnectTimeout, ConnectionRefusedError, socket.gaierror)


#: the request never left; solana-py wraps its transport's errors (`SolanaRpcException`)
TRANSPORT = Transport(_transport, causes=True)


def _expired() -> TransferRejected:
    return TransferRejected(
        "Transfer rejected: its blockhash expired before it landed; nothing was sent"
    )


#: what a refusal means, first match first (the runtime's names, and the RPC's words)
REFUSALS = Refusals(
    (
        #: it landed between the gateway's check and the send: it counts as sent
        Says(AlreadyKnown, ("AlreadyProcessed", "already been processed")),
        Says(
            lambda: InsufficientFunds(
                "Not enough SOL for the network fee at broadcast: the fee payer cannot pay it; "
                "nothing was sent"
            ),
            ("InsufficientFundsForFee", "AccountNotFound"),
        ),
        Says(
            lambda: InsufficientFunds(
                "Insufficient balance at broadcast: the network refused the transfer; nothing "
                "was sent"
            ),
            (
                "InstructionErrorCustom(1)",
                "InsufficientFunds",
                "insufficient lamports",
                re.compile(r"custom program error: 0x1(?: |$)"),  # not 0x10, 0x11, ...
                "insufficient funds",
            ),
        ),
        Says(
            lambda: InsufficientFunds(
                "Insufficient token balance at broadcast: the sender has no account of the "
                "token; nothing was sent"
            ),
            ("InvalidAccountData", "UninitializedAccount"),
        ),
        Says(_expired, ("BlockhashNotFound", "Blockhash not found")),
    ),
    fold_case=False,
)


def refusal(text: str) -> BaseException:
    """What a refusal's text means: `AlreadyKnown`, or a domain error (nothing was sent)."""
    return REFUSALS.read(text)


__all__ = ["REFUSALS", "TRANSPORT", "AlreadyKnown", "refusal"]
