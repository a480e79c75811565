"""A Solana JSON-RPC node for the tests: stdlib `http.server` on 127.0.0.1 (a free port) in a
thread, answering the methods `RpcNode` calls from a `LiteSvmNode` (the devnet's runtime
and its index of landed transactions). Responses are built with solders' RPC response
types wherever one fits, so their shapes are the ones the `solana` client parses.

`hang_sends`: sendTransaction waits `hang_seconds` before it lands the transaction and
answers (a client with a shorter timeout sees an unknown outcome: the bytes did land).

The node's own rules, kept by the `LiteSvmNode` it serves (so both engines see the same
chain): a fresh blockhash per block, valid 150 blocks (isBlockhashValid; sends of an
expired one are refused `BlockhashNotFound`); commitment levels (`finality_slots`: a
landed transaction is `confirmed`, then `finalized` that many slots later; getBlockHeight
at `finalized` trails as much); getRecentPrioritizationFees from the fees a test sets
(`set_priority_fee`: LiteSVM has no fee market); `lose_sends`: the next sends are
answered with their signature and never land (a transaction dropped on its way).

Blocks, as the node models them (`LiteSvmNode`: a block per slot where a transaction
landed, the slots the clock passed without one skipped): getSlot (the newest block at the
commitment), getBlocks (at most 500,000 slots a call), getBlock (`encoding` json,
`transactionDetails` full, accounts, signatures or none, `rewards`; a skipped slot answers -32007,
a slot above the commitment's newest block -32004, `processed` is refused, as a node
does); getTransaction's meta carries the same balances. `blockHeight` is the slot: the
node counts heights in slots (getBlockHeight)."""

from __future__ import annotations

import base64
import json
import threading
import time
from decimal import Decimal
from typing import Any

import base58
from solders.account_decoder import UiTokenAmount
from solders.hash import Hash
from solders.pubkey import Pubkey
from solders.rpc.responses import (
    GetAccountInfoResp,
    GetBalanceResp,
    GetBlockResp,
    GetLatestBlockhashResp,
    GetRecentPrioritizationFeesResp,
    GetSignaturesForAddressResp,
    GetSignatureStatusesResp,
    GetTokenAccountBalanceResp,
    GetTransactionResp,
    IsBlockhashValidResp,
    RpcBlockhash,
    RpcConfirmedTransactionStatusWithSignature,
    RpcPrioritizationFee,
    RpcResponseContext,
    RpcSimulateTransactionResult,
    SimulateTransactionResp,
)
from solders.signature import Signature
from solders.transaction import Transaction, VersionedTransaction
from solders.transaction_status import TransactionConfirmationStatus, TransactionStatus

from walletcore.testing.http import LoopbackRpcServer, RpcError
from walletcore_chains.solana.blocks import BlockTx, TokenBalance
from walletcore_chains.solana.node import COMMITMENTS, Commitment, Executed, LiteSvmNode, SendError

_STATUS = {
    "processed": TransactionConfirmationStatus.Processed,
    "confirmed": TransactionConfirmationStatus.Confirmed,
    "finalized": TransactionConfirmationStatus.Finalized,
}


def _commitment(config: Any, default: Commitment = "finalized") -> Commitment:
    """The commitment of a request's config object (a node's default: finalized)."""
    asked = config.get("commitment") if isinstance(config, dict) else None
    for level in COMMITMENTS:
        if asked == level:
            return level
    return default


#: the widest slot range getBlocks answers
MAX_BLOCKS_RANGE = 500_000


def _config(config: Any) -> dict[str, Any]:
    return config if isinstance(config, dict) else {}


def _block_commitment(config: Any) -> Commitment:
    """A block read's commitment: `confirmed` or `finalized` (the default)."""
    level = _commitment(config)
    if level == "processed":
        raise RpcError(-32602, "Method does not support commitment below `confirmed`")
    return level


def _token_json(balance: TokenBalance) -> dict[str, Any]:
    units = Decimal(balance.amount).scaleb(-balance.decimals)
    return {
        "accountIndex": balance.account_index,
        "mint": balance.mint,
        "owner": balance.owner,
        "programId": balance.program_id,
        "uiTokenAmount": {
            "amount": str(balance.amount),
            "decimals": balance.decimals,
            "uiAmount": float(units),
            "uiAmountString": format(units.normalize(), "f") if balance.amount else "0",
        },
    }


