"""Building and signing of `BitcoinGateway`'s transfers: under the address's
lease (and the sponsor's), the coins that pay exactly the quoted fee (`spend.pay`), one
BIP143 digest per coin; `assemble` puts the signatures in; `release` ends the turns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from walletcore.domain.errors import InsufficientFunds, InvalidRequest, TransferRejected
from walletcore.ports import FeeQuote, SignedTransfer, Transfer, UnsignedTransfer
from walletcore_chains.bitcoin import errors, spend, txcodec
from walletcore_chains.bitcoin.backend import BackendFailure
from walletcore_chains.bitcoin.coins import NotEnough, dust_limit
from walletcore_chains.bitcoin.gateway.base import btc, first_turn
from walletcore_chains.bitcoin.gateway.fees import Fees


class Building(Fees):
    """Prepare, assemble, release."""

    # -- transfers ----------------------------------------------------------------------
    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        self._native(transfer.asset)
        sponsor = transfer.fee_payer if transfer.fee_payer != transfer.sender else None
        turns: dict[str, int] = {}
        try:
            for owner in (transfer.sender, sponsor):
                if owner is not None:
                    turns[owner] = await self._turns.reserve(owner, first_turn)
            body = await self._build(transfer, fee, sponsor, turns)
            payloads = txcodec.payloads(self.network, body)
        except BaseException:
            await self._give_back(turns)
            raise
        return UnsignedTransfer(
            transfer, fee, payloads[transfer.sender], body.encode(), payloads=payloads
        )

    async def _build(
        self, transfer: Transfer, fee: FeeQuote, sponsor: str | None, turns: dict[str, int]
    ) -> txcodec.Body:
        coins = await self.spendable(transfer.sender)
        sponsor_coins = await self.spendable(sponsor) if sponsor else None
        try:
            tip = await self.backend.tip_height()
            floor = await self.backend.min_fee_rate()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        script, witness = self._script(transfer.recipient)
        try:
            planned = spend.pay(
                coins,
                transfer.sender,
                transfer.recipient,
                dust_limit(script, witness),
                transfer.amount_units,
                fee.native_units,
                script,
                sponsor=sponsor,
                sponsor_coins=sponsor_coins,
            )
        except spend.TooSmall as exc:
            raise InvalidRequest(
                f"Amount too small: the recipient's output would be {btc(exc.value)} BTC, "
                f"below the dust limit of {btc(exc.limit)} BTC; nothing was sent"
            ) from None
        except spend.SponsorShort as exc:
            raise InsufficientFunds(
                f"Not enough BTC for the network fee: the platform wallet's spendable coins "
                f"hold {btc(exc.available)} BTC, the fee is {btc(fee.native_units)} BTC"
            ) from None
        except NotEnough as exc:
            raise self._short(exc.available, transfer.amount_units) from None
        needed = math.ceil(planned.vsize * floor)
        if planned.fee < needed:
            raise TransferRejected(
                "Transfer not sent: the quoted fee no longer covers the transaction's size at "
                "the network's minimum relay fee (the wallet's coins changed meanwhile); "
                "nothing was sent; request a new fee quote"
            )
        return txcodec.Body.of(self.network, planned, tip, turns)

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        from walletcore_chains.bitcoin import address_of

        body = txcodec.Body.decode(unsigned.body)
        raw, txid = txcodec.assemble(self.network, body, signatures, address_of)
        if body.turns:  # a ladder's rungs hold no turn
            self._held[txid] = dict(body.turns)
        return SignedTransfer(raw, txid)

    async def release(self, unsigned: UnsignedTransfer) -> None:
        await self._give_back(txcodec.Body.decode(unsigned.body).turns)

    async def _give_back(self, turns: Mapping[str, int], *, sent: bool = False) -> None:
        """End the addresses' turns. The lease's floor (a nonce on the EVM chains) is never
        moved: a Bitcoin address has no sequence, only the turn matters."""
        for owner, turn in turns.items():
            await self._turns.release(owner, turn)


__all__ = ["Building"]
