"""A client's enabled assets when a deployment serves a chain a plugin adds: by default the
contract's sixteen (a new chain changes no client), the plugin chain's only when the
operator names them, and only ids the served catalog has."""

from __future__ import annotations

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.assets import CONTRACT_ASSETS, Asset, AssetKind, Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import InvalidRequest
from walletcore.services.audit import Auditor
from walletcore.services.auth import AuthService
from walletcore.services.tokens import TokenSigner
from walletcore.testing import CONTRACT_CATALOG, InMemoryStorage

BASE = Chain("BASECHAIN")
BASE_ETH = Asset(8453, BASE, "ETH", AssetKind.NATIVE, None, 18)
BASE_USDC = Asset(84531, BASE, "USDC", AssetKind.TOKEN, "ERC20", 6)
SERVED = Catalog.of((*CONTRACT_ASSETS, BASE_ETH, BASE_USDC))


def auth(catalog: Catalog) -> AuthService:
    storage, clock = InMemoryStorage(), ManualClock()
    signer = TokenSigner(bytes(32))
    return AuthService(storage, clock, signer, Auditor(storage, clock), catalog=catalog)


async def test_a_new_client_gets_the_contract_assets_whatever_else_is_served() -> None:
    contract = tuple(a.id for a in CONTRACT_ASSETS)
    issued = await auth(SERVED).create_client("Acme")
    assert issued.client.enabled_assets == contract
    assert (await auth(CONTRACT_CATALOG).create_client("Acme")).client.enabled_assets == contract
    assert not issued.client.is_enabled(8453) and not issued.client.is_enabled(84531)


async def test_a_plugin_chain_is_enabled_when_the_operator_names_its_assets() -> None:
    service = auth(SERVED)
    issued = await service.create_client("Acme", assets=[84531, 2, 8453])
    assert issued.client.enabled_assets == (2, 8453, 84531)  # catalog order
    other = await service.create_client("Other")
    updated = await service.update_client(other.client.client_id, assets=[1, 8453])
    assert updated.enabled_assets == (1, 8453)


@pytest.mark.parametrize("assets", [[8453], [2, 84531]])
async def test_an_asset_the_deployment_does_not_serve_is_refused(assets: list[int]) -> None:
    with pytest.raises(InvalidRequest, match="unknown asset ids"):
        await auth(CONTRACT_CATALOG).create_client("Acme", assets=assets)