def _meta_json(executed: Executed, landed: BlockTx | None, err: Any) -> dict[str, Any]:
    """A transaction's meta as the node words it (json encoding)."""
    return {
        "err": err,
        "status": {"Ok": None} if err is None else {"Err": err},
        "fee": executed.fee,
        "preBalances": list(landed.pre_balances) if landed else [],
        "postBalances": list(landed.post_balances) if landed else [],
        "innerInstructions": [],
        "logMessages": [],
        "preTokenBalances": [_token_json(b) for b in landed.pre_token_balances] if landed else [],
        "postTokenBalances": [_token_json(b) for b in landed.post_token_balances] if landed else [],
        "rewards": [],
        "loadedAddresses": {"writable": [], "readonly": []},
        "computeUnitsConsumed": executed.compute_units,
    }


def _transaction_json(executed: Executed) -> dict[str, Any]:
    """A transaction in the json encoding: its signatures and its message."""
    message = executed.tx.message
    header = message.header
    return {
        "signatures": [str(s) for s in executed.tx.signatures],
        "message": {
            "accountKeys": [str(k) for k in message.account_keys],
            "header": {
                "numRequiredSignatures": header.num_required_signatures,
                "numReadonlySignedAccounts": header.num_readonly_signed_accounts,
                "numReadonlyUnsignedAccounts": header.num_readonly_unsigned_accounts,
            },
            "instructions": [
                {
                    "programIdIndex": ix.program_id_index,
                    "accounts": list(bytes(ix.accounts)),
                    "data": base58.b58encode(bytes(ix.data)).decode(),
                    "stackHeight": None,
                }
                for ix in message.instructions
            ],
            "recentBlockhash": str(message.recent_blockhash),
        },
    }


#: the meta of a transaction read with `"transactionDetails": "accounts"`
_ACCOUNTS_META = (
    "err",
    "status",
    "fee",
    "preBalances",
    "postBalances",
    "preTokenBalances",
    "postTokenBalances",
)


def _accounts_json(executed: Executed) -> dict[str, Any]:
    """A transaction as "accounts" lists it: its signatures, and every account key with
    whether it signs and is written."""
    message = executed.tx.message
    header = message.header
    keys = message.account_keys
    signers = header.num_required_signatures
    read_only_signers = header.num_readonly_signed_accounts
    read_only_others = header.num_readonly_unsigned_accounts
    accounts = []
    for index, key in enumerate(keys):
        writable = (
            index < signers - read_only_signers or signers <= index < len(keys) - read_only_others
        ) and not message.is_key_called_as_program(index)
        accounts.append(
            {
                "pubkey": str(key),
                "writable": writable,
                "signer": index < signers,
                "source": "transaction",
            }
        )
    return {"accountKeys": accounts, "signatures": [str(s) for s in executed.tx.signatures]}


def _error_json(error: Any) -> Any:
    """A runtime error (solders' `TransactionError`) as JSON-RPC words it."""
    return json.loads(TransactionStatus(0, None, None, error, None).to_json())["err"]


