"""`/create` under a repeated X-Request-Id makes no second wallet: 409, naming the first
user, on every store (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import astuple
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.wallet import WalletOwner
from walletcore.ports import Storage
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import Auditor
from walletcore.services.context import Caller
from walletcore.services.wallets import WalletAlreadyCreated, WalletService
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG, InMemoryStorage, autocommit
from walletcore_sql import migrate
from walletcore_sql.engine import sqlite_url
from walletcore_sql.storage import SqlStorage
from walletcore_sql.testing import create_schema_async, drop_schema_async, pg_test_url

if TYPE_CHECKING:
    from conftest import Wallets

PASSWORD = "correct horse battery staple"
BTC, ETH = 1, 2


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    kind = request.param
    if kind == "memory":
        yield InMemoryStorage()
    elif kind == "sqlite":
        sql = SqlStorage(sqlite_url(tmp_path / "db" / "walletcore.db"), migrate=True)
        yield sql
        await sql.aclose()
    else:
        url = pg_test_url()
        schema = await create_schema_async(url)
        try:
            await migrate.upgrade_async(url, schema=schema)
            sql = SqlStorage(url, migrate=False, schema=schema)
            yield sql
            await sql.aclose()
        finally:
            await drop_schema_async(url, schema)


@pytest.fixture
def service(
    store: Storage, wallets: Wallets, clock: ManualClock, settings: Settings
) -> WalletService:
    policy = AssetPolicy(CONTRACT_CATALOG, settings.limited_assets, settings.unavailable_assets)
    return WalletService(store, clock, wallets.keystore, policy, Auditor(store, clock))


async def _client_caller(store: Storage, wallets: Wallets, request_id: str, given: bool) -> Caller:
    client = await wallets.client(BTC, ETH)  # in the fixture's own storage: copy it over
    await autocommit(store).clients.add(client)
    return Caller(client, request_id, request_id_given=given)


async def test_a_repeated_request_id_is_409_naming_the_first_user(
    store: Storage, service: WalletService, wallets: Wallets
) -> None:
    caller = await _client_caller(store, wallets, "create-1", given=True)
    first = await service.create(caller, password=PASSWORD)

    with pytest.raises(WalletAlreadyCreated) as caught:
        await service.create(caller, password=PASSWORD)
    assert caught.value.status == 409
    assert caught.value.message == (
        f"A wallet was already created for this X-Request-Id (userId {first.user_id}); "
        "its seed phrase is shown only once"
    )
    assert caught.value.user_id == first.user_id
    assert first.mnemonic not in caught.value.message

    assert (
        await autocommit(store).wallets.created_by_request(caller.client_id, "create-1")
        == first.user_id
    )
    wallet = await autocommit(store).wallets.get(caller.client_id, WalletOwner.USER, first.user_id)
    assert wallet is not None and dict(wallet.addresses) == dict(first.addresses)
    audit = [(e.action, e.outcome, e.user_id) for e in await autocommit(store).audit.newest()]
    assert audit == [
        ("wallet.create", "409", first.user_id),
        ("wallet.create", "ok", first.user_id),
    ]
    for entry in await autocommit(store).audit.newest():
        assert not [f for f in astuple(entry) if isinstance(f, str) and first.mnemonic in f]


async def test_without_a_sent_request_id_every_create_makes_a_wallet(
    store: Storage, service: WalletService, wallets: Wallets
) -> None:
    caller = await _client_caller(store, wallets, "generated-1", given=False)
    first = await service.create(caller, password=PASSWORD)
    second = await service.create(caller, password=PASSWORD)
    assert first.user_id != second.user_id
    assert (
        await autocommit(store).wallets.created_by_request(caller.client_id, "generated-1") is None
    )


async def test_request_ids_are_per_api_client(
    store: Storage, service: WalletService, wallets: Wallets
) -> None:
    mine = await _client_caller(store, wallets, "create-1", given=True)
    theirs = await _client_caller(store, wallets, "create-1", given=True)
    a = await service.create(mine, password=PASSWORD)
    b = await service.create(theirs, password=PASSWORD)
    assert a.user_id != b.user_id
    again = Caller(mine.client, "create-2", request_id_given=True)
    assert (await service.create(again, password=PASSWORD)).user_id not in (a.user_id, b.user_id)


async def test_a_body_refused_first_claims_nothing(
    store: Storage, service: WalletService, wallets: Wallets
) -> None:
    caller = await _client_caller(store, wallets, "create-1", given=True)
    with pytest.raises(InvalidRequest):
        await service.create(caller, password="short")
    created = await service.create(caller, password=PASSWORD)  # the id is still free
    with pytest.raises(InvalidRequest):  # and a bad body stays a 400 after it is used
        await service.create(caller, password="short")
    assert (
        await autocommit(store).wallets.created_by_request(caller.client_id, "create-1")
        == created.user_id
    )


async def test_concurrent_creates_under_one_request_id_make_one_wallet(
    store: Storage, service: WalletService, wallets: Wallets
) -> None:
    caller = await _client_caller(store, wallets, "create-race", given=True)
    results = await asyncio.gather(
        *(service.create(caller, password=PASSWORD) for _ in range(6)), return_exceptions=True
    )
    made = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(made) == 1, results
    assert all(isinstance(r, WalletAlreadyCreated) for r in refused), refused
    assert all(r.user_id == made[0].user_id for r in refused)  # type: ignore[union-attr]
    ok = [e for e in await autocommit(store).audit.newest() if e.outcome == "ok"]
    assert [(e.action, e.user_id) for e in ok] == [("wallet.create", made[0].user_id)]


async def test_over_http_only_a_sent_x_request_id_counts(
    clock: ManualClock, tmp_path: Path, wallets: Wallets
) -> None:
    from litestar.testing import AsyncTestClient

    from walletcore.container import create_container
    from walletcore_litestar import create_app

    container = create_container(
        Settings(home=tmp_path / "home", repo="memory"), clock=clock, keystore=wallets.keystore
    )
    issued = await container.auth().create_client("Acme Pay")
    async with AsyncTestClient(create_app(container)) as http:
        signed_in = await http.post(
            "/auth",
            headers={"x-client-id": issued.client.client_id, "x-api-key": issued.api_key},
        )
        token = signed_in.json()["result"]["token"]
        auth = {"Authorization": f"Bearer {token}"}
        body = {"password": PASSWORD}

        first = await http.post("/create", json=body, headers={**auth, "X-Request-Id": "c-1"})
        assert first.status_code == 200, first.text
        user_id = first.json()["result"]["userId"]
        again = await http.post("/create", json=body, headers={**auth, "X-Request-Id": "c-1"})
        assert again.status_code == 409, again.text
        assert again.json()["message"] == (
            f"A wallet was already created for this X-Request-Id (userId {user_id}); "
            "its seed phrase is shown only once"
        )
        assert first.json()["result"]["mnemonic"] not in again.text
        # Without the header every call makes a wallet.
        unnamed = [await http.post("/create", json=body, headers=auth) for _ in range(2)]
        assert [a.status_code for a in unnamed] == [200, 200]
        assert len({a.json()["result"]["userId"] for a in unnamed} | {user_id}) == 3
