"""Backend failures and node refusals read into domain errors (docs/bitcoin.md, "Errors").

The node's words decide (Bitcoin Core's and Knots', passed through unchanged by Esplora's
`POST /tx`); they never reach the client.
"""

from __future__ import annotations

from walletcore.domain.errors import (
    DomainError,
    HistoryUnavailable,
    InsufficientFunds,
    InvalidRequest,
    NodeUnavailable,
    TransferRejected,
)
from walletcore_chains.bitcoin.backend import BackendUnreachable

#: our own transaction is there already: it counts as sent
_KNOWN = (
    "txn-already-in-mempool",
    "txn-already-known",
    "already in block chain",
    "outputs already in utxo set",
    "transaction already in block chain",
)
#: its coins are spent (by it, if the node knows it; else a double spend)
_SPENT = (
    "txn-mempool-conflict",
    "bad-txns-inputs-missingorspent",
    "missing-inputs",
    "missingorspent",
    "bad-txns-inputs-spent",
    "insufficient fee, rejecting replacement",
    "replacement-adds-unconfirmed",
    "too many potential replacements",
    "rejecting replacement",
)
_DUST = ("dust",)
_LOW_FEE = (
    "min relay fee not met",
    "mempool min fee not met",
    "min fee not met",
    "insufficient priority",
    "mempool full",
)
_CHAIN = (
    "too-long-mempool-chain",
    "too-long-mempool",
    "exceeds descendant size limit",
    "exceeds ancestor size limit",
    "too many unconfirmed",
)
_FUNDS = ("bad-txns-in-belowout", "bad-txns-in-below-out", "insufficient funds")
_FEE_CAP = ("max-fee-exceeded", "fee exceeds maximum", "absurdly-high-fee")


class AlreadyKnown(Exception):
    """The node has the transaction already."""


class Spent(Exception):
    """Its coins are spent: by this very transaction (sent before) or by another."""


def refusal(reason: str) -> BaseException:
    """What a node's refusal means: `AlreadyKnown`, `Spent`, or a domain error to raise."""
    text = reason.lower()
    if any(k in text for k in _KNOWN):
        return AlreadyKnown()
    if any(k in text for k in _SPENT):
        return Spent()
    if any(k in text for k in _CHAIN):
        return TransferRejected(
            "Transfer rejected by the network: the wallet has too many unconfirmed "
            "transactions in a row (mempool chain too long); nothing was sent; retry after "
            "the next block"
        )
    if any(k in text for k in _LOW_FEE):
        return TransferRejected(
            "Transfer rejected by the network: its fee is below the minimum relay fee the "
            "network takes now; nothing was sent; request a new fee quote"
        )
    if any(k in text for k in _FEE_CAP):
        return TransferRejected(
            "Transfer rejected by the chain node: its fee exceeds the node's fee cap; nothing "
            "was sent; contact the operator"
        )
    if any(k in text for k in _FUNDS):
        return InsufficientFunds(
            "Insufficient BTC: the network refused the transfer (its outputs exceed its "
            "coins); nothing was sent"
        )
    if any(k in text for k in _DUST):
        return InvalidRequest(
            "Transfer refused by the network: an output is below the dust limit; nothing was sent"
        )
    return TransferRejected("Transfer rejected by the network; nothing was sent")


def double_spend() -> TransferRejected:
    return TransferRejected(
        "Transfer rejected by the network: its coins were spent by another transaction "
        "(a double spend); nothing was sent; retry"
    )


def read_error(exc: BaseException, *, history: bool = False) -> DomainError:
    """A failed read: unreachable -> 503 retry; anything else -> 503 too (transient from
    the client's side); on `/transactions`, the history's own 503."""
    if isinstance(exc, DomainError):
        return exc
    if isinstance(exc, BackendUnreachable):
        return NodeUnavailable("Chain node unreachable; retry with backoff")
    if history:
        return HistoryUnavailable()
    return NodeUnavailable("The chain node could not answer; retry with backoff")


def unreachable_send() -> NodeUnavailable:
    return NodeUnavailable("Chain node unreachable; nothing was sent; retry with backoff")


__all__ = ["AlreadyKnown", "Spent", "double_spend", "read_error", "refusal", "unreachable_send"]
