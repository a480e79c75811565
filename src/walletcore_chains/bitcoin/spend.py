"""A transfer's shape: which coins of whom, which outputs, which fee (docs/bitcoin.md).

- `quote(...)`: the fee of the transfer at a fee rate, for `/fee` and the send's plan.
  The sender pays the amount and the fee on top (a PLATFORM sponsor pays the fee from
  its own coin instead); when the wallet's coins cannot pay both, the quote is for the fee
  taken from the amount (a USER send of the whole balance).
- `pay(...)`: the transaction that pays exactly a quoted fee now, under the address's
  lease: the coins may differ from the quote's (another send took some meanwhile); the fee
  then stays the quote's as long as it is at least the node's minimum relay fee for the
  real size, else the send is refused with "request a new fee quote".

Inputs: the sender's coins, then the sponsor's (the fee payer's input is the last one, which
the history rows read as "who paid the fee"). Outputs: the recipient, the sender's change,
the sponsor's change; every change output at least the dust limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from walletcore_chains.bitcoin.backend import Utxo
from walletcore_chains.bitcoin.coins import (
    CHANGE_DUST,
    P2WPKH_SCRIPT,
    NotEnough,
    fee_for,
    input_weight,
    pick,
    vsize,
)


@dataclass(frozen=True, slots=True)
class Output:
    address: str
    value: int


@dataclass(frozen=True, slots=True)
class Spend:
    #: (coin, owner address), in input order
    inputs: tuple[tuple[Utxo, str], ...]
    outputs: tuple[Output, ...]
    fee: int
    #: each output's locking-script length, for the size
    scripts: tuple[int, ...]

    @property
    def vsize(self) -> int:
        return vsize(len(self.inputs), self.scripts)

    def owners(self) -> list[str]:
        return list(dict.fromkeys(owner for _, owner in self.inputs))


def _spend(
    inputs: Sequence[tuple[Utxo, str]], outputs: Sequence[tuple[Output, int]], fee: int
) -> Spend:
    return Spend(tuple(inputs), tuple(o for o, _ in outputs), fee, tuple(n for _, n in outputs))


def _per_input(rate: float) -> int:
    return math.ceil(input_weight() / 4 * rate) + 1


class TooSmall(Exception):
    """The recipient's output would be below its dust limit (`limit` sat)."""

    def __init__(self, value: int, limit: int) -> None:
        super().__init__(f"{value} < {limit}")
        self.value = value
        self.limit = limit


def quote(
    coins: Sequence[Utxo],
    amount: int,
    recipient_script: int,
    rate: float,
    *,
    sponsor_coins: Sequence[Utxo] | None = None,
) -> int:
    """The fee (sat) of sending `amount` at `rate` sat/vB (see the module's docstring)."""
    if sponsor_coins is not None:
        sender = pick(coins, amount) if amount else None
        n_sender = len(sender.coins) if sender else 1
        sender_change = sender is not None and sender.surplus >= CHANGE_DUST
        outs = [recipient_script] + ([P2WPKH_SCRIPT] if sender_change else [])
        base = fee_for(n_sender, outs + [P2WPKH_SCRIPT], rate)
        try:
            paid = pick(sponsor_coins, 0, _per_input(rate), base)
        except NotEnough:  # cannot pay: the most it could cost (the core falls back to USER)
            return fee_for(n_sender + max(1, len(sponsor_coins)), outs + [P2WPKH_SCRIPT], rate)
        n = n_sender + len(paid.coins)
        with_change = fee_for(n, outs + [P2WPKH_SCRIPT], rate)
        if paid.total - with_change >= CHANGE_DUST:
            return with_change
        return paid.total  # no sponsor change: its whole coin pays the fee
    outs_change = [recipient_script, P2WPKH_SCRIPT]
    try:
        picked = pick(coins, amount, _per_input(rate), fee_for(0, outs_change, rate))
    except NotEnough:
        # fee from the amount: the coins that make up `amount` pay it
        picked = pick(coins, amount)
        n = len(picked.coins)
        if picked.surplus >= CHANGE_DUST:
            return fee_for(n, outs_change, rate)
        return fee_for(n, [recipient_script], rate)
    n = len(picked.coins)
    with_change = fee_for(n, outs_change, rate)
    leftover = picked.total - amount - with_change
    if leftover >= CHANGE_DUST:
        return with_change
    return picked.total - amount  # no change: the leftover joins the fee


def pay(
    coins: Sequence[Utxo],
    sender: str,
    recipient: str,
    recipient_limit: int,
    amount: int,
    fee: int,
    recipient_script: int,
    *,
    sponsor: str | None = None,
    sponsor_coins: Sequence[Utxo] | None = None,
) -> Spend:
    """The transaction paying `amount` to `recipient` and exactly `fee` (a quote)."""
    if amount < recipient_limit:
        raise TooSmall(amount, recipient_limit)
    if sponsor is None:
        picked = pick(coins, amount + fee)
        inputs = [(c, sender) for c in picked.coins]
        change = picked.total - amount - fee
        outputs: list[tuple[Output, int]] = []
        if change >= CHANGE_DUST:
            outputs = [
                (Output(recipient, amount), recipient_script),
                (Output(sender, change), P2WPKH_SCRIPT),
            ]
        else:  # too small to keep: the recipient gets it, the fee stays the quote's
            outputs = [(Output(recipient, amount + change), recipient_script)]
        return _spend(inputs, outputs, fee)
    assert sponsor_coins is not None
    sender_pick = pick(coins, amount)
    try:
        sponsor_pick = pick(sponsor_coins, fee)
    except NotEnough as exc:
        raise SponsorShort(exc.available, exc.needed) from None
    inputs = [(c, sender) for c in sender_pick.coins] + [(c, sponsor) for c in sponsor_pick.coins]
    sender_change = sender_pick.total - amount
    sponsor_change = sponsor_pick.total - fee
    to_recipient = amount
    outputs = []
    if 0 < sender_change < CHANGE_DUST:
        to_recipient += sender_change
        sender_change = 0
    if 0 < sponsor_change < CHANGE_DUST:
        to_recipient += sponsor_change
        sponsor_change = 0
    outputs.append((Output(recipient, to_recipient), recipient_script))
    if sender_change:
        outputs.append((Output(sender, sender_change), P2WPKH_SCRIPT))
    if sponsor_change:
        outputs.append((Output(sponsor, sponsor_change), P2WPKH_SCRIPT))
    return _spend(inputs, outputs, fee)


class SponsorShort(NotEnough):
    """The sponsor's coins cannot pay the fee."""


__all__ = ["Output", "Spend", "SponsorShort", "TooSmall", "pay", "quote"]
