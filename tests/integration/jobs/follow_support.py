"""Shared by the follow job tests: a container that sends on the sandbox chains (the real
sealed KeyStore at its cheapest Argon2id) over a given storage, clock and home, and what to
read back (send records, `send.settle` entries)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient
from walletcore.domain.sends import SendRecord
from walletcore.jobs import JobSettings, JobsMode
from walletcore.ports import Clock, Storage
from walletcore.services.context import Caller
from walletcore.services.send_record import SendReceipt
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore.testing.storage import autocommit
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams
from walletcore_sandbox.chain import SandboxChainSettings
from walletcore_sandbox.faucet import fund

PASSWORD = "correct horse battery"
FAST_KDF = KdfParams(opslimit=1, memlimit=64 * 1024)
ELSEWHERE = {
    Chain.ETHEREUM: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.TRON: "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7",
    Chain.SOLANA: "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T",
}


def sending_container(
    storage: Storage,
    *,
    home: Path,
    clock: Clock | None = None,
    confirm_seconds: float = 3.0,
    mode: JobsMode = JobsMode.INPROCESS,
    database_url: str | None = None,
    follow_seconds: float = 1.0,
    follow_batch: int = 200,
    **overrides: Any,
) -> Container:
    """A container on `storage` whose sandbox chains keep their ledger in `home` (share the
    home to share the chains); jobs as `mode`, never started here."""
    if clock is not None:
        overrides["clock"] = clock
    return create_container(
        Settings(home=home, repo="sql", database_url=database_url),
        storage=storage,
        keystore=SealedKeyStore(secrets.token_bytes(32), kdf=FAST_KDF, allow_weak_kdf=True),
        chain_settings={"sandbox": SandboxChainSettings(sandbox_confirm_seconds=confirm_seconds)},
        job_settings=JobSettings(
            jobs=mode,
            jobs_follow_seconds=follow_seconds,
            jobs_follow_batch=follow_batch,
            jobs_settle_seconds=60,
            jobs_price_cache_seconds=0,
        ),
        **overrides,
    )


@dataclass
class Sender:
    """Sends through the container's SendService, as `/send` and `/platform/send` do."""

    container: Container
    client: ApiClient | None = None
    sent: list[SendReceipt] = field(default_factory=list)

    async def start(self) -> Sender:
        issued = await self.container.auth().create_client("Follow")
        self.client = issued.client
        await self.container.wallets().provision_platform(self.client.client_id)
        return self

    def caller(self, request_id: str) -> Caller:
        assert self.client is not None
        return Caller(self.client, request_id)

    async def user(self) -> tuple[str, str]:
        """A funded user on ETHEREUM: (user id, address)."""
        created = await self.container.wallets().create(self.caller("create"), password=PASSWORD)
        address = created.addresses[Chain.ETHEREUM]
        await self._fund(address, 2, "1")
        return str(created.user_id), address

    async def platform(self, chain: Chain, asset_id: int, amount: str) -> str:
        addresses = await self.container.wallets().platform_addresses(self.caller("addresses"))
        await self._fund(addresses[chain], asset_id, amount)
        return addresses[chain]

    async def send(self, user_id: str, request_id: str, amount: str = "0.01") -> SendReceipt:
        receipt: SendReceipt = await self.container.sends().send(
            self.caller(request_id),
            request_id=request_id,
            user_id=user_id,
            asset_id=2,
            recipient=ELSEWHERE[Chain.ETHEREUM],
            amount=amount,
            password=PASSWORD,
        )
        self.sent.append(receipt)
        return receipt

    async def platform_send(self, asset_id: int, request_id: str, amount: str) -> SendReceipt:
        receipt: SendReceipt = await self.container.sends().platform_send(
            self.caller(request_id),
            request_id=request_id,
            asset_id=asset_id,
            recipient=ELSEWHERE[CONTRACT_CATALOG.asset_by_id(asset_id).chain],
            amount=amount,
        )
        self.sent.append(receipt)
        return receipt

    async def record(self, request_id: str) -> SendRecord:
        assert self.client is not None
        found = await autocommit(self.container.storage()).sends.get(
            self.client.client_id, request_id
        )
        assert found is not None
        return found

    async def _fund(self, address: str, asset_id: int, amount: str) -> None:
        await fund(
            self.container.settings(),
            self.container.gateways(),
            self.container.catalog(),
            chain=CONTRACT_CATALOG.asset_by_id(asset_id).chain.value,
            address=address,
            asset_id=asset_id,
            amount=amount,
        )


async def settle_entries(storage: Storage) -> list[AuditEntry]:
    """The `send.settle` audit entries, oldest first."""
    entries = await autocommit(storage).audit.newest(10_000)
    return [e for e in reversed(entries) if e.action == "send.settle"]
