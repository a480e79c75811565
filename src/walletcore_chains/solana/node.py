"""The Solana engines behind `SolanaGateway` (`SolanaEngine`): the LiteSVM node here, the
JSON-RPC node in `walletcore_chains.solana.rpc`.

The LiteSVM node: an in-process Solana runtime (`solders.litesvm.LiteSVM`) with the
SPL token programs built in, and what a node's RPC would answer from: executed
transactions by signature and by account, block time, recent blockhashes, commitment
levels and recent prioritization fees.

Slots stand for block heights. The node's blockhashes, as a cluster's: every new block
(slot) has a fresh one, taken when first asked for; a blockhash issued at height `h` is
valid to `h + 150` (its last valid block height), then refused (`BlockhashNotFound`) --
the node keeps that rule itself, LiteSVM's own check (the latest blockhash only) is off.

Commitment: a transaction lands at once and is `confirmed`; it is `finalized` once it is
`finality_slots` slots deep (0 by default: at once; a test sets more to see the
difference). The finalized block height trails the confirmed one by as much.

Blocks (getSlot, getBlocks, getBlock: the deposit scan's reads): the slot the clock is at
is the one being produced; every transaction that lands makes the block of its slot and
moves the clock to the next slot (one transaction per block), so a block is complete
once it exists. A slot the clock passed without a transaction (a test's warp) was
skipped, as a cluster skips the slot of a leader that produced nothing. Block 0 (the
genesis block, empty) exists from the start. A block's blockhash is the one the node
issued at its slot; each transaction carries its balances before and after it (lamports
of every account key, and SPL token accounts: mint, owner, amount), read from the
runtime around its execution as a validator records them. `slot_now(commitment)` is the
newest block at that commitment (the finalized one trails by `finality_slots`).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from solders.hash import Hash
from solders.litesvm import LiteSVM
from solders.pubkey import Pubkey
from solders.transaction import Transaction, VersionedTransaction
from solders.transaction_status import TransactionErrorFieldless
from solders.transaction_status import TransactionErrorInstructionError as InstructionError
from spl.token.constants import TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID

from walletcore_chains.errors import no_answer
from walletcore_chains.solana.blocks import Block, BlockTx, TokenBalance

#: blocks a blockhash stays valid for (Solana's MAX_PROCESSING_AGE)
BLOCKHASH_VALIDITY = 150
LAMPORTS_PER_SIGNATURE = 5_000
TOKEN_ACCOUNT_SIZE = 165
#: slots getRecentPrioritizationFees answers for (a node's prioritization fee cache)
PRIORITIZATION_FEE_SLOTS = 150

#: Solana's commitment levels, weakest first.
Commitment = Literal["processed", "confirmed", "finalized"]
COMMITMENTS: tuple[Commitment, ...] = ("processed", "confirmed", "finalized")


def reaches(level: Commitment, wanted: Commitment) -> bool:
    """Whether a transaction at commitment `level` is at `wanted` or deeper."""
    return COMMITMENTS.index(level) >= COMMITMENTS.index(wanted)


class SendError(Exception):
    """The runtime refused a transaction; `text` is its error, as an RPC node words it."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


@dataclass(frozen=True, slots=True)
class Executed:
    """A transaction that landed: its signature, the transaction, the fee its payer paid;
    `err` when it landed and failed (the fee is charged, nothing else happened);
    `account_keys` when the message loads addresses from lookup tables (else its own);
    `compute_units` it consumed (0 when the node did not say)."""

    signature: str
    tx: Transaction | VersionedTransaction
    slot: int
    block_time: int
    fee: int
    err: str | None = None
    account_keys: tuple[Pubkey, ...] | None = None
    compute_units: int = 0


@dataclass(frozen=True, slots=True)
class SignatureStatus:
    """What getSignatureStatuses says of a signature the node knows: the slot it landed
    in, its commitment level, and its error when it landed and failed."""

    slot: int
    confirmation: Commitment
    err: str | None = None


