"""Solana blocks as the deposit scan reads them (`walletcore_chains.solana.scanning`): a
slot's block, its blockhash and parent, and for each transaction its account keys and the
balances before and after it -- lamports per account, and SPL token accounts (mint,
owner, amount in base units) -- as getBlock answers them with `"transactionDetails":
"accounts"` (the keys and the balances, without instructions or logs), or `"full"` with
`"encoding": "json"`, or without transactions (`"none"`).

The account keys of a transaction are all it names, those it loaded from lookup tables
included: "accounts" lists them all (`source`: transaction or lookupTable); "full" lists
the message's own, and the loaded ones in `meta.loadedAddresses` (writable, then
read-only). The balances are indexed over that list, as the node lists them. `block_from_json` reads getBlock's
`result`; anything it cannot read raises `ValueError` (the node answered nonsense: the
caller raises rather than skip a transaction).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TokenBalance:
    """An SPL token account's balance in a transaction's meta (pre or post)."""

    #: its index in the transaction's account keys
    account_index: int
    mint: str
    #: the wallet that owns the token account ("" when the node does not say)
    owner: str
    #: base units (`uiTokenAmount.amount`)
    amount: int
    decimals: int
    program_id: str = ""


@dataclass(frozen=True, slots=True)
class BlockTx:
    """A transaction of a block: its first signature (its hash), every account key, its
    error (None: it succeeded), and the balances before and after it."""

    signature: str
    account_keys: tuple[str, ...]
    err: Any
    pre_balances: tuple[int, ...]
    post_balances: tuple[int, ...]
    pre_token_balances: tuple[TokenBalance, ...] = ()
    post_token_balances: tuple[TokenBalance, ...] = ()
    fee: int = 0


@dataclass(frozen=True, slots=True)
class Block:
    """The block of `slot`: its blockhash, its parent (the block before it in its fork; the
    slots between were skipped) and its transactions (empty when read without them)."""

    slot: int
    blockhash: str
    parent_slot: int
    previous_blockhash: str
    block_time: int | None = None
    transactions: tuple[BlockTx, ...] = ()


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"not an integer: {value!r}")
    return int(value)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not a string: {value!r}")
    return value


def _token_balances(rows: Any, keys: int) -> tuple[TokenBalance, ...]:
    if not isinstance(rows, Sequence):
        raise TypeError("token balances are not a list")
    out = []
    for row in rows:
        index = _int(row["accountIndex"])
        if not 0 <= index < keys:
            raise ValueError("a token balance of an account the transaction does not name")
        amount = row["uiTokenAmount"]
        out.append(
            TokenBalance(
                account_index=index,
                mint=_str(row["mint"]),
                owner=_str(row.get("owner") or ""),
                amount=_int(amount["amount"]),
                decimals=_int(amount["decimals"]),
                program_id=_str(row.get("programId") or ""),
            )
        )
    return tuple(out)


def _ints(values: Any) -> tuple[int, ...]:
    out = tuple(values)
    if not all(type(v) is int for v in out):  # `type`: a bool is no balance
        raise TypeError("balances that are not integers")
    return out


def _transaction(entry: Mapping[str, Any]) -> BlockTx:
    tx, meta = entry["transaction"], entry["meta"]
    if meta is None:
        raise TypeError("a transaction without its meta")
    if "message" in tx:  # "full": the message's keys, then those it loaded
        keys = tuple(tx["message"]["accountKeys"])
        loaded = meta.get("loadedAddresses")
        if loaded:
            keys += (*(loaded.get("writable") or ()), *(loaded.get("readonly") or ()))
    else:  # "accounts": every key, those loaded from lookup tables included
        keys = tuple(key["pubkey"] for key in tx["accountKeys"])
    if not all(type(k) is str for k in keys):
        raise TypeError("account keys that are not strings")
    pre, post = _ints(meta["preBalances"]), _ints(meta["postBalances"])
    if not keys or len(pre) != len(keys) or len(post) != len(keys):
        raise ValueError("balances that do not match the account keys")
    pre_tokens, post_tokens = meta.get("preTokenBalances"), meta.get("postTokenBalances")
    return BlockTx(
        signature=_str(tx["signatures"][0]),
        account_keys=keys,
        err=meta.get("err"),
        pre_balances=pre,
        post_balances=post,
        pre_token_balances=_token_balances(pre_tokens, len(keys)) if pre_tokens else (),
        post_token_balances=_token_balances(post_tokens, len(keys)) if post_tokens else (),
        fee=_int(meta.get("fee") or 0),
    )


def block_from_json(slot: int, result: Any) -> Block:
    """The `Block` of getBlock's `result` for `slot` (`transactionDetails` full or none;
    `encoding` json)."""
    try:
        if not isinstance(result, Mapping):
            raise TypeError("no block")
        entries = result.get("transactions") or ()
        block_time = result.get("blockTime")
        return Block(
            slot=slot,
            blockhash=_str(result["blockhash"]),
            parent_slot=_int(result["parentSlot"]),
            previous_blockhash=_str(result["previousBlockhash"]),
            block_time=None if block_time is None else _int(block_time),
            transactions=tuple(_transaction(entry) for entry in entries),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"an unreadable block: {exc}") from None


__all__ = ["Block", "BlockTx", "TokenBalance", "block_from_json"]
