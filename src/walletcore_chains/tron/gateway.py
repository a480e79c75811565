"""`TronGateway`: the `ChainGateway` of TRON (TRX and the TRC20 tokens) on a full node's
HTTP API (docs/tron.md).

- fee: what Tron burns. Bandwidth = the signed transaction's bytes + 64 (java-tron's
  result reserve), free when the sender's staked or free daily bandwidth covers it all, else
  bytes x `getTransactionFee`; a TRX transfer to an account that does not exist yet burns
  `getCreateAccountFee` instead (unless staked bandwidth covers it) plus the activation fee
  `getCreateNewAccountFeeInSystemContract`. Energy (TRC20): the node's estimate of this very
  transfer (`estimateenergy`, else a constant call's `energy_used`); what staked energy does
  not cover burns at `getEnergyFee`. The transaction's `fee_limit` is the estimate + the
  margin, priced; the quote's TRX is the most the transfer can burn (that limit included).
- PLATFORM: the platform wallet tops the sender up with exactly that most-it-can-burn in a
  TRX transfer of its own (activating a sender that never held TRX), which must be in a
  block before the sender's transfer goes; unused TRX stays with the sender.
- The txID is the SHA-256 of `raw_data`'s protobuf bytes, built here (never taken from the
  node); the signature is the KeyStore's over it. The signed `Transaction` bytes are kept
  and re-sent unchanged on a retry (`wallet/broadcasthex`): `DUP_TRANSACTION_ERROR` counts
  as sent; an expired transaction is sent only if the node knows it.
- Followed (`walletcore.ports.TransferFollower`): `sighting` reads one transaction on the
  chain, in the pending pool, or past its expiration. TRON has no fee replacement: a
  transaction that can no longer land (EXPIRED) is re-signed (`resigns`: `prepare` again
  with a fresh quote: a new reference block, expiration and txID).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eth_abi.abi import encode as abi_encode
from tronpy.keys import to_base58check_address, to_raw_address  # type: ignore[import-untyped]

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.errors import (
    AssetUnavailableOnEndpoint,
    BroadcastTimeout,
    HistoryUnavailable,
    InvalidRequest,
    TransactionNotFound,
    TransferRejected,
)
from walletcore.domain.wallet import TxRow
from walletcore.ports import (
    AddressValidator,
    ChainGateway,
    FeeQuote,
    Replacement,
    Sighting,
    SignedTransfer,
    Transfer,
    TransferFollower,
    UnsignedTransfer,
)
from walletcore_chains.tron import errors, proto, rows
from walletcore_chains.tron.client import Prices, Resources, TronClient

log = logging.getLogger(__name__)

#: java-tron adds this many bytes per contract to a transaction's bandwidth (its result)
RESULT_RESERVE = 64
_SIGNATURE = 65
#: energy assumed when the transfer cannot be estimated now (the sender lacks the tokens):
#: above a USDT transfer to a new holder on mainnet
FALLBACK_ENERGY = 131_000
_POLL = 0.5


@dataclass(frozen=True, slots=True)
class Cost:
    """One transaction's resources and the most it burns."""

    bandwidth: int
    energy: int
    fee_limit: int
    most: int


@dataclass(frozen=True, slots=True)
class TronOptions:
    network: str = "mainnet"
    #: fee_limit = energy estimate x (1 + margin), priced
    energy_margin: float = 0.2
    expiration_seconds: int = 300
    #: how long a PLATFORM top-up may take to reach a block before the transfer goes
    receipt_timeout: float = 60.0
    #: TronGrid's history pages read at most (200 rows each)
    history_pages: int = 3
    #: seconds a broadcast may stay pending before it counts as stuck (`TransferFollower`)
    stuck_after_seconds: float = 60.0
    #: a transaction not on chain reads EXPIRED only once the solidified head is this many
    #: seconds past its expiration (`sighting`; docs/tron.md, "Following a transfer")
    expiry_margin_seconds: float = 30.0


