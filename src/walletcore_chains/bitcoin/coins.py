"""Coin selection and sizes: which coins pay a transfer, its fee from its virtual size, and
no dust outputs (pure functions: no I/O, no bitcoinlib).

Sizes are native segwit (P2WPKH inputs, the wallets' own), counted in weight units with a
72-byte signature (the longest DER form), so a transaction is never bigger than estimated
and its fee rate never below the one asked for.

Selection, over the spendable coins (confirmed ones, then the wallet's own unconfirmed
change; `spendable` in the gateway): the smallest single coin that pays everything, else
the largest coins first until they do. A leftover too small for a change output (below
the dust limit of a P2WPKH output) is not kept as change: when a fee is being quoted it
joins the fee (the quote says so); when a quoted fee is being paid, it goes to the
recipient, so the transaction never costs more than its quote.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from walletcore_chains.bitcoin.backend import Utxo

#: the node's default dust relay fee (sat/kvB): a output worth less is refused
DUST_RELAY_SAT_PER_KVB = 3000
#: version, locktime, input and output counts (up to 252 each), in bytes
_TX_OVERHEAD = 10
_SEGWIT_MARKER_WU = 2
#: outpoint, empty scriptSig, sequence
_P2WPKH_INPUT_BASE = 32 + 4 + 1 + 4
#: item count, signature (72 + its length byte), public key (33 + its length byte)
_P2WPKH_WITNESS = 1 + 73 + 34
P2WPKH_SCRIPT = 22


def input_weight() -> int:
    return _P2WPKH_INPUT_BASE * 4 + _P2WPKH_WITNESS


def output_weight(script_len: int) -> int:
    return (8 + 1 + script_len) * 4


def vsize(inputs: int, output_scripts: Sequence[int]) -> int:
    """Virtual size of a transaction spending `inputs` P2WPKH coins to outputs with these
    locking-script lengths."""
    overhead = _TX_OVERHEAD + (2 if inputs > 252 else 0) + (2 if len(output_scripts) > 252 else 0)
    weight = overhead * 4 + _SEGWIT_MARKER_WU + inputs * input_weight()
    weight += sum(output_weight(n) for n in output_scripts)
    return math.ceil(weight / 4)


def fee_for(inputs: int, output_scripts: Sequence[int], rate: float) -> int:
    """The fee of that transaction at `rate` sat/vB, rounded up."""
    return math.ceil(vsize(inputs, output_scripts) * rate - 1e-9)


def dust_limit(script_len: int, witness: bool) -> int:
    """The node's dust threshold of an output (`GetDustThreshold`): the cost of spending
    it at the dust relay fee; 294 sat for P2WPKH, 330 for P2TR/P2WSH, 546 for P2PKH."""
    spend = (32 + 4 + 1 + 107 // 4 + 4) if witness else (32 + 4 + 1 + 107 + 4)
    size = 8 + 1 + script_len + spend
    return size * DUST_RELAY_SAT_PER_KVB // 1000


CHANGE_DUST = dust_limit(P2WPKH_SCRIPT, True)


class NotEnough(Exception):
    """The coins cannot pay it: `available` sat, `needed` sat at least."""

    def __init__(self, available: int, needed: int) -> None:
        super().__init__(f"{available} < {needed}")
        self.available = available
        self.needed = needed


@dataclass(frozen=True, slots=True)
class Picked:
    coins: tuple[Utxo, ...]
    #: what the coins pay beyond the target (and the fee, when it was fixed)
    surplus: int

    @property
    def total(self) -> int:
        return sum(c.value for c in self.coins)


def _order(coins: Sequence[Utxo]) -> list[Utxo]:
    """Confirmed coins first (oldest change last to be chained on), larger first."""
    return sorted(coins, key=lambda c: (c.height is None, -c.value, c.txid, c.vout))


def pick(coins: Sequence[Utxo], need: int, extra_per_coin: int = 0, base: int = 0) -> Picked:
    """Coins paying at least `need + base + extra_per_coin x count`: the smallest single
    coin that does, else the largest first (confirmed before unconfirmed). `extra_per_coin`
    is each input's own fee when the fee grows with the inputs."""
    ordered = _order(coins)
    single_need = need + base + extra_per_coin
    for pool in (
        [c for c in ordered if c.height is not None],
        ordered,
    ):
        fitting = [c for c in pool if c.value >= single_need]
        if fitting:
            best = min(fitting, key=lambda c: (c.value, c.height is None, c.txid, c.vout))
            return Picked((best,), best.value - single_need)
    chosen: list[Utxo] = []
    total = 0
    for coin in ordered:
        chosen.append(coin)
        total += coin.value
        target = need + base + extra_per_coin * len(chosen)
        if total >= target:
            return Picked(tuple(chosen), total - target)
    raise NotEnough(total, need + base + extra_per_coin * max(1, len(chosen)))


__all__ = [
    "CHANGE_DUST",
    "DUST_RELAY_SAT_PER_KVB",
    "P2WPKH_SCRIPT",
    "NotEnough",
    "Picked",
    "dust_limit",
    "fee_for",
    "input_weight",
    "output_weight",
    "pick",
    "vsize",
]
