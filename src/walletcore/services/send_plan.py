"""What a send is before anything is signed: the request read, its fingerprint, and the plan
(who pays the network fee, what the recipient receives, whether the wallets can pay).

Fee payer rules (spec, `/config`):
- USER, native coin: the fee is taken from the amount; the recipient receives amount - fee,
  so the amount must exceed the fee.
- USER, token: the fee is paid in the chain's native coin, which the wallet must hold.
- PLATFORM: the api client's platform wallet pays the fee (the recipient receives the whole
  amount). When it cannot (no platform wallet yet, or not enough native coin in it) the
  send falls back to USER, and its result says `feePayer: "USER"`.
- A platform send (`/platform/send`) pays its own fee, on top of the amount.

Minimum (a gateway that is `MinimumSends`: Bitcoin's dust limit, Solana's rent-exempt
minimum of a new account): what the recipient receives must reach it, the fee taken from a
USER native amount first; else a 400 naming the minimum, before anything is signed. `/fee`
with an amount answers the same 400 (`check_minimum`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from walletcore.domain.assets import Asset, FeePayer, parse_asset_id
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import AddressUnknown, InsufficientFunds, InvalidRequest
from walletcore.domain.ids import parse_id
from walletcore.domain.money import format_balance, parse_amount, to_base_units
from walletcore.domain.wallet import WalletRecord
from walletcore.domain.wire import JsonValue
from walletcore.ports import ChainGateway, FeeQuote, MinimumSends, SendMinimum, Transfer


@dataclass(frozen=True, slots=True)
class SendRequest:
    """A send's body, read and normalised (no state consulted): a request that fails here
    always fails, so it claims no X-Request-Id."""

    endpoint: str
    user_id: str | None
    asset: Asset
    recipient: str
    amount_units: int
    password: str | None = field(default=None, repr=False)

    @property
    def fingerprint(self) -> str:
        """A digest of the non-secret fields only: never the password, nor a hash of it."""
        canonical = json.dumps(
            [self.endpoint, self.user_id, self.asset.id, self.recipient, self.amount_units],
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_asset(catalog: Catalog, raw_asset_id: JsonValue) -> Asset:
    """The catalog asset of a raw `assetId` (400 when malformed or unknown)."""
    return catalog.asset_by_id(parse_asset_id(raw_asset_id))


def read_amount(raw: JsonValue, asset: Asset) -> int:
    """A decimal string with at most the asset's decimals, in base units."""
    if raw is None or raw == "":
        raise InvalidRequest("amount is required")
    return to_base_units(parse_amount(raw, asset.decimals), asset.decimals)


def read_user_id(raw: JsonValue) -> str:
    return parse_id(raw, "userId")


def show(units: int, asset: Asset) -> str:
    """`0.0021 BTC`: an amount for a message."""
    return f"{format_balance(units, asset.decimals)} {asset.symbol}"


def wallet_address(wallet: WalletRecord, asset: Asset) -> str:
    address = wallet.addresses.get(asset.chain)
    if address is None:
        if wallet.user_id is None:
            raise InvalidRequest(f"The platform wallet has no {asset.chain} address")
        raise InvalidRequest(
            f"The wallet has no {asset.chain} address yet; add it with /extend and the password"
        )
    return address


def refuse_own_address(recipient: str, sender: str, platform: bool) -> None:
    if recipient == sender:
        whose = "the platform wallet's" if platform else "the wallet's"
        raise InvalidRequest(f"recipient must differ from {whose} own address")


async def held(gateway: ChainGateway, address: str, asset: Asset) -> int:
    """A balance for a decision: an address unknown to a Bitcoin indexer holds nothing."""
    try:
        return await gateway.balance(address, asset)
    except AddressUnknown:
        return 0


async def minimum_send(gateway: ChainGateway, recipient: str, asset: Asset) -> SendMinimum | None:
    """The chain's minimum of a transfer of `asset` to `recipient`, if it has one."""
    if isinstance(gateway, MinimumSends):
        return await gateway.minimum_send(recipient, asset)
    return None


