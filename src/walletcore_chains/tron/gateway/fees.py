"""The fees of `TronGateway`: what a transfer burns (bandwidth, activation, the
energy staked energy does not cover), from the node's prices, the sender's resources and
the node's energy estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from eth_abi.abi import encode as abi_encode

from walletcore.domain.assets import Asset
from walletcore.ports import FeeQuote
from walletcore_chains.tron import errors, proto, rows
from walletcore_chains.tron.client import Prices, Resources
from walletcore_chains.tron.gateway.base import SIGNATURE, evm_address, now_ms
from walletcore_chains.tron.gateway.reads import Reads

#: java-tron adds this many bytes per contract to a transaction's bandwidth (its result)
RESULT_RESERVE = 64
#: energy assumed when the transfer cannot be estimated now (the sender lacks the tokens):
#: above a USDT transfer to a new holder on mainnet
FALLBACK_ENERGY = 131_000


@dataclass(frozen=True, slots=True)
class Cost:
    """One transaction's resources and the most it burns."""

    bandwidth: int
    energy: int
    fee_limit: int
    most: int


class Fees(Reads):
    """Quotes: the most a transfer (and its PLATFORM top-up) can burn."""

    # -- fees ---------------------------------------------------------------------------
    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        contract = self._contract_of(asset)
        amount = amount_units if amount_units and amount_units > 0 else 1
        try:
            prices = await self.client.prices()
            energy = (
                0 if contract is None else await self._estimate(sender, contract, recipient, amount)
            )
            cost = await self._cost(prices, sender, recipient, contract, amount, energy)
            if fee_payer is None or fee_payer == sender or cost.most == 0:
                return FeeQuote(
                    cost.most, bandwidth=cost.bandwidth, energy=_energy(contract, energy)
                )
            topup = await self._cost(prices, fee_payer, sender, None, cost.most, 0)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        return FeeQuote(
            cost.most + topup.most, bandwidth=cost.bandwidth, energy=_energy(contract, energy)
        )

    async def _estimate(self, owner: str, contract: str, to: str, amount: int) -> int:
        """The energy of this transfer: `estimateenergy`, else a constant call's
        `energy_used`; `FALLBACK_ENERGY` when it would fail now (no tokens yet)."""
        parameter = abi_encode(["address", "uint256"], [evm_address(to), amount]).hex()
        selector = rows.TRANSFER_SELECTOR
        answer = await self.client.estimate_energy(owner, contract, selector, parameter)
        if (answer.get("result") or {}).get("result") and "energy_required" in answer:
            return int(answer["energy_required"])
        answer = await self.client.constant_call(owner, contract, selector, parameter)
        if "result" not in answer:
            raise ValueError("the node answered no result")
        result = answer["result"] or {}
        if not result.get("result") or result.get("message"):
            return FALLBACK_ENERGY  # it would revert now
        return int(answer.get("energy_used", 0))

    async def _cost(
        self,
        prices: Prices,
        owner: str,
        to: str,
        contract: str | None,
        amount: int,
        energy: int,
    ) -> Cost:
        resources = await self.client.resources(owner)
        fee_limit = self._fee_limit(energy, prices)
        raw = self._raw(owner, to, contract, amount, fee_limit, b"\0" * 2, b"\0" * 8, now_ms())
        bandwidth = len(proto.signed_bytes(raw.encode(), [b"\0" * SIGNATURE])) + RESULT_RESERVE
        new_account = contract is None and not await self.client.account(to)
        return Cost(
            bandwidth,
            energy,
            fee_limit,
            _burn(prices, resources, bandwidth, new_account, self._energy_cap(energy)),
        )

    def _energy_cap(self, energy: int) -> int:
        return math.ceil(energy * (1 + self.options.energy_margin)) if energy else 0

    def _fee_limit(self, energy: int, prices: Prices) -> int:
        return self._energy_cap(energy) * prices.sun_per_energy


def _burn(
    prices: Prices, resources: Resources, bandwidth: int, new_account: bool, energy_cap: int
) -> int:
    """The most a transaction burns: bandwidth (all-or-nothing per java-tron), activation,
    and the energy up to its cap that staked energy does not cover."""
    if new_account:
        burn = 0 if resources.staked_bandwidth >= bandwidth else prices.create_account_fee
        burn += prices.activation_fee
    elif resources.staked_bandwidth >= bandwidth or resources.free_bandwidth >= bandwidth:
        burn = 0
    else:
        burn = bandwidth * prices.sun_per_byte
    return burn + max(0, energy_cap - resources.staked_energy) * prices.sun_per_energy


def _energy(contract: str | None, energy: int) -> int | None:
    return None if contract is None else energy


__all__ = ["Fees"]
