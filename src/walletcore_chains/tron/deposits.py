"""Credits to watched addresses read from TRON blocks (docs/tron.md, "Deposits"): a
block as `wallet/getblockbylimitnext` / `wallet/getblockbynum` give it and its
transactions' receipts as `wallet/gettransactioninfobyblocknum` gives them, both with
`visible` off (addresses in hex, `41...`; a log's address in 20 bytes).

- **TRX** (`trx`): a `TransferContract` whose `to_address` is watched and whose result is
  `SUCCESS` (`ret[0].contractRet`); the sender is its `owner_address`.
- **TRC20** (`trc20:<n>`, `n` the log's index in its transaction's `log` list): a
  `Transfer(address,address,uint256)` log emitted by one of the served tokens' contracts
  (whichever contract the transaction called), its recipient (`topics[2]`) watched, in a
  receipt that succeeded; the sender is `topics[1]`.
- **Internal TRX** (`internal:<n>`, `n` the index in the receipt's
  `internal_transactions`): TRX a contract moved to a watched address while running (notes
  `call`, `create`, `suicide`; not `rejected`), in a receipt that succeeded; the sender is
  the calling contract. Only a node saving them (java-tron `vm.saveInternalTx`) lists them.

A watched address is matched by its 21 bytes and reported exactly as the wallet stores it.
Receipts are only read for a block with a contract call (`TriggerSmartContract`,
`CreateSmartContract`), the only transactions that emit logs or move TRX inside a
contract. The answers are checked against each other, never half believed: every contract
call of the block has its receipt and every receipt is a transaction of the block (a block
replaced between the two reads raises), and a range's blocks follow one another by number
and parent hash.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from walletcore.domain.assets import Chain
from walletcore.domain.deposits import BlockRef, Incoming
from walletcore_chains.encodings import b58check_decode
from walletcore_chains.tron import rows
from walletcore_chains.tron.proto import TRANSFER, TRIGGER

CREATE = "CreateSmartContract"
#: the transactions that run the TVM: the only ones with logs or internal transfers
CALLS = frozenset({TRIGGER, CREATE})
#: internal transactions that move TRX to `transferTo_address` (java-tron's notes)
MOVES_TRX = frozenset({"call", "create", "suicide"})
_TOPIC_PAD = "0" * 24
_HEX = frozenset("0123456789abcdef")


class Inconsistent(ValueError):
    """The node's answers do not agree with each other (the chain moved between two
    reads, or a node that does not keep receipts): nothing of the range is reported."""


def hex21(value: object) -> str | None:
    """The 21-byte hex form (`41...`, lower case) of an address field of a node's answer:
    hex with the 0x41 prefix, a log's 20-byte address, an indexed topic (32 bytes, the
    address in the last 20), or base58 (`T...`); None when it is not an address."""
    if not isinstance(value, str) or not value:
        return None
    if value.startswith("T") and len(value) == 34:
        return _decoded(value)
    text = value.lower().removeprefix("0x")
    if not _HEX.issuperset(text):
        return None
    if len(text) == 64 and text.startswith(_TOPIC_PAD):
        return "41" + text[24:]
    if len(text) == 40:
        return "41" + text
    if len(text) == 42 and text.startswith("41"):
        return text
    return None


@lru_cache(maxsize=1 << 20)
def _decoded(address: str) -> str | None:
    """A `T...` address's 21 bytes in hex; kept, as the same watch list is decoded at every
    scan (10,000 base58check decodes take ~0.2 s, the look-ups ~2 ms)."""
    payload = b58check_decode(address)
    return payload.hex() if payload is not None and len(payload) == 21 else None


@dataclass(frozen=True, slots=True)
class Watch:
    """The watched addresses by their 21-byte hex form, each to the address as stored."""

    by_hex: Mapping[str, str]

    @classmethod
    def of(cls, addresses: Collection[str]) -> Watch:
        """`addresses` as stored (`T...`); one that does not decode can receive nothing and
        is left out."""
        found = {}
        for address in addresses:
            key = hex21(address)
            if key is not None:
                found[key] = address
        return cls(found)

    def get(self, field: object) -> str | None:
        key = hex21(field)
        return None if key is None else self.by_hex.get(key)


def tokens_by_hex(tokens: Mapping[int, str]) -> dict[str, int]:
    """The served TRC20 contracts (asset id -> `T...`) by their 21-byte hex form."""
    out = {}
    for asset_id, address in tokens.items():
        key = hex21(address)
        if key is not None:
            out[key] = asset_id
    return out


def number_of(block: Mapping[str, Any]) -> int:
    """A block's height (protobuf's JSON leaves 0 out: the genesis block)."""
    return int(((block.get("block_header") or {}).get("raw_data") or {}).get("number", 0))


def ref_of(block: Mapping[str, Any]) -> BlockRef:
    block_id = block.get("blockID")
    if not isinstance(block_id, str) or len(block_id) != 64:
        raise Inconsistent("a block without its id")
    return BlockRef(number_of(block), block_id.lower())


def parent_of(block: Mapping[str, Any]) -> str:
    return str(((block.get("block_header") or {}).get("raw_data") or {}).get("parentHash", ""))


def transactions(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = block.get("transactions") or []
    if not isinstance(found, list):
        raise Inconsistent("a block's transactions are not a list")
    return found


def has_calls(block: Mapping[str, Any]) -> bool:
    """Whether the block holds a contract call (its receipts are worth reading)."""
    return any(rows.contract_of(tx)[0] in CALLS for tx in transactions(block))


def check_range(blocks: Sequence[Mapping[str, Any]], first: int, last: int) -> list[BlockRef]:
    """The blocks' refs, once they are exactly `first..last`, each the parent of the next."""
    refs = [ref_of(block) for block in blocks]
    if [ref.height for ref in refs] != list(range(first, last + 1)):
        raise Inconsistent(f"the node did not answer blocks {first}..{last} exactly")
    for ref, block in zip(refs, blocks[1:], strict=False):
        if parent_of(block).lower() != ref.hash:
            raise Inconsistent(f"block {ref.height + 1} does not follow block {ref.height}")
    return refs


