"""The deposit scan of `SolanaGateway` (`walletcore.ports.DepositScanner`; docs/solana.md,
"Deposits"), over its node's blocks (`SolanaEngine.slot`, `block_slots`, `block`).

- Heights are slots. The head is the newest block at the gateway's commitment (getSlot):
  under `finalized` (the default) every block scanned is rooted and can never be rolled
  back, under `confirmed` it is voted on by a supermajority. So a deposit in a block at
  or below the head is already where a transfer reads `success` (docs/solana.md,
  "Commitment"): `confirmations` is 1, and no slot count stands in for the commitment.
- A slot may have no block (its leader produced none: skipped). `block(slot)` answers
  the block at `slot`, or for a skipped slot the newest block below it: the height is
  the slot asked, the hash that block's blockhash. The chain as of a slot is that block,
  so the core's cursor check (the hash stored for the last slot scanned, against
  `block(slot)` now) sees a change of fork whether the slot had a block or not. None
  above the head.
- `scan(first, last)`: getBlocks (the slots of the range that have a block), then
  getBlock of each (`transactionDetails: accounts`: every transaction's keys and
  balances, not its instructions or logs; no rewards), `BLOCK_READS` at a time. The
  blocks must link (each one's parent the block before it in the list) and the node must
  have the whole range at the commitment, else the chain moved during the scan and the
  range is read again (at most `_ATTEMPTS` times, then 503). A block missing or
  unreadable raises: never a partial answer, never a skipped slot.
- Credits, in each transaction that succeeded (`meta.err` null): **SOL**: an account
  key that is a watched address whose lamports rose (postBalances - preBalances), not the
  fee payer (key 0: its balance nets its own fee, and what it moved in a transaction it
  paid for is its own doing, not a deposit): position `sol:<account index>`. **SPL**: a
  token account of a served mint (USDT, USDC: the gateway's mints) owned by a watched
  address, that is the owner's associated token account (the one its balance and sends
  use), whose amount rose (postTokenBalances - preTokenBalances by account index; an
  account the transaction created had none before): position `spl:<account index>`,
  the amount in base units, credited to the owner. The sender: for SOL the one account
  other than the fee payer whose lamports fell, for SPL the one owner of the mint's
  token accounts whose amount fell; else the fee payer (a mint, several payers).
- `mempool`: [] -- a Solana node has no mempool to read (a transaction goes to the
  leaders and lands, or not, within seconds).
- `locate`: getSignatureStatuses (searching the history): at the commitment, its slot
  and that block's blockhash; landed below the commitment, `MEMPOOL` (not yet in a block
  the scan reads); unknown, None -- unless the block it was last seen in is still the
  chain's block at that slot and holds it (a node that keeps no transaction history past
  its recent status cache cannot tell; one getBlock answers): that block.
- Node failures raise as every other read does (`NodeUnavailable`, 503).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

from solders.pubkey import Pubkey
from spl.token.instructions import get_associated_token_address

from walletcore.domain.assets import Chain
from walletcore.domain.deposits import BlockRef, Incoming
from walletcore.ports.deposits import MEMPOOL, Unmined
from walletcore_chains.errors import no_answer
from walletcore_chains.solana.blocks import Block, BlockTx
from walletcore_chains.solana.chain import DESCRIPTION
from walletcore_chains.solana.node import Commitment, SolanaEngine, reaches

#: SOL's asset id (the chain's native asset)
SOL_ID = next(a.id for a in DESCRIPTION.assets if a.is_native)
#: getBlock calls in flight at once during a scan
BLOCK_READS = 8
#: slots one `scan` covers: getBlock per slot is the cost (~2.5 slots a second on mainnet)
SCAN_SPAN = 32
#: reads of a range while the chain moves under it, before the scan gives up (503)
_ATTEMPTS = 3
#: how far below a skipped slot `block` looks for the block before it (getBlocks windows)
_BACK_WINDOW, _BACK_WINDOWS = 256, 16
#: owner and mint -> the owner's associated token account (remembered, up to a bound)
_ATA_REMEMBERED = 100_000


class _Moved(Exception):
    """The chain changed (or the node went back) while a range was read."""


def credits(
    chain: Chain,
    block: Block,
    watched: AbstractSet[str],
    tokens: Mapping[str, int],
    associated: dict[tuple[str, str], str] | None = None,
) -> Iterator[Incoming]:
    """The credits to `watched` addresses in `block` (module rules). `tokens`: mint ->
    asset id; `associated`: (owner, mint) -> the owner's associated token account, filled
    as they are derived."""
    ref = BlockRef(block.slot, block.blockhash)
    for tx in block.transactions:
        if tx.err is not None:
            continue  # it failed: only its fee moved
        yield from _sol(chain, tx, watched, ref)
        if tx.post_token_balances:
            yield from _spl(chain, tx, watched, tokens, ref, associated)


def _sol(chain: Chain, tx: BlockTx, watched: AbstractSet[str], ref: BlockRef) -> Iterator[Incoming]:
    keys, pre, post = tx.account_keys, tx.pre_balances, tx.post_balances
    for index in range(1, len(keys)):
        if keys[index] in watched and post[index] > pre[index]:
            yield Incoming(
                chain,
                tx.signature,
                f"sol:{index}",
                keys[index],
                SOL_ID,
                post[index] - pre[index],
                ref,
                _lamports_sender(tx),
            )


def _lamports_sender(tx: BlockTx) -> str:
    fell = [i for i in range(1, len(tx.account_keys)) if tx.post_balances[i] < tx.pre_balances[i]]
    return tx.account_keys[fell[0]] if len(fell) == 1 else tx.account_keys[0]


def _spl(
    chain: Chain,
    tx: BlockTx,
    watched: AbstractSet[str],
    tokens: Mapping[str, int],
    ref: BlockRef,
    associated: dict[tuple[str, str], str] | None,
) -> Iterator[Incoming]:
    before = {b.account_index: b for b in tx.pre_token_balances}
    for after in tx.post_token_balances:
        asset_id = tokens.get(after.mint)
        if asset_id is None or after.owner not in watched:
            continue
        was = before.get(after.account_index)
        gained = after.amount - (was.amount if was is not None and was.mint == after.mint else 0)
        if gained <= 0:
            continue
        key = (after.owner, after.mint)
        ata = associated.get(key) if associated is not None else None
        if ata is None:
            owner, mint = Pubkey.from_string(after.owner), Pubkey.from_string(after.mint)
            ata = str(get_associated_token_address(owner, mint))
            if associated is not None:
                if len(associated) >= _ATA_REMEMBERED:
                    associated.clear()
                associated[key] = ata
        if tx.account_keys[after.account_index] != ata:
            continue  # another token account of the owner: not the one its wallet uses
        yield Incoming(
            chain,
            tx.signature,
            f"spl:{after.account_index}",
            after.owner,
            asset_id,
            gained,
            ref,
            _token_sender(tx, after.mint),
        )


def _token_sender(tx: BlockTx, mint: str) -> str:
    after = {b.account_index: b.amount for b in tx.post_token_balances if b.mint == mint}
    owners = {
        b.owner
        for b in tx.pre_token_balances
        if b.mint == mint and b.owner and after.get(b.account_index, 0) < b.amount
    }
    return owners.pop() if len(owners) == 1 else tx.account_keys[0]


class Scanning:
    """`DepositScanner` of `SolanaGateway`: head, block, scan, mempool, locate."""

    #: every block at or below the head is at the gateway's commitment (module rules)
    confirmations = 1
    scan_span = SCAN_SPAN

    chain: Chain
    node: SolanaEngine
    commitment: Commitment
    _mints: dict[int, Pubkey]
    #: (owner, mint) -> the owner's associated token account, remembered between scans
    _associated: dict[tuple[str, str], str]

    def _tokens(self) -> dict[str, int]:
        return {str(mint): asset_id for asset_id, mint in self._mints.items()}

    async def head(self) -> BlockRef:
        return await self._at(await self.node.slot(self.commitment))

    async def block(self, height: int) -> BlockRef | None:
        if height < 0 or height > await self.node.slot(self.commitment):
            return None
        return await self._at(height)

    async def _at(self, slot: int) -> BlockRef:
        """The block of `slot`, or of the newest slot below it that has one (skipped)."""
        found = await self.node.block(slot, self.commitment, transactions=False)
        if found is not None:
            return BlockRef(slot, found.blockhash)
        top = slot - 1
        for _ in range(_BACK_WINDOWS):
            if top < 0:
                break
            slots = await self.node.block_slots(
                max(0, top - _BACK_WINDOW + 1), top, self.commitment
            )
            if slots:
                below = await self.node.block(slots[-1], self.commitment, transactions=False)
                if below is None:
                    raise no_answer()  # listed, then skipped: the node changed its fork
                return BlockRef(slot, below.blockhash)
            top -= _BACK_WINDOW
        raise no_answer()  # the node has no block near below the slot (its ledger starts later)

    async def scan(self, first: int, last: int, addresses: Collection[str]) -> list[Incoming]:
        """Every credit to `addresses` in slots `first..last` (module rules)."""
        watched = addresses if isinstance(addresses, AbstractSet) else frozenset(addresses)
        first = max(first, 0)
        if not watched or last < first:
            return []
        for _ in range(_ATTEMPTS):
            try:
                return await self._range(first, last, watched)
            except _Moved:
                continue
        raise no_answer()  # the chain kept changing while the range was read

    async def _range(self, first: int, last: int, watched: AbstractSet[str]) -> list[Incoming]:
        if await self.node.slot(self.commitment) < last:
            raise _Moved()  # the node is behind the range asked (it went back)
        slots = await self.node.block_slots(first, last, self.commitment)
        if any(not first <= s <= last for s in slots) or slots != sorted(set(slots)):
            raise no_answer()  # nonsense: slots out of the range, or out of order
        blocks = await self._blocks(slots)
        found: list[Incoming] = []
        previous: Block | None = None
        tokens = self._tokens()
        for slot, block in zip(slots, blocks, strict=True):
            if block is None:
                raise _Moved()  # listed, then skipped
            if previous is None:
                linked = block.parent_slot < first or slot == 0
            else:
                linked = (
                    block.parent_slot == previous.slot
                    and block.previous_blockhash == previous.blockhash
                )
            if not linked or block.slot != slot:
                raise _Moved()
            previous = block
            found.extend(credits(self.chain, block, watched, tokens, self._associated))
        return found

    async def _blocks(self, slots: Sequence[int]) -> list[Block | None]:
        """getBlock of each slot, `BLOCK_READS` at a time; the first failure raises (the
        reads still in flight are cancelled)."""
        gate = asyncio.Semaphore(BLOCK_READS)

        async def read(slot: int) -> Block | None:
            async with gate:
                return await self.node.block(slot, self.commitment)

        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(read(slot)) for slot in slots]
        except ExceptionGroup as failed:
            raise failed.exceptions[0] from None
        return [task.result() for task in tasks]

    async def mempool(self, addresses: Collection[str]) -> list[Incoming]:
        """None to read: a Solana node has no mempool (module rules)."""
        return []

    async def locate(self, tx_hash: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        try:
            status = (await self.node.statuses([tx_hash]))[0]
        except ValueError:
            return None  # not a signature: nowhere
        if status is None:
            return last if last is not None and await self._holds(last, tx_hash) else None
        if not reaches(status.confirmation, self.commitment):
            return MEMPOOL
        found = await self.node.block(status.slot, self.commitment, transactions=False)
        if found is None:
            raise no_answer()  # the node says it landed in a slot it calls skipped
        return BlockRef(status.slot, found.blockhash)

    async def _holds(self, where: BlockRef, tx_hash: str) -> bool:
        """Whether the chain's block at `where.height` is still `where` and holds the
        transaction (a getBlock of it, with its transactions)."""
        if not 0 <= where.height <= await self.node.slot(self.commitment):
            return False
        found = await self.node.block(where.height, self.commitment)
        return (
            found is not None
            and found.blockhash == where.hash
            and any(tx.signature == tx_hash for tx in found.transactions)
        )


__all__ = ["BLOCK_READS", "SCAN_SPAN", "SOL_ID", "Scanning", "credits"]
