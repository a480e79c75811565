"""`SolanaGateway`: the `ChainGateway` of SOLANA, for SOL and SPL tokens.

- fee: 5,000 lamports per signature (two when a sponsor pays), plus the rent of the
  recipient's associated token account (165 bytes, rent-exempt) on an SPL transfer to an
  owner that has none: the fee payer creates it in the same transaction.
- PLATFORM fee payer: the platform wallet is the transaction's fee payer (first signer)
  and pays the account rent; the sender signs as the token's owner.
- every prepared transfer carries a memo with a random tag, so two equal transfers under
  one blockhash are two transactions, not one signature landing once for both.
- blockhash: `prepare` takes the latest one and the last block height it is valid at;
  both travel with the signed bytes. `broadcast` sends, then waits until the signature
  is seen or that height passes: only then is a transfer that never landed known to be
  dead ("nothing was sent"). A retry re-sends the same signed bytes (same signature: it
  can land once); the gateway never re-signs with a new blockhash while the first may
  still land -- it holds no key, and the core re-broadcasts the stored bytes.
- the node is a `SolanaEngine`: the in-process LiteSVM node (devnet) or a JSON-RPC node
  (`walletcore_chains.solana.rpc`). Once the bytes left, a node that stops answering
  makes the outcome unknown (504), never "nothing was sent".
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping
from secrets import token_hex

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
    InsufficientFunds,
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
    FeeQuote,
    SignedTransfer,
    Transfer,
    UnsignedTransfer,
)
from walletcore_chains.solana.node import (
    LAMPORTS_PER_SIGNATURE,
    TOKEN_ACCOUNT_SIZE,
    SendError,
    SolanaEngine,
)
from walletcore_chains.solana.rows import row

MEMO_PROGRAM_ID = Pubkey.from_string("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr")


class SolanaGateway(ChainGateway):
    chain = Chain.SOLANA

    def __init__(
        self,
        node: SolanaEngine,
        validator: AddressValidator,
        mints: Mapping[int, Pubkey],
        *,
        confirm_poll: float = 0.5,
    ) -> None:
        self.node = node
        self._validator = validator
        self._mints = dict(mints)
        self._poll = confirm_poll

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
        rows = []
        for signature in await self.node.signatures(account, limit):
            executed = await self.node.executed(signature)
            found = row(address, mint, executed) if executed is not None else None
            if found is not None:
                rows.append(found)
        return rows

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        executed = await self.node.executed(tx_hash)
        mint = None if asset.is_native else self.mint(asset)
        found = row(address, mint, executed) if executed is not None else None
        if found is None:
            raise TransactionNotFound()
        return found

    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        signatures = 2 if fee_payer is not None and fee_payer != sender else 1
        lamports = LAMPORTS_PER_SIGNATURE * signatures
        if not asset.is_native and not await self._has_token_account(recipient, asset):
            lamports += await self.node.rent_exempt(TOKEN_ACCOUNT_SIZE)
        return FeeQuote(lamports)

    async def _has_token_account(self, owner: str, asset: Asset) -> bool:
        account = get_associated_token_address(Pubkey.from_string(owner), self.mint(asset))
        return await self.node.exists(account)

    # -- transfers ----------------------------------------------------------------------
    async def prepare(self, transfer_: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        asset = transfer_.asset
        if asset.chain is not self.chain:
            raise ValueError(f"{asset.symbol} is not on {self.chain}")
        sender = Pubkey.from_string(transfer_.sender)
        recipient = Pubkey.from_string(transfer_.recipient)
        payer = Pubkey.from_string(transfer_.fee_payer)
        if asset.is_native:
            params = TransferParams(
                from_pubkey=sender, to_pubkey=recipient, lamports=transfer_.amount_units
            )
            instructions = [transfer(params)]
        else:
            mint = self.mint(asset)
            instructions = []
            if not await self._has_token_account(transfer_.recipient, asset):
                instructions.append(
                    create_idempotent_associated_token_account(payer, recipient, mint)
                )
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
            raw = json.loads(signed.raw)
            tx = Transaction.from_bytes(base64.b64decode(raw["tx"]))
            last_valid = int(raw["lastValid"])
        except (ValueError, KeyError, TypeError):
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
            if "AlreadyProcessed" not in exc.text and "already been processed" not in exc.text:
                raise _refusal(exc.text) from None
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


def _refusal(text: str) -> Exception:
    """A refusal's text -- LiteSVM's error, or a JSON-RPC node's simulation error and logs --
    read into a domain error (nothing was sent)."""
    if "InsufficientFundsForFee" in text or "AccountNotFound" in text:
        return InsufficientFunds(
            "Not enough SOL for the network fee at broadcast: the fee payer cannot pay it; "
            "nothing was sent"
        )
    if (
        "InstructionErrorCustom(1)" in text
        or "InsufficientFunds" in text
        or "insufficient lamports" in text
        or "custom program error: 0x1 " in text + " "
        or "insufficient funds" in text
    ):
        return InsufficientFunds(
            "Insufficient balance at broadcast: the network refused the transfer; nothing was sent"
        )
    if "InvalidAccountData" in text or "UninitializedAccount" in text:
        return InsufficientFunds(
            "Insufficient token balance at broadcast: the sender has no account of the "
            "token; nothing was sent"
        )
    if "BlockhashNotFound" in text or "Blockhash not found" in text:
        return TransferRejected(
            "Transfer rejected: its blockhash expired before it landed; nothing was sent"
        )
    return TransferRejected("Transfer rejected by the network; nothing was sent")


__all__ = ["SolanaGateway"]
