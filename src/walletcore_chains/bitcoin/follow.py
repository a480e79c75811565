"""The transfer lifecycle of BITCOIN (`walletcore.ports.TransferFollower`, docs/bitcoin.md,
"Lifecycle"): what the chain says of one transaction, the replace-by-fee ladder signed with
a send, and child-pays-for-parent for a received transaction.

- `sighting`: mined -> `success` at the gateway's depth, else `pending`; in the mempool ->
  `pending`; unknown -> its inputs decide: one spent by another transaction -> `conflict`
  (it can never land), else `missing` (evicted or never seen: the same bytes may be sent
  again). A mined Bitcoin transaction never fails.
- `ladder`: offline, from the body `prepare` built. Bumps: the same coins, the same
  recipient output, the fee raised `FACTOR` times per rung (and at least by the
  incremental relay fee x the rung's size: BIP125 rules 3 and 4) out of the payer's change
  (the sender's; the platform's for a PLATFORM-paid send); a change that would fall below
  the dust limit joins the fee and ends the ladder. A send without change (the whole
  balance, fee from the amount) is bumped out of the recipient's output. Then one cancel:
  the same coins all back to their owners at a fee above the top bump (the sender's
  coins back to the sender; a PLATFORM-paid send's fee again from the platform's coins).
  Every rung costs at most the cap; rungs carry no lease turn (they are broadcast later,
  without one).
- `cpfp_fee`: the child's fee that brings parent (and its unconfirmed ancestors) plus child
  to a target rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from walletcore.ports import FeeQuote, Replacement, Transfer, UnsignedTransfer
from walletcore_chains.bitcoin import txcodec
from walletcore_chains.bitcoin.coins import CHANGE_DUST, P2WPKH_SCRIPT, vsize
from walletcore_chains.bitcoin.network import BitcoinNetwork
from walletcore_chains.bitcoin.spend import Output

#: each bump's fee over the one before (a rung's fee rate rises as much: same size or less)
FACTOR = 1.5
#: bumps at most (1.5^8 ~ 25x the first fee), fewer when the cap is reached first
MAX_BUMPS = 8
#: sat/vB: the node's incremental relay fee (BIP125 rule 4: a replacement adds at least
#: this x its own size). Bitcoin Core's and Knots' default; Core 30 lowers it to 0.1, so
#: 1 is the safe figure offline.
INCREMENTAL_RATE = 1.0


def _increment(size: int) -> int:
    return math.ceil(INCREMENTAL_RATE * size)


@dataclass(frozen=True)
class _Shape:
    """What a send's body says about who pays a raised fee."""

    body: txcodec.Body
    transfer: Transfer
    #: locking-script lengths of the outputs, in order
    scripts: tuple[int, ...]
    #: the output a raised fee comes out of; None: no bump (only the cancel)
    payer: int | None
    #: whether that output is change (dropped below dust) or the recipient's (kept)
    payer_is_change: bool
    recipient_dust: int


def _shape(unsigned: UnsignedTransfer, recipient_script: int, recipient_dust: int) -> _Shape | None:
    body = txcodec.Body.decode(unsigned.body)
    transfer = unsigned.transfer
    if not body.outputs or body.outputs[0].address != transfer.recipient:
        return None  # not a body `prepare` built (the recipient's output comes first)
    sponsor = transfer.fee_payer if transfer.fee_payer != transfer.sender else None
    scripts = (recipient_script,) + (P2WPKH_SCRIPT,) * (len(body.outputs) - 1)
    payer_address = sponsor or transfer.sender
    change = next(
        (i for i, o in enumerate(body.outputs) if i > 0 and o.address == payer_address), None
    )
    if change is not None:
        return _Shape(body, transfer, scripts, change, True, recipient_dust)
    if sponsor is None and len(body.outputs) == 1:  # the whole balance: fee from the amount
        return _Shape(body, transfer, scripts, 0, False, recipient_dust)
    # a PLATFORM fee without platform change (or a sender's change under the dust limit,
    # which `pay` gave the recipient): nothing to raise a fee from but the cancel's coins
    return _Shape(body, transfer, scripts, None, False, recipient_dust)


@dataclass(frozen=True)
class _Rung:
    body: txcodec.Body
    transfer: Transfer
    size: int
    #: the payer's change was used up (joined the fee): no rung can follow
    last: bool


def _bump(shape: _Shape, fee: int) -> _Rung | None:
    """The send at (about) `fee`: exactly `fee` unless the payer's change falls below the
    dust limit, then the whole change joins the fee (more, or less when it is short)."""
    body = shape.body
    if shape.payer is None:
        return None
    outputs = list(body.outputs)
    scripts = list(shape.scripts)
    value = outputs[shape.payer].value - (fee - body.fee)
    transfer = shape.transfer
    last = False
    if shape.payer_is_change:
        if value >= CHANGE_DUST:
            outputs[shape.payer] = Output(outputs[shape.payer].address, value)
        else:
            fee = body.fee + outputs[shape.payer].value
            del outputs[shape.payer], scripts[shape.payer]
            last = True
    else:
        if value < shape.recipient_dust:
            return None
        outputs[shape.payer] = Output(outputs[shape.payer].address, value)
        transfer = replace(transfer, amount_units=value)
    new = replace(body, outputs=tuple(outputs), fee=fee, turns={})
    return _Rung(new, transfer, vsize(len(body.inputs), scripts), last)


