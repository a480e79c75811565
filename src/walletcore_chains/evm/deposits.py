"""Deposit scanning of an EVM chain (`walletcore.ports.deposits.DepositScanner`):
`EvmScanner`, which `EvmGateway` serves (so does the devnet's, and every chain the family
builds).

What a scan of blocks `first..last` asks the node, for every watched address at once:

- **Tokens**: `eth_getLogs` over the whole range, `address` = every token contract of the
  chain, topic0 = `Transfer`, topic2 = the recipients (left-padded), at most
  `ADDRESSES_PER_QUERY` (1,000) recipients a query. A node that refuses the range as too
  large (`errors.RangeTooLarge`: too many results, a block range over its limit) gets the
  two halves, recursively down to one block; a block refused alone is a failure. Each
  credit's position is `log:<n>`, `n` the log's index among its transaction's logs (read
  from the transaction's receipt: one `eth_getTransactionReceipt` per transaction that
  carries a credit), which a reorg that mines the transaction into another block leaves
  unchanged (the block-wide `logIndex` would move, and the credit would be counted twice).
  A transfer of zero units credits nothing and is not reported.
- **The native coin**, block by block (`BLOCKS_AT_ONCE` blocks at a time):
  - with a tracer: the block's header (`eth_getBlockByNumber(n, false)`), then its trace,
    from the first tracer of `TRACERS` the node serves: `trace_block` (erigon, reth,
    nethermind, anvil: flat traces, each with its `traceAddress`), else
    `debug_traceBlockByHash` with `callTracer` (geth and its forks: a tree per
    transaction). A transaction's own value to a watched address is `tx` unless the
    transaction failed; value moved inside it is `call:<path>` for each `CALL` (or
    `SELFDESTRUCT`) with value to a watched address, `path` its place in the call tree
    below the transaction (`call:0.2.1`: the transaction's first call's third call's
    second call; both tracers number calls so), skipping every call below one that failed
    (its value went back). The transaction's own frame is its `tx`, never also a `call`.
    `DELEGATECALL`, `STATICCALL` and `CALLCODE` move nothing to their target. A trace that
    is not of the header's transactions (a reorg between the two reads) fails the scan.
  - without one (the node answers that it serves neither method: logged once, and the
    node is not asked again): the block with its transactions (`eth_getBlockByNumber(n,
    true)`), each transaction's value to a watched address (`tx`) counted when its receipt
    says success (asked only for those: one `eth_getTransactionReceipt`, or
    `eth_getBlockReceipts` when the block holds several). Value moved inside a contract
    call is then not seen.
  - a block whose state the node no longer keeps (`errors.StateGone`: a full geth asked to
    trace a block about 128 blocks or more behind its head) is read the second way, with a
    warning naming it: an archive node, or a scanner that keeps up with the head, avoids it.
- `head` and `block`: `eth_getBlockByNumber`. `locate`: the receipt (its block), else the
  transaction (no block: `MEMPOOL`), else None; a receipt whose transaction failed is None
  too (a transaction re-mined by a reorg that reverted this time moved nothing).
- `mempool`: the node's `txpool_content` (geth, anvil; `pending` only: a `queued`
  transaction waits on a nonce gap), each transaction's own value to a watched address as
  `tx` (the same position it takes once mined); [] from a node without it (logged once).
  Token transfers are not read from the pool: their position is known once mined.

A failure of any read raises (`NodeUnavailable`, walletcore_chains.errors): the scan
answers every block of its range or nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from eth_typing import HexStr
from eth_utils.address import to_checksum_address
from web3 import AsyncWeb3
from web3.exceptions import BlockNotFound, TransactionNotFound, Web3RPCError
from web3.types import RPCEndpoint

from walletcore.domain.assets import Chain
from walletcore.domain.deposits import BlockRef, Incoming
from walletcore.domain.errors import DomainError
from walletcore.ports.deposits import MEMPOOL, Unmined
from walletcore_chains.errors import no_answer
from walletcore_chains.evm import errors
from walletcore_chains.evm.rows import TRANSFER_TOPIC, hexstr

log = logging.getLogger(__name__)

#: Recipients one `eth_getLogs` names (providers refuse longer topic lists).
ADDRESSES_PER_QUERY = 1_000
#: Blocks whose transactions (or traces) are read at once.
BLOCKS_AT_ONCE = 8
#: Receipts asked at once for the transactions that carry a token credit.
RECEIPTS_AT_ONCE = 8
#: The tracers asked for a block's call tree, in this order.
TRACERS = ("trace_block", "debug_traceBlockByHash")
#: `debug_traceBlockByHash`'s tracer.
CALL_TRACER = {"tracer": "callTracer"}
#: Frames that move value to their `to`.
_MOVING = frozenset({"CALL", "SELFDESTRUCT"})

T = TypeVar("T")
U = TypeVar("U")


# -- pure helpers ---------------------------------------------------------------------------
def watch_of(addresses: Iterable[str]) -> dict[str, str]:
    """Lower-case address -> the address as the wallet stores it (the form `Incoming`
    reports); anything that is not `0x` and 40 hex digits is left out."""
    out: dict[str, str] = {}
    for address in addresses:
        key = address.lower()
        if len(key) == 42 and key.startswith("0x"):
            try:
                int(key, 16)
            except ValueError:
                continue
            out.setdefault(key, address)
    return out


def chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """`items` in consecutive pieces of at most `size`."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def address_topic(address: str) -> str:
    """An address as an indexed event argument: 32 bytes, left-padded with zeros."""
    return "0x" + "0" * 24 + address.lower().removeprefix("0x")


