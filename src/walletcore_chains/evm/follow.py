"""The transfer lifecycle on the EVM chains (`walletcore.ports.TransferFollower`): what the
node says of one broadcast transfer now (`sighting`), and the replacement ladder built,
offline, when the transfer is signed (`ladder`).

Sighting, of the transfer's own transaction (the last of its envelope: a sponsored
transfer's gas top-up is only the means, and its hash is not the transfer's):

- a receipt: mined. `SUCCESS` (status 1) or `FAILED` (status 0) once it is
  `confirmations` blocks deep, its own block included (the depth rule of `lookup` and
  `history`); `PENDING` before.
- no receipt, and the node has the transaction: `PENDING` (in its pool).
- neither, and the sender's mined nonce count is not past the transaction's nonce:
  `MISSING` (dropped or evicted from the pool, replaced in the pool by a rung of its own
  ladder, or never seen by this node): broadcasting the same bytes again is safe.
- neither, and the count is past its nonce: another transaction took the nonce.
  `CONFLICT` once the count `confirmations` blocks below the head is past it too (the other
  transaction is as deep as a `success` must be); `PENDING` while it is shallower (a
  reorganisation could still undo it). The receipt is read once more after the count, so a
  transaction mined between the reads is never called a conflict.

Every read that fails raises (`errors.read_error`: `NodeUnavailable`): a node that did not
answer never reads `MISSING`.

The ladder, of the transfer's own transaction (for a sponsored transfer: of the sender's
transfer, not of the sponsor's top-up, which is mined before the transfer goes out):

- bumps: the same nonce, recipient, value, data and gas, the max fee and the tip (or the
  legacy gas price) each x 1.25, rounded up and at least one wei more, over the rung
  before. geth, bsc and bor take a replacement at +10% on both; anvil at any increase.
- a cancel: the same nonce, nothing (value 0, no data) to the sender itself, 21,000 gas,
  its tip (or legacy gas price) x 1.25 over the top bump's. On an EIP-1559 chain its max fee
  is the most the cap allows (`cap // 21,000`, never below 1.25 x the top bump's): it pays
  the base fee of its block plus its tip, no more, and still lands when the base fee jumps.
- every rung costs at most `cap_units` (gas x max fee, in the native coin's base units);
  the bumps stop where a cancel over them would no longer fit under the cap, so the ladder
  always ends in a cancel when one fits at all, and at `MAX_BUMPS` bumps. Empty when not
  even the first rung fits.

A rung's transaction carries `replaces` (`codec.EvmTx.replaces`): its nonce was reserved,
broadcast and accepted with the transfer it replaces, so the `NonceBook` is never asked to
reserve or free it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from eth_typing import HexStr
from eth_utils.address import to_checksum_address
from web3 import AsyncWeb3
from web3.exceptions import TransactionNotFound as Web3NotFound

from walletcore.ports import Sighting
from walletcore_chains.evm import codec
from walletcore_chains.evm.fees import NATIVE_GAS

#: each rung's max fee and tip over the rung before: x BUMP_NUMERATOR / BUMP_DENOMINATOR
BUMP_NUMERATOR, BUMP_DENOMINATOR = 5, 4
#: the most bumps a ladder holds (x 1.25 ten times: 9.3 x the first fee), before its cancel
MAX_BUMPS = 10


@dataclass(frozen=True, slots=True)
class Rung:
    """One rung: its unsigned transaction and the most it can cost (gas x max fee)."""

    kind: Literal["bump", "cancel"]
    tx: codec.EvmTx
    fee_units: int


def raised(value: int) -> int:
    """`value` x 1.25 rounded up, and at least `value` + 1 (a tip of 0 becomes 1 wei)."""
    return max(-(-value * BUMP_NUMERATOR // BUMP_DENOMINATOR), value + 1)


def ladder(main: codec.EvmTx, cap_units: int, max_bumps: int = MAX_BUMPS) -> list[Rung]:
    """The replacement ladder of `main` under `cap_units` (see the module's docstring)."""
    gas = int(main.fields["gas"])
    rungs: list[Rung] = []
    top = main
    for _ in range(max_bumps):
        bump = codec.EvmTx(main.sender, _bumped(top.fields), replaces=True)
        if gas * bump.max_fee > cap_units or NATIVE_GAS * raised(bump.max_fee) > cap_units:
            break
        rungs.append(Rung("bump", bump, gas * bump.max_fee))
        top = bump
    cancel = _cancel(top, cap_units)
    if cancel is not None:
        rungs.append(cancel)
    return rungs


def _bumped(fields: dict[str, Any]) -> dict[str, Any]:
    out = dict(fields)
    if "gasPrice" in fields:
        out["gasPrice"] = raised(int(fields["gasPrice"]))
        return out
    max_fee = raised(int(fields["maxFeePerGas"]))
    out["maxFeePerGas"] = max_fee
    out["maxPriorityFeePerGas"] = min(raised(int(fields["maxPriorityFeePerGas"])), max_fee)
    return out


def _cancel(top: codec.EvmTx, cap_units: int) -> Rung | None:
    """Nothing to the sender itself, over `top` (the top bump, or the transfer)."""
    least = raised(top.max_fee)
    if NATIVE_GAS * least > cap_units:
        return None
    fields = top.fields
    sender = to_checksum_address(top.sender)
    if top.legacy:
        max_fee, tip = least, None
    else:
        max_fee = cap_units // NATIVE_GAS
        tip = min(raised(int(fields["maxPriorityFeePerGas"])), max_fee)
    cancel = codec.tx_fields(
        int(fields["chainId"]), top.nonce, sender, 0, b"", NATIVE_GAS, max_fee, tip
    )
    tx = codec.EvmTx(top.sender, cancel, replaces=True)
    return Rung("cancel", tx, NATIVE_GAS * max_fee)


async def sighting(
    w3: AsyncWeb3[Any], confirmations: int, main: codec.SignedTx, tx_hash: str
) -> Sighting:
    """What the node says of `main` (hash `tx_hash`) now; node errors propagate as raised
    (the gateway reads them into domain errors)."""
    found = await _mined(w3, confirmations, tx_hash)
    if found is not None:
        return found
    try:
        await w3.eth.get_transaction(HexStr(tx_hash))
    except Web3NotFound:
        pass
    else:
        return Sighting.PENDING  # in the node's pool
    sender = to_checksum_address(main.sender)
    if int(await w3.eth.get_transaction_count(sender, "latest")) <= main.nonce:
        return Sighting.MISSING
    found = await _mined(w3, confirmations, tx_hash)  # mined between the reads after all?
    if found is not None:
        return found
    deep = int(await w3.eth.block_number) - confirmations + 1
    if deep >= 0 and int(await w3.eth.get_transaction_count(sender, deep)) > main.nonce:
        return Sighting.CONFLICT
    return Sighting.PENDING  # another transaction holds the nonce, not yet at depth


async def _mined(w3: AsyncWeb3[Any], confirmations: int, tx_hash: str) -> Sighting | None:
    """None without a receipt; else its outcome, once at depth."""
    try:
        receipt = await w3.eth.get_transaction_receipt(HexStr(tx_hash))
    except Web3NotFound:
        return None
    if receipt is None or receipt.get("blockNumber") is None:  # a node that answers early
        return None
    depth = int(await w3.eth.block_number) - int(receipt["blockNumber"]) + 1
    if depth < confirmations:
        return Sighting.PENDING
    return Sighting.SUCCESS if int(receipt.get("status", 1)) == 1 else Sighting.FAILED


__all__ = [
    "BUMP_DENOMINATOR",
    "BUMP_NUMERATOR",
    "MAX_BUMPS",
    "Rung",
    "ladder",
    "raised",
    "sighting",
]
