"""Backend failures and node refusals read into domain errors (docs/bitcoin.md, "Errors").

The node's words decide (Bitcoin Core's and Knots', passed through unchanged by Esplora's
`POST /tx`); they never reach the client. The table is `REFUSALS`, read as every chain's is
(`walletcore_chains.errors`).
"""

from __future__ import annotations

from walletcore.domain.errors import (
    DomainError,
    InsufficientFunds,
    InvalidRequest,
    TransferRejected,
)
from walletcore_chains.bitcoin.backend import BackendUnreachable
from walletcore_chains.errors import AlreadyKnown, Refusals, Says, Transport, unreachable_send


class Spent(Exception):
    """Its coins are spent: by this very transaction (sent before) or by another."""


#: a backend raises `BackendUnreachable` when its request never left
TRANSPORT = Transport(lambda: (BackendUnreachable,))

#: what the node's words mean, first match first
REFUSALS = Refusals(
    (
        #: our own transaction is there already: it counts as sent
        Says(
            AlreadyKnown,
            (
                "txn-already-in-mempool",
                "txn-already-known",
                "already in block chain",
                "outputs already in utxo set",
                "transaction already in block chain",
            ),
        ),
        #: its coins are spent (by it, if the node knows it; else a double spend)
        Says(
            Spent,
            (
                "txn-mempool-conflict",
                "bad-txns-inputs-missingorspent",
                "missing-inputs",
                "missingorspent",
                "bad-txns-inputs-spent",
                "insufficient fee, rejecting replacement",
                "replacement-adds-unconfirmed",
                "too many potential replacements",
                "rejecting replacement",
            ),
        ),
        Says(
            lambda: TransferRejected(
                "Transfer rejected by the network: the wallet has too many unconfirmed "
                "transactions in a row (mempool chain too long); nothing was sent; retry after "
                "the next block"
            ),
            (
                "too-long-mempool-chain",
                "too-long-mempool",
                "exceeds descendant size limit",
                "exceeds ancestor size limit",
                "too many unconfirmed",
            ),
        ),
        Says(
            lambda: TransferRejected(
                "Transfer rejected by the network: its fee is below the minimum relay fee the "
                "network takes now; nothing was sent; request a new fee quote"
            ),
            (
                "min relay fee not met",
                "mempool min fee not met",
                "min fee not met",
                "insufficient priority",
                "mempool full",
            ),
        ),
        Says(
            lambda: TransferRejected(
                "Transfer rejected by the chain node: its fee exceeds the node's fee cap; "
                "nothing was sent; contact the operator"
            ),
            ("max-fee-exceeded", "fee exceeds maximum", "absurdly-high-fee"),
        ),
        Says(
            lambda: InsufficientFunds(
                "Insufficient BTC: the network refused the transfer (its outputs exceed its "
                "coins); nothing was sent"
            ),
            ("bad-txns-in-belowout", "bad-txns-in-below-out", "insufficient funds"),
        ),
        Says(
            lambda: InvalidRequest(
                "Transfer refused by the network: an output is below the dust limit; nothing "
                "was sent"
            ),
            ("dust",),
        ),
    )
)


def refusal(reason: str) -> BaseException:
    """What a node's refusal means: `AlreadyKnown`, `Spent`, or a domain error to raise."""
    return REFUSALS.read(reason)


def double_spend() -> TransferRejected:
    return TransferRejected(
        "Transfer rejected by the network: its coins were spent by another transaction "
        "(a double spend); nothing was sent; retry"
    )


def read_error(exc: BaseException, *, history: bool = False) -> DomainError:
    """A failed read: unreachable -> 503 retry; anything else -> 503 too (transient from
    the client's side); on `/transactions`, the history's own 503."""
    return TRANSPORT.read_error(exc, history=history)


__all__ = [
    "REFUSALS",
    "TRANSPORT",
    "AlreadyKnown",
    "Spent",
    "double_spend",
    "read_error",
    "refusal",
    "unreachable_send",
]
