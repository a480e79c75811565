"""The fees of `BitcoinGateway`: the fee rate (the backend's estimate, at least
the node's minimum relay fee), a transfer's quote (`spend.quote`), the dust minimum.
"""

from __future__ import annotations

from walletcore.domain.assets import Asset
from walletcore.domain.errors import InsufficientFunds, ServiceUnavailable
from walletcore.ports import FeeQuote, SendMinimum
from walletcore_chains.bitcoin import errors, spend
from walletcore_chains.bitcoin.backend import BackendFailure
from walletcore_chains.bitcoin.coins import P2WPKH_SCRIPT, NotEnough, dust_limit, fee_for
from walletcore_chains.bitcoin.gateway.base import btc
from walletcore_chains.bitcoin.gateway.reads import Reads


class Fees(Reads):
    """Fee rates, quotes and the dust minimum."""

    # -- fees ---------------------------------------------------------------------------
    async def fee_rate(self) -> float:
        """sat/vB: the backend's estimate for `fee_target` blocks, at least the node's
        minimum relay fee."""
        try:
            estimate = await self.backend.fee_rate(self.options.fee_target)
            floor = await self.backend.min_fee_rate()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        if estimate is None:
            estimate = self.options.fallback_rate
        if estimate is None:
            if self.network.name != "regtest":
                raise ServiceUnavailable(
                    "No Bitcoin fee-rate estimate is available now; retry with backoff"
                )
            estimate = floor
        return max(estimate, floor)

    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        self._native(asset)
        rate = await self.fee_rate()
        script, _ = self._script(recipient)
        sponsored = fee_payer is not None and fee_payer != sender
        if amount_units is None:
            outputs = [script, P2WPKH_SCRIPT] + ([P2WPKH_SCRIPT] if sponsored else [])
            return FeeQuote(fee_for(2 if sponsored else 1, outputs, rate))
        coins = await self.spendable(sender)
        sponsor_coins = await self.spendable(fee_payer) if sponsored and fee_payer else None
        try:
            units = spend.quote(coins, amount_units, script, rate, sponsor_coins=sponsor_coins)
        except NotEnough as exc:
            raise self._short(exc.available, amount_units) from None
        return FeeQuote(units)

    def _short(self, available: int, needed: int) -> InsufficientFunds:
        return InsufficientFunds(
            f"Insufficient BTC: the wallet's spendable coins hold {btc(available)} BTC, the "
            f"send needs {btc(needed)} BTC and its network fee (coins received count once "
            "mined)"
        )

    async def minimum_send(self, recipient: str, asset: Asset) -> SendMinimum | None:
        """The node's dust limit of the recipient's output (`dust_limit` of its locking
        script): an output worth less is not relayed, and `prepare` refuses to build it."""
        self._native(asset)
        script, witness = self._script(recipient)
        return SendMinimum(dust_limit(script, witness), "the dust limit of its address type")


__all__ = ["Fees"]
