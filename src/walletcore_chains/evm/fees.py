"""EVM fee figures: the gas price (EIP-1559 from `eth_feeHistory`, else legacy) and the gas
of a transfer (21,000 native; a token transfer's estimate + 20%, or a safe bound)."""

from __future__ import annotations

from statistics import median
from typing import Any

from eth_abi.abi import encode as abi_encode
from web3 import AsyncWeb3
from web3.exceptions import Web3RPCError

from walletcore_chains.evm import errors
from walletcore_chains.evm.rows import TRANSFER_SELECTOR

NATIVE_GAS = 21_000
#: a token transfer's gas when it cannot be estimated (it reverts now: no balance yet)
TOKEN_GAS_FALLBACK = 100_000


async def gas_price(w3: AsyncWeb3[Any], eip1559: bool) -> tuple[int, int | None]:
    """(max fee per gas, tip) on EIP-1559 chains: 2 x the next base fee + the median tip of
    the last 5 blocks that carried transactions (`eth_maxPriorityFeePerGas` when none did;
    the latest block's base fee when the node keeps no fee history or has no
    `eth_feeHistory`); (gas price, None) on the others, and on a chain whose blocks have no
    base fee (some nodes of such a chain answer a fee history of zero base fees: BSC's
    zero base fee is told apart by its blocks, which carry one)."""
    eth = w3.eth
    if eip1559:
        try:
            history: Any = await eth.fee_history(5, "latest", [50])
        except Web3RPCError:  # the node answered: it has no fee history (a legacy chain)
            history = {}
        bases = list(history.get("baseFeePerGas") or [])
        # an empty block's reward row is zeros, which says nothing of the tips paid
        used = list(history.get("gasUsedRatio") or [])
        rewards = [
            int(r[0])
            for i, r in enumerate(history.get("reward") or [])
            if r and (i >= len(used) or used[i] > 0)
        ]
        if bases and not any(int(b) for b in bases) and await _pre_london(w3):
            return int(await eth.gas_price), None  # fee history of a chain without base fees
        if bases:
            base = int(bases[-1])
            tip = int(median(rewards)) if rewards else int(await eth.max_priority_fee)
        else:
            block = await eth.get_block("latest")
            latest_base = block.get("baseFeePerGas")
            if latest_base is None:
                return int(await eth.gas_price), None
            base, tip = int(latest_base), int(await eth.max_priority_fee)
        return 2 * base + tip, tip
    return int(await eth.gas_price), None


async def _pre_london(w3: AsyncWeb3[Any]) -> bool:
    """Whether the chain's blocks carry no base fee (a chain without EIP-1559)."""
    block = await w3.eth.get_block("latest")
    return block.get("baseFeePerGas") is None


async def token_gas(
    w3: AsyncWeb3[Any], sender: str, contract: str, recipient: str, units: int
) -> int:
    call = {"from": sender, "to": contract, "data": transfer_data(recipient, units)}
    try:
        return int(await w3.eth.estimate_gas(call)) * 6 // 5  # type: ignore[arg-type]
    except Exception as exc:
        if errors.is_unreachable(exc):
            raise
        return TOKEN_GAS_FALLBACK


def transfer_data(recipient: str, amount: int) -> bytes:
    """The calldata of ERC20 `transfer(recipient, amount)`."""
    return TRANSFER_SELECTOR + abi_encode(["address", "uint256"], [recipient, amount])


__all__ = ["NATIVE_GAS", "TOKEN_GAS_FALLBACK", "gas_price", "token_gas", "transfer_data"]