class SolanaEngine(Protocol):
    """What `SolanaGateway` asks of a Solana node (the LiteSVM node, or a JSON-RPC node).

    Reads raise `NodeUnavailable` (503) when the node cannot answer; `send` raises
    `SendError` when the node refuses the transaction (nothing was sent), `NodeUnavailable`
    when the request never reached it, `BroadcastTimeout` when its outcome is unknown."""

    async def lamports(self, account: Pubkey) -> int: ...

    async def token_units(self, token_account: Pubkey) -> int | None: ...

    async def exists(self, account: Pubkey) -> bool: ...

    async def blockhash(self) -> tuple[Hash, int]: ...

    async def block_height(self, commitment: Commitment = "confirmed") -> int: ...

    async def blockhash_valid(self, blockhash: Hash, commitment: Commitment) -> bool: ...

    async def rent_exempt(self, size: int) -> int: ...

    async def prioritization_fees(self, accounts: Sequence[Pubkey]) -> list[int]:
        """The recent slots' prioritization fees (micro-lamports per compute unit) of
        transactions writing to `accounts`, one a slot (0 where none was paid)."""
        ...

    async def send(self, tx: Transaction) -> str: ...

    async def seen(self, signature: str) -> bool: ...

    async def statuses(self, signatures: Sequence[str]) -> list[SignatureStatus | None]:
        """getSignatureStatuses, searching the history: None for a signature the node
        neither holds nor has landed."""
        ...

    async def executed(self, signature: str) -> Executed | None: ...

    async def signatures(self, account: Pubkey, limit: int) -> list[str]: ...

    # -- blocks (the deposit scan) --------------------------------------------------------
    async def slot(self, commitment: Commitment) -> int:
        """getSlot: the newest block's slot at `commitment`."""
        ...

    async def block_slots(self, first: int, last: int, commitment: Commitment) -> list[int]:
        """getBlocks: the slots of `first..last` that have a block at `commitment`,
        ascending (the others were skipped)."""
        ...

    async def block(
        self, slot: int, commitment: Commitment, *, transactions: bool = True
    ) -> Block | None:
        """getBlock: the block of `slot` (with its transactions and their balances, or
        without), None when the slot was skipped; `NodeUnavailable` when the node does
        not have it (above its tip at `commitment`, or beyond its ledger)."""
        ...


#: the programs whose accounts are SPL token accounts
_TOKEN_PROGRAMS = (TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID)
#: a token account's size (Token-2022 appends extensions after it, behind a type byte)
_TOKEN_ACCOUNT = 165
_ACCOUNT_TYPE_ACCOUNT = 2
_MULTISIG = 355


def _is_token_account(program: Pubkey, data: bytes) -> bool:
    """An initialized token account (not a mint, a multisig, or an empty account)."""
    if len(data) < _TOKEN_ACCOUNT or data[108] == 0:  # 108: its state (0: uninitialized)
        return False
    if len(data) == _TOKEN_ACCOUNT:
        return True
    return (
        program == TOKEN_2022_PROGRAM_ID
        and len(data) != _MULTISIG
        and data[_TOKEN_ACCOUNT] == _ACCOUNT_TYPE_ACCOUNT
    )


