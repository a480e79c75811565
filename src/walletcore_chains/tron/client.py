"""The TRON node the gateway talks to: a full node's HTTP API (java-tron, TronGrid) through
tronpy's `AsyncTron`, and TronGrid's `/v1/accounts/...` history API over the same client.

The API key travels as the `TRON-PRO-API-KEY` header on every request (never tronpy's
built-in shared keys); URLs and the key are secrets: no repr, log line or error shows them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from tronpy import AsyncTron  # type: ignore[import-untyped]
from tronpy.exceptions import TransactionNotFound  # type: ignore[import-untyped]
from tronpy.providers.async_http import AsyncHTTPProvider  # type: ignore[import-untyped]

API_KEY_HEADER = "TRON-PRO-API-KEY"


@dataclass(frozen=True, slots=True)
class Prices:
    """The chain parameters a transfer's fee is read from (`wallet/getchainparameters`)."""

    #: sun burned per byte of bandwidth (`getTransactionFee`)
    sun_per_byte: int
    #: sun burned per unit of energy (`getEnergyFee`)
    sun_per_energy: int
    #: burned (or paid in staked bandwidth) for the bandwidth of a transaction creating an
    #: account (`getCreateAccountFee`)
    create_account_fee: int
    #: the activation fee a TRX transfer to a new account burns (`getCreateNewAccountFeeInSystemContract`)
    activation_fee: int

    @classmethod
    def of(cls, parameters: list[dict[str, Any]]) -> Prices:
        values = {str(p.get("key")): int(p.get("value", 0)) for p in parameters}
        return cls(
            sun_per_byte=values.get("getTransactionFee", 0),
            sun_per_energy=values.get("getEnergyFee", 0),
            create_account_fee=values.get("getCreateAccountFee", 0),
            activation_fee=values.get("getCreateNewAccountFeeInSystemContract", 0),
        )


@dataclass(frozen=True, slots=True)
class Resources:
    """An account's bandwidth and energy left now (`wallet/getaccountresource`)."""

    free_bandwidth: int
    staked_bandwidth: int
    staked_energy: int

    @classmethod
    def of(cls, answer: dict[str, Any]) -> Resources:
        def left(limit: str, used: str) -> int:
            return max(0, int(answer.get(limit, 0)) - int(answer.get(used, 0)))

        return cls(
            free_bandwidth=left("freeNetLimit", "freeNetUsed"),
            staked_bandwidth=left("NetLimit", "NetUsed"),
            staked_energy=left("EnergyLimit", "EnergyUsed"),
        )


@dataclass(frozen=True, slots=True)
class Block:
    id: str
    number: int
    timestamp: int


