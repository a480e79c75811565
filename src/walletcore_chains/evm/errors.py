"""Node errors read into domain errors: the node's message decides (each client words it
differently; eth-tester raises py-evm's ValidationError with its own words).

- unreachable node (refused, reset, DNS) -> `NodeUnavailable` (503, retry with backoff)
- insufficient funds for value + gas -> `InsufficientFunds` (400)
- gas limit below what the transfer needs -> `InsufficientGas` (400)
- a nonce already used -> `NonceUsed` (the gateway checks whether it was this transaction)
- another transaction with the same nonce waiting in the node's pool at an equal or higher
  fee (`replacement transaction underpriced`: a rung of a replacement ladder sent under a
  higher one, or a nonce handed out twice) -> `TransferRejected` saying so (502, nothing
  sent; the transaction in the pool is untouched)
- a nonce ahead of the account's, a fee below what the node takes, a gas limit above the
  block's, a fee above the node's cap -> `TransferRejected` saying which (502, nothing sent)
- anything else the node answered with an error -> `TransferRejected` (502, nothing sent)
- anything else (a timeout, a connection lost after the request left) -> outcome unknown

The words are geth's (and bsc's and bor's, which are geth forks): `already known`,
`nonce too low: next nonce N, tx nonce T`, `replacement transaction underpriced`,
`insufficient funds for gas * price + value: balance B, tx cost C, overshot O`,
`intrinsic gas too low: gas G, minimum needed M`, `exceeds block gas limit`,
`transaction underpriced: gas tip cap T, minimum needed M`, ...; and anvil's (Foundry's
node, the tests' engine): `transaction already imported`, `nonce too low`,
`max fee per gas less than block base fee`, `intrinsic gas too high -- tx.gas_limit >
env.block.gas_limit`, `Insufficient funds for gas * price + value`.

The deposit scan (`walletcore_chains.evm.deposits`) reads three more kinds of answers, each
only from a node that answered (a JSON-RPC error object; a transport failure is always
`NodeUnavailable`):

- `read_scan_refusal`: a log query refused as too large (`RangeTooLarge`: the scan halves
  the range and asks again): `query returned more than 10000 results` (Infura, Polygon),
  `block range is too wide` (Ankr), `exceed maximum block range: 5000` (BSC), `Log
  response size exceeded` (Alchemy), `eth_getLogs is limited to a 10,000 range`, code
  -32005 without words of a rate limit; a rate limit (`rate limit`, `request rate`,
  `too many requests`, `daily request count exceeded`) is never read as a range, since
  halving would only ask more. `MethodMissing`: the node does not serve the method at all
  (code -32601, `the method ... does not exist/is not available`, `not supported`), so
  the scan reads without it. `StateGone`: the node cannot trace a block whose state it no
  longer keeps (`required historical state unavailable`, `missing trie node`: a full
  node more than about 128 blocks behind).
"""

from __future__ import annotations

import re

from walletcore.domain.errors import (
    DomainError,
    InsufficientFunds,
    InsufficientGas,
    TransferRejected,
)
from walletcore_chains.errors import (
    AlreadyKnown,
    Reads,
    Refusals,
    Says,
    Transport,
    unreachable_send,
)


class NonceUsed(Exception):
    """The nonce was used: by this very transaction (sent before), or by another one."""


def _transport() -> tuple[type[BaseException], ...]:
    import socket

    import aiohttp

    return (aiohttp.ClientConnectorError, ConnectionRefusedError, socket.gaierror)


TRANSPORT = Transport(_transport)


def _nonce_gap() -> TransferRejected:
    return TransferRejected("Transfer rejected by the network: nonce gap; nothing was sent")


def _tester_nonce(found: re.Match[str]) -> BaseException:
    expected, got = int(found.group(1)), int(found.group(2))
    return NonceUsed() if got < expected else _nonce_gap()


#: what the node's words mean, first match first
REFUSALS = Refusals(
    (
        Says(
            AlreadyKnown, ("already known", "known transaction", "already imported", "alreadyknown")
        ),
        Reads(
            re.compile(r"invalid transaction nonce: expected (\d+), but got (\d+)"), _tester_nonce
        ),
        #: the pool holds another transaction with this nonce at an equal or higher fee
        Says(
            lambda: TransferRejected(
                "Transfer rejected by the network: another transaction with its nonce waits in "
                "the node's pool at an equal or higher fee; nothing was sent"
            ),
            ("replacement transaction underpriced", "replacement underpriced"),
        ),
        Says(NonceUsed, ("nonce too low",)),
        Says(_nonce_gap, ("nonce too high", "nonce gap")),
        #: the fee is below the node's price floor, or the max fee below the base fee now
        Says(
            lambda: TransferRejected(
                "Transfer rejected by the network: its fee is below what the network takes now; "
                "nothing was sent; request a new fee quote"
            ),
            (
                "transaction underpriced",
                "gas price below minimum",
                "less than block base fee",
                "fee cap less than",
            ),
        ),
        Says(
            lambda: TransferRejected(
                "Transfer rejected by the network: its gas limit exceeds the block gas limit; "
                "nothing was sent"
            ),
            (
                "exceeds block gas limit",
                "intrinsic gas too high",  # anvil: "... -- tx.gas_limit > env.block.gas_limit"
            ),
        ),
        Says(
            lambda: TransferRejected(
                "Transfer rejected by the chain node: its fee exceeds the node's transaction fee "
                "cap; nothing was sent; contact the operator"
            ),
            ("exceeds the configured cap",),  # geth's --rpc.txfeecap
        ),
        Says(
            lambda: InsufficientFunds(
                "Insufficient funds for the amount and the gas at broadcast: the network "
                "refused the transfer; nothing was sent"
            ),
            (
                "insufficient funds",
                "cannot afford",
                "insufficient balance",
                "not have enough balance",
            ),
        ),
        Says(
            InsufficientGas,
            (
                "intrinsic gas too low",
                "gas cannot be negative",
                "out of gas",
                "gas too low",
                "insufficient gas",  # geth's EIP-7623 floor: "insufficient gas for floor data gas cost"
            ),
        ),
    )
)


