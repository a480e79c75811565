"""The wallet use cases over the in-memory storage and the real sealed KeyStore (cheap Argon2id)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.clients import ApiClient
from walletcore.domain.ids import new_id
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import Auditor
from walletcore.services.context import Caller
from walletcore.services.wallets import WalletService
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG, InMemoryStorage, autocommit
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams

#: Argon2id at its cheapest: these tests are about the use cases, not the KDF cost.
FAST_KDF = KdfParams(opslimit=1, memlimit=64 * 1024)


@dataclass
class Wallets:
    service: WalletService
    storage: InMemoryStorage
    keystore: SealedKeyStore
    clock: ManualClock
    master_key: bytes

    @property
    def db(self) -> Any:
        return autocommit(self.storage)

    async def client(self, *asset_ids: int) -> ApiClient:
        client = ApiClient(
            client_id=new_id(), name="Acme Pay", key_hash="0" * 64, enabled_assets=asset_ids
        )
        await self.db.clients.add(client)
        return client

    async def caller(self, client: ApiClient, request_id: str = "req-1") -> Caller:
        stored = await self.db.clients.get(client.client_id)
        assert stored is not None
        return Caller(stored, request_id)


@pytest.fixture
def wallets(clock: ManualClock, settings: Settings) -> Wallets:
    storage = InMemoryStorage()
    master_key = secrets.token_bytes(32)
    keystore = SealedKeyStore(master_key, kdf=FAST_KDF, allow_weak_kdf=True)
    policy = AssetPolicy(CONTRACT_CATALOG, settings.limited_assets, settings.unavailable_assets)
    service = WalletService(storage, clock, keystore, policy, Auditor(storage, clock))
    return Wallets(service, storage, keystore, clock, master_key)