class TronClient:
    """One node (and its history API); every method raises the transport's or tronpy's
    exceptions, which the gateway reads into domain errors (`tron/errors.py`)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        history_url: str | None = None,
        timeout: float = 20.0,
    ) -> None:
        headers = {API_KEY_HEADER: api_key} if api_key else {}
        self._http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout))
        provider = AsyncHTTPProvider(url.rstrip("/") + "/", timeout=timeout, client=self._http)
        provider.use_api_key = False  # our key rides on the client; never tronpy's shared ones
        self.tron = AsyncTron(provider)
        self._history = (history_url or url).rstrip("/")

    def __repr__(self) -> str:
        return "TronClient(<node>)"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self.tron.provider.make_request(path, body)
        if not isinstance(answer, dict):
            raise TypeError("the node's answer is not an object")
        return answer

    async def account(self, address: str) -> dict[str, Any]:
        """The account, or {} when it does not exist (never received TRX)."""
        return await self.post("wallet/getaccount", {"address": address, "visible": True})

    async def resources(self, address: str) -> Resources:
        answer = await self.post("wallet/getaccountresource", {"address": address, "visible": True})
        return Resources.of(answer)

    async def prices(self) -> Prices:
        return Prices.of(await self.tron.get_chain_parameters())

    async def head(self, *, solid: bool = False) -> Block:
        """The head block (`solid`: the latest solidified block, irreversible)."""
        path = "walletsolidity" if solid else "wallet"
        block = await self.post(f"{path}/getnowblock", {"visible": True})
        header = block["block_header"]["raw_data"]
        return Block(str(block["blockID"]), int(header.get("number", 0)), int(header["timestamp"]))

    async def constant_call(
        self, owner: str, contract: str, selector: str, parameter: str
    ) -> dict[str, Any]:
        """`wallet/triggerconstantcontract`: the call's result and `energy_used`."""
        return await self.post(
            "wallet/triggerconstantcontract",
            {
                "owner_address": owner,
                "contract_address": contract,
                "function_selector": selector,
                "parameter": parameter,
                "visible": True,
            },
        )

    async def estimate_energy(
        self, owner: str, contract: str, selector: str, parameter: str
    ) -> dict[str, Any]:
        return await self.post(
            "wallet/estimateenergy",
            {
                "owner_address": owner,
                "contract_address": contract,
                "function_selector": selector,
                "parameter": parameter,
                "visible": True,
            },
        )

    async def broadcast_hex(self, transaction: bytes) -> dict[str, Any]:
        return await self.post("wallet/broadcasthex", {"transaction": transaction.hex()})

    async def transaction(self, tx_id: str) -> dict[str, Any] | None:
        try:
            found = await self.tron.get_transaction(tx_id)
        except TransactionNotFound:
            return None
        return found if isinstance(found, dict) and found else None

    async def info(self, tx_id: str, *, solid: bool) -> dict[str, Any] | None:
        """The transaction's receipt: in a block (`solid`: in a solidified one), else None."""
        path = "walletsolidity" if solid else "wallet"
        answer = _checked(await self.post(f"{path}/gettransactioninfobyid", {"value": tx_id}))
        return answer if answer.get("id") else None

    async def block(self, number: int) -> dict[str, Any] | None:
        """`wallet/getblockbynum`: the block with its transactions (addresses in hex), or
        None above the head (java-tron answers `{}`)."""
        answer = _checked(await self.post("wallet/getblockbynum", {"num": number}))
        return answer if answer.get("blockID") else None

    async def blocks(self, first: int, last: int) -> list[dict[str, Any]] | None:
        """`wallet/getblockbylimitnext`: blocks `first..last` (both included; those above
        the head left out), or None when the node refuses the range (java-tron answers
        `{}` to more than 100 blocks)."""
        answer = _checked(
            await self.post("wallet/getblockbylimitnext", {"startNum": first, "endNum": last + 1})
        )
        found = answer.get("block")
        if found is None:
            return None
        if not isinstance(found, list) or not all(isinstance(b, dict) for b in found):
            raise TypeError("the node's blocks are not a list of objects")
        return found

    async def block_infos(self, number: int) -> list[dict[str, Any]]:
        """`wallet/gettransactioninfobyblocknum`: the receipt of every transaction of the
        block (logs, internal transactions), a JSON array; empty above the head."""
        answer = await self.tron.provider.make_request(
            "wallet/gettransactioninfobyblocknum", {"num": number}
        )
        if isinstance(answer, dict):
            _checked(answer)
        if not isinstance(answer, list) or not all(isinstance(i, dict) for i in answer):
            raise TypeError("the node's receipts are not a list of objects")
        return answer

    async def pending(self, tx_id: str) -> bool:
        """Whether the node holds the transaction in its pending pool, not yet in a block
        (`wallet/gettransactionfrompending`); False from a provider without that API (404)."""
        try:
            answer = await self.post("wallet/gettransactionfrompending", {"value": tx_id})
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == httpx.codes.NOT_FOUND:
                return False
            raise
        return str(_checked(answer).get("txID", "")).lower() == tx_id

    async def history(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        """A GET of TronGrid's `/v1/...` API (`path` after `/v1/`)."""
        response = await self._http.get(f"{self._history}/v1/{path}", params=params)
        response.raise_for_status()
        answer = response.json()
        if not isinstance(answer, dict) or answer.get("success") is False:
            raise ValueError("the history API refused the request")
        return answer


def _checked(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer, unless it is java-tron's servlet error (`{"Error": ...}`): a node error,
    never to be read as "not found"."""
    if "Error" in answer:
        raise ValueError("the node answered an error")
    return answer


__all__ = ["API_KEY_HEADER", "Block", "Prices", "Resources", "TronClient"]
