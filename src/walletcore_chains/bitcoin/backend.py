"""The interface of the gateway's two backends (Esplora HTTP API, Bitcoin Core JSON-RPC)
and the plain values they answer in (docs/bitcoin.md, "Backends").

Amounts are satoshis, fee rates sat/vB. Backends raise `BackendUnreachable` (the request
never reached the server), `BackendError` (it answered with an error or nonsense),
`BroadcastRefused` (the node refused a transaction; `reason` is the node's own words, read
by `errors.refusal`) and `BackendTimeout` (no answer in time: for a broadcast, the outcome
is unknown). The gateway turns them into domain errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from walletcore_chains.bitcoin.blocks import BlockSource


class BackendFailure(Exception):
    """Base of the backends' errors (never carries a URL or a credential)."""


class BackendUnreachable(BackendFailure):
    pass


class BackendTimeout(BackendFailure):
    pass


class BackendError(BackendFailure):
    pass


class BroadcastRefused(BackendFailure):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Utxo:
    txid: str
    vout: int
    value: int
    #: block height of the funding transaction; None while in the mempool
    height: int | None


@dataclass(frozen=True, slots=True)
class TxIn:
    txid: str
    vout: int
    address: str | None
    value: int


@dataclass(frozen=True, slots=True)
class TxOut:
    address: str | None
    value: int


@dataclass(frozen=True, slots=True)
class TxView:
    """A transaction as the backend knows it."""

    txid: str
    inputs: tuple[TxIn, ...]
    outputs: tuple[TxOut, ...]
    fee: int
    #: None while unconfirmed
    height: int | None = None
    block_time: int | None = None
    coinbase: bool = False
    #: the backend knows it was replaced or double-spent by a mined transaction
    conflicted: bool = False
    #: every input's sequence signals replace-by-fee (BIP125: below 0xfffffffe)
    rbf: bool = False
    extra: dict[str, object] = field(default_factory=dict, compare=False, repr=False)
    #: virtual size in vB (weight / 4, rounded up); None when the backend does not tell
    vsize: int | None = None


#: Confirmed transactions a backend keeps decoded (about 1.4 KB each with two inputs and
#: two outputs: some 13 MB at the bound; docs/performance.md, "Memory per worker").
CONFIRMED_REMEMBERED = 10_000


class ConfirmedViews:
    """Confirmed transactions, decoded once: a history page or the follow job reads the
    same ones again, and a mined transaction does not change. Bounded: past `size`, the one
    kept longest is forgotten (read again from the backend when it is asked for)."""

    __slots__ = ("_size", "_views")

    def __init__(self, size: int | None = None) -> None:
        self._size = CONFIRMED_REMEMBERED if size is None else size
        self._views: dict[str, TxView] = {}  # insertion-ordered: the oldest first

    def __len__(self) -> int:
        return len(self._views)

    def get(self, txid: str) -> TxView | None:
        return self._views.get(txid)

    def keep(self, view: TxView) -> None:
        """Remember `view` if it is confirmed (an unconfirmed one may still change)."""
        if view.height is None:
            return
        views = self._views
        views[view.txid] = view
        if len(views) > self._size:
            del views[next(iter(views))]


@dataclass(frozen=True, slots=True)
class Outspend:
    """Whether an output is spent, as the backend knows it (mempool and chain).

    `unspent`: it exists and nothing spends it. `spent`: a transaction spends it, `spender`
    when the backend can tell which (Core cannot for a spend already mined: no spend
    index). `unknown`: no such output (its transaction is neither mined nor in the
    mempool: evicted, replaced, or never seen)."""

    state: Literal["unspent", "spent", "unknown"]
    spender: str | None = None


class Backend(Protocol):
    """What the gateway reads from and sends to the Bitcoin network."""

    name: str
    #: the blocks and mempool the deposit scan reads (`blocks.py`)
    blocks: BlockSource

    async def tip_height(self) -> int: ...

    async def watch(self, address: str) -> None:
        """Make sure the backend follows `address` (Core imports it into its watch-only
        wallet; an Esplora indexer follows every address)."""
        ...

    async def address_known(self, address: str) -> bool:
        """Whether the address has any transaction (confirmed or in the mempool)."""
        ...

    async def utxos(self, address: str) -> list[Utxo]:
        """Unspent outputs of `address`, mempool spends removed, mempool outputs included."""
        ...

    async def transaction(self, txid: str) -> TxView | None:
        """The transaction, inputs' addresses and values included; None when unknown."""
        ...

    async def outspend(self, txid: str, vout: int) -> Outspend:
        """Whether output `vout` of `txid` is spent, and by which transaction if known."""
        ...

    async def history(self, address: str, limit: int) -> list[TxView]:
        """The address's transactions, newest first (the mempool's first), at most `limit`."""
        ...

    async def fee_rate(self, target_blocks: int) -> float | None:
        """The backend's estimate for confirmation within `target_blocks`; None if none."""
        ...

    async def min_fee_rate(self) -> float:
        """The lowest rate the node relays now (its minimum relay fee, or the mempool's)."""
        ...

    async def broadcast(self, raw_hex: str) -> str:
        """Send it; the txid the node reports."""
        ...

    async def aclose(self) -> None: ...


__all__ = [
    "Backend",
    "BackendError",
    "BackendFailure",
    "BackendTimeout",
    "BackendUnreachable",
    "BroadcastRefused",
    "Outspend",
    "TxIn",
    "TxOut",
    "TxView",
    "Utxo",
]