def halves(first: int, last: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """`first..last` (two blocks or more) cut in two ranges that cover it, in order."""
    middle = (first + last) // 2
    return (first, middle), (middle + 1, last)


def quantity(value: Any) -> int:
    """A JSON-RPC quantity (`0x` hex) or an int, as an int; absent is 0."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    return int(text, 16) if text.startswith(("0x", "0X")) else int(text)


@dataclass(frozen=True, slots=True)
class CallCredit:
    """Value one frame of a call tree moved to a watched address."""

    path: str
    address: str
    amount: int
    sender: str


def call_credits(calls: Sequence[Mapping[str, Any]], watch: Mapping[str, str]) -> list[CallCredit]:
    """The credits to `watch`'s addresses in the frames `calls` (a `callTracer` root's
    `calls`) and below: a `CALL` or `SELFDESTRUCT` frame with value, whose own frame and
    every frame above it did not revert. `path`: the frame's indexes from the root, `.`
    between them."""
    out: list[CallCredit] = []

    def walk(frames: Sequence[Mapping[str, Any]], prefix: str) -> None:
        for index, frame in enumerate(frames):
            if frame.get("error"):
                continue  # it reverted: nothing in it or below it moved
            path = f"{prefix}{index}"
            amount = quantity(frame.get("value"))
            to = str(frame.get("to") or "").lower()
            if str(frame.get("type", "")).upper() in _MOVING and amount > 0 and to in watch:
                sender = to_checksum_address(str(frame.get("from")))
                out.append(CallCredit(path, watch[to], amount, sender))
            walk(frame.get("calls") or (), f"{path}.")

    walk(calls, "")
    return out


@dataclass(frozen=True, slots=True)
class TraceCredit:
    """Value one transaction of a traced block moved to a watched address: its own (`tx`)
    or inside a call (`call:<path>`)."""

    tx_hash: str
    position: str
    address: str
    amount: int
    sender: str


class TraceMismatch(Exception):
    """The trace is not one of the block's transactions (a reorg between the reads), or
    the node could not trace one of them."""


def geth_credits(
    trace: Sequence[Mapping[str, Any]], hashes: Sequence[str], watch: Mapping[str, str]
) -> list[TraceCredit]:
    """The credits in a block's `debug_traceBlockByHash` answer with `callTracer` (one
    entry per transaction, `hashes` in order): each transaction's own value (its root
    frame) and `call_credits` below it; nothing of a transaction whose root failed."""
    if len(trace) != len(hashes):
        raise TraceMismatch(f"{len(trace)} traces for {len(hashes)} transactions")
    out: list[TraceCredit] = []
    for tx_hash, entry in zip(hashes, trace, strict=True):
        if entry.get("txHash") is not None and hexstr(entry["txHash"]) != tx_hash:
            raise TraceMismatch("a trace of another transaction")
        root = entry.get("result")
        if not isinstance(root, Mapping):
            raise TraceMismatch("the node could not trace a transaction")  # {"error": ...}
        if root.get("error"):
            continue  # the transaction failed: it moved nothing
        to = str(root.get("to") or "").lower()
        amount = quantity(root.get("value"))
        if str(root.get("type", "")).upper() == "CALL" and amount > 0 and to in watch:
            sender = to_checksum_address(str(root.get("from")))
            out.append(TraceCredit(tx_hash, "tx", watch[to], amount, sender))
        for credit in call_credits(root.get("calls") or (), watch):
            out.append(
                TraceCredit(
                    tx_hash, f"call:{credit.path}", credit.address, credit.amount, credit.sender
                )
            )
    return out


def parity_credits(
    traces: Sequence[Mapping[str, Any]],
    block_hash: str,
    hashes: Sequence[str],
    watch: Mapping[str, str],
) -> list[TraceCredit]:
    """The credits in a block's `trace_block` answer (flat, each trace with its
    `traceAddress`, the same path `call_credits` gives): a `call` trace of `callType`
    `call`, or a `suicide`, with value to a watched address, neither it nor a trace above
    it failed; the root (`traceAddress` []) is the transaction's own value. Traces without
    a transaction (block rewards) are left out."""
    entries: dict[str, list[Mapping[str, Any]]] = {h: [] for h in hashes}
    for entry in traces:
        if entry.get("transactionHash") is None:
            continue
        tx_hash = hexstr(entry["transactionHash"])
        if hexstr(entry.get("blockHash")) != block_hash or tx_hash not in entries:
            raise TraceMismatch("a trace of another block")
        entries[tx_hash].append(entry)
    out: list[TraceCredit] = []
    for tx_hash in hashes:
        if not entries[tx_hash]:
            raise TraceMismatch("a transaction without its trace")
        paths = [tuple(quantity(i) for i in e.get("traceAddress") or ()) for e in entries[tx_hash]]
        failed = {p for p, e in zip(paths, entries[tx_hash], strict=True) if e.get("error")}
        for path, entry in zip(paths, entries[tx_hash], strict=True):
            if any(path[:n] in failed for n in range(len(path) + 1)):
                continue  # it, or a call above it, failed: nothing in it moved
            action = entry.get("action") or {}
            kind = str(entry.get("type", "")).lower()
            if kind == "call" and str(action.get("callType", "")).lower() == "call":
                to, amount, sender = action.get("to"), action.get("value"), action.get("from")
            elif kind == "suicide" and path:
                to, amount = action.get("refundAddress"), action.get("balance")
                sender = action.get("address")
            else:
                continue
            to, units = str(to or "").lower(), quantity(amount)
            if units > 0 and to in watch:
                position = "call:" + ".".join(map(str, path)) if path else "tx"
                out.append(
                    TraceCredit(
                        tx_hash, position, watch[to], units, to_checksum_address(str(sender))
                    )
                )
    return out


def log_position(receipt_logs: Sequence[Mapping[str, Any]], log_index: int) -> str:
    """`log:<n>`: the place of the log whose block-wide index is `log_index` among its
    transaction's logs (`receipt_logs`, the receipt's, in order)."""
    for n, entry in enumerate(receipt_logs):
        if quantity(entry.get("logIndex")) == log_index:
            return f"log:{n}"
    raise LookupError(f"log {log_index} is not in its transaction's receipt")


# -- the scanner ----------------------------------------------------------------------------
class EvmScanner:
    """The deposit reads of one EVM chain's node (the module's rules)."""

    def __init__(
        self,
        w3: AsyncWeb3[Any],
        chain: Chain,
        native_asset_id: int,
        tokens: Mapping[int, str],
        *,
        addresses_per_query: int = ADDRESSES_PER_QUERY,
        blocks_at_once: int = BLOCKS_AT_ONCE,
    ) -> None:
        self.w3 = w3
        self.chain = chain
        self.native_asset_id = native_asset_id
        #: contract (lower case) -> asset id
        self.tokens = {contract.lower(): asset_id for asset_id, contract in tokens.items()}
        self.addresses_per_query = addresses_per_query
        self.blocks_at_once = blocks_at_once
        #: whether the node traces calls (None: not asked yet)
        self.traces: bool | None = None
        #: the tracers still to try, the one that answers first (`trace_block`: erigon,
        #: reth, nethermind, anvil; `debug_traceBlockByHash` with `callTracer`: geth too)
        self.tracers = list(TRACERS)
        #: whether the node serves `eth_getBlockReceipts` (None: not asked yet)
        self.block_receipts: bool | None = None
        #: whether the node serves `txpool_content` (None: not asked yet)
        self.pool: bool | None = None

    # -- the chain --------------------------------------------------------------------------
    async def head(self) -> BlockRef:
        block = await self._read(lambda: self.w3.eth.get_block("latest"))
        return BlockRef(quantity(block["number"]), hexstr(block["hash"]))

    async def block(self, height: int) -> BlockRef | None:
        if height < 0:
            return None

        async def read() -> Any:
            try:
                return await self.w3.eth.get_block(height)
            except BlockNotFound:
                return None

        block = await self._read(read)
        return None if block is None else BlockRef(height, hexstr(block["hash"]))

    async def locate(self, tx_hash: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        async def read() -> BlockRef | Unmined | None:
            try:
                receipt = await self.w3.eth.get_transaction_receipt(HexStr(tx_hash))
            except TransactionNotFound:
                receipt = None
            if receipt is not None:
                if receipt.get("status") is not None and quantity(receipt["status"]) == 0:
                    return None  # mined, but it failed: it moved nothing
                return BlockRef(quantity(receipt["blockNumber"]), hexstr(receipt["blockHash"]))
            try:
                tx = await self.w3.eth.get_transaction(HexStr(tx_hash))
            except TransactionNotFound:
                return None
            if tx.get("blockNumber") is None or tx.get("blockHash") is None:
                return MEMPOOL
            # mined, its receipt not indexed yet: its block all the same
            return BlockRef(quantity(tx["blockNumber"]), hexstr(tx["blockHash"]))

        return await self._read(read)

    async def mempool(self, addresses: Collection[str]) -> list[Incoming]:
        watch = watch_of(addresses)
        if not watch or self.pool is False:
            return []
        try:
            content = await self._rpc("txpool_content", [])
        except Exception as exc:  # noqa: BLE001 - read below
            if isinstance(errors.read_scan_refusal(exc), errors.MethodMissing):
                self.pool = False
                log.info(
                    "%s: the node serves no txpool_content; its mempool is not read", self.chain
                )
                return []
            raise errors.read_error(exc) from None
        self.pool = True
        out: list[Incoming] = []
        for by_nonce in dict(content.get("pending") or {}).values():
            for tx in dict(by_nonce).values():
                to = str(tx.get("to") or "").lower()
                amount = quantity(tx.get("value"))
                if amount > 0 and to in watch:
                    out.append(self._native(tx, watch[to], None))
        return out

    # -- scanning ---------------------------------------------------------------------------
    async def scan(self, first: int, last: int, addresses: Collection[str]) -> list[Incoming]:
        watch = watch_of(addresses)
        if not watch or first > last:
            return []
        try:
            heights = range(first, last + 1)
            native = []
            if self.traces is None:  # the first block tells whether the node traces
                native.append(await self._native_of_block(first, watch))
                heights = range(first + 1, last + 1)
            native += await _bounded(
                lambda n: self._native_of_block(n, watch), heights, self.blocks_at_once
            )
            tokens = await self._token_credits(first, last, watch)
        except DomainError:
            raise
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        found = [credit for block in native for credit in block] + tokens
        found.sort(key=lambda c: c.block.height if c.block is not None else -1)
        return found

    async def _rpc(self, method: str, params: list[Any]) -> Any:
        """A method web3 has no call of its own for (a trace, the pool), its result as the
        node wrote it: straight from the provider, since web3's wrapping of every nested
        value costs more than the node's answer (a trace of 200 transactions: 38 ms of
        50). The node's error is raised as web3 raises it (`Web3RPCError`)."""
        response: Any = await self.w3.provider.make_request(RPCEndpoint(method), params)
        error = response.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, Mapping) else error
            raise Web3RPCError(str(message), rpc_response=response)
        return response.get("result")

    async def _read(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await call()
        except DomainError:
            raise
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None

    def _native(self, tx: Mapping[str, Any], address: str, block: BlockRef | None) -> Incoming:
        return Incoming(
            chain=self.chain,
            tx_hash=hexstr(tx["hash"]),
            position="tx",
            address=address,
            asset_id=self.native_asset_id,
            amount_units=quantity(tx.get("value")),
            block=block,
            sender=to_checksum_address(str(tx["from"])),
        )

    # -- tokens -----------------------------------------------------------------------------
    async def _token_credits(
        self, first: int, last: int, watch: Mapping[str, str]
    ) -> list[Incoming]:
        if not self.tokens:
            return []
        contracts: list[str] = [to_checksum_address(c) for c in self.tokens]
        logs: list[Any] = []
        for group in chunks(sorted(watch), self.addresses_per_query):
            logs += await self._logs(first, last, contracts, [address_topic(a) for a in group])
        matched = []
        for entry in logs:
            topics: Sequence[Any] = entry.get("topics") or ()
            if entry.get("removed") or len(topics) != 3 or hexstr(topics[0]) != TRANSFER_TOPIC:
                continue
            asset_id = self.tokens.get(str(entry["address"]).lower())
            to = "0x" + hexstr(topics[2])[-40:]
            amount = int.from_bytes(_data(entry.get("data")), "big")
            if asset_id is None or to not in watch or amount == 0:
                continue
            matched.append((entry, asset_id, watch[to], amount))
        receipts = await self._receipts({hexstr(e["transactionHash"]) for e, *_ in matched})
        out = []
        for entry, asset_id, address, amount in matched:
            tx_hash = hexstr(entry["transactionHash"])
            receipt = receipts[tx_hash]
            block = BlockRef(quantity(entry["blockNumber"]), hexstr(entry["blockHash"]))
            if hexstr(receipt["blockHash"]) != block.hash:
                raise no_answer()  # the chain moved under the scan: the next run reads again
            out.append(
                Incoming(
                    chain=self.chain,
                    tx_hash=tx_hash,
                    position=log_position(receipt["logs"], quantity(entry["logIndex"])),
                    address=address,
                    asset_id=asset_id,
                    amount_units=amount,
                    block=block,
                    sender=to_checksum_address("0x" + hexstr(entry["topics"][1])[-40:]),
                )
            )
        return out

    async def _logs(
        self, first: int, last: int, contracts: list[str], topics: list[str]
    ) -> list[Any]:
        """The Transfer logs of `contracts` to `topics` in `first..last`, halving a range
        the node refuses as too large."""
        query: Any = {
            "fromBlock": first,
            "toBlock": last,
            "address": contracts,
            "topics": [TRANSFER_TOPIC, None, topics],
        }
        try:
            return list(await self.w3.eth.get_logs(query))
        except Exception as exc:
            if first == last or not isinstance(errors.read_scan_refusal(exc), errors.RangeTooLarge):
                raise
        lower, upper = halves(first, last)
        log.debug("%s: eth_getLogs %d..%d refused as too large; halved", self.chain, first, last)
        return await self._logs(*lower, contracts, topics) + await self._logs(
            *upper, contracts, topics
        )

    async def _receipts(self, hashes: Collection[str]) -> dict[str, Any]:
        async def one(tx_hash: str) -> tuple[str, Any]:
            try:
                return tx_hash, await self.w3.eth.get_transaction_receipt(HexStr(tx_hash))
            except TransactionNotFound:
                raise no_answer() from None  # reorged away meanwhile: the next run reads again

        found = await _bounded(one, sorted(hashes), RECEIPTS_AT_ONCE)
        return dict(found)

    # -- the native coin ----------------------------------------------------------------------
    async def _native_of_block(self, height: int, watch: Mapping[str, str]) -> list[Incoming]:
        if self.traces is not False:
            traced = await self._traced(height, watch)
            if traced is not None:
                return traced
        return await self._top_level(height, watch)

    async def _traced(self, height: int, watch: Mapping[str, str]) -> list[Incoming] | None:
        """The block's credits from its call trace; None when the node cannot trace it."""
        header: Any = await self.w3.eth.get_block(height)
        block = BlockRef(height, hexstr(header["hash"]))
        hashes = [hexstr(h) for h in header["transactions"]]
        while self.tracers:
            tracer = self.tracers[0]
            try:
                if tracer == "trace_block":
                    traces = await self._rpc("trace_block", [hex(height)])
                    found = parity_credits(traces or (), block.hash, hashes, watch)
                else:
                    trace = await self._rpc("debug_traceBlockByHash", [block.hash, CALL_TRACER])
                    found = geth_credits(trace or (), hashes, watch)
            except TraceMismatch:
                raise no_answer() from None  # the next run reads the block again
            except Exception as exc:
                meaning = errors.read_scan_refusal(exc)
                if isinstance(meaning, errors.MethodMissing):
                    self.tracers.remove(tracer)
                    continue
                if isinstance(meaning, errors.StateGone):
                    log.warning(
                        "%s: the node no longer keeps the state of block %d: value moved "
                        "inside its contract calls is not read (an archive node reads it)",
                        self.chain,
                        height,
                    )
                    return None
                raise
            self.traces = True
            return [
                Incoming(
                    chain=self.chain,
                    tx_hash=credit.tx_hash,
                    position=credit.position,
                    address=credit.address,
                    asset_id=self.native_asset_id,
                    amount_units=credit.amount,
                    block=block,
                    sender=credit.sender,
                )
                for credit in found
            ]
        if self.traces is not False:
            self.traces = False
            log.warning(
                "%s: the node traces no calls (neither trace_block nor debug_traceBlockByHash); "
                "deposits are read from transactions' own value only",
                self.chain,
            )
        return None

    async def _top_level(self, height: int, watch: Mapping[str, str]) -> list[Incoming]:
        """The block's credits from its transactions' own value, each counted when its
        receipt says success."""
        found: Any = await self.w3.eth.get_block(height, full_transactions=True)
        block = BlockRef(height, hexstr(found["hash"]))
        candidates = [
            tx
            for tx in found["transactions"]
            if quantity(tx.get("value")) > 0 and str(tx.get("to") or "").lower() in watch
        ]
        if not candidates:
            return []
        statuses = await self._statuses(block, [hexstr(tx["hash"]) for tx in candidates])
        return [
            self._native(tx, watch[str(tx["to"]).lower()], block)
            for tx in candidates
            if statuses[hexstr(tx["hash"])]
        ]

    async def _statuses(self, block: BlockRef, hashes: list[str]) -> dict[str, bool]:
        """tx hash -> whether it succeeded, from receipts of `block`."""
        receipts: list[Any] | None = None
        if len(hashes) > 1 and self.block_receipts is not False:
            try:
                receipts = list(await self.w3.eth.get_block_receipts(HexStr(block.hash)))
                self.block_receipts = True
            except Exception as exc:
                if not isinstance(errors.read_scan_refusal(exc), errors.MethodMissing):
                    raise
                self.block_receipts = False
        if receipts is None:
            receipts = [r for _, r in (await self._receipts(hashes)).items()]
        out: dict[str, bool] = {}
        for receipt in receipts:
            if hexstr(receipt["blockHash"]) != block.hash:
                raise no_answer()  # the chain moved under the scan: the next run reads again
            status = receipt.get("status")
            out[hexstr(receipt["transactionHash"])] = status is None or quantity(status) == 1
        if any(h not in out for h in hashes):
            raise no_answer()
        return out


def _data(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return bytes.fromhex(str(value or "0x").removeprefix("0x"))


async def _bounded(call: Callable[[U], Awaitable[T]], items: Iterable[U], at_once: int) -> list[T]:
    """`call(item)` for every item, the results in order, at most `at_once` running; the
    first failure cancels the others and is raised."""
    gate = asyncio.Semaphore(at_once)

    async def run(item: U) -> T:
        async with gate:
            return await call(item)

    tasks = [asyncio.ensure_future(run(item)) for item in items]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


__all__ = [
    "ADDRESSES_PER_QUERY",
    "BLOCKS_AT_ONCE",
    "CallCredit",
    "EvmScanner",
    "TraceCredit",
    "TraceMismatch",
    "address_topic",
    "call_credits",
    "chunks",
    "geth_credits",
    "halves",
    "log_position",
    "parity_credits",
    "quantity",
    "watch_of",
]