def _cancel(shape: _Shape, fee: int) -> _Rung | None:
    """The same coins back to their owners at `fee`: the sender's all to the sender; on a
    PLATFORM-paid send the platform's to the platform, less the fee (all of them, when what
    is left would be dust)."""
    body, transfer = shape.body, shape.transfer
    sponsor = transfer.fee_payer if transfer.fee_payer != transfer.sender else None
    own = sum(c.value for c, owner in body.inputs if owner == transfer.sender)
    theirs = sum(c.value for c, owner in body.inputs if owner != transfer.sender)
    if sponsor is None:
        if own - fee < CHANGE_DUST:
            return None
        outputs = [Output(transfer.sender, own - fee)]
    else:
        outputs = [Output(transfer.sender, own)]
        if theirs - fee >= CHANGE_DUST:
            outputs.append(Output(sponsor, theirs - fee))
        elif theirs >= fee:
            fee = theirs
        else:
            return None
    new = replace(body, outputs=tuple(outputs), fee=fee, turns={})
    cancel = Transfer(transfer.asset, transfer.sender, transfer.sender, 0, transfer.fee_payer)
    return _Rung(new, cancel, vsize(len(body.inputs), [P2WPKH_SCRIPT] * len(outputs)), True)


def _cancel_size(shape: _Shape) -> int:
    sponsored = shape.transfer.fee_payer != shape.transfer.sender
    return vsize(len(shape.body.inputs), [P2WPKH_SCRIPT] * (2 if sponsored else 1))


def _cancel_over(shape: _Shape, top: int, cap: float) -> _Rung | None:
    """The cancel over a transaction of fee `top`: `FACTOR` x `top` when the cap allows,
    else the cap, never less than the replacement rule asks."""
    least = top + _increment(_cancel_size(shape))
    fee = int(min(cap, max(math.ceil(top * FACTOR), least)))
    if fee < least:
        return None
    rung = _cancel(shape, fee)
    if rung is None or rung.body.fee > cap or rung.body.fee < top + _increment(rung.size):
        return None
    return rung


def ladder(
    network: BitcoinNetwork,
    unsigned: UnsignedTransfer,
    cap_units: int,
    *,
    recipient_script: int,
    recipient_dust: int,
) -> list[Replacement]:
    """The bumps then the cancel of a send `prepare` built (see the module's docstring);
    empty when not even one rung fits under `cap_units`."""
    shape = _shape(unsigned, recipient_script, recipient_dust)
    if shape is None or shape.body.network != network.name:
        return []
    bumps: list[_Rung] = []
    prev = shape.body.fee
    size = vsize(len(shape.body.inputs), shape.scripts)
    room = _increment(_cancel_size(shape))  # the cancel's least step over the top bump
    while len(bumps) < MAX_BUMPS:
        target = max(math.ceil(prev * FACTOR), prev + _increment(size))
        if target > cap_units - room:  # the last bump: as high as leaves the cancel room
            target = cap_units - room
            if target < prev + _increment(size):
                break
        rung = _bump(shape, target)
        if (
            rung is None
            or rung.body.fee > cap_units
            or rung.body.fee < prev + _increment(rung.size)
        ):
            break
        bumps.append(rung)
        prev, size = rung.body.fee, rung.size
        if rung.last or target == cap_units - room:
            break
    cancel = None
    # a cancel the coins can pay at all (over the send, whatever the cap): the top bumps
    # give way until it fits under the cap; one they cannot pay leaves the bumps alone
    if _cancel_over(shape, shape.body.fee, math.inf) is not None:
        while cancel is None:
            top = bumps[-1].body.fee if bumps else shape.body.fee
            cancel = _cancel_over(shape, top, cap_units)
            if cancel is None:
                if not bumps:
                    break
                bumps.pop()
    out = [Replacement("bump", _unsigned(network, r), r.body.fee) for r in bumps]
    if cancel is not None:
        out.append(Replacement("cancel", _unsigned(network, cancel), cancel.body.fee))
    return out


def _unsigned(network: BitcoinNetwork, rung: _Rung) -> UnsignedTransfer:
    """Signed like `prepare`'s: each owner signs the BIP143 digests of its coins."""
    payloads = txcodec.payloads(network, rung.body)
    return UnsignedTransfer(
        rung.transfer,
        FeeQuote(rung.body.fee),
        payloads[rung.transfer.sender],
        rung.body.encode(),
        payloads=payloads,
    )


def cpfp_fee(
    rate: float,
    floor: float,
    child_size: int,
    parent: tuple[int, int],
    ancestors: tuple[int, int],
) -> int:
    """The child's fee (sat) so that the package reaches `rate` sat/vB whether a miner
    counts the parent alone or with its unconfirmed ancestors (`(vsize, fee)` each); the
    child alone pays at least `rate` and the node's floor too."""
    own = math.ceil(child_size * max(rate, floor) - 1e-9)
    needs = [
        math.ceil(rate * (size + child_size) - 1e-9) - fee for size, fee in (parent, ancestors)
    ]
    return max([own, *needs])


def child_size(inputs: int) -> int:
    """A child spending `inputs` P2WPKH coins to one P2WPKH output."""
    return vsize(inputs, [P2WPKH_SCRIPT])


def ancestry(views: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The summed `(vsize, fee)` of a transaction and its unconfirmed ancestors."""
    return sum(v for v, _ in views), sum(f for _, f in views)


__all__ = [
    "FACTOR",
    "INCREMENTAL_RATE",
    "MAX_BUMPS",
    "ancestry",
    "child_size",
    "cpfp_fee",
    "ladder",
]
