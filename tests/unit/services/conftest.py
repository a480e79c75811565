"""Fixtures of the send and transfer use case tests: the core on its fakes (in-memory
storage, a manual clock, the FAKE KeyStore) with an in-memory gateway per chain
(`walletcore.testing.chains`), an api client, and helpers to make wallets and sends."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal

import pytest
from dependency_injector import providers

from walletcore import Caller, Container, Settings, create_container
from walletcore.clock import ManualClock
from walletcore.domain.assets import CONTRACT_CHAINS, Chain, FeePayer
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient
from walletcore.domain.money import to_base_units
from walletcore.domain.sends import SendRecord
from walletcore.services.send_record import SendReceipt, SignedSend
from walletcore.services.transfers import TransferSettings
from walletcore.testing import CONTRACT_CATALOG, FakeKeyStore, InMemoryStorage, autocommit
from walletcore.testing.chains import FakeGateway, FollowedFakeGateway
from walletcore.testing.keys import fake_address

PASSWORD = "correct horse battery"
WRONG = "not the password"
BTC, ETH, USDT, BNB, TRX, TRC_USDT, POL, SOL, SPL_USDT = 1, 2, 21, 3, 4, 41, 5, 6, 61


def elsewhere(chain: Chain, n: int = 1) -> str:
    """An address on `chain` of no wallet made here."""
    return fake_address(bytes([n]) * 8, chain)


async def until(condition: Callable[[], bool]) -> None:
    """Let the other tasks run until `condition` holds (a bounded number of turns)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


def units(asset_id: int, amount: str) -> int:
    """`amount` of the asset in its base units."""
    return to_base_units(Decimal(amount), CONTRACT_CATALOG.asset_by_id(asset_id).decimals)


@dataclass
class Desk:
    """The core on its fakes, one api client, and what to read back."""

    container: Container
    clock: ManualClock
    storage: InMemoryStorage
    keystore: FakeKeyStore
    gateways: dict[Chain, FakeGateway]
    client: ApiClient
    requests: int = 0
    addresses: dict[str, dict[Chain, str]] = field(default_factory=dict)

    # -- the parts ------------------------------------------------------------------------
    @property
    def db(self) -> Any:
        return autocommit(self.storage)

    @property
    def sends(self) -> Any:
        return self.container.sends()

    @property
    def transfers(self) -> Any:
        return self.container.transfers()

    @property
    def reads(self) -> Any:
        return self.container.wallet_reads()

    def gateway(self, asset_id: int) -> FollowedFakeGateway:
        """The followed gateway of the asset's chain (most tests use these)."""
        found = self.gateways[CONTRACT_CATALOG.asset_by_id(asset_id).chain]
        assert isinstance(found, FollowedFakeGateway)
        return found

    def caller(self, request_id: str | None = None, client: ApiClient | None = None) -> Caller:
        self.requests += 1
        return Caller(client or self.client, request_id or f"req-{self.requests:04d}")

    # -- making things ------------------------------------------------------------------
    async def set_client(self, **changes: Any) -> ApiClient:
        """Change the api client (its fee payer, say) as the operator would."""
        self.client = replace(self.client, **changes)
        await self.db.clients.update(self.client)
        return self.client

    async def other_client(self) -> ApiClient:
        issued = await self.container.auth().create_client("Other Pay")
        return issued.client

    async def user(self, client: ApiClient | None = None) -> str:
        created = await self.container.wallets().create(
            self.caller(client=client), password=PASSWORD
        )
        self.addresses[created.user_id] = dict(created.addresses)
        return str(created.user_id)

    async def platform(self) -> dict[Chain, str]:
        """Provision the client's platform wallet; its addresses."""
        return dict(await self.container.wallets().provision_platform(self.client.client_id))

    def address(self, user_id: str, asset_id: int) -> str:
        return self.addresses[user_id][CONTRACT_CATALOG.asset_by_id(asset_id).chain]

    def fund(self, address: str, asset_id: int, amount: str) -> None:
        asset = CONTRACT_CATALOG.asset_by_id(asset_id)
        self.gateways[asset.chain].fund(address, asset, units(asset_id, amount))

    def held(self, address: str, asset_id: int) -> int:
        asset = CONTRACT_CATALOG.asset_by_id(asset_id)
        return self.gateways[asset.chain].balances.get((address, asset_id), 0)

    async def send(
        self,
        user_id: str,
        asset_id: int,
        amount: str,
        *,
        request_id: str | None = "send-1",
        recipient: str | None = None,
        password: str = PASSWORD,
        client: ApiClient | None = None,
    ) -> SendReceipt:
        receipt: SendReceipt = await self.sends.send(
            self.caller(request_id, client),
            request_id=request_id,
            user_id=user_id,
            asset_id=asset_id,
            recipient=recipient or elsewhere(CONTRACT_CATALOG.asset_by_id(asset_id).chain),
            amount=amount,
            password=password,
        )
        return receipt

    async def platform_send(
        self,
        asset_id: int,
        amount: str,
        *,
        request_id: str | None = "psend-1",
        recipient: str | None = None,
    ) -> SendReceipt:
        receipt: SendReceipt = await self.sends.platform_send(
            self.caller(request_id),
            request_id=request_id,
            asset_id=asset_id,
            recipient=recipient or elsewhere(CONTRACT_CATALOG.asset_by_id(asset_id).chain),
            amount=amount,
        )
        return receipt

    async def follow(self) -> int:
        """One run of the `follow_sends` job; how many sends became final."""
        settled: int = await self.container.jobs().follow_sends()
        return settled

    # -- reading back -------------------------------------------------------------------
    async def record(
        self, request_id: str = "send-1", client: ApiClient | None = None
    ) -> SendRecord:
        found: SendRecord | None = await self.db.sends.get(
            (client or self.client).client_id, request_id
        )
        assert found is not None, f"no send record {request_id}"
        return found

    async def signed(self, request_id: str = "send-1") -> SignedSend:
        return SignedSend.from_bytes((await self.record(request_id)).raw_tx)

    async def audit(self, action: str | None = None) -> list[AuditEntry]:
        """The audit log, oldest first (one action's entries, when given)."""
        entries: list[AuditEntry] = await self.db.audit.newest(10_000)
        return [e for e in reversed(entries) if action is None or e.action == action]


