"""Reading a wallet on its chain: balance, info, history, one transaction, a fee quote.

For a user's wallet (`/balance`, `/info`, `/transactions`, `/txid`, `/fee`; `userId`) and for
the api client's platform wallet (`/platform/...`; no user). Rules:
- Checks, in order: ids and body (400) -> asset: unknown or limited `400`, not enabled
  `403`, flagged on the endpoint `503` -> the wallet: `404` (no such user; no platform
  wallet yet) -> the chain's answer.
- Balances are full-precision decimal strings of the asset; fees are in the chain's native
  coin (on TRON a `{bandwidth, energy?}` object, energy for TRC20 only).
- `/transactions`: newest first, one page (`WALLETCORE_TRANSACTIONS_PAGE_SIZE`, default 10,
  the same for users and the platform); `503` when history cannot be read now.
- `/info`: `transactions` is `[]` when history is unavailable (an empty list proves nothing).
- `/balance` on BITCOIN: `404` when the indexer does not know the address (no transactions
  yet); `/info` shows `0` then.
- `/fee`: the recipient is checked per chain (400) and must differ from the wallet's own
  address (400); it quotes the send that would follow, fee payer rule included, and with
  an `amount` refuses one below the chain's minimum as that send would (400).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from walletcore.domain.assets import Asset, Chain, FeePayer
from walletcore.domain.errors import (
    AddressUnknown,
    HistoryUnavailable,
    InvalidRequest,
    TransactionNotFound,
)
from walletcore.domain.sends import SendRecord
from walletcore.domain.wallet import TxRow, WalletRecord
from walletcore.domain.wire import JsonValue
from walletcore.ports import ChainGateway, FeeQuote, Storage
from walletcore.services.assets import AssetPolicy
from walletcore.services.context import Caller
from walletcore.services.send_plan import (
    check_minimum,
    minimum_send,
    read_amount,
    read_user_id,
    refuse_own_address,
    sponsored_fee,
    wallet_address,
)
from walletcore.services.send_record import SignedSend
from walletcore.services.wallet_access import (
    platform_wallet,
    platform_wallet_or_none,
    user_wallet,
)

#: Most characters a transaction hash may have (SOLANA signatures are about 88).
MAX_TX_HASH_CHARS = 128


@dataclass(frozen=True, slots=True)
class Holding:
    asset: Asset
    address: str
    units: int


@dataclass(frozen=True, slots=True)
class WalletInfo:
    asset: Asset
    address: str
    units: int
    #: the chain's coin: the unit of the rows' fees
    native: Asset
    transactions: list[TxRow] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TxPage:
    asset: Asset
    rows: list[TxRow]
    #: the chain's coin: the unit of the rows' fees
    native: Asset


@dataclass(frozen=True, slots=True)
class TxFound:
    asset: Asset
    row: TxRow
    #: the chain's coin: the unit of the row's fee
    native: Asset


@dataclass(frozen=True, slots=True)
class FeeAnswer:
    asset: Asset
    quote: FeeQuote
    #: the chain's coin: the unit of the fee
    native: Asset


@dataclass(frozen=True, slots=True)
class _Target:
    asset: Asset
    wallet: WalletRecord
    address: str
    gateway: ChainGateway
    native: Asset


class WalletReads:
    def __init__(
        self,
        storage: Storage,
        gateways: Mapping[Chain, ChainGateway],
        policy: AssetPolicy,
        *,
        page_size: int = 10,
    ) -> None:
        self._storage = storage
        self._gateways = gateways
        self._policy = policy
        self._page_size = page_size

    async def balance(
        self,
        caller: Caller,
        *,
        asset_id: JsonValue,
        user_id: JsonValue = None,
        platform: bool = False,
    ) -> Holding:
        target = await self._target(caller, "balance", asset_id, user_id, platform)
        units = await target.gateway.balance(target.address, target.asset)
        return Holding(target.asset, target.address, units)

    async def info(
        self,
        caller: Caller,
        *,
        asset_id: JsonValue,
        user_id: JsonValue = None,
        platform: bool = False,
    ) -> WalletInfo:
        target = await self._target(caller, "info", asset_id, user_id, platform)
        try:
            units = await target.gateway.balance(target.address, target.asset)
        except AddressUnknown:
            units = 0
        try:
            rows = await target.gateway.history(target.address, target.asset, self._page_size)
        except HistoryUnavailable:
            rows = []
        return WalletInfo(target.asset, target.address, units, target.native, rows)

    async def transactions(
        self,
        caller: Caller,
        *,
        asset_id: JsonValue,
        user_id: JsonValue = None,
        platform: bool = False,
    ) -> TxPage:
        target = await self._target(caller, "transactions", asset_id, user_id, platform)
        rows = await target.gateway.history(target.address, target.asset, self._page_size)
        return TxPage(target.asset, rows[: self._page_size], target.native)

    async def txid(
        self,
        caller: Caller,
        *,
        asset_id: JsonValue,
        tx_hash: JsonValue,
        user_id: JsonValue = None,
        platform: bool = False,
    ) -> TxFound:
        target = await self._target(caller, "txid", asset_id, user_id, platform)
        wanted = _tx_hash(tx_hash)
        transfer = await self._transfer(caller, target, wanted)
        if transfer is not None:
            row = await self._transfer_row(target, wanted, *transfer)
            return TxFound(target.asset, row, target.native)
        row = await target.gateway.lookup(target.address, target.asset, wanted)
        return TxFound(target.asset, row, target.native)

    async def _transfer(
        self, caller: Caller, target: _Target, wanted: str
    ) -> tuple[SendRecord, SignedSend] | None:
        """The send of this wallet and asset whose transaction is or was `wanted` and whose
        transfer the service follows (docs/transfers.md), or None: ask the chain."""
        async with self._storage.read() as unit:
            record = await unit.sends.by_hash(caller.client_id, wanted)
        if record is None or record.chain_status is None or record.raw_tx is None:
            return None
        signed = SignedSend.from_bytes(record.raw_tx)
        mine = (signed.user_id, signed.asset_id, signed.sender) == (
            target.wallet.user_id,
            target.asset.id,
            target.address,
        )
        return (record, signed) if mine else None

    async def _transfer_row(
        self, target: _Target, wanted: str, record: SendRecord, signed: SignedSend
    ) -> TxRow:
        """`/txid` of a followed send's hash: the transfer's outcome. The chain's row of
        its current transaction (a replacement's, when `wanted` was replaced); the
        transfer's own row while the node lacks it (dropped, awaiting re-broadcast), or
        when a cancel took its place (`failed`)."""
        assert record.chain_status is not None
        status = record.chain_status.public
        if not signed.cancelled:
            try:
                row = await target.gateway.lookup(target.address, target.asset, signed.tx_hash)
            except TransactionNotFound:
                row = None
            if row is not None and (row.status != "pending" or status == "pending"):
                return row
        return TxRow(
            hash=signed.tx_hash,
            type="send",
            amount_units=signed.amount_units,
            fee_units=signed.fee_units,
            status=status,
            date=record.chain_final_at,
        )

    async def fee(
        self,
        caller: Caller,
        *,
        asset_id: JsonValue,
        recipient: JsonValue,
        amount: JsonValue = None,
        user_id: JsonValue = None,
        platform: bool = False,
    ) -> FeeAnswer:
        """The fee of the send that would follow (a platform quote ignores any `sender`)."""
        target = await self._target(caller, "fee", asset_id, user_id, platform)
        asset, gateway = target.asset, target.gateway
        to = gateway.validate_address(recipient)
        refuse_own_address(to, target.address, platform)
        units = None if amount is None else read_amount(amount, asset)
        minimum = None if units is None else await minimum_send(gateway, to, asset)
        if units is not None:
            check_minimum(minimum, asset, units)
        if not platform and caller.client.fee_payer_for(asset.id) == FeePayer.PLATFORM:
            async with self._storage.read() as unit:
                sponsor_wallet = await platform_wallet_or_none(unit, caller.client_id)
            sponsor = sponsor_wallet.addresses.get(asset.chain) if sponsor_wallet else None
            quote = await sponsored_fee(
                gateway, asset, target.native, target.address, to, units, sponsor
            )
            if quote is not None:
                return FeeAnswer(asset, quote, target.native)
        quote = await gateway.fee(target.address, to, asset, units)
        if units is not None and asset.is_native and not platform:  # USER: from the amount
            check_minimum(minimum, asset, units - quote.native_units, quote.native_units)
        return FeeAnswer(asset, quote, target.native)

    async def _target(
        self, caller: Caller, endpoint: str, asset_id: JsonValue, user_id: JsonValue, platform: bool
    ) -> _Target:
        uid = None if platform else read_user_id(user_id)
        name = f"platform/{endpoint}" if platform else endpoint
        asset = self._policy.resolve(caller.client, asset_id, name)
        async with self._storage.read() as unit:
            if uid is None:
                wallet = await platform_wallet(unit, caller.client_id)
            else:
                wallet = await user_wallet(unit, caller.client_id, uid)
        gateway = self._gateways[asset.chain]
        native = self._policy.catalog.native_asset(asset.chain)
        return _Target(asset, wallet, wallet_address(wallet, asset), gateway, native)


def _tx_hash(value: JsonValue) -> str:
    if value is None or value == "":
        raise InvalidRequest("txHash is required")
    if not isinstance(value, str):
        raise InvalidRequest("txHash must be a string")
    text = value.strip()
    if not text or len(text) > MAX_TX_HASH_CHARS or not text.isascii() or not text.isalnum():
        raise InvalidRequest("txHash is not a transaction hash")
    return text
