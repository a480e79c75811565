"""Migrations: upgrade creates the schema the code expects; the start-up check refuses an
unmigrated database and one migrated by a newer walletcore, with a message that says what
to do."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sql_helpers import Db
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from walletcore.domain.assets import Chain
from walletcore.domain.clients import AuthFailures, User
from walletcore.domain.deposits import Watched
from walletcore.domain.policies import Policy
from walletcore.domain.sends import Spend
from walletcore.domain.settlement import Settlement, SettlementStatus
from walletcore.domain.trade import Side
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.testing import autocommit
from walletcore_sql import migrate
from walletcore_sql.engine import make_engine
from walletcore_sql.errors import SchemaError, SchemaNotMigrated, SchemaTooNew
from walletcore_sql.storage import SqlStorage
from walletcore_sql.tables import metadata
from walletcore_sql.testing import off_loop

TABLES = {
    "alembic_version",
    "api_clients",
    "users",
    "wallets",
    "trades",
    "sends",
    "send_hashes",
    "audit_log",
    "nonce_floors",
    "price_records",
    "watched_addresses",
    "deposits",
    "scan_cursors",
    "events",
    "webhook_endpoints",
    "webhook_attempts",
    "settlements",
    "desk_pauses",
    "policy_versions",
    "allowlist",
    "policy_usage",
    "transfer_approvals",
    "operators",
}
HEAD = "0011"


async def _sync(db: Db, work):  # type: ignore[no-untyped-def]
    engine = make_engine(db.url, schema=db.schema)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(work)
    finally:
        await engine.dispose()


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


async def test_upgrade_on_an_empty_database_creates_the_schema(database: Db) -> None:
    assert await migrate.current_async(database.url, schema=database.schema) is None
    assert await _sync(database, _tables) == set()

    reached = await migrate.upgrade_async(database.url, schema=database.schema)

    assert reached == migrate.head() == HEAD
    assert await _sync(database, _tables) == TABLES
    assert await migrate.current_async(database.url, schema=database.schema) == migrate.head()
    await migrate.check_schema_async(database.url, schema=database.schema)
    # Again is a no-op.
    assert await migrate.upgrade_async(database.url, schema=database.schema) == HEAD


async def test_two_migrators_at_once_both_succeed(database: Db) -> None:
    """Two processes starting on a fresh database: one migrates, the other waits and finds
    it done (PostgreSQL: advisory lock; SQLite: BEGIN IMMEDIATE)."""
    reached = await asyncio.gather(
        migrate.upgrade_async(database.url, schema=database.schema),
        migrate.upgrade_async(database.url, schema=database.schema),
    )
    assert reached == [HEAD, HEAD]
    assert await _sync(database, _tables) == TABLES


async def test_the_migrated_schema_matches_the_tables_of_the_code(database: Db) -> None:
    await migrate.upgrade_async(database.url, schema=database.schema)

    def diff(conn: Connection) -> list[object]:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))

    assert await _sync(database, diff) == []


async def test_a_0001_database_is_outdated_until_upgraded_to_nonce_floors(
    database: Db,
) -> None:
    """Deployed at 0001 (no nonce_floors): the production check refuses it, the upgrade
    adds the empty table and keeps what was there."""
    from walletcore_sql.errors import SchemaOutdated

    await migrate.upgrade_async(database.url, schema=database.schema, revision="0001")
    await _sync(
        database,
        lambda c: c.execute(
            text(
                "INSERT INTO api_clients VALUES ('c1', 'n', 'h', '[]', 'USER', '{}', false, 1, NULL)"
            )
        ),
    )
    with pytest.raises(SchemaOutdated, match="walletcore db upgrade"):
        await migrate.check_schema_async(database.url, schema=database.schema)

    assert await migrate.upgrade_async(database.url, schema=database.schema) == HEAD

    assert await _sync(database, _tables) == TABLES
    rows = await _sync(
        database,
        lambda c: (
            c.execute(text("SELECT count(*) FROM api_clients")).scalar_one(),
            c.execute(text("SELECT count(*) FROM nonce_floors")).scalar_one(),
        ),
    )
    assert rows == (1, 0)


async def test_a_0002_database_keeps_its_users_and_gets_one_user_per_request_id(
    database: Db,
) -> None:
    """0003 adds `users.request_id` (NULL for the users already there) under a unique index
    per api client: a second /create under one X-Request-Id inserts nothing."""
    await migrate.upgrade_async(database.url, schema=database.schema, revision="0002")
    await _sync(
        database,
        lambda c: [
            c.execute(
                text(
                    "INSERT INTO api_clients VALUES "
                    "('c1', 'n', 'h', '[]', 'USER', '{}', false, 1, NULL)"
                )
            ),
            c.execute(
                text(
                    "INSERT INTO users (client_id, user_id, created_at) "
                    "VALUES ('c1', 'u1', CURRENT_TIMESTAMP)"
                )
            ),
        ],
    )
    assert await migrate.upgrade_async(database.url, schema=database.schema) == HEAD

    rows = await _sync(
        database,
        lambda c: c.execute(text("SELECT user_id, request_id FROM users")).all(),
    )
    assert [tuple(r) for r in rows] == [("u1", None)]
    storage = SqlStorage(database.url, migrate=False, schema=database.schema)
    try:
        assert await autocommit(storage).wallets.created_by_request("c1", "create-1") is None
        now = datetime(2026, 1, 1, tzinfo=UTC)
        for user_id, expected in (("u2", True), ("u3", False)):
            stored = await autocommit(storage).wallets.add_user(
                User(user_id, "c1", now),
                WalletRecord("c1", WalletOwner.USER, user_id, b"s", {}, now),
                request_id="create-1",
            )
            assert stored is expected
        assert await autocommit(storage).wallets.created_by_request("c1", "create-1") == "u2"
        assert await autocommit(storage).wallets.get_user("c1", "u3") is None
    finally:
        await storage.aclose()


async def test_a_0004_database_keeps_its_sends_unfollowed_and_checks_chain_status(
    database: Db,
) -> None:
    """0005 adds the chain status of sends: NULL (not followed) for the sends already
    there; the CHECK refuses a status on an unfinished send and an unknown status."""
    await migrate.upgrade_async(database.url, schema=database.schema, revision="0004")
    columns = "client_id, request_id, fingerprint, state, attempt, created_at, updated_at"
    await _sync(
        database,
        lambda c: [
            c.execute(
                text(
                    "INSERT INTO api_clients VALUES "
                    "('c1', 'n', 'h', '[]', 'USER', '{}', false, 1, NULL)"
                )
            ),
            c.execute(
                text(
                    f"INSERT INTO sends ({columns}) VALUES ('c1', 'r1', 'fp', 'finished', 1, "
                    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            ),
        ],
    )
    assert await migrate.upgrade_async(database.url, schema=database.schema) == HEAD
    storage = SqlStorage(database.url, migrate=False, schema=database.schema)
    try:
        record = await autocommit(storage).sends.get("c1", "r1")
        assert record is not None and record.chain_status is None
        assert await autocommit(storage).sends.following(10) == []
    finally:
        await storage.aclose()
    for values in (
        (
            "('c1', 'r2', 'fp', 'started', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'pending', "
            "CURRENT_TIMESTAMP)"
        ),
        (
            "('c1', 'r3', 'fp', 'finished', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'lost', "
            "CURRENT_TIMESTAMP)"
        ),
    ):
        statement = text(
            f"INSERT INTO sends ({columns}, chain_status, chain_checked_at) VALUES {values}"
        )
        with pytest.raises(IntegrityError):
            await _sync(database, lambda c, statement=statement: c.execute(statement))


async def test_a_0006_database_keeps_its_clients_and_counts_their_failed_auth(
    database: Db,
) -> None:
    """0007 adds the failed /auth of each api client, counted in place: none for the
    clients already there, and they count from the upgrade on."""
    await migrate.upgrade_async(database.url, schema=database.schema, revision="0006")
    await _sync(
        database,
        lambda c: c.execute(
            text(
                "INSERT INTO api_clients VALUES ('c1', 'n', 'h', '[1]', 'USER', '{}', false, 2, "
                "NULL)"
            )
        ),
    )
    assert await migrate.upgrade_async(database.url, schema=database.schema) == HEAD
    storage = SqlStorage(database.url, migrate=False, schema=database.schema)
    try:
        db = autocommit(storage)
        client = await db.clients.get("c1")
        assert client is not None
        assert (client.key_generation, client.auth_failures) == (2, AuthFailures())
        at = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)
        assert await db.clients.add_auth_failures("c1", AuthFailures(1, at, at))
        counted = await db.clients.get("c1")
        assert counted is not None and counted.auth_failures == AuthFailures(1, at, at)
    finally:
        await storage.aclose()


async def test_a_0007_database_watches_the_addresses_of_its_wallets(database: Db) -> None:
    """0008 back-fills the watch list from every wallet's addresses (an address two wallets
    name stays the oldest wallet's), and the new tables start empty and in use."""
    await migrate.upgrade_async(database.url, schema=database.schema, revision="0007")
    wallet = (
        "INSERT INTO wallets (client_id, owner, user_id, sealed, addresses, created_at) "
        "VALUES ('c1', :owner, :user, :sealed, :addresses, CURRENT_TIMESTAMP)"
    )
    await _sync(
        database,
        lambda c: [
            c.execute(
                text(
                    "INSERT INTO api_clients (client_id, name, key_hash, enabled_assets, "
                    "fee_payer, asset_fee_payers, disabled, key_generation) "
                    "VALUES ('c1', 'n', 'h', '[]', 'USER', '{}', false, 1)"
                )
            ),
            c.execute(
                text(
                    "INSERT INTO users (client_id, user_id, created_at) "
                    "VALUES ('c1', 'u1', CURRENT_TIMESTAMP), ('c1', 'u2', CURRENT_TIMESTAMP)"
                )
            ),
            c.execute(
                text(wallet),
                {
                    "owner": "user",
                    "user": "u1",
                    "sealed": b"s",
                    "addresses": '{"ETHEREUM": "0xa1", "BITCOIN": "bc1qa1"}',
                },
            ),
            c.execute(
                text(wallet),
                {"owner": "platform", "user": None, "sealed": b"s", "addresses": '{"TRON": "Tp"}'},
            ),
            c.execute(
                text(wallet),
                {
                    "owner": "user",
                    "user": "u2",
                    "sealed": b"s",
                    "addresses": '{"ETHEREUM": "0xa1", "SOLANA": "So2"}',
                },
            ),
        ],
    )
    assert await migrate.upgrade_async(database.url, schema=database.schema) == HEAD
    storage = SqlStorage(database.url, migrate=False, schema=database.schema)
    try:
        db = autocommit(storage)
        u1, u2 = (Watched("c1", WalletOwner.USER, u) for u in ("u1", "u2"))
        assert await db.deposits.watchlist(Chain.ETHEREUM) == {"0xa1": u1}
        assert await db.deposits.watchlist(Chain.BITCOIN) == {"bc1qa1": u1}
        assert await db.deposits.watchlist(Chain.SOLANA) == {"So2": u2}
        assert await db.deposits.watchlist(Chain.TRON) == {
            "Tp": Watched("c1", WalletOwner.PLATFORM, None)
        }
        assert await db.deposits.cursor(Chain.ETHEREUM) is None
        assert await db.deposits.page("c1", None, limit=10) == []
        assert await db.events.oldest("c1") is None
    finally:
        await storage.aclose()