def credits(
    chain: Chain,
    block: Mapping[str, Any],
    infos: Sequence[dict[str, Any]] | None,
    watch: Watch,
    tokens: Mapping[str, int],
    native: int,
) -> list[Incoming]:
    """Every credit to a watched address in `block` (module rules), in the block's order.
    `infos`: the block's receipts (None: not read, the block holds no contract call);
    `tokens`: `tokens_by_hex`; `native`: the asset id of TRX."""
    ref = ref_of(block)
    txs = transactions(block)
    receipts = _receipts(ref, txs, infos)
    found: list[Incoming] = []
    for tx in txs:
        tx_id = str(tx.get("txID", "")).lower()
        kind, value = rows.contract_of(tx)
        if kind == TRANSFER:
            found.extend(_native(chain, ref, tx_id, tx, value, watch, native))
        info = receipts.get(tx_id)
        if info is not None and not rows.receipt_failed(info):
            found.extend(_tokens(chain, ref, tx_id, info, watch, tokens))
            found.extend(_internal(chain, ref, tx_id, info, watch, native))
    return found


def _receipts(
    ref: BlockRef, txs: Sequence[dict[str, Any]], infos: Sequence[dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """The block's receipts by txID, once they agree with its transactions."""
    calls = {str(tx.get("txID", "")).lower() for tx in txs if rows.contract_of(tx)[0] in CALLS}
    if infos is None:
        if calls:
            raise Inconsistent(f"block {ref.height}'s receipts were not read")
        return {}
    ids = {str(tx.get("txID", "")).lower() for tx in txs}
    by_id: dict[str, dict[str, Any]] = {}
    for info in infos:
        tx_id = str(info.get("id", "")).lower()
        if tx_id not in ids or int(info.get("blockNumber", ref.height)) != ref.height:
            raise Inconsistent(f"a receipt of block {ref.height} is not one of its transactions")
        by_id[tx_id] = info
    if not calls.issubset(by_id):
        raise Inconsistent(f"block {ref.height}: a contract call has no receipt")
    return by_id


def _native(
    chain: Chain,
    ref: BlockRef,
    tx_id: str,
    tx: Mapping[str, Any],
    value: Mapping[str, Any],
    watch: Watch,
    native: int,
) -> Iterator[Incoming]:
    address = watch.get(value.get("to_address"))
    if address is None:
        return
    ret = (tx.get("ret") or [{}])[0]
    amount = int(value.get("amount", 0))
    if ret.get("contractRet") != "SUCCESS" or amount <= 0:
        return
    sender = rows.base58(value.get("owner_address"))
    yield Incoming(chain, tx_id, "trx", address, native, amount, ref, sender)


def _tokens(
    chain: Chain,
    ref: BlockRef,
    tx_id: str,
    info: Mapping[str, Any],
    watch: Watch,
    tokens: Mapping[str, int],
) -> Iterator[Incoming]:
    for n, log in enumerate(info.get("log") or []):
        asset_id = tokens.get(hex21(log.get("address")) or "")
        topics = log.get("topics") or []
        if asset_id is None or len(topics) != 3:
            continue
        if str(topics[0]).lower().removeprefix("0x") != rows.TRANSFER_TOPIC:
            continue
        address = watch.get(str(topics[2]))
        data = str(log.get("data") or "").lower().removeprefix("0x")
        if address is None or len(data) != 64 or not _HEX.issuperset(data):
            continue
        amount = int(data, 16)
        if amount > 0:
            sender = rows.base58(str(topics[1]))
            yield Incoming(chain, tx_id, f"trc20:{n}", address, asset_id, amount, ref, sender)


def _internal(
    chain: Chain, ref: BlockRef, tx_id: str, info: Mapping[str, Any], watch: Watch, native: int
) -> Iterator[Incoming]:
    for n, internal in enumerate(info.get("internal_transactions") or []):
        if internal.get("rejected") or _note(internal.get("note")) not in MOVES_TRX:
            continue
        address = watch.get(internal.get("transferTo_address"))
        if address is None:
            continue
        amount = sum(
            int(part.get("callValue", 0))
            for part in internal.get("callValueInfo") or []
            if not part.get("tokenId")  # a TRC10 token's value, not TRX
        )
        if amount > 0:
            sender = rows.base58(internal.get("caller_address"))
            yield Incoming(chain, tx_id, f"internal:{n}", address, native, amount, ref, sender)


def _note(value: object) -> str:
    """An internal transaction's note (bytes, hex in the JSON)."""
    try:
        return bytes.fromhex(str(value or "")).decode()
    except ValueError:
        return ""


__all__ = [
    "CALLS",
    "Inconsistent",
    "Watch",
    "check_range",
    "credits",
    "has_calls",
    "hex21",
    "number_of",
    "ref_of",
    "tokens_by_hex",
]
