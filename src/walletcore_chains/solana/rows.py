"""Transaction rows from executed Solana transactions, read from their instructions:
System `Transfer` for SOL; SPL Token `TransferChecked`, `Transfer` and `MintTo` for tokens.

A SOL row: the wallet sent or received lamports. A token row: the wallet owns the source
(sent) or its associated token account is the destination (received). The fee is the
transaction's (paid by its fee payer, who may be a sponsor). A transaction that landed and
failed reads `failed` (its fee was charged, its transfer did not happen).
"""

from __future__ import annotations

from datetime import UTC, datetime

from solders.pubkey import Pubkey
from solders.system_program import ID as SYSTEM_PROGRAM_ID
from spl.token.constants import TOKEN_PROGRAM_ID
from spl.token.instructions import get_associated_token_address

from walletcore.domain.wallet import TxRow
from walletcore_chains.solana.node import Executed

_SYSTEM_TRANSFER = 2
_TOKEN_TRANSFER, _TOKEN_MINT_TO, _TOKEN_TRANSFER_CHECKED = 3, 7, 12


def _moves(executed: Executed, mint: Pubkey | None) -> list[tuple[Pubkey, Pubkey, int]]:
    """(from, to, amount) of each transfer of the asset: owners' or token accounts' keys."""
    message = executed.tx.message
    keys = list(executed.account_keys or message.account_keys)
    out = []
    for ix in message.instructions:
        if ix.program_id_index >= len(keys) or any(i >= len(keys) for i in ix.accounts):
            continue  # an account this reading does not know: not one of ours
        program = keys[ix.program_id_index]
        data = bytes(ix.data)
        accounts = [keys[i] for i in ix.accounts]
        if (
            mint is None
            and program == SYSTEM_PROGRAM_ID
            and len(data) >= 12
            and len(accounts) >= 2
            and data[:4] == b"\x02\0\0\0"
        ):
            out.append((accounts[0], accounts[1], int.from_bytes(data[4:12], "little")))
        if mint is None or program != TOKEN_PROGRAM_ID or not data:
            continue
        amount = int.from_bytes(data[1:9], "little")
        if len(data) < 9:
            continue
        if data[0] == _TOKEN_TRANSFER_CHECKED and len(accounts) >= 4 and accounts[1] == mint:
            out.append((accounts[3], accounts[2], amount))  # owner -> destination account
        elif data[0] == _TOKEN_MINT_TO and len(accounts) >= 3 and accounts[0] == mint:
            out.append((accounts[2], accounts[1], amount))  # authority -> destination
    return out


def row(address: str, mint: Pubkey | None, executed: Executed) -> TxRow | None:
    """The row of `executed` for the wallet at `address`, or None when it is not one."""
    me = Pubkey.from_string(address)
    mine = get_associated_token_address(me, mint) if mint is not None else me
    for sender, recipient, amount in _moves(executed, mint):
        if sender == me or recipient == mine:
            return TxRow(
                hash=executed.signature,
                type="send" if sender == me else "receive",
                amount_units=amount,
                fee_units=executed.fee,
                status="success" if executed.err is None else "failed",
                date=datetime.fromtimestamp(executed.block_time, UTC),
            )
    return None


__all__ = ["row"]
