"""Helpers of the wallet operation tests (imported by name; the fixtures are in conftest.py).

The sandbox core (manual clock, in-memory storage, the sandbox chains in a temporary home) with
the real sealed KeyStore at its cheapest Argon2id, a gateway wrapper that counts broadcasts
and can lose their answers, and helpers to make api clients, wallets and sends."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dependency_injector import providers

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import BroadcastTimeout
from walletcore.ports import ChainGateway, SignedTransfer
from walletcore.services.context import Caller
from walletcore.services.send_record import SendReceipt
from walletcore.settings import Settings
from walletcore.testing import InMemoryStorage, autocommit
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams
from walletcore_sandbox.chain import SandboxGateway
from walletcore_sandbox.faucet import fund

#: Argon2id at its cheapest: these tests are about wallet operations, not the KDF cost.
FAST_KDF = KdfParams(opslimit=1, memlimit=64 * 1024)
PASSWORD = "correct horse battery"

#: Valid mainnet addresses outside any wallet made here, one per chain.
ELSEWHERE = {
    Chain.BITCOIN: "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
    Chain.ETHEREUM: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.BSC: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.POLYGON: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.TRON: "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7",
    Chain.SOLANA: "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T",
}


class CountingGateway:
    """A gateway that counts broadcasts; `lose_answers` makes the next ones reach the
    network and then time out, as a lost reply would."""

    def __init__(self, inner: SandboxGateway) -> None:
        self.inner = inner
        self.chain = inner.chain
        self.broadcasts: list[str] = []
        self.lose_answers = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def broadcast(self, signed: SignedTransfer) -> str:
        self.broadcasts.append(signed.tx_hash)
        tx_hash = await self.inner.broadcast(signed)
        if self.lose_answers:
            self.lose_answers -= 1
            raise BroadcastTimeout()
        return tx_hash


@dataclass
class Ops:
    container: Container
    clock: ManualClock
    storage: InMemoryStorage
    gateways: Mapping[Chain, CountingGateway]
    keystore: SealedKeyStore
    requests: int = 0
    wallets: dict[str, Mapping[Chain, str]] = field(default_factory=dict)

    @property
    def db(self) -> Any:
        return autocommit(self.storage)

    @property
    def reads(self) -> Any:
        return self.container.wallet_reads()

    @property
    def sends(self) -> Any:
        return self.container.sends()

    async def client(
        self,
        *,
        fee_payer: FeePayer = FeePayer.USER,
        assets: list[int] | None = None,
        platform: bool = False,
    ) -> ApiClient:
        issued = await self.container.auth().create_client("Acme Pay", assets=assets)
        client = replace(issued.client, fee_payer=fee_payer)
        await self.db.clients.update(client)
        if platform:
            await self.container.wallets().provision_platform(client.client_id)
        return client

    def caller(self, client: ApiClient, request_id: str | None = None) -> Caller:
        self.requests += 1
        return Caller(client, request_id or f"req-{self.requests:04d}")

    async def user(self, client: ApiClient, password: str = PASSWORD) -> str:
        created = await self.container.wallets().create(self.caller(client), password=password)
        self.wallets[created.user_id] = created.addresses
        return str(created.user_id)

    async def platform_address(self, client: ApiClient, chain: Chain) -> str:
        addresses = await self.container.wallets().platform_addresses(self.caller(client))
        return str(addresses[chain])

    async def fund(self, address: str, asset_id: int, amount: str) -> str:
        answer = await fund(
            self.container.settings(),
            {chain: g.inner for chain, g in self.gateways.items()},
            self.container.catalog(),
            chain=_chain_of(asset_id).value,
            address=address,
            asset_id=asset_id,
            amount=amount,
        )
        return str(answer["balance"])

    async def balance(self, client: ApiClient, user_id: str | None, asset_id: int) -> str:
        from walletcore.domain.money import format_balance

        holding = await self.reads.balance(
            self.caller(client), asset_id=asset_id, user_id=user_id, platform=user_id is None
        )
        return format_balance(holding.units, holding.asset.decimals)

    async def send(
        self,
        client: ApiClient,
        user_id: str,
        asset_id: int,
        amount: str,
        *,
        request_id: str | None = None,
        recipient: str | None = None,
        password: str = PASSWORD,
    ) -> SendReceipt:
        rid = request_id or f"send-{secrets.token_hex(4)}"
        receipt: SendReceipt = await self.sends.send(
            self.caller(client, rid),
            request_id=rid,
            user_id=user_id,
            asset_id=asset_id,
            recipient=recipient or ELSEWHERE[_chain_of(asset_id)],
            amount=amount,
            password=password,
        )
        return receipt

    def broadcasts(self) -> int:
        return sum(len(g.broadcasts) for g in self.gateways.values())


def _chain_of(asset_id: int) -> Chain:
    from walletcore.testing import CONTRACT_CATALOG

    return CONTRACT_CATALOG.asset_by_id(asset_id).chain


def make_ops(
    settings: Settings,
    clock: ManualClock,
    storage: Any = None,
    chain_settings: dict[str, Any] | None = None,
    **changes: Any,
) -> Ops:
    """`chain_settings`: chain plugin name -> its settings (`{"sandbox":
    SandboxChainSettings(sandbox_confirm_seconds=0)}`)."""
    keystore = SealedKeyStore(secrets.token_bytes(32), kdf=FAST_KDF, allow_weak_kdf=True)
    storage = storage if storage is not None else InMemoryStorage()
    container = create_container(
        settings.model_copy(update=changes),
        clock=clock,
        keystore=keystore,
        storage=storage,
        chain_settings=chain_settings or {},
    )
    built: Mapping[Chain, ChainGateway] = container.gateways()
    counting = {chain: CountingGateway(g) for chain, g in built.items()}  # type: ignore[arg-type]
    container.gateways.override(providers.Object(counting))
    return Ops(container, clock, storage, counting, keystore)