class TronGateway(ChainGateway, TransferFollower):
    chain = Chain.TRON
    #: TRON has no fee replacement: an EXPIRED transfer is signed again (`prepare`)
    resigns = True

    def __init__(
        self,
        client: TronClient,
        validator: AddressValidator,
        *,
        tokens: Mapping[int, str],
        options: TronOptions | None = None,
    ) -> None:
        self.client = client
        self._validator = validator
        self._tokens = dict(tokens)
        self.options = options or TronOptions()
        self.stuck_after_seconds = self.options.stuck_after_seconds

    def __repr__(self) -> str:
        return f"TronGateway({self.options.network})"

    async def aclose(self) -> None:
        await self.client.aclose()

    async def check(self) -> None:
        """`walletcore.ports.HealthCheck`: the node answers `wallet/getnowblock`."""
        await self.client.head()

    def token_address(self, asset: Asset) -> str:
        contract = self._tokens.get(asset.id)
        if contract is None:
            raise AssetUnavailableOnEndpoint(
                f"{asset.symbol} has no contract on TRON {self.options.network}; contact the operator"
            )
        return contract

    def _contract_of(self, asset: Asset) -> str | None:
        if asset.chain != Chain.TRON:
            raise ValueError(f"{asset.symbol} is not on TRON")
        return None if asset.is_native else self.token_address(asset)

    # -- reads --------------------------------------------------------------------------
    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest("A TRON address must be a string")
        return self._validator(Chain.TRON, address)

    async def balance(self, address: str, asset: Asset) -> int:
        contract = self._contract_of(asset)
        try:
            if contract is None:
                return int((await self.client.account(address)).get("balance", 0))
            parameter = abi_encode(["address"], [_evm(address)]).hex()
            answer = await self.client.constant_call(
                address, contract, "balanceOf(address)", parameter
            )
            if not (answer.get("result") or {}).get("result"):
                raise ValueError("balanceOf failed")
            return int(answer["constant_result"][0] or "0", 16)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        contract = self._contract_of(asset)
        wanted = tx_hash.strip().lower().removeprefix("0x")
        if len(wanted) != 64 or any(c not in "0123456789abcdef" for c in wanted):
            raise TransactionNotFound()
        try:
            tx = await self.client.transaction(wanted)
            if tx is None:
                raise TransactionNotFound()
            solid = await self.client.info(wanted, solid=True)
            info = solid if solid is not None else await self.client.info(wanted, solid=False)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        row = rows.lookup_row(address, tx, info, solid=solid is not None, token=contract)
        if row is None:
            raise TransactionNotFound()
        return row

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        contract = self._contract_of(asset)
        try:
            if contract is None:
                return await self._native_history(address, limit)
            return await self._token_history(address, contract, limit)
        except Exception as exc:  # noqa: BLE001 - any failure: history unreadable now
            log.warning("TRON history unreadable: %s", type(exc).__name__)
            raise HistoryUnavailable() from None

    async def _native_history(self, address: str, limit: int) -> list[TxRow]:
        found: list[TxRow] = []
        params: dict[str, Any] = {"limit": 200, "only_confirmed": "true"}
        for _ in range(self.options.history_pages):
            page = await self.client.history(f"accounts/{address}/transactions", params)
            for item in page.get("data") or []:
                row = rows.grid_native_row(address, item)
                if row is not None:
                    found.append(row)
            fingerprint = (page.get("meta") or {}).get("fingerprint")
            if len(found) >= limit or not fingerprint:
                break
            params = {**params, "fingerprint": fingerprint}
        return found[:limit]

    async def _token_history(self, address: str, contract: str, limit: int) -> list[TxRow]:
        page = await self.client.history(
            f"accounts/{address}/transactions/trc20",
            {"limit": limit, "contract_address": contract, "only_confirmed": "true"},
        )
        out = []
        for item in (page.get("data") or [])[:limit]:
            way = "send" if rows.base58(item.get("from")) == address else "receive"
            tx_id = str(item["transaction_id"])
            info = await self.client.info(tx_id, solid=True) or {}
            status = "failed" if info and rows.receipt_failed(info) else "success"
            date = rows.date_of(item.get("block_timestamp"))
            out.append(TxRow(tx_id, way, int(item["value"]), int(info.get("fee", 0)), status, date))
        return out

    # -- fees ---------------------------------------------------------------------------
    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        contract = self._contract_of(asset)
        amount = amount_units if amount_units and amount_units > 0 else 1
        try:
            prices = await self.client.prices()
            energy = (
                0 if contract is None else await self._estimate(sender, contract, recipient, amount)
            )
            cost = await self._cost(prices, sender, recipient, contract, amount, energy)
            if fee_payer is None or fee_payer == sender or cost.most == 0:
                return FeeQuote(
                    cost.most, bandwidth=cost.bandwidth, energy=_energy(contract, energy)
                )
            topup = await self._cost(prices, fee_payer, sender, None, cost.most, 0)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        return FeeQuote(
            cost.most + topup.most, bandwidth=cost.bandwidth, energy=_energy(contract, energy)
        )

    async def _estimate(self, owner: str, contract: str, to: str, amount: int) -> int:
        """The energy of this transfer: `estimateenergy`, else a constant call's
        `energy_used`; `FALLBACK_ENERGY` when it would fail now (no tokens yet)."""
        parameter = abi_encode(["address", "uint256"], [_evm(to), amount]).hex()
        selector = rows.TRANSFER_SELECTOR
        answer = await self.client.estimate_energy(owner, contract, selector, parameter)
        if (answer.get("result") or {}).get("result") and "energy_required" in answer:
            return int(answer["energy_required"])
        answer = await self.client.constant_call(owner, contract, selector, parameter)
        if "result" not in answer:
            raise ValueError("the node answered no result")
        result = answer["result"] or {}
        if not result.get("result") or result.get("message"):
            return FALLBACK_ENERGY  # it would revert now
        return int(answer.get("energy_used", 0))

    async def _cost(
        self,
        prices: Prices,
        owner: str,
        to: str,
        contract: str | None,
        amount: int,
        energy: int,
    ) -> Cost:
        resources = await self.client.resources(owner)
        fee_limit = self._fee_limit(energy, prices)
        raw = self._raw(owner, to, contract, amount, fee_limit, b"\0" * 2, b"\0" * 8, _now_ms())
        bandwidth = len(proto.signed_bytes(raw.encode(), [b"\0" * _SIGNATURE])) + RESULT_RESERVE
        new_account = contract is None and not await self.client.account(to)
        return Cost(
            bandwidth,
            energy,
            fee_limit,
            _burn(prices, resources, bandwidth, new_account, self._energy_cap(energy)),
        )

    def _energy_cap(self, energy: int) -> int:
        return math.ceil(energy * (1 + self.options.energy_margin)) if energy else 0

    def _fee_limit(self, energy: int, prices: Prices) -> int:
        return self._energy_cap(energy) * prices.sun_per_energy

    # -- transfers ----------------------------------------------------------------------
    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        contract = self._contract_of(transfer.asset)
        sponsored = transfer.fee_payer != transfer.sender
        energy = 0 if contract is None else (fee.energy or 0)
        try:
            prices = await self.client.prices()
            if contract is not None and not energy:
                energy = await self._estimate(
                    transfer.sender, contract, transfer.recipient, transfer.amount_units
                )
            head = await self.client.head()
            cost = await self._cost(
                prices, transfer.sender, transfer.recipient, contract, transfer.amount_units, energy
            )
            topup = None
            if sponsored and cost.most > 0:
                topup = await self._cost(
                    prices, transfer.fee_payer, transfer.sender, None, cost.most, 0
                )
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        if cost.most + (topup.most if topup else 0) > fee.native_units:
            raise TransferRejected(
                "Transfer rejected: the network fee rose since the quote (bandwidth or energy "
                "used up, or the chain's prices changed); nothing was sent; request a new fee quote"
            )
        block = bytes.fromhex(head.id)
        ref_bytes, ref_hash = block[6:8], block[8:16]
        expiration = head.timestamp + self.options.expiration_seconds * 1000
        now = _now_ms()
        main = self._raw(
            transfer.sender,
            transfer.recipient,
            contract,
            transfer.amount_units,
            cost.fee_limit,
            ref_bytes,
            ref_hash,
            now,
            expiration,
        ).encode()
        txs = [(transfer.sender, main)]
        if topup is not None:
            top = self._raw(
                transfer.fee_payer,
                transfer.sender,
                None,
                cost.most,
                0,
                ref_bytes,
                ref_hash,
                now,
                expiration,
            ).encode()
            txs.insert(0, (transfer.fee_payer, top))
        payloads = {signer: bytes.fromhex(proto.txid(raw)) for signer, raw in txs}
        body = json.dumps({"txs": [{"signer": s, "raw": r.hex()} for s, r in txs]}).encode()
        return UnsignedTransfer(
            transfer,
            fee,
            bytes.fromhex(proto.txid(main)),
            body,
            payloads=payloads if sponsored and topup is not None else None,
        )

    def _raw(
        self,
        owner: str,
        to: str,
        contract: str | None,
        amount: int,
        fee_limit: int,
        ref_bytes: bytes,
        ref_hash: bytes,
        now: int,
        expiration: int | None = None,
    ) -> proto.Raw:
        if contract is None:
            call = proto.Contract(proto.TRANSFER, _raw21(owner), _raw21(to), amount)
        else:
            data = rows.TRANSFER_METHOD_ID + abi_encode(["address", "uint256"], [_evm(to), amount])
            call = proto.Contract(proto.TRIGGER, _raw21(owner), _raw21(contract), 0, data)
        expires = (
            expiration if expiration is not None else now + self.options.expiration_seconds * 1000
        )
        return proto.Raw(call, ref_bytes, ref_hash, expires, now, fee_limit)

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        txs = json.loads(unsigned.body)["txs"]
        signed = []
        for tx in txs:
            signature = signatures.get(tx["signer"])
            if signature is None or len(signature) != _SIGNATURE:
                raise ValueError("one 65-byte signature per signer is needed")
            signed.append(proto.signed_bytes(bytes.fromhex(tx["raw"]), [signature]).hex())
        last = bytes.fromhex(txs[-1]["raw"])
        return SignedTransfer(json.dumps({"txs": signed}).encode(), proto.txid(last))

    async def release(self, unsigned: UnsignedTransfer) -> None:
        """Nothing reserved: TRON has no nonces (a transaction is its reference block and
        expiration)."""

    async def broadcast(self, signed: SignedTransfer) -> str:
        try:
            txs = [bytes.fromhex(t) for t in json.loads(signed.raw)["txs"]]
            raws = [proto.split_signed(t)[0] for t in txs]
            kinds = [proto.Raw.decode(r).contract.kind for r in raws]
        except (ValueError, KeyError, TypeError):
            raise TransferRejected(
                "Transfer rejected by the network: malformed transaction"
            ) from None
        for index, tx in enumerate(txs):
            tx_id = proto.txid(raws[index])
            await self._send(tx, tx_id, token=kinds[index] == proto.TRIGGER)
            if index < len(txs) - 1:
                await self._in_block(tx_id)
        return proto.txid(raws[-1])

    async def _send(self, tx: bytes, tx_id: str, *, token: bool) -> None:
        try:
            answer = await self.client.broadcast_hex(tx)
        except Exception as exc:  # noqa: BLE001 - any transport failure
            if errors.is_unreachable(exc):
                raise errors.unreachable_send() from None
            log.warning("broadcast of %s: outcome unknown (%s)", tx_id, type(exc).__name__)
            raise BroadcastTimeout() from None
        if answer.get("result") is True:
            return
        meaning = errors.broadcast_refusal(answer, token=token)
        if isinstance(meaning, errors.AlreadyKnown):
            return
        if isinstance(meaning, errors.Expired):
            if await self._known(tx_id):
                return
            raise errors.expired()
        raise meaning

    async def _known(self, tx_id: str) -> bool:
        """Whether the node knows the transaction; when it cannot tell, the outcome of the
        broadcast is unknown (never "refused" for a transaction that may have landed)."""
        try:
            return await self.client.transaction(tx_id) is not None
        except Exception:  # noqa: BLE001 - cannot tell
            raise BroadcastTimeout() from None

    # -- the transfer lifecycle (`TransferFollower`) ----------------------------------------
    async def sighting(self, sender: str, asset: Asset, signed: SignedTransfer) -> Sighting:
        """What the chain says of `signed`'s transaction (the transfer itself; a PLATFORM
        top-up before it is re-sent with it, never followed on its own):

        - in a solidified block: SUCCESS, or FAILED (`OUT_OF_ENERGY`, `REVERT`, ...: its fee
          was burned), the rule `lookup` uses;
        - in a block not yet solidified, or in the node's pending pool: PENDING;
        - else EXPIRED once the solidified head is past the transaction's `expiration` by
          `expiry_margin_seconds` (java-tron takes a transaction only into a block whose
          parent is older than its expiration, so no block after that head can carry it, and
          every block up to it is irreversible and was read): re-signing is safe;
        - else MISSING: the same bytes are still valid, and may be sent again.

        The solidified head is read first, so a block arriving while the transaction is
        looked up cannot be missed. A node error raises (`NodeUnavailable`), never MISSING."""
        tx_id, expiration = _followed(signed)
        try:
            solid_head = await self.client.head(solid=True)
            solid = await self.client.info(tx_id, solid=True)
            if solid is not None:
                return Sighting.FAILED if rows.receipt_failed(solid) else Sighting.SUCCESS
            if await self.client.info(tx_id, solid=False) is not None:
                return Sighting.PENDING
            if await self.client.transaction(tx_id) is not None:
                return Sighting.PENDING
            if await self.client.pending(tx_id):
                return Sighting.PENDING
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        margin = math.ceil(self.options.expiry_margin_seconds * 1000)
        if solid_head.timestamp > expiration + margin:
            return Sighting.EXPIRED
        return Sighting.MISSING

    def replacements(self, unsigned: UnsignedTransfer, cap_units: int) -> Sequence[Replacement]:
        """Empty: TRON has no fee replacement (a transaction's fee is what it burns); a
        transfer that cannot land any more is re-signed instead (`resigns`)."""
        return []

    async def _in_block(self, tx_id: str) -> None:
        """Wait until the top-up `tx_id` is in a block (the transfer needs its TRX)."""
        deadline = time.monotonic() + self.options.receipt_timeout
        while True:
            try:
                if await self.client.info(tx_id, solid=False) is not None:
                    return
            except Exception as exc:  # noqa: BLE001 - a read failing while waiting: try again
                log.debug("top-up %s not readable yet: %s", tx_id, type(exc).__name__)
            if time.monotonic() >= deadline:
                log.warning("top-up %s not in a block in time; its transfer waits", tx_id)
                raise BroadcastTimeout()
            await asyncio.sleep(_POLL)