class RangeTooLarge(Exception):
    """The node refused a log query over too many blocks or with too many results."""


class MethodMissing(Exception):
    """The node does not serve this method (a tracer, block receipts, the pool)."""


class StateGone(Exception):
    """The node no longer keeps the state a trace of the block needs."""


class OtherError(Exception):
    """Any other refusal: the node could not answer now."""


#: what a node's refusal of a scan's read means, first match first
SCAN_REFUSALS = Refusals(
    (
        Says(
            OtherError,
            (
                "rate limit",
                "rate-limit",
                "request rate",
                "too many requests",
                "request count",
                "requests per",
                "capacity",
                "credits",
                "throughput",
            ),
        ),
        Says(
            RangeTooLarge,
            (
                "query returned more than",
                "more than 10000 results",
                "block range",
                "range is too",
                "range too",
                "too many blocks",
                "too many results",
                "too many logs",
                "response size",
                "max results",
                "exceeds max results",
                "maximum block range",
                "is limited to",
                "range exceeds",
                "range limit",
                "results limit",
            ),
        ),
        Says(RangeTooLarge, codes=("-32005",)),
        Says(
            StateGone,
            (
                "historical state",
                "missing trie node",
                "state unavailable",
                "state not available",
                "state is not available",
                "state histories",
                "reexec",
            ),
        ),
        Says(MethodMissing, codes=("-32601",)),
        Says(
            MethodMissing,
            (
                "method not found",
                "does not exist",
                "is not available",
                "not available on",
                "not supported",
                "unsupported method",
                "method not allowed",
                "not whitelisted",
                "not enabled",
                "has not been implemented",
                "unknown rpc endpoint",
            ),
        ),
    ),
    otherwise=OtherError,
)


def read_scan_refusal(exc: BaseException) -> BaseException:
    """What a failed read of the deposit scan means: `RangeTooLarge`, `MethodMissing`,
    `StateGone`, or `OtherError` (the node could not answer now, or never got the request):
    see the module's docstring."""
    from web3.exceptions import MethodUnavailable, Web3RPCError

    if isinstance(exc, MethodUnavailable):
        return MethodMissing()
    if not isinstance(exc, Web3RPCError) or is_unreachable(exc):
        return OtherError()
    code = ""
    response = exc.rpc_response
    if isinstance(response, dict) and isinstance(response.get("error"), dict):
        code = str(response["error"].get("code", ""))
    return SCAN_REFUSALS.read(str(exc.message), code)


def is_unreachable(exc: BaseException) -> bool:
    """A connection that was never made: the request cannot have reached the node."""
    return TRANSPORT.unreachable(exc)


def _is_node_answer(exc: BaseException) -> bool:
    """The node answered the request with an error (it did not take the transaction)."""
    from eth_utils.exceptions import ValidationError  # eth-tester's refusals
    from web3.exceptions import Web3RPCError

    return isinstance(exc, Web3RPCError | ValidationError)


def read_send_error(exc: BaseException) -> BaseException:
    """What a failed `eth_sendRawTransaction` means: a domain error, `AlreadyKnown` or
    `NonceUsed`, or `exc` itself when the outcome is unknown (a timeout, a connection lost
    after the request left): the caller answers "outcome unknown" then, never "refused"."""
    if is_unreachable(exc):
        return unreachable_send()
    if not _is_node_answer(exc):
        return exc
    return REFUSALS.read(str(exc))


def read_error(exc: BaseException) -> DomainError:
    """A failed read (balance, fee, history): unreachable -> 503, else a 503 too, since a
    read the node could not answer is transient from the client's side."""
    return TRANSPORT.read_error(exc)


__all__ = [
    "REFUSALS",
    "SCAN_REFUSALS",
    "TRANSPORT",
    "AlreadyKnown",
    "MethodMissing",
    "NonceUsed",
    "OtherError",
    "RangeTooLarge",
    "StateGone",
    "is_unreachable",
    "read_error",
    "read_scan_refusal",
    "read_send_error",
]