class LiteSvmNode:
    def __init__(self) -> None:
        # the node keeps the blockhash rule itself (`blockhash_valid_now`): LiteSVM's own
        # check takes only its latest blockhash
        self.svm = LiteSVM().with_blockhash_check(False)
        self._by_signature: dict[str, Executed] = {}
        self._by_account: dict[str, list[str]] = {}
        #: signature -> the transaction as its block holds it (keys, balances)
        self._landed: dict[str, BlockTx] = {}
        #: blockhash -> the block height it was issued at
        genesis = self.svm.latest_blockhash()
        self._issued: dict[Hash, int] = {genesis: 0}
        self._latest_at = 0
        #: slot -> its block; `_slots`: the slots that have one, ascending
        self.blocks: dict[int, Block] = {0: Block(0, str(genesis), 0, str(Hash.default()))}
        self._slots: list[int] = [0]
        self.svm.warp_to_slot(1)  # block 0 is complete: the clock is at the next slot
        #: slots a landed transaction waits before it is `finalized` (0: at once)
        self.finality_slots = 0
        #: slot -> the prioritization fee (micro-lamports per compute unit) paid in it by
        #: every transaction; and per account, by those writing to it (set by tests:
        #: LiteSVM has no market of its own)
        self.priority_fees: dict[int, int] = {}
        self.account_priority_fees: dict[str, dict[int, int]] = {}
        #: the next `lose_sends` sends are answered (their signature) and never land, as a
        #: transaction dropped on its way to the leader (a test hook); `lost` records them
        self.lose_sends = 0
        self.lost: list[str] = []
        #: the runtime's error of each transaction that landed and failed
        self.errors: dict[str, Any] = {}

    def __repr__(self) -> str:
        return "LiteSvmNode()"

    # -- the chain's clock ----------------------------------------------------------------
    def height_now(self, commitment: Commitment = "confirmed") -> int:
        """The block height at `commitment` (processed and confirmed are the same here)."""
        slot = int(self.svm.get_clock().slot)
        if commitment == "finalized":
            return max(0, slot - self.finality_slots)
        return slot

    def latest_blockhash_now(self) -> tuple[Hash, int]:
        """The current block's blockhash and the last block height it is valid at."""
        height = self.height_now()
        if height != self._latest_at or self.svm.latest_blockhash() not in self._issued:
            self.svm.expire_blockhash()  # a new block: a new blockhash
            self._issued[self.svm.latest_blockhash()] = height
            self._latest_at = height
            for stale in [
                h for h, at in self._issued.items() if at + 2 * BLOCKHASH_VALIDITY < height
            ]:
                del self._issued[stale]  # long expired: as unknown as a made-up one
        blockhash = self.svm.latest_blockhash()
        return blockhash, self._issued[blockhash] + BLOCKHASH_VALIDITY

    def blockhash_valid_now(self, blockhash: Hash, commitment: Commitment = "processed") -> bool:
        """isBlockhashValid: issued at or below the bank's height at `commitment`, and that
        height not past its last valid one."""
        issued = self._issued.get(blockhash)
        height = self.height_now(commitment)
        return issued is not None and issued <= height <= issued + BLOCKHASH_VALIDITY

    # -- reads --------------------------------------------------------------------------
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
        return self.latest_blockhash_now()

    async def block_height(self, commitment: Commitment = "confirmed") -> int:
        return self.height_now(commitment)

    async def blockhash_valid(self, blockhash: Hash, commitment: Commitment) -> bool:
        return self.blockhash_valid_now(blockhash, commitment)

    async def rent_exempt(self, size: int) -> int:
        return int(self.svm.minimum_balance_for_rent_exemption(size))

    # -- prioritization fees --------------------------------------------------------------
    def set_priority_fee(
        self, fee: int, slot: int | None = None, account: str | None = None
    ) -> None:
        """Record that transactions of `slot` (the current one by default) paid `fee`
        micro-lamports per compute unit -- all of them, or those writing to `account`."""
        at = self.height_now() if slot is None else slot
        if account is None:
            self.priority_fees[at] = fee
        else:
            self.account_priority_fees.setdefault(account, {})[at] = fee

    def prioritization_fees_now(self, accounts: Sequence[str]) -> list[tuple[int, int]]:
        """(slot, fee) of each recent slot, newest last: the slot's fee, or the highest
        paid by transactions writing to one of `accounts` when that is more (as a node's
        prioritization fee cache answers)."""
        top = self.height_now()
        out = []
        for slot in range(max(0, top - PRIORITIZATION_FEE_SLOTS + 1), top + 1):
            fee = self.priority_fees.get(slot, 0)
            for account in accounts:
                fee = max(fee, self.account_priority_fees.get(account, {}).get(slot, 0))
            out.append((slot, fee))
        return out

    async def prioritization_fees(self, accounts: Sequence[Pubkey]) -> list[int]:
        return [fee for _, fee in self.prioritization_fees_now([str(a) for a in accounts])]

    # -- transactions -------------------------------------------------------------------
    async def send(self, tx: Transaction) -> str:
        """Execute it (it lands at once) and index it; `SendError` when refused."""
        return self.accept(tx)

    def accept(self, tx: Transaction) -> str:
        """A send from the outside (`send`, the test RPC node's sendTransaction): lost
        while `lose_sends` says so, else executed."""
        signature = str(tx.signatures[0])
        if self.lose_sends > 0 and signature not in self._by_signature:
            self.lose_sends -= 1
            self.lost.append(signature)
            return signature  # answered, never landing
        return self.execute(tx)

    def simulate(self, tx: Transaction | VersionedTransaction) -> tuple[Any, list[str], int]:
        """The preflight: (the runtime's error or None, logs, compute units consumed)."""
        if not self.blockhash_valid_now(tx.message.recent_blockhash):
            return TransactionErrorFieldless.BlockhashNotFound, [], 0
        simulated = self.svm.simulate_transaction(tx)
        failed = getattr(simulated, "err", None)
        meta = _value(simulated.meta)
        logs = [str(line) for line in _value(meta.logs)]
        units = int(_value(meta.compute_units_consumed))
        return (failed() if callable(failed) else None), logs, units

    def execute(self, tx: Transaction, *, preflight: bool = True) -> str:
        """`send`, for the devnet's own set-up (mints, faucet).

        Simulated first, as an RPC node's preflight does: a transaction that would fail is
        refused without landing (no fee charged). Without the preflight (a test's way to
        have a transaction fail on chain, as one does when the state changes between the
        preflight and its block), one whose instruction fails lands `failed`: its fee is
        charged, nothing else happens."""
        signature = str(tx.signatures[0])
        if signature in self._by_signature:
            raise SendError("AlreadyProcessed")
        failed, _, _ = self.simulate(tx)
        if failed is not None and (preflight or not isinstance(failed, InstructionError)):
            raise SendError(str(failed))
        slot = self.height_now()
        blockhash, _ = self.latest_blockhash_now()  # its block's own blockhash
        keys = tuple(tx.message.account_keys)
        pre = self._balances(keys)
        # the transaction's metadata, or a failure carrying it as `meta` beside its `err`
        result: Any = self.svm.send_transaction(tx)
        error = _value(getattr(result, "err", None))
        if error is not None and not isinstance(error, InstructionError):
            raise SendError(str(error))
        meta = _value(result.meta) if error is not None else result
        fee = int(_value(meta.fee))
        units = int(_value(meta.compute_units_consumed))
        post = self._balances(keys)
        err = None if error is None else str(error)
        executed = Executed(signature, tx, slot, int(time.time()), fee, err, compute_units=units)
        self._by_signature[signature] = executed
        if error is not None:
            self.errors[signature] = error
        for key in tx.message.account_keys:
            self._by_account.setdefault(str(key), []).append(signature)
        landed = BlockTx(
            signature, tuple(str(k) for k in keys), err, pre[0], post[0], pre[1], post[1], fee
        )
        self._landed[signature] = landed
        self._land(slot, blockhash, executed.block_time, landed)
        self.svm.warp_to_slot(slot + 1)  # one transaction per block
        return signature

    def _balances(self, keys: Sequence[Pubkey]) -> tuple[tuple[int, ...], tuple[TokenBalance, ...]]:
        """The lamports of each account, and the token accounts among them, now."""
        lamports, tokens = [], []
        for index, key in enumerate(keys):
            account = self.svm.get_account(key)
            lamports.append(0 if account is None else int(account.lamports))
            if account is None or account.owner not in _TOKEN_PROGRAMS:
                continue
            data = bytes(account.data)
            if not _is_token_account(account.owner, data):
                continue  # a mint, a multisig, or an uninitialized account
            mint = Pubkey.from_bytes(data[:32])
            mint_account = self.svm.get_account(mint)
            decimals = bytes(mint_account.data)[44] if mint_account is not None else 0
            tokens.append(
                TokenBalance(
                    account_index=index,
                    mint=str(mint),
                    owner=str(Pubkey.from_bytes(data[32:64])),
                    amount=int.from_bytes(data[64:72], "little"),
                    decimals=decimals,
                    program_id=str(account.owner),
                )
            )
        return tuple(lamports), tuple(tokens)

    def _land(self, slot: int, blockhash: Hash, block_time: int, landed: BlockTx) -> None:
        """Put `landed` in the block of `slot` (made now, on the newest block below it)."""
        block = self.blocks.get(slot)
        if block is not None:
            self.blocks[slot] = replace(block, transactions=(*block.transactions, landed))
            return
        parent = self.blocks[self._slots[bisect.bisect_left(self._slots, slot) - 1]]
        self.blocks[slot] = Block(
            slot, str(blockhash), parent.slot, parent.blockhash, block_time, (landed,)
        )
        bisect.insort(self._slots, slot)

    def confirmation_now(self, executed: Executed) -> Commitment:
        """`finalized` once `finality_slots` deep, else `confirmed`."""
        if executed.slot <= self.height_now("finalized"):
            return "finalized"
        return "confirmed"

    def status_now(self, signature: str) -> SignatureStatus | None:
        executed = self._by_signature.get(signature)
        if executed is None:
            return None
        return SignatureStatus(executed.slot, self.confirmation_now(executed), executed.err)

    async def seen(self, signature: str) -> bool:
        """Whether the signature landed (this node lands a transaction at once)."""
        return signature in self._by_signature

    async def statuses(self, signatures: Sequence[str]) -> list[SignatureStatus | None]:
        return [self.status_now(s) for s in signatures]

    async def executed(self, signature: str) -> Executed | None:
        return self._by_signature.get(signature)

    def executed_now(self, signature: str) -> Executed | None:
        """`executed`, from a thread without an event loop (the test RPC node)."""
        return self._by_signature.get(signature)

    def landed_now(self, signature: str) -> BlockTx | None:
        """The transaction as its block holds it (its keys and balances)."""
        return self._landed.get(signature)

    def signatures_now(self, account: Pubkey, limit: int) -> list[str]:
        return list(reversed(self._by_account.get(str(account), [])))[:limit]

    async def signatures(self, account: Pubkey, limit: int) -> list[str]:
        """Signatures of the executed transactions naming `account`, newest first."""
        return self.signatures_now(account, limit)

    # -- blocks (the deposit scan) --------------------------------------------------------
    def slot_now(self, commitment: Commitment = "confirmed") -> int:
        """The newest block at `commitment` (the clock's slot is still being produced)."""
        top = min(self.height_now() - 1, self.height_now(commitment))
        return self._slots[max(0, bisect.bisect_right(self._slots, top) - 1)]

    def block_slots_now(self, first: int, last: int, commitment: Commitment) -> list[int]:
        """The slots of `first..last` with a block, up to the newest at `commitment`."""
        last = min(last, self.slot_now(commitment))
        lo, hi = bisect.bisect_left(self._slots, first), bisect.bisect_right(self._slots, last)
        return self._slots[lo:hi] if first <= last else []

    def block_now(self, slot: int) -> Block | None:
        """The block of `slot`, None when there is none (skipped, or not yet made)."""
        return self.blocks.get(slot)

    async def slot(self, commitment: Commitment) -> int:
        return self.slot_now(commitment)

    async def block_slots(self, first: int, last: int, commitment: Commitment) -> list[int]:
        return self.block_slots_now(first, last, commitment)

    async def block(
        self, slot: int, commitment: Commitment, *, transactions: bool = True
    ) -> Block | None:
        if slot > self.slot_now(commitment):
            raise no_answer()  # not produced yet at that commitment
        block = self.block_now(slot)
        if block is None or transactions:
            return block
        return replace(block, transactions=())


def _value(attribute: Any) -> Any:
    """solders exposes some fields as methods, others as attributes."""
    return attribute() if callable(attribute) else attribute


__all__ = [
    "BLOCKHASH_VALIDITY",
    "COMMITMENTS",
    "LAMPORTS_PER_SIGNATURE",
    "PRIORITIZATION_FEE_SLOTS",
    "Commitment",
    "Executed",
    "LiteSvmNode",
    "SendError",
    "SignatureStatus",
    "SolanaEngine",
    "reaches",
]
