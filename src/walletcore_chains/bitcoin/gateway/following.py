"""The follow-up of a sent transfer (`TransferFollower`, `follow.py`):
`sighting` of one transaction, `replacements` (the replace-by-fee ladder, offline),
`prepare_cpfp` (child pays for a received parent).
"""

from __future__ import annotations

from walletcore.domain.assets import Asset
from walletcore.domain.errors import (
    InvalidRequest,
    ServerError,
    ServiceUnavailable,
    TransferRejected,
)
from walletcore.ports import (
    FeeQuote,
    Replacement,
    Sighting,
    SignedTransfer,
    Transfer,
    UnsignedTransfer,
)
from walletcore_chains.bitcoin import errors, follow, spend, txcodec
from walletcore_chains.bitcoin.backend import BackendFailure, Outspend, TxView, Utxo
from walletcore_chains.bitcoin.coins import CHANGE_DUST, dust_limit
from walletcore_chains.bitcoin.gateway.base import btc, first_turn
from walletcore_chains.bitcoin.gateway.sending import Sending
from walletcore_chains.encodings import segwit_decode

#: a transaction has at most this many unconfirmed ancestors (the node's default limit)
_ANCESTOR_LIMIT = 25


class Following(Sending):
    """The transfer lifecycle: sightings, the replace-by-fee ladder, child pays for parent."""

    # -- lifecycle (`TransferFollower`, follow.py) ---------------------------------------
    async def sighting(self, sender: str, asset: Asset, signed: SignedTransfer) -> Sighting:
        """Mined: `success` at the gateway's depth, else `pending`; in the mempool:
        `pending`; unknown to the node: `conflict` when one of its coins is spent by
        another transaction (or its coin's transaction was replaced by a mined one), else
        `missing`. Node failures raise (503), never `missing`."""
        self._native(asset)
        txid = signed.tx_hash
        try:
            parsed_txid, spent = self._parsed(signed.raw)
            matches = parsed_txid == txid
        except Exception:  # noqa: BLE001 - not bytes this gateway made
            matches = False
        if not matches:
            raise ServerError(
                "The stored transaction does not match its hash; contact the operator"
            )
        try:
            await self.backend.watch(sender)  # Core: its wallet then remembers replacements
            seen = await self._sighted(txid)
            if seen is not None:
                return seen
            states: list[Outspend] = []
            for prev_txid, vout in spent:
                states.append(await self.backend.outspend(prev_txid, vout))
            if any(s.state == "spent" and s.spender == txid for s in states):
                return Sighting.PENDING  # the backend names it as the spender: it has it
            if any(s.state == "spent" for s in states):
                # it may have been mined (or entered the mempool) since it was looked up
                again = await self._sighted(txid)
                return Sighting.CONFLICT if again is None else again
            for (prev_txid, _), state in zip(spent, states, strict=True):
                if state.state == "unknown":
                    funding = await self.backend.transaction(prev_txid)
                    if funding is not None and funding.conflicted:
                        return Sighting.CONFLICT  # the coin it spends can never exist
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        return Sighting.MISSING

    async def _sighted(self, txid: str) -> Sighting | None:
        """What the backend says of a transaction it knows; None when it does not."""
        view = await self.backend.transaction(txid)
        if view is None:
            return None
        if view.conflicted:
            return Sighting.CONFLICT
        if view.height is None:
            return Sighting.PENDING
        tip = await self.backend.tip_height()
        deep = tip - view.height + 1 >= self.options.confirmations
        return Sighting.SUCCESS if deep else Sighting.PENDING

    def replacements(self, unsigned: UnsignedTransfer, cap_units: int) -> list[Replacement]:
        """The replace-by-fee ladder of a send `prepare` built (`follow.ladder`), offline:
        bumps out of the payer's change (the recipient's output when the whole balance
        was sent), then a cancel (the coins back to their owners); each costs at most
        `cap_units` sat and is signed like the send (`payload_for` each signer)."""
        if unsigned.transfer.asset.chain != self.chain:
            return []
        script, witness = self._script(unsigned.transfer.recipient)
        return follow.ladder(
            self.network,
            unsigned,
            cap_units,
            recipient_script=script,
            recipient_dust=dust_limit(script, witness),
        )

    async def prepare_cpfp(
        self,
        address: str,
        parent_txid: str,
        fee_rate_sat_vb: float | None = None,
        cap_units: int | None = None,
    ) -> UnsignedTransfer:
        """Child pays for parent: a transaction spending the outputs of the unconfirmed
        `parent_txid` that pay `address` (not yet spent) back to `address`, at the fee
        that brings the package (the parent with its unconfirmed ancestors, and the
        child) to `fee_rate_sat_vb` (default: the gateway's estimate for `fee_target`
        blocks). Signed by `address`'s key (`payload_for(address)`), put together by
        `assemble`, sent by `broadcast`. `InvalidRequest` when the parent is confirmed,
        unknown, replaced or pays nothing unspent to `address`; `TransferRejected` when
        the fee would exceed `cap_units` or the coins cannot pay it."""
        address = self.validate_address(address)
        decoded = segwit_decode(self.network.hrp, address)
        if decoded is None or decoded[0] != 0 or len(decoded[1]) != 20:
            raise InvalidRequest("Child-pays-for-parent spends a wallet's P2WPKH coins only")
        wanted = parent_txid.strip().lower() if isinstance(parent_txid, str) else ""
        if len(wanted) != 64 or any(c not in "0123456789abcdef" for c in wanted):
            raise InvalidRequest("The parent transaction's id must be 64 hexadecimal digits")
        if fee_rate_sat_vb is not None and not (0 < fee_rate_sat_vb <= 100_000):
            raise InvalidRequest("The target fee rate must be above 0 sat/vB")
        try:
            await self.backend.watch(address)
            parent = await self.backend.transaction(wanted)
            if parent is None or parent.conflicted:
                raise InvalidRequest(
                    f"Transaction {wanted} is unknown to the network (or was replaced): "
                    "nothing to pay for"
                )
            if parent.height is not None:
                raise InvalidRequest(
                    f"Transaction {wanted} is confirmed already: nothing to speed up"
                )
            paying = [(i, o.value) for i, o in enumerate(parent.outputs) if o.address == address]
            if not paying:
                raise InvalidRequest(
                    f"Transaction {wanted} pays nothing to {address}: its key cannot speed it up"
                )
            coins = []
            for vout, value in paying:
                if (await self.backend.outspend(wanted, vout)).state == "unspent":
                    coins.append(Utxo(wanted, vout, value, None))
            if not coins:
                raise InvalidRequest(
                    f"The outputs of {wanted} to {address} are spent already (a child "
                    "transaction pays for it already)"
                )
            rate = fee_rate_sat_vb if fee_rate_sat_vb is not None else await self.fee_rate()
            floor = await self.backend.min_fee_rate()
            ancestors = await self._unconfirmed_ancestry(parent)
            tip = await self.backend.tip_height()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        if parent.vsize is None or any(size <= 0 for size, _ in ancestors):
            raise ServiceUnavailable("The chain node does not tell the transaction's size")
        size = follow.child_size(len(coins))
        fee = follow.cpfp_fee(
            rate, floor, size, (parent.vsize, parent.fee), follow.ancestry(ancestors)
        )
        total = sum(c.value for c in coins)
        if cap_units is not None and fee > cap_units:
            raise TransferRejected(
                f"Child-pays-for-parent not prepared: its fee of {btc(fee)} BTC exceeds the "
                f"cap of {btc(cap_units)} BTC; nothing was signed"
            )
        if total - fee < CHANGE_DUST:
            raise TransferRejected(
                f"Child-pays-for-parent not prepared: the coins received ({btc(total)} BTC) "
                f"cannot pay its fee of {btc(fee)} BTC; nothing was signed"
            )
        turns = {address: await self._turns.reserve(address, first_turn)}
        try:
            body = txcodec.Body(
                self.network.name,
                tip,
                tuple((c, address) for c in coins),
                (spend.Output(address, total - fee),),
                fee,
                turns,
            )
            payloads = txcodec.payloads(self.network, body)
        except BaseException:
            await self._give_back(turns)
            raise
        # moves nothing: the wallet's own coins back to it (as the ladder's cancel)
        transfer = Transfer(self.native, address, address, 0, address)
        return UnsignedTransfer(
            transfer, FeeQuote(fee), payloads[address], body.encode(), payloads=payloads
        )

    async def _unconfirmed_ancestry(self, tx: TxView) -> list[tuple[int, int]]:
        """`(vsize, fee)` of `tx` and of each of its unconfirmed ancestors (at most the
        node's ancestor limit)."""
        known: dict[str, TxView | None] = {tx.txid: tx}
        queue = [tx]
        while queue and len(known) <= _ANCESTOR_LIMIT * 4:
            for txin in queue.pop().inputs:
                if txin.txid in known:
                    continue
                view = await self.backend.transaction(txin.txid)
                known[txin.txid] = view
                if view is not None and view.height is None:
                    queue.append(view)
        unconfirmed = [v for v in known.values() if v is not None and v.height is None]
        return [(v.vsize or 0, v.fee) for v in unconfirmed[: _ANCESTOR_LIMIT + 1]]


__all__ = ["Following"]