async def test_a_0009_database_keeps_its_sends_without_a_spend_and_holds_nothing(
    database: Db,
) -> None:
    """0010 adds the settlements, empty, and a send's spend: NULL for the sends already
    there (none counted, in flight or not), written from the upgrade on."""
    await migrate.upgrade_async(database.url, schema=database.schema, revision="0009")
    columns = "client_id, request_id, fingerprint, state, attempt, created_at, updated_at"
    await _sync(
        database,
        lambda c: [
            c.execute(
                text(
                    "INSERT INTO api_clients (client_id, name, key_hash, enabled_assets, "
                    "fee_payer, asset_fee_payers, disabled, key_generation) "
                    "VALUES ('c1', 'n', 'h', '[]', 'USER', '{}', false, 1)"
                )
            ),
            c.execute(
                text(
                    "INSERT INTO users (client_id, user_id, created_at) "
                    "VALUES ('c1', 'u1', CURRENT_TIMESTAMP)"
                )
            ),
            c.execute(
                text(
                    f"INSERT INTO sends ({columns}) VALUES ('c1', 'r1', 'fp', 'signed', 1, "
                    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            ),
        ],
    )
    assert await migrate.upgrade_async(database.url, schema=database.schema) == HEAD
    storage = SqlStorage(database.url, migrate=False, schema=database.schema)
    try:
        db = autocommit(storage)
        record = await db.sends.get("c1", "r1")
        assert record is not None and record.spend is None
        assert await db.sends.spending("c1", "u1", 2) == 0
        assert await db.settlements.held("c1", "u1", 2) == 0
        assert await db.settlements.listing("c1") == []
        at = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
        sell = Settlement("t1", "c1", "u1", Side.SELL, 2, 2**70, SettlementStatus.RESERVED, at, at)
        assert await db.settlements.add(sell)
        assert await db.settlements.held("c1", "u1", 2) == 2**70
        spend = Spend("u1", 2, 5)
        signed = await db.sends.begin("c1", "r2", "fp", at)
        assert await db.sends.advance(signed, signed.signed(b"raw", "0x2", at, spend=spend))
        assert await db.sends.spending("c1", "u1", 2) == 5
    finally:
        await storage.aclose()
    # a settlement's status is one of the domain's; its user a stored one
    for values in ("('c1', 't2', 'u1', 'sell', 'lost')", "('c1', 't3', 'u9', 'sell', 'reserved')"):
        statement = text(
            "INSERT INTO settlements (client_id, trade_id, user_id, side, status, asset_id, "
            f"units, fee_units, attempt, created_at, updated_at) VALUES {values[:-1]}, 2, "
            "'1', '0', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
        )
        with pytest.raises(IntegrityError):
            await _sync(database, lambda c, statement=statement: c.execute(statement))


async def test_a_0010_database_gets_empty_policy_tables_and_one_destination_per_key(
    database: Db,
) -> None:
    """0011 adds the withdrawal policies' tables, empty (a client without a policy is not
    guarded); the allowlist keeps one destination per (client, chain, address, asset),
    one of any asset (a NULL asset) included, on both databases."""
    await migrate.upgrade_async(database.url, schema=database.schema, revision="0010")
    await _sync(
        database,
        lambda c: c.execute(
            text(
                "INSERT INTO api_clients (client_id, name, key_hash, enabled_assets, "
                "fee_payer, asset_fee_payers, disabled, key_generation) "
                "VALUES ('c1', 'n', 'h', '[]', 'USER', '{}', false, 1)"
            )
        ),
    )
    assert await migrate.upgrade_async(database.url, schema=database.schema) == HEAD
    storage = SqlStorage(database.url, migrate=False, schema=database.schema)
    try:
        db = autocommit(storage)
        assert await db.policies.versions("c1") == []
        assert await db.policies.allowlist("c1") == []
        assert await db.policies.approvals() == []
        assert await db.policies.operators() == []
        at = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
        version = await db.policies.add_version(
            "c1", Policy(), set_at=at, effective_at=at, set_by="cli"
        )
        assert version.version == 1
    finally:
        await storage.aclose()
    row = (
        "INSERT INTO allowlist (client_id, chain, address, asset_id, label, added_at, "
        "usable_at, added_by) VALUES ('c1', 'ETHEREUM', '0xab', {asset}, 'l', "
        "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'cli')"
    )
    for asset in ("NULL", "2"):
        statement = text(row.format(asset=asset))
        await _sync(database, lambda c, statement=statement: c.execute(statement))
        with pytest.raises(IntegrityError):
            await _sync(database, lambda c, statement=statement: c.execute(statement))
    # an approval's status is one of the domain's
    approval = text(
        "INSERT INTO transfer_approvals (id, client_id, request_id, rule, required, "
        "initiated_by, wallet, origin, chain, asset_id, symbol, decimals, amount_units, "
        "recipient, destination, created_at, expires_at, status, approvers) VALUES ('a1', "
        "'c1', 'r1', 'big', 1, 'cli', 'user', 'send', 'ETHEREUM', 2, 'ETH', 18, '1', '0xab', "
        "'other', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'lost', '[]')"
    )
    with pytest.raises(IntegrityError):
        await _sync(database, lambda c: c.execute(approval))


async def test_check_schema_refuses_an_unmigrated_database(database: Db) -> None:
    with pytest.raises(SchemaNotMigrated) as caught:
        await migrate.check_schema_async(database.url, schema=database.schema)
    message = str(caught.value)
    assert "unmigrated" in message and "walletcore db upgrade" in message
    # The production storage refuses to start with the same message; nothing is created.
    storage = SqlStorage(database.url, migrate=False, schema=database.schema)
    with pytest.raises(SchemaNotMigrated):
        await storage.start()
    await storage.aclose()
    assert await _sync(database, _tables) == set()


async def test_check_schema_refuses_a_newer_schema(database: Db) -> None:
    await migrate.upgrade_async(database.url, schema=database.schema)
    await _sync(
        database, lambda c: c.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    )

    with pytest.raises(SchemaTooNew) as caught:
        await migrate.check_schema_async(database.url, schema=database.schema)
    assert "9999" in str(caught.value) and "newer" in str(caught.value)
    # Neither the CLI upgrade nor a sandbox start touches it.
    with pytest.raises(SchemaTooNew):
        await migrate.upgrade_async(database.url, schema=database.schema)
    sandbox = SqlStorage(database.url, migrate=True, schema=database.schema)
    with pytest.raises(SchemaTooNew):
        await sandbox.start()
    await sandbox.aclose()
    assert await migrate.current_async(database.url, schema=database.schema) == "9999"


async def test_schema_errors_are_configuration_errors_without_the_password(
    database: Db,
) -> None:
    from walletcore.secretfiles import ConfigurationError

    if database.kind == "sqlite":
        url = database.url
    else:
        url = database.url.replace("postgres@", "postgres:hunter2@")
    with pytest.raises(SchemaError) as caught:
        await migrate.check_schema_async(url, schema=database.schema)
    assert isinstance(caught.value, ConfigurationError)
    assert "hunter2" not in str(caught.value)


async def test_downgrade_removes_everything_and_upgrade_restores_it(database: Db) -> None:
    from alembic import command

    await migrate.upgrade_async(database.url, schema=database.schema)

    def down(conn: Connection) -> None:
        config = migrate.alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, "base")

    await _sync(database, down)
    assert await _sync(database, _tables) == {"alembic_version"}
    await migrate.upgrade_async(database.url, schema=database.schema)
    assert await _sync(database, _tables) == TABLES


def test_the_sync_functions_run_their_own_loop(sqlite_database: Db) -> None:
    assert migrate.upgrade(sqlite_database.url) == HEAD
    assert migrate.current(sqlite_database.url) == HEAD
    migrate.check_schema(sqlite_database.url)


async def test_the_sync_functions_refuse_a_running_loop(sqlite_database: Db) -> None:
    with pytest.raises(RuntimeError, match="_async"):
        migrate.current(sqlite_database.url)
    assert off_loop(lambda: migrate.current(sqlite_database.url)) is None