class RpcTestNode(LoopbackRpcServer):
    def __init__(self, node: LiteSvmNode) -> None:
        self.node = node
        self.hang_sends = False
        self.hang_seconds = 1.0
        self.calls: list[str] = []
        self._lock = threading.Lock()
        super().__init__()

    # -- dispatch -----------------------------------------------------------------------
    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        method, params, rid = request["method"], request.get("params") or [], request["id"]
        self.calls.append(method)
        try:
            if method == "sendTransaction" and self.hang_sends:
                time.sleep(self.hang_seconds)
            with self._lock:
                result = getattr(self, "_" + method)(*params)
        except RpcError as err:
            return err.reply(rid)
        except Exception as exc:  # noqa: BLE001 - a bug of this node: an internal error
            return RpcError(-32603, repr(exc)).reply(rid)
        if hasattr(result, "to_json"):
            body = json.loads(result.to_json())
            body["id"] = rid
            return body  # type: ignore[no-any-return]
        return {"jsonrpc": "2.0", "result": result, "id": rid}

    @property
    def _slot(self) -> int:
        return int(self.node.svm.get_clock().slot)

    def _context(self) -> RpcResponseContext:
        return RpcResponseContext(self._slot)

    # -- methods ------------------------------------------------------------------------
    def _getBalance(self, address: str, *_: Any) -> GetBalanceResp:
        balance = self.node.svm.get_balance(Pubkey.from_string(address)) or 0
        return GetBalanceResp(int(balance), self._context())

    def _getAccountInfo(self, address: str, *_: Any) -> GetAccountInfoResp:
        account = self.node.svm.get_account(Pubkey.from_string(address))
        return GetAccountInfoResp(account, self._context())

    def _getTokenAccountBalance(self, address: str, *_: Any) -> GetTokenAccountBalanceResp:
        account = self.node.svm.get_account(Pubkey.from_string(address))
        if account is None:
            raise RpcError(-32602, "Invalid param: could not find account")
        data = bytes(account.data)
        mint = self.node.svm.get_account(Pubkey.from_bytes(data[:32]))
        decimals = bytes(mint.data)[44] if mint is not None else 0
        amount = int.from_bytes(data[64:72], "little")
        ui = amount / 10**decimals
        return GetTokenAccountBalanceResp(
            UiTokenAmount(ui, decimals, str(amount), str(ui)), self._context()
        )

    def _getLatestBlockhash(self, *_: Any) -> GetLatestBlockhashResp:
        value = RpcBlockhash(*self.node.latest_blockhash_now())
        return GetLatestBlockhashResp(value, self._context())

    def _getBlockHeight(self, config: Any = None, *_: Any) -> int:
        return self.node.height_now(_commitment(config))

    def _isBlockhashValid(self, blockhash: str, config: Any = None, *_: Any) -> Any:
        valid = self.node.blockhash_valid_now(Hash.from_string(blockhash), _commitment(config))
        # solders' stub leaves out the context its constructor takes (and needs)
        response: Any = IsBlockhashValidResp
        return response(valid, self._context())

    def _getRecentPrioritizationFees(
        self, accounts: list[str] | None = None, *_: Any
    ) -> GetRecentPrioritizationFeesResp:
        if accounts is not None and len(accounts) > 128:
            raise RpcError(-32602, "Too many inputs provided; max 128")
        fees = self.node.prioritization_fees_now(accounts or [])
        return GetRecentPrioritizationFeesResp(
            [RpcPrioritizationFee(slot, fee) for slot, fee in fees]
        )

    def _getMinimumBalanceForRentExemption(self, size: int, *_: Any) -> int:
        return int(self.node.svm.minimum_balance_for_rent_exemption(size))

    def _simulateTransaction(self, raw: str, *_: Any) -> SimulateTransactionResp:
        tx = VersionedTransaction.from_bytes(base64.b64decode(raw))
        err, logs, units = self.node.simulate(tx)
        result = RpcSimulateTransactionResult(err=err, logs=logs, units_consumed=units)
        return SimulateTransactionResp(result, self._context())  # type: ignore[call-arg]

    def _sendTransaction(self, raw: str, *_: Any) -> str:
        tx = Transaction.from_bytes(base64.b64decode(raw))
        signature = str(tx.signatures[0])
        if self.node.executed_now(signature) is not None:
            return signature  # a node answers a duplicate with its signature
        try:
            self.node.accept(tx)
        except SendError as exc:
            raise RpcError(-32002, f"Transaction simulation failed: {exc.text}") from None
        return signature

    def _getSignatureStatuses(self, signatures: list[str], *_: Any) -> GetSignatureStatusesResp:
        if len(signatures) > 256:
            raise RpcError(-32602, "Too many inputs provided; max 256")
        statuses = []
        for signature in signatures:
            status = self.node.status_now(signature)
            statuses.append(
                None
                if status is None
                else TransactionStatus(
                    status.slot,
                    None if status.confirmation == "finalized" else 1,
                    None,
                    self.node.errors.get(signature),
                    _STATUS[status.confirmation],
                )
            )
        return GetSignatureStatusesResp(statuses, self._context())

    def _getTransaction(self, signature: str, *_: Any) -> GetTransactionResp | None:
        executed = self.node.executed_now(signature)
        if executed is None:
            return None
        meta = _meta_json(executed, self.node.landed_now(signature), self._err(signature))
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {
                "slot": executed.slot,
                "blockTime": executed.block_time,
                "version": "legacy",
                "transaction": [base64.b64encode(bytes(executed.tx)).decode(), "base64"],
                "meta": meta,
            },
        }
        parsed = GetTransactionResp.from_json(json.dumps(body))
        assert isinstance(parsed, GetTransactionResp)  # the shape the client parses
        return parsed

    def _getSignaturesForAddress(
        self, address: str, config: dict[str, Any] | None = None, *_: Any
    ) -> GetSignaturesForAddressResp:
        limit = int((config or {}).get("limit") or 1000)
        rows = []
        for signature in self.node.signatures_now(Pubkey.from_string(address), limit):
            executed = self.node.executed_now(signature)
            assert executed is not None
            rows.append(
                RpcConfirmedTransactionStatusWithSignature(
                    Signature.from_string(signature),
                    executed.slot,
                    block_time=executed.block_time,
                    confirmation_status=_STATUS[self.node.confirmation_now(executed)],
                )
            )
        return GetSignaturesForAddressResp(rows)

    def _err(self, signature: str) -> Any:
        error = self.node.errors.get(signature)
        return None if error is None else _error_json(error)

    # -- blocks -------------------------------------------------------------------------
    def _getSlot(self, config: Any = None, *_: Any) -> int:
        return self.node.slot_now(_commitment(config))

    def _getBlocks(self, start: int, end: Any = None, config: Any = None, *_: Any) -> list[int]:
        if isinstance(end, dict):  # getBlocks(start, config)
            end, config = None, end
        commitment = _block_commitment(config)
        last = self.node.slot_now(commitment) if end is None else int(end)
        if last - int(start) > MAX_BLOCKS_RANGE:
            raise RpcError(-32602, f"Slot range too large; max {MAX_BLOCKS_RANGE}")
        return self.node.block_slots_now(int(start), last, commitment)

    def _getBlock(self, slot: int, config: Any = None, *_: Any) -> dict[str, Any]:
        options = {"encoding": config} if isinstance(config, str) else _config(config)
        commitment = _block_commitment(options)
        encoding = options.get("encoding") or "json"
        details = options.get("transactionDetails") or "full"
        if encoding != "json" or details not in ("full", "accounts", "signatures", "none"):
            raise RpcError(-32602, "Invalid params: this node answers the json encoding only")
        if slot > self.node.slot_now(commitment):
            raise RpcError(-32004, f"Block not available for slot {slot}")
        block = self.node.block_now(slot)
        if block is None:
            raise RpcError(
                -32007, f"Slot {slot} was skipped, or missing due to ledger jump to recent snapshot"
            )
        result: dict[str, Any] = {
            "blockHeight": block.slot,
            "blockTime": block.block_time,
            "blockhash": block.blockhash,
            "parentSlot": block.parent_slot,
            "previousBlockhash": block.previous_blockhash,
        }
        versioned = options.get("maxSupportedTransactionVersion") is not None
        if details == "signatures":
            result["signatures"] = [tx.signature for tx in block.transactions]
        elif details in ("full", "accounts"):
            result["transactions"] = [
                self._block_tx(tx, versioned, details == "full") for tx in block.transactions
            ]
        if options.get("rewards", True):
            result["rewards"] = []
        body = {"jsonrpc": "2.0", "id": 0, "result": result}
        parsed = GetBlockResp.from_json(json.dumps(body))
        assert isinstance(parsed, GetBlockResp)  # the shape the client parses
        return result

    def _block_tx(self, landed: BlockTx, versioned: bool, full: bool) -> dict[str, Any]:
        executed = self.node.executed_now(landed.signature)
        assert executed is not None
        meta = _meta_json(executed, landed, self._err(landed.signature))
        entry: dict[str, Any] = {"transaction": _transaction_json(executed), "meta": meta}
        if not full:  # "accounts": the keys and the balances only
            entry["transaction"] = _accounts_json(executed)
            entry["meta"] = {k: v for k, v in meta.items() if k in _ACCOUNTS_META}
        if versioned:
            entry["version"] = "legacy"
        return entry


__all__ = ["RpcTestNode"]
