"""`walletcore sandbox fund`: credit sandbox coins to an address (sandbox profile only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from walletcore.domain.assets import Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.money import format_balance
from walletcore.domain.wire import JsonValue
from walletcore.ports import ChainGateway
from walletcore.secretfiles import ConfigurationError
from walletcore.services.send_plan import read_amount, read_asset
from walletcore_sandbox.chain import SandboxGateway


async def fund(
    settings: Any,
    gateways: Mapping[Chain, ChainGateway],
    catalog: Catalog,
    *,
    chain: JsonValue,
    address: JsonValue,
    asset_id: JsonValue,
    amount: JsonValue,
) -> dict[str, Any]:
    """Credit `amount` of the asset to `address`; the new balance, as JSON-ready values.

    The address is checked like a recipient (checksum, network); the amount with the
    asset's decimals. Refused on the production profile and on chains that are not the
    sandbox's.
    """
    if str(getattr(settings, "profile", "sandbox")) != "sandbox":
        raise ConfigurationError("sandbox fund runs on the sandbox profile only")
    try:
        on = Chain(str(chain).strip().upper())
    except ValueError:
        on = None
    if on is None or not catalog.has_chain(on):
        names = ", ".join(c.value for c in catalog.chains)
        raise InvalidRequest(f"chain must be one of {names}") from None
    asset = read_asset(catalog, asset_id)
    if asset.chain != on:
        raise InvalidRequest(f"asset {asset.id} ({asset.symbol}) is on {asset.chain}, not {on}")
    gateway = gateways[on]
    if not isinstance(gateway, SandboxGateway):
        raise ConfigurationError(f"the {on} gateway is not the sandbox chain; nothing to fund")
    where = gateway.validate_address(address)
    balance = await gateway.fund(where, asset, read_amount(amount, asset))
    return {
        "chain": on.value,
        "address": where,
        "assetId": asset.id,
        "symbol": asset.symbol,
        "balance": format_balance(balance, asset.decimals),
    }
