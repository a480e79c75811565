"""`RpcNode`: the `SolanaEngine` of a Solana JSON-RPC node (`solana.rpc.async_api.AsyncClient`).

- reads at `confirmed` commitment: getBalance, getTokenAccountBalance (an account the node
  does not know: none), getAccountInfo, getLatestBlockhash (with its last valid block
  height), getBlockHeight (also at `finalized`), getMinimumBalanceForRentExemption.
- getRecentPrioritizationFees of the accounts a transfer writes; isBlockhashValid (at
  the commitment asked).
- send: simulateTransaction first (the preflight, read like the LiteSVM node's refusals),
  then sendTransaction of the same bytes with `skipPreflight`.
- landed: getSignatureStatuses (searching history), `confirmed` or `finalized`; the
  statuses, with their commitment level, for the gateway's commitment rule.
- lookup and history: getTransaction (base64, the fee and error from its meta);
  getSignaturesForAddress bounded by the page, then getTransaction for each.
- blocks (the deposit scan): getSlot and getBlocks at the gateway's commitment; getBlock
  (`transactionDetails` accounts -- each transaction's keys and balances, without its
  instructions and logs -- or none; no rewards; versioned transactions too) read as
  plain JSON into `walletcore_chains.solana.blocks` (a skipped slot, -32007 / -32009:
  None; any other error, or an answer that does not read: 503).

Errors: a node that cannot be reached (refused, DNS, connect timeout) -> `NodeUnavailable`
(503, retry with backoff); a read the node could not answer -> `NodeUnavailable` too; a
send whose request left and got no answer -> `BroadcastTimeout` (504, outcome unknown);
a node that answered a send with an error -> `SendError` (read by the gateway: 400/502,
nothing was sent). The client makes no retries of its own.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from solana.exceptions import SolanaRpcException
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Confirmed, Finalized, Processed
from solana.rpc.core import RPCException
from solana.rpc.models import TxOpts
from solders.commitment_config import CommitmentLevel
from solders.hash import Hash
from solders.pubkey import Pubkey
from solders.rpc.config import RpcBlockConfig, RpcContextConfig
from solders.rpc.requests import GetBlock, GetBlocks, IsBlockhashValid
from solders.rpc.responses import GetBlocksResp, IsBlockhashValidResp
from solders.signature import Signature
from solders.transaction import Transaction, VersionedTransaction
from solders.transaction_status import (
    TransactionConfirmationStatus,
    TransactionDetails,
    UiTransactionEncoding,
)

from walletcore.domain.errors import BroadcastTimeout, DomainError
from walletcore_chains.solana.blocks import Block, block_from_json
from walletcore_chains.solana.errors import TRANSPORT
from walletcore_chains.solana.node import Commitment, Executed, SendError, SignatureStatus

T = TypeVar("T")

_LANDED = ("confirmed", "finalized")
_COMMITMENT = {"processed": Processed, "confirmed": Confirmed, "finalized": Finalized}
_LEVEL = {
    "processed": CommitmentLevel.Processed,
    "confirmed": CommitmentLevel.Confirmed,
    "finalized": CommitmentLevel.Finalized,
}
_STATUS: tuple[tuple[TransactionConfirmationStatus, Commitment], ...] = (
    (TransactionConfirmationStatus.Processed, "processed"),
    (TransactionConfirmationStatus.Confirmed, "confirmed"),
    (TransactionConfirmationStatus.Finalized, "finalized"),
)
#: signatures getSignatureStatuses takes at once
_STATUSES_PER_CALL = 256
#: getBlock's errors for a slot without a block: skipped, or skipped in long-term storage
_SKIPPED = (-32007, -32009)


def is_unreachable(exc: BaseException | None) -> bool:
    """A connection that was never made: the request cannot have reached the node."""
    return TRANSPORT.unreachable(exc)


def rpc_client(url: str, timeout: float) -> AsyncClient:
    """An `AsyncClient` on a JSON-RPC endpoint: no retries of its own (a failed call is
    answered at once: 503, or an unknown broadcast outcome)."""
    return AsyncClient(url, commitment=Confirmed, timeout=timeout, max_transport_retries=0)


class RpcNode:
    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    def __repr__(self) -> str:
        return "RpcNode()"

    async def aclose(self) -> None:
        await self.client.close()

    # -- errors -------------------------------------------------------------------------
    @staticmethod
    async def _read(call: Awaitable[T]) -> T:
        try:
            return await call
        except DomainError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure of a read is a 503
            raise _read_failure(exc) from None

    # -- reads --------------------------------------------------------------------------
    async def lamports(self, account: Pubkey) -> int:
        return int((await self._read(self.client.get_balance(account))).value)

    async def token_units(self, token_account: Pubkey) -> int | None:
        try:
            resp = await self.client.get_token_account_balance(token_account)
        except RPCException:
            # the node's answer for an account it does not know (or that is no token
            # account): make sure it is absent rather than read a failure as "zero"
            if await self.exists(token_account):
                raise _read_failure(None) from None
            return None
        except Exception as exc:  # noqa: BLE001 - every failure of a read is a 503
            raise _read_failure(exc) from None
        return int(resp.value.amount)

    async def exists(self, account: Pubkey) -> bool:
        return (await self._read(self.client.get_account_info(account))).value is not None

    async def blockhash(self) -> tuple[Hash, int]:
        value = (await self._read(self.client.get_latest_blockhash(Confirmed))).value
        return value.blockhash, int(value.last_valid_block_height)

    async def block_height(self, commitment: Commitment = "confirmed") -> int:
        resp = await self._read(self.client.get_block_height(_COMMITMENT[commitment]))
        return int(resp.value)

    async def blockhash_valid(self, blockhash: Hash, commitment: Commitment) -> bool:
        """isBlockhashValid (the client has no method of its own for it)."""
        body = IsBlockhashValid(blockhash, RpcContextConfig(commitment=_LEVEL[commitment]))
        provider = self.client._provider  # the client's own transport
        resp = await self._read(provider.make_request(body, IsBlockhashValidResp))
        return bool(resp.value)

    async def prioritization_fees(self, accounts: Sequence[Pubkey]) -> list[int]:
        resp = await self._read(self.client.get_recent_prioritization_fees(list(accounts)))
        return [int(fee.prioritization_fee) for fee in resp.value]

    async def rent_exempt(self, size: int) -> int:
        resp = await self._read(self.client.get_minimum_balance_for_rent_exemption(size))
        return int(resp.value)

    # -- send ---------------------------------------------------------------------------
    async def send(self, tx: Transaction) -> str:
        """Simulate (the preflight), then send the same bytes; `SendError` when refused."""
        versioned = VersionedTransaction.from_legacy(tx)
        simulated = (
            await self._read(
                self.client.simulate_transaction(versioned, sig_verify=True, commitment=Confirmed)
            )
        ).value
        if simulated.err is not None:
            logs = " ".join(simulated.logs or [])
            raise SendError(f"{simulated.err} {logs}")
        try:
            resp = await self.client.send_raw_transaction(
                bytes(tx), TxOpts(skip_preflight=True, preflight_commitment=Confirmed)
            )
        except RPCException as exc:
            raise SendError(_rpc_text(exc)) from None
        except SolanaRpcException as exc:
            # never left: 503; else the request left and the outcome is unknown
            raise TRANSPORT.send_error(exc) from None
        except Exception:  # noqa: BLE001 - the request left: the outcome is unknown
            raise BroadcastTimeout() from None
        return str(resp.value)

    # -- transactions -------------------------------------------------------------------
    async def seen(self, signature: str) -> bool:
        status = (await self.statuses([signature]))[0]
        return status is not None and status.confirmation in _LANDED

    async def statuses(self, signatures: Sequence[str]) -> list[SignatureStatus | None]:
        out: list[SignatureStatus | None] = []
        for start in range(0, len(signatures), _STATUSES_PER_CALL):
            chunk = [
                Signature.from_string(s) for s in signatures[start : start + _STATUSES_PER_CALL]
            ]
            resp = await self._read(
                self.client.get_signature_statuses(chunk, search_transaction_history=True)
            )
            if len(resp.value) != len(chunk):
                raise _read_failure(None)
            out.extend(_status(found) for found in resp.value)
        return out

    async def executed(self, signature: str) -> Executed | None:
        try:
            sig = Signature.from_string(signature)
        except ValueError:
            return None
        resp = await self._read(
            self.client.get_transaction(
                sig, encoding="base64", commitment=Confirmed, max_supported_transaction_version=0
            )
        )
        found = resp.value
        if found is None:
            return None
        return _executed(signature, found)

    async def signatures(self, account: Pubkey, limit: int) -> list[str]:
        resp = await self._read(
            self.client.get_signatures_for_address(account, limit=limit, commitment=Confirmed)
        )
        return [str(s.signature) for s in resp.value][:limit]

    # -- blocks (the deposit scan) --------------------------------------------------------
    async def slot(self, commitment: Commitment) -> int:
        return int((await self._read(self.client.get_slot(_COMMITMENT[commitment]))).value)

    async def block_slots(self, first: int, last: int, commitment: Commitment) -> list[int]:
        body = GetBlocks(first, last, _LEVEL[commitment])
        provider = self.client._provider
        resp = await self._read(provider.make_request(body, GetBlocksResp))
        return [int(slot) for slot in resp.value]

    async def block(
        self, slot: int, commitment: Commitment, *, transactions: bool = True
    ) -> Block | None:
        config = RpcBlockConfig(
            encoding=UiTransactionEncoding.Json,
            transaction_details=(
                TransactionDetails.Accounts if transactions else TransactionDetails.None_
            ),
            rewards=False,
            commitment=_LEVEL[commitment],
            max_supported_transaction_version=0,
        )
        provider = self.client._provider
        raw = await self._read(provider.make_request_unparsed(GetBlock(slot, config)))
        try:
            answer = json.loads(raw)
            error = answer.get("error")
            if error is not None:
                if error.get("code") in _SKIPPED:
                    return None
                raise ValueError("the node could not answer")
            return block_from_json(slot, answer["result"])
        except (ValueError, KeyError, TypeError, AttributeError):
            raise _read_failure(None) from None


def _read_failure(exc: BaseException | None) -> DomainError:
    return TRANSPORT.read_error(exc)


def _rpc_text(exc: RPCException) -> str:
    error = exc.args[0] if exc.args else exc
    parts = [str(getattr(error, "message", error))]
    data = getattr(error, "data", None)
    if data is not None:
        parts.append(str(getattr(data, "err", "")))
        parts.extend(getattr(data, "logs", None) or [])
    return " ".join(parts)


def _status(found: Any) -> SignatureStatus | None:
    """A `SignatureStatus` from getSignatureStatuses' answer for one signature. A node that
    gives no confirmation level: `finalized` when it counts no confirmations (rooted),
    else no more than `processed`."""
    if found is None:
        return None
    level = next((lv for st, lv in _STATUS if st == found.confirmation_status), None)
    if level is None:
        level = "finalized" if found.confirmations is None else "processed"
    return SignatureStatus(int(found.slot), level, None if found.err is None else str(found.err))


def _executed(signature: str, found: Any) -> Executed | None:
    """An `Executed` from getTransaction's answer (base64): None when unreadable."""
    encoded = found.transaction
    tx = encoded.transaction
    meta = encoded.meta
    if not isinstance(tx, VersionedTransaction) or meta is None:
        return None
    keys: tuple[Pubkey, ...] | None = None
    loaded = getattr(meta, "loaded_addresses", None)
    if loaded is not None and (loaded.writable or loaded.readonly):
        keys = (*tx.message.account_keys, *loaded.writable, *loaded.readonly)
    return Executed(
        signature=signature,
        tx=tx,
        slot=int(found.slot),
        block_time=int(found.block_time or 0),
        fee=int(meta.fee),
        err=None if meta.err is None else str(meta.err),
        account_keys=keys,
        compute_units=int(getattr(meta, "compute_units_consumed", None) or 0),
    )


__all__ = ["RpcNode", "is_unreachable", "rpc_client"]