def check_minimum(
    minimum: SendMinimum | None, asset: Asset, received: int, fee_taken: int | None = None
) -> None:
    """Refuse (400) a transfer whose recipient would receive less than `minimum`;
    `fee_taken`: the network fee taken from the amount first (USER, native coin)."""
    if minimum is None or received >= minimum.units:
        return
    least = show(minimum.units, asset)
    if fee_taken is None:
        raise InvalidRequest(
            f"amount is below the minimum send of {least} to this recipient ({minimum.rule})"
        )
    raise InvalidRequest(
        f"amount must be at least {show(minimum.units + fee_taken, asset)}: the recipient "
        f"must receive at least {least} ({minimum.rule}), and the network fee of "
        f"{show(fee_taken, asset)} is taken from the amount"
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """A send ready to be built and signed."""

    gateway: ChainGateway
    transfer: Transfer
    fee: FeeQuote
    fee_payer: FeePayer
    sender_wallet: WalletRecord = field(repr=False)
    #: The platform wallet when it pays the fee of a user's send.
    sponsor_wallet: WalletRecord | None = field(default=None, repr=False)
    #: What the sending wallet held of the asset when planned (a user's send): checked
    #: again, less what its sells hold, when the signed send is stored
    balance_units: int | None = None

    @property
    def asset(self) -> Asset:
        return self.transfer.asset


async def sponsored_fee(
    gateway: ChainGateway,
    asset: Asset,
    native: Asset,
    sender: str,
    recipient: str,
    amount_units: int | None,
    sponsor: str | None,
) -> FeeQuote | None:
    """The fee the platform wallet at `sponsor` would pay, if it can pay it (in `native`,
    the chain's coin); else None."""
    if sponsor is None:
        return None
    quote = await gateway.fee(sender, recipient, asset, amount_units, fee_payer=sponsor)
    if await held(gateway, sponsor, native) < quote.native_units:
        return None
    return quote


async def plan_user_send(
    request: SendRequest,
    payer: FeePayer,
    gateway: ChainGateway,
    native: Asset,
    wallet: WalletRecord,
    platform_wallet: WalletRecord | None,
) -> Plan:
    """The user's send; `native`: the chain's coin, which pays its fee."""
    asset, recipient, units = request.asset, request.recipient, request.amount_units
    sender = wallet_address(wallet, asset)
    refuse_own_address(recipient, sender, platform=False)
    minimum = await minimum_send(gateway, recipient, asset)
    check_minimum(minimum, asset, units)
    holding = await held(gateway, sender, asset)
    if holding < units:
        raise InsufficientFunds(
            f"Insufficient {asset.symbol} balance: the wallet holds {show(holding, asset)}, "
            f"the send needs {show(units, asset)}"
        )
    if payer == FeePayer.PLATFORM and platform_wallet is not None:
        sponsor = platform_wallet.addresses.get(asset.chain)
        quote = await sponsored_fee(gateway, asset, native, sender, recipient, units, sponsor)
        if quote is not None and sponsor is not None:
            transfer = Transfer(asset, sender, recipient, units, fee_payer=sponsor)
            return Plan(
                gateway, transfer, quote, FeePayer.PLATFORM, wallet, platform_wallet, holding
            )
    # USER, or PLATFORM falling back to USER: the sending wallet pays.
    quote = await gateway.fee(sender, recipient, asset, units)
    if asset.is_native:
        check_minimum(minimum, asset, units - quote.native_units, fee_taken=quote.native_units)
        if units <= quote.native_units:
            raise InvalidRequest(
                f"amount must exceed the network fee of {show(quote.native_units, native)}, "
                "which is taken from it"
            )
        units -= quote.native_units
    else:
        coin = await held(gateway, sender, native)
        if coin < quote.native_units:
            raise InsufficientFunds(
                f"Not enough {native.symbol} for the network fee: the send needs "
                f"{show(quote.native_units, native)} in the wallet, which holds {show(coin, native)}"
            )
    transfer = Transfer(asset, sender, recipient, units, fee_payer=sender)
    return Plan(gateway, transfer, quote, FeePayer.USER, wallet, balance_units=holding)


async def plan_platform_send(
    request: SendRequest, gateway: ChainGateway, native: Asset, wallet: WalletRecord
) -> Plan:
    """The platform wallet sends and pays its own fee, on top of the amount."""
    asset, recipient, units = request.asset, request.recipient, request.amount_units
    sender = wallet_address(wallet, asset)
    refuse_own_address(recipient, sender, platform=True)
    check_minimum(await minimum_send(gateway, recipient, asset), asset, units)
    quote = await gateway.fee(sender, recipient, asset, units)
    holding = await held(gateway, sender, asset)
    if asset.is_native:
        needed = units + quote.native_units
        if holding < needed:
            raise InsufficientFunds(
                f"Insufficient {asset.symbol} balance: the platform wallet holds "
                f"{show(holding, asset)}, the send needs {show(needed, asset)} "
                f"({show(units, asset)} and a network fee of {show(quote.native_units, native)})"
            )
    else:
        if holding < units:
            raise InsufficientFunds(
                f"Insufficient {asset.symbol} balance: the platform wallet holds "
                f"{show(holding, asset)}, the send needs {show(units, asset)}"
            )
        coin = await held(gateway, sender, native)
        if coin < quote.native_units:
            raise InsufficientFunds(
                f"Not enough {native.symbol} for the network fee: the send needs "
                f"{show(quote.native_units, native)} in the platform wallet, which holds "
                f"{show(coin, native)}"
            )
    transfer = Transfer(asset, sender, recipient, units, fee_payer=sender)
    return Plan(gateway, transfer, quote, FeePayer.PLATFORM, wallet)


def fee_text(units: int, native: Asset) -> str:
    """A fee as the wire shows it: a decimal string in `native`, the chain's coin."""
    return format_balance(units, native.decimals)
