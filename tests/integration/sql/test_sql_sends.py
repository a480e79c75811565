"""Sends against the real stores: twenty concurrent retries of one `/send` (one
X-Request-Id) from five server processes (engines) on one database broadcast exactly once."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest
from sql_helpers import Db

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.domain.errors import IdempotencyConflict
from walletcore.domain.sends import SendState
from walletcore.ports import SignedTransfer
from walletcore.services.context import Caller
from walletcore.services.send_record import SendReceipt
from walletcore.settings import Settings
from walletcore.testing import autocommit
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams
from walletcore_sandbox.chain import SandboxGateway
from walletcore_sandbox.faucet import fund
from walletcore_sql.storage import SqlStorage

PROCESSES = 5
RETRIES = 20
PASSWORD = "correct horse battery"
RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"


@pytest.fixture
async def storages(database: Db) -> AsyncIterator[list[SqlStorage]]:
    first = database.storage(migrate=True)
    await first.start()
    others = [database.storage() for _ in range(PROCESSES - 1)]
    for r in others:
        await r.start()
    try:
        yield [first, *others]
    finally:
        for r in (first, *others):
            await r.aclose()


def _servers(
    storages: list[SqlStorage], settings: Settings, clock: ManualClock, broadcasts: list[str]
) -> list[Container]:
    """One container per engine, all over the same sandbox ledger (the same home)."""
    keystore = SealedKeyStore(
        secrets.token_bytes(32),
        kdf=KdfParams(opslimit=1, memlimit=64 * 1024),
        allow_weak_kdf=True,
    )
    servers = []
    for storage in storages:
        container = create_container(settings, clock=clock, keystore=keystore, storage=storage)
        gateway: SandboxGateway = container.gateways()[Chain.ETHEREUM]
        real = gateway.broadcast

        async def slow(signed: SignedTransfer, real: object = real) -> str:
            broadcasts.append(signed.tx_hash)
            await asyncio.sleep(0.05)  # the first request is still in flight meanwhile
            return await real(signed)  # type: ignore[operator, no-any-return]

        gateway.broadcast = slow  # type: ignore[method-assign]
        servers.append(container)
    return servers


async def test_twenty_concurrent_retries_of_one_send_broadcast_once(
    storages: list[SqlStorage], settings: Settings, clock: ManualClock
) -> None:
    broadcasts: list[str] = []
    servers = _servers(storages, settings, clock, broadcasts)
    issued = await servers[0].auth().create_client("racer")
    caller = Caller(issued.client, "dup")
    created = await servers[0].wallets().create(caller, password=PASSWORD)
    sender = created.addresses[Chain.ETHEREUM]
    await fund(
        settings,
        servers[0].gateways(),
        servers[0].catalog(),
        chain="ETHEREUM",
        address=sender,
        asset_id=2,
        amount="1",
    )

    async def send(server: Container) -> SendReceipt:
        receipt: SendReceipt = await server.sends().send(
            caller,
            request_id="dup",
            user_id=created.user_id,
            asset_id=2,
            recipient=RECIPIENT,
            amount="0.1",
            password=PASSWORD,
        )
        return receipt

    results = await asyncio.gather(
        *(send(servers[i % PROCESSES]) for i in range(RETRIES)), return_exceptions=True
    )
    receipts = [r for r in results if isinstance(r, SendReceipt)]
    conflicts = [r for r in results if isinstance(r, IdempotencyConflict)]
    assert len(receipts) + len(conflicts) == RETRIES, results
    assert conflicts and len({r.tx_hash for r in receipts}) == 1
    # Counted at the ledger: one transfer left the wallet, broadcast once.
    ledger = await servers[0].gateways()[Chain.ETHEREUM]._ledger.transactions()
    assert [t.tx_hash for t in ledger if t.sender == sender] == [receipts[0].tx_hash]
    assert broadcasts == [receipts[0].tx_hash]
    record = await autocommit(storages[0]).sends.get(issued.client.client_id, "dup")
    assert record is not None and record.state is SendState.FINISHED
    # A later retry, from any process, replays it.
    assert await send(servers[-1]) == receipts[0]
    assert len(broadcasts) == 1
