"""`SolanaGateway`: the `ChainGateway` of SOLANA, for SOL and SPL tokens (docs/solana.md).

- minimum (`MinimumSends`): a SOL transfer to an account that does not exist must bring it
  to the rent-exempt minimum (890,880 lamports); less is a 400 before anything is signed.
- fee: 5,000 lamports per signature (two when a sponsor pays), plus the priority fee
  (the compute-unit limit times the compute-unit price, rounded up to a lamport), plus
  the rent of the recipient's associated token account (165 bytes, rent-exempt) on an
  SPL transfer to an owner that has none: the fee payer creates it in the same
  transaction.
- priority fee: every transfer sets a compute-unit limit sized for its instructions
  (`compute_unit_limit`: measured on LiteSVM, with margin for mainnet's programs) and a
  compute-unit price: the 75th percentile of the non-zero recent prioritization fees of
  the accounts it writes (getRecentPrioritizationFees), at least `cu_price_min`, at most
  `cu_price_max` (micro-lamports per compute unit). `prepare` pays no more than the
  quote it is given: the price now, or the highest the quote covers when that is less.
- PLATFORM fee payer: the platform wallet is the transaction's fee payer (first signer)
  and pays the fee and the account rent; the sender signs as the token's owner.
- every prepared transfer carries a memo with a random tag, so two equal transfers under
  one blockhash are two transactions, not one signature landing once for both.
- blockhash: `prepare` takes the latest one and the last block height it is valid at;
  both travel with the signed bytes. `broadcast` sends, then waits until the signature
  is seen or that height passes: only then is a transfer that never landed known to be
  dead ("nothing was sent"). A retry re-sends the same signed bytes (same signature: it
  can land once); the gateway never re-signs with a new blockhash while the first may
  still land -- it holds no key, and the core re-broadcasts the stored bytes.
- commitment: `lookup`, `history` and `sighting` read a transaction that landed as
  `success`/`failed` once it is at the gateway's commitment (`finalized` by default,
  `WALLETCORE_SOLANA_COMMITMENT=confirmed`), `pending` before.
- `TransferFollower`: a transfer is re-signed (`resigns`), never replaced from a
  pre-signed ladder; `sighting` reads getSignatureStatuses, and calls a transfer that the
  node does not know `EXPIRED` only once the finalized block height is past its last
  valid one and the node says its blockhash is no longer valid, else `MISSING`.
- deposits (`DepositScanner`, `walletcore_chains.solana.scanning`): the blocks at the
  gateway's commitment, slot by slot, read against every watched address at once.
- the node is a `SolanaEngine`: the in-process LiteSVM node (devnet) or a JSON-RPC node
  (`walletcore_chains.solana.rpc`). Once the bytes left, a node that stops answering
  makes the outcome unknown (504), never "nothing was sent".
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from secrets import token_hex

from solders.compute_budget import set_compute_unit_limit, set_compute_unit_price
from solders.instruction import Instruction
from solders.message import Message
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction
from spl.token.constants import TOKEN_PROGRAM_ID
from spl.token.instructions import (
    create_idempotent_associated_token_account,
    get_associated_token_address,
    transfer_checked,
)
from spl.token.models import TransferCheckedParams

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.errors import (
    AssetUnavailableOnEndpoint,
    BroadcastTimeout,
    InvalidRequest,
    NodeUnavailable,
    ServiceUnavailable,
    TransactionNotFound,
    TransferRejected,
)
from walletcore.domain.wallet import TxRow
from walletcore.ports import (
    AddressValidator,
    ChainGateway,
    DepositScanner,
    FeeQuote,
    MinimumSends,
    Replacement,
    SendMinimum,
    Sighting,
    SignedTransfer,
    Transfer,
    TransferFollower,
    UnsignedTransfer,
)
from walletcore_chains.solana import errors
from walletcore_chains.solana.chain import RENT_RULE
from walletcore_chains.solana.node import (
    LAMPORTS_PER_SIGNATURE,
    TOKEN_ACCOUNT_SIZE,
    Commitment,
    SendError,
    SolanaEngine,
    reaches,
)
from walletcore_chains.solana.rows import row
from walletcore_chains.solana.scanning import Scanning

MEMO_PROGRAM_ID = Pubkey.from_string("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr")

#: Compute units of each part of a transfer, for its compute-unit limit: what LiteSVM
#: measures (tests/integration/solana/test_solana_follow.py checks every transfer stays
#: under its limit), raised for mainnet's programs and with margin. A transaction that
#: needs more than its limit fails (its fee is spent), so these err high.
CU_BUDGET_INSTRUCTIONS = 300  # SetComputeUnitLimit + SetComputeUnitPrice: 150 each
CU_MEMO = 15_000  # the 27-byte memo: 11,145 on LiteSVM
CU_SYSTEM_TRANSFER = 1_000  # 150 on LiteSVM
CU_TOKEN_TRANSFER = 10_000  # TransferChecked: ~6,200 with mainnet's SPL Token
CU_CREATE_TOKEN_ACCOUNT = 40_000  # CreateIdempotent creating it: ~15,000 on LiteSVM,
# ~25,000 with mainnet's SPL Token
#: the recent prioritization fee a transfer's compute-unit price follows
PRIORITY_FEE_PERCENTILE = 75
#: the default highest compute-unit price (micro-lamports per compute unit)
CU_PRICE_MAX = 1_000_000
MICRO_LAMPORTS_PER_LAMPORT = 1_000_000


def compute_unit_limit(native: bool, creates_token_account: bool = False) -> int:
    """The compute-unit limit of a SOL transfer, or an SPL one (creating the recipient's
    token account or not), memo included."""
    if native:
        return CU_BUDGET_INSTRUCTIONS + CU_SYSTEM_TRANSFER + CU_MEMO
    create = CU_CREATE_TOKEN_ACCOUNT if creates_token_account else 0
    return CU_BUDGET_INSTRUCTIONS + CU_TOKEN_TRANSFER + create + CU_MEMO


def priority_fee(limit: int, price: int) -> int:
    """Lamports of a compute-unit `price` (micro-lamports) over `limit` units, rounded up
    (as the runtime charges it)."""
    return -(-limit * price // MICRO_LAMPORTS_PER_LAMPORT)


def cu_price(fees: Sequence[int], floor: int, cap: int) -> int:
    """The compute-unit price from recent prioritization fees: the percentile of the
    non-zero ones (nearest rank), within [floor, cap]."""
    paid = sorted(fee for fee in fees if fee > 0)
    price = paid[-(-len(paid) * PRIORITY_FEE_PERCENTILE // 100) - 1] if paid else 0
    return min(max(price, floor), cap)


class SolanaGateway(Scanning, ChainGateway, TransferFollower, MinimumSends, DepositScanner):
    #: an EXPIRED transfer is re-signed (a fresh blockhash and compute-unit price)
    resigns = True

    def __init__(
        self,
        node: SolanaEngine,
        validator: AddressValidator,
        mints: Mapping[int, Pubkey],
        *,
        confirm_poll: float = 0.5,
        commitment: Commitment = "finalized",
        cu_price_min: int = 0,
        cu_price_max: int = CU_PRICE_MAX,
        stuck_after_seconds: float = 60.0,
        chain: Chain = Chain.SOLANA,
    ) -> None:
        if commitment not in ("confirmed", "finalized"):
            raise ValueError("a Solana transfer succeeds at `confirmed` or `finalized`")
        if not 0 <= cu_price_min <= cu_price_max:
            raise ValueError("the compute-unit prices need 0 <= minimum <= maximum")
        self.chain = chain
        self.node = node
        self._validator = validator
        self._mints = dict(mints)
        self._associated: dict[tuple[str, str], str] = {}
        self._poll = confirm_poll
        self.commitment: Commitment = commitment
        self.cu_price_min = cu_price_min
        self.cu_price_max = cu_price_max
        self.stuck_after_seconds = stuck_after_seconds

    def __repr__(self) -> str:
        return f"SolanaGateway({self.node!r})"

    async def start(self) -> None:
        """Nothing to start: the node is asked on demand."""

    async def aclose(self) -> None:
        """Close the node's HTTP session (the in-process node has none)."""
        close = getattr(self.node, "aclose", None)
        if close is not None:
            await close()

    async def check(self) -> None:
        """`walletcore.ports.HealthCheck`: the node answers `getBlockHeight`."""
        await self.node.block_height()

    def mint(self, asset: Asset) -> Pubkey:
        mint = self._mints.get(asset.id)
        if mint is None:
            raise AssetUnavailableOnEndpoint(
                f"{asset.symbol} has no mint on this Solana network; contact the operator"
            )
        return mint

    # -- reads --------------------------------------------------------------------------
    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest("A SOLANA address must be a string")
        return self._validator(self.chain, address)

    async def balance(self, address: str, asset: Asset) -> int:
        owner = Pubkey.from_string(address)
        if asset.is_native:
            return await self.node.lamports(owner)
        units = await self.node.token_units(get_associated_token_address(owner, self.mint(asset)))
        return units or 0

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        owner = Pubkey.from_string(address)
        mint = None if asset.is_native else self.mint(asset)
        account = owner if mint is None else get_associated_token_address(owner, mint)
        signatures = await self.node.signatures(account, limit)
        settled = await self._settled(signatures)
        rows = []
        for signature, deep in zip(signatures, settled, strict=True):
            executed = await self.node.executed(signature)
            found = row(address, mint, executed) if executed is not None else None
            if found is not None:
                rows.append(found if deep else replace(found, status="pending"))
        return rows

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        executed = await self.node.executed(tx_hash)
        mint = None if asset.is_native else self.mint(asset)
        found = row(address, mint, executed) if executed is not None else None
        if found is None:
            raise TransactionNotFound()
        if not (await self._settled([tx_hash]))[0]:
            return replace(found, status="pending")
        return found

    async def _settled(self, signatures: Sequence[str]) -> list[bool]:
        """Whether each of these landed transactions is at the gateway's commitment (one
        getSignatureStatuses; none at `confirmed`, which every landed one reached)."""
        if self.commitment == "confirmed" or not signatures:
            return [True] * len(signatures)
        statuses = await self.node.statuses(signatures)
        return [s is not None and reaches(s.confirmation, self.commitment) for s in statuses]

    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        payer = fee_payer or sender
        transfer_ = Transfer(asset, sender, recipient, amount_units or 0, fee_payer=payer)
        creates = await self._creates_token_account(transfer_)
        instructions = self._instructions(transfer_, creates)
        price = await self._cu_price(transfer_, instructions)
        limit = compute_unit_limit(asset.is_native, creates)
        base = await self._base_fee(transfer_, creates)
        return FeeQuote(base + priority_fee(limit, price))

    async def minimum_send(self, recipient: str, asset: Asset) -> SendMinimum | None:
        """A SOL transfer to an account that does not exist (it holds no lamports) must
        leave it rent-exempt: the runtime refuses less (`InsufficientFundsForRent`), and
        only once the transaction is signed and sent. None for a token: the rent of a new
        token account is the fee payer's (`fee`), and any amount may follow."""
        if not asset.is_native or await self.node.lamports(Pubkey.from_string(recipient)) > 0:
            return None
        return SendMinimum(await self.node.rent_exempt(0), RENT_RULE)

    async def _has_token_account(self, owner: str, asset: Asset) -> bool:
        account = get_associated_token_address(Pubkey.from_string(owner), self.mint(asset))
        return await self.node.exists(account)

    async def _creates_token_account(self, transfer_: Transfer) -> bool:
        """Whether the transfer creates the recipient's token account (it has none)."""
        if transfer_.asset.is_native:
            return False
        return not await self._has_token_account(transfer_.recipient, transfer_.asset)

    async def _base_fee(self, transfer_: Transfer, creates: bool) -> int:
        """The fee without its priority part: the signatures, and the rent of the
        recipient's token account when the transfer creates it."""
        lamports = LAMPORTS_PER_SIGNATURE * len(transfer_.signers)
        if creates:
            lamports += await self.node.rent_exempt(TOKEN_ACCOUNT_SIZE)
        return lamports

    async def _cu_price(self, transfer_: Transfer, instructions: Sequence[Instruction]) -> int:
        """The compute-unit price now, from the recent prioritization fees of the accounts
        the transfer writes (its fee payer's among them)."""
        writable = {Pubkey.from_string(transfer_.fee_payer)}
        writable.update(m.pubkey for ix in instructions for m in ix.accounts if m.is_writable)
        fees = await self.node.prioritization_fees(sorted(writable, key=bytes))
        return cu_price(fees, self.cu_price_min, self.cu_price_max)

    # -- transfers ----------------------------------------------------------------------
    def _instructions(self, transfer_: Transfer, creates: bool) -> list[Instruction]:
        """The transfer's own instructions (no compute budget, no memo)."""
        asset = transfer_.asset
        sender = Pubkey.from_string(transfer_.sender)
        recipient = Pubkey.from_string(transfer_.recipient)
        payer = Pubkey.from_string(transfer_.fee_payer)
        if asset.is_native:
            params = TransferParams(
                from_pubkey=sender, to_pubkey=recipient, lamports=transfer_.amount_units
            )
            return [transfer(params)]
        mint = self.mint(asset)
        instructions = []
        if creates:
            instructions.append(create_idempotent_associated_token_account(payer, recipient, mint))
        instructions.append(
            transfer_checked(
                TransferCheckedParams(
                    program_id=TOKEN_PROGRAM_ID,
                    source=get_associated_token_address(sender, mint),
                    mint=mint,
                    dest=get_associated_token_address(recipient, mint),
                    owner=sender,
                    amount=transfer_.amount_units,
                    decimals=asset.decimals,
                )
            )
        )
        return instructions

    async def prepare(self, transfer_: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        asset = transfer_.asset
        if asset.chain != self.chain:
            raise ValueError(f"{asset.symbol} is not on {self.chain}")
        payer = Pubkey.from_string(transfer_.fee_payer)
        creates = await self._creates_token_account(transfer_)
        own = self._instructions(transfer_, creates)
        limit = compute_unit_limit(asset.is_native, creates)
        # the quote is binding: the price now, or the highest the quote covers if less
        covered = max(0, fee.native_units - await self._base_fee(transfer_, creates))
        price = min(
            await self._cu_price(transfer_, own), covered * MICRO_LAMPORTS_PER_LAMPORT // limit
        )
        instructions = [set_compute_unit_limit(limit), set_compute_unit_price(price), *own]
        # two equal transfers under one blockhash would be one transaction (one signature):
        # a memo with a random tag keeps every prepared transfer distinct
        instructions.append(
            Instruction(MEMO_PROGRAM_ID, b"walletcore:" + token_hex(8).encode(), [])
        )
        blockhash, last_valid = await self.node.blockhash()
        message = Message.new_with_blockhash(instructions, payer, blockhash)
        body = json.dumps(
            {"message": base64.b64encode(bytes(message)).decode(), "lastValid": last_valid}
        ).encode()
        return UnsignedTransfer(transfer_, fee, bytes(message), body)

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        body = json.loads(unsigned.body)
        message = Message.from_bytes(base64.b64decode(body["message"]))
        signers = message.account_keys[: message.header.num_required_signatures]
        if set(signatures) != {str(k) for k in signers}:
            raise ValueError("one signature per signer is needed")
        tx = Transaction.populate(
            message, [Signature.from_bytes(signatures[str(k)]) for k in signers]
        )
        raw = {"tx": base64.b64encode(bytes(tx)).decode(), "lastValid": body["lastValid"]}
        return SignedTransfer(json.dumps(raw).encode(), str(tx.signatures[0]))

    async def release(self, unsigned: UnsignedTransfer) -> None:
        """Nothing to give back: a Solana transfer reserves nothing (its blockhash lapses)."""

    async def broadcast(self, signed: SignedTransfer) -> str:
        try:
            tx, last_valid = _decode(signed.raw)
        except ValueError:
            raise TransferRejected(
                "Transfer rejected by the network: malformed transaction"
            ) from None
        signature = str(tx.signatures[0])
        try:
            if await self.node.seen(signature):
                return signature  # landed before: sending it again changes nothing
            expired = await self.node.block_height() > last_valid
        except NodeUnavailable as exc:
            reason = exc.message.removesuffix("; retry with backoff")
            raise NodeUnavailable(f"{reason}; nothing was sent; retry with backoff") from None
        if expired:
            raise TransferRejected(
                "Transfer rejected: its blockhash expired before it landed; nothing was sent"
            )
        try:
            await self.node.send(tx)
        except SendError as exc:
            meaning = errors.refusal(exc.text)
            if not isinstance(meaning, errors.AlreadyKnown):
                raise meaning from None
            # it landed between the check above and the send: wait for it like any other
        try:
            return await self._confirm(signature, last_valid)
        except ServiceUnavailable:
            raise BroadcastTimeout() from None  # the bytes left: the outcome is unknown

    async def _confirm(self, signature: str, last_valid: int) -> str:
        """Wait until the signature is seen or its blockhash lapsed (then it never lands)."""
        while not await self.node.seen(signature):
            if await self.node.block_height() > last_valid:
                if await self.node.seen(signature):
                    break
                raise TransferRejected(
                    "Transfer rejected: its blockhash expired before it landed; nothing was sent"
                )
            await asyncio.sleep(self._poll)
        return signature

    # -- the transfer lifecycle (TransferFollower) --------------------------------------
    async def sighting(self, sender: str, asset: Asset, signed: SignedTransfer) -> Sighting:
        """getSignatureStatuses (searching the history) of the signature: `success` or
        `failed` at the gateway's commitment, `pending` below it. Unknown to the node:
        `expired` once the finalized block height is past the transaction's last valid one
        (read before the status, so a landing at or below it shows in the status) and the
        node calls its blockhash no longer valid -- it can never land; else `missing`
        (the same bytes may be sent again). A node that cannot answer raises."""
        tx, last_valid = _decode(signed.raw)
        signature = str(tx.signatures[0])
        if signature != signed.tx_hash:
            raise ValueError("the signed transaction is not the one of this hash")
        finalized = await self.node.block_height("finalized")
        status = (await self.node.statuses([signature]))[0]
        if status is not None:
            if not reaches(status.confirmation, self.commitment):
                return Sighting.PENDING
            return Sighting.FAILED if status.err is not None else Sighting.SUCCESS
        if finalized > last_valid and not await self.node.blockhash_valid(
            tx.message.recent_blockhash, "processed"
        ):
            return Sighting.EXPIRED
        return Sighting.MISSING

    def replacements(self, unsigned: UnsignedTransfer, cap_units: int) -> Sequence[Replacement]:
        """None: a Solana transfer that can never land is re-signed (`resigns`)."""
        return []


def _decode(raw: bytes) -> tuple[Transaction, int]:
    """The transaction and its last valid block height from the signed bytes of
    `assemble`; ValueError when they are not."""
    try:
        envelope = json.loads(raw)
        return Transaction.from_bytes(base64.b64decode(envelope["tx"])), int(envelope["lastValid"])
    except (ValueError, KeyError, TypeError):
        raise ValueError("malformed signed Solana transfer") from None


__all__ = [
    "CU_PRICE_MAX",
    "SolanaGateway",
    "compute_unit_limit",
    "cu_price",
    "priority_fee",
]
