"""The Solana engines behind `SolanaGateway` (`SolanaEngine`): the LiteSVM node here, the
JSON-RPC node in `walletcore_chains.solana.rpc`.

The LiteSVM node: an in-process Solana runtime (`solders.litesvm.LiteSVM`) with the
SPL token programs built in, and the index a node's RPC would answer from (executed
transactions by signature and by account, block time).

Slots stand for block heights: a blockhash taken at slot `s` is valid to `s + 150`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from solders.hash import Hash
from solders.litesvm import LiteSVM
from solders.pubkey import Pubkey
from solders.transaction import Transaction, VersionedTransaction

#: blocks a blockhash stays valid for (Solana's MAX_PROCESSING_AGE)
BLOCKHASH_VALIDITY = 150
LAMPORTS_PER_SIGNATURE = 5_000
TOKEN_ACCOUNT_SIZE = 165


class SendError(Exception):
    """The runtime refused a transaction; `text` is its error, as an RPC node words it."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


@dataclass(frozen=True, slots=True)
class Executed:
    """A transaction that landed: its signature, the transaction, the fee its payer paid;
    `err` when it landed and failed (the fee is charged, nothing else happened);
    `account_keys` when the message loads addresses from lookup tables (else its own)."""

    signature: str
    tx: Transaction | VersionedTransaction
    slot: int
    block_time: int
    fee: int
    err: str | None = None
    account_keys: tuple[Pubkey, ...] | None = None


class SolanaEngine(Protocol):
    """What `SolanaGateway` asks of a Solana node (the LiteSVM node, or a JSON-RPC node).

    Reads raise `NodeUnavailable` (503) when the node cannot answer; `send` raises
    `SendError` when the node refuses the transaction (nothing was sent), `NodeUnavailable`
    when the request never reached it, `BroadcastTimeout` when its outcome is unknown."""

    async def lamports(self, account: Pubkey) -> int: ...

    async def token_units(self, token_account: Pubkey) -> int | None: ...

    async def exists(self, account: Pubkey) -> bool: ...

    async def blockhash(self) -> tuple[Hash, int]: ...

    async def block_height(self) -> int: ...

    async def rent_exempt(self, size: int) -> int: ...

    async def send(self, tx: Transaction) -> str: ...

    async def seen(self, signature: str) -> bool: ...

    async def executed(self, signature: str) -> Executed | None: ...

    async def signatures(self, account: Pubkey, limit: int) -> list[str]: ...


class LiteSvmNode:
    def __init__(self) -> None:
        self.svm = LiteSVM()
        self._by_signature: dict[str, Executed] = {}
        self._by_account: dict[str, list[str]] = {}

    def __repr__(self) -> str:
        return "LiteSvmNode()"

    async def lamports(self, account: Pubkey) -> int:
        return int(self.svm.get_balance(account) or 0)

    async def token_units(self, token_account: Pubkey) -> int | None:
        """The amount of an SPL token account, None when it does not exist."""
        account = self.svm.get_account(token_account)
        if account is None:
            return None
        return int.from_bytes(bytes(account.data)[64:72], "little")

    async def exists(self, account: Pubkey) -> bool:
        return self.svm.get_account(account) is not None

    async def blockhash(self) -> tuple[Hash, int]:
        """The latest blockhash and the last block height it is valid at."""
        return self.svm.latest_blockhash(), await self.block_height() + BLOCKHASH_VALIDITY

    async def block_height(self) -> int:
        return int(self.svm.get_clock().slot)

    async def rent_exempt(self, size: int) -> int:
        return int(self.svm.minimum_balance_for_rent_exemption(size))

    async def send(self, tx: Transaction) -> str:
        """Execute it (it lands at once) and index it; `SendError` when refused."""
        return self.execute(tx)

    def execute(self, tx: Transaction) -> str:
        """`send`, for the devnet's own set-up (mints, faucet).

        Simulated first, as an RPC node's preflight does: a transaction that would fail is
        refused without landing (no fee charged)."""
        simulated = self.svm.simulate_transaction(tx)
        failed = getattr(simulated, "err", None)
        if callable(failed):
            raise SendError(str(failed()))
        result = self.svm.send_transaction(tx)
        err = getattr(result, "err", None)
        if callable(err):
            raise SendError(str(err()))
        signature = str(tx.signatures[0])
        fee = int(result.fee())  # type: ignore[union-attr]
        slot = int(self.svm.get_clock().slot)
        executed = Executed(signature, tx, slot, int(time.time()), fee)
        self._by_signature[signature] = executed
        for key in tx.message.account_keys:
            self._by_account.setdefault(str(key), []).append(signature)
        self.svm.warp_to_slot(slot + 1)  # one transaction per block
        return signature

    async def seen(self, signature: str) -> bool:
        """Whether the signature landed (this node lands a transaction at once)."""
        return signature in self._by_signature

    async def executed(self, signature: str) -> Executed | None:
        return self._by_signature.get(signature)

    def executed_now(self, signature: str) -> Executed | None:
        """`executed`, from a thread without an event loop (the test RPC node)."""
        return self._by_signature.get(signature)

    def signatures_now(self, account: Pubkey, limit: int) -> list[str]:
        return list(reversed(self._by_account.get(str(account), [])))[:limit]

    async def signatures(self, account: Pubkey, limit: int) -> list[str]:
        """Signatures of the executed transactions naming `account`, newest first."""
        return list(reversed(self._by_account.get(str(account), [])))[:limit]


__all__ = [
    "BLOCKHASH_VALIDITY",
    "LAMPORTS_PER_SIGNATURE",
    "Executed",
    "LiteSvmNode",
    "SendError",
    "SolanaEngine",
]