DeskFactory = Callable[..., Awaitable[Desk]]


@pytest.fixture(scope="session")
def desk_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Sandbox settings on the in-memory storage, read once: building settings reads the
    environment, and nothing here writes the home."""
    return Settings(home=tmp_path_factory.mktemp("home"), repo="memory")


@pytest.fixture
def make_desk(desk_settings: Settings, clock: ManualClock) -> DeskFactory:
    """`await make_desk(followed=True, fee_bump="auto", fee_caps={...}, gateways=...,
    **settings changes)`: the core on its fakes, one api client (fee payer USER, every
    asset)."""

    async def build(
        *,
        followed: bool = True,
        gateways: dict[Chain, FakeGateway] | None = None,
        fee_bump: Literal["auto", "manual"] = "auto",
        fee_caps: dict[Chain, str] | None = None,
        **changes: Any,
    ) -> Desk:
        storage, keystore = InMemoryStorage(), FakeKeyStore()
        if gateways is None:
            kind = FollowedFakeGateway if followed else FakeGateway
            gateways = {chain: kind(chain) for chain in CONTRACT_CHAINS}
        container = create_container(
            desk_settings.model_copy(update=changes),
            clock=clock,
            storage=storage,
            keystore=keystore,
        )
        container.gateways.override(providers.Object(gateways))
        caps = {chain: Decimal(cap) for chain, cap in (fee_caps or {}).items()}
        # built, not read from the environment: the test's own settings only
        transfer = TransferSettings.model_construct(fee_bump=fee_bump, fee_caps=caps)
        container.transfer_settings.override(providers.Object(transfer))
        issued = await container.auth().create_client("Acme Pay")
        return Desk(container, clock, storage, keystore, gateways, issued.client)

    return build


@pytest.fixture
async def desk(make_desk: DeskFactory) -> Desk:
    return await make_desk()


@pytest.fixture
async def funded(desk: Desk) -> tuple[Desk, str]:
    """A user whose ETHEREUM wallet holds 1 ETH and 100 USDT."""
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "1")
    desk.fund(desk.address(user, USDT), USDT, "100")
    return desk, user


__all__ = [
    "BNB",
    "BTC",
    "ETH",
    "PASSWORD",
    "POL",
    "SOL",
    "SPL_USDT",
    "TRC_USDT",
    "TRX",
    "USDT",
    "WRONG",
    "Desk",
    "DeskFactory",
    "FeePayer",
    "elsewhere",
    "units",
    "until",
]