def _burn(
    prices: Prices, resources: Resources, bandwidth: int, new_account: bool, energy_cap: int
) -> int:
    """The most a transaction burns: bandwidth (all-or-nothing per java-tron), activation,
    and the energy up to its cap that staked energy does not cover."""
    if new_account:
        burn = 0 if resources.staked_bandwidth >= bandwidth else prices.create_account_fee
        burn += prices.activation_fee
    elif resources.staked_bandwidth >= bandwidth or resources.free_bandwidth >= bandwidth:
        burn = 0
    else:
        burn = bandwidth * prices.sun_per_byte
    return burn + max(0, energy_cap - resources.staked_energy) * prices.sun_per_energy


def _energy(contract: str | None, energy: int) -> int | None:
    return None if contract is None else energy


def _followed(signed: SignedTransfer) -> tuple[str, int]:
    """(txID, expiration in ms) of the transfer's own transaction in `signed` (the last of
    its `txs`: a PLATFORM top-up comes first)."""
    try:
        last = bytes.fromhex(json.loads(signed.raw)["txs"][-1])
        raw_bytes = proto.split_signed(last)[0]
        expiration = proto.Raw.decode(raw_bytes).expiration
    except (ValueError, KeyError, TypeError, IndexError):
        raise ValueError("not a signed TRON transfer of this gateway") from None
    tx_id = proto.txid(raw_bytes)
    if tx_id != signed.tx_hash.strip().lower().removeprefix("0x"):
        raise ValueError("the signed transfer's hash is not its transaction's txID")
    return tx_id, expiration


def _raw21(address: str) -> bytes:
    return bytes(to_raw_address(address))


def _evm(address: str) -> str:
    """The 20-byte EVM form of a `T...` address (what the TVM's ABI carries)."""
    return "0x" + _raw21(address)[1:].hex()


def _now_ms() -> int:
    return int(time.time() * 1000)


__all__ = ["Cost", "TronGateway", "TronOptions", "to_base58check_address"]
