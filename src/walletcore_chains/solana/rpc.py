"""`RpcNode`: the `SolanaEngine` of a Solana JSON-RPC node (`solana.rpc.async_api.AsyncClient`).

- reads at `confirmed` commitment: getBalance, getTokenAccountBalance (an account the node
  does not know: none), getAccountInfo, getLatestBlockhash (with its last valid block
  height), getBlockHeight, getMinimumBalanceForRentExemption.
- send: simulateTransaction first (the preflight, read like the LiteSVM node's refusals),
  then sendTransaction of the same bytes with `skipPreflight`.
- landed: getSignatureStatuses (searching history), `confirmed` or `finalized`.
- lookup and history: getTransaction (base64, the fee and error from its meta);
  getSignaturesForAddress bounded by the page, then getTransaction for each.

Errors: a node that cannot be reached (refused, DNS, connect timeout) -> `NodeUnavailable`
(503, retry with backoff); a read the node could not answer -> `NodeUnavailable` too; a
send whose request left and got no answer -> `BroadcastTimeout` (504, outcome unknown);
a node that answered a send with an error -> `SendError` (read by the gateway: 400/502,
nothing was sent). The client makes no retries of its own.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable
from typing import Any, TypeVar

import httpx2
from solana.exceptions import SolanaRpcException
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Confirmed
from solana.rpc.core import RPCException
from solana.rpc.models import TxOpts
from solders.hash import Hash
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import Transaction, VersionedTransaction
from solders.transaction_status import TransactionConfirmationStatus

from walletcore.domain.errors import BroadcastTimeout, DomainError, NodeUnavailable
from walletcore_chains.solana.node import Executed, SendError

T = TypeVar("T")

_LANDED = (TransactionConfirmationStatus.Confirmed, TransactionConfirmationStatus.Finalized)


def is_unreachable(exc: BaseException | None) -> bool:
    """A connection that was never made: the request cannot have reached the node."""
    while exc is not None:
        if isinstance(
            exc,
            httpx2.ConnectError | httpx2.ConnectTimeout | ConnectionRefusedError | socket.gaierror,
        ):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


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

    async def block_height(self) -> int:
        return int((await self._read(self.client.get_block_height(Confirmed))).value)

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
            if is_unreachable(exc):
                raise NodeUnavailable(
                    "Chain node unreachable; nothing was sent; retry with backoff"
                ) from None
            raise BroadcastTimeout() from None  # the request left: the outcome is unknown
        except Exception:  # noqa: BLE001 - the request left: the outcome is unknown
            raise BroadcastTimeout() from None
        return str(resp.value)

    # -- transactions -------------------------------------------------------------------
    async def seen(self, signature: str) -> bool:
        resp = await self._read(
            self.client.get_signature_statuses(
                [Signature.from_string(signature)], search_transaction_history=True
            )
        )
        status = resp.value[0] if resp.value else None
        return status is not None and status.confirmation_status in _LANDED

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


def _read_failure(exc: BaseException | None) -> NodeUnavailable:
    if is_unreachable(exc):
        return NodeUnavailable("Chain node unreachable; retry with backoff")
    return NodeUnavailable("The chain node could not answer; retry with backoff")


def _rpc_text(exc: RPCException) -> str:
    error = exc.args[0] if exc.args else exc
    parts = [str(getattr(error, "message", error))]
    data = getattr(error, "data", None)
    if data is not None:
        parts.append(str(getattr(data, "err", "")))
        parts.extend(getattr(data, "logs", None) or [])
    return " ".join(parts)


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
    )


__all__ = ["RpcNode", "is_unreachable", "rpc_client"]
