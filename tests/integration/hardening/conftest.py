"""Fixtures of the hardening tests: real `walletcore serve` processes.

- `sqlite_server`: the default sandbox profile (the SQL repo on an SQLite file under
  WALLETCORE_HOME), one granian worker: every request meets the one primed worker.
- `pg_server`: the same on PostgreSQL (WALLETCORE_REPO=sql, WALLETCORE_DATABASE_URL to a
  database created for this session on the test server, `pg_test_url()`, and dropped
  afterwards), two granian workers, each primed.
- `served`: each of the two in turn (the PostgreSQL one marked `postgres`).

Both are provisioned alike (`hardening_support.provision`): api clients A (fee payer
USER), B (PLATFORM) with platform wallets, C without one; A and B with a funded user, trades
and sends. Session-scoped: the servers start once (a few seconds each) and are stopped at
the end; their logs stay under the session's temporary directory.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.register_assert_rewrite("hardening_support")

from hardening_support import Server, provision

from walletcore_sql.testing import create_database, drop_database


@pytest.fixture(scope="session")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server("sqlite", tmp_path_factory.mktemp("hardening-sqlite"), workers=1)
    try:
        provision(server)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database, dropped after the session."""
    url, name = create_database("wch")
    try:
        yield url
    finally:
        drop_database(name)


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory, pg_database: str) -> Iterator[Server]:
    server = Server(
        "postgres",
        tmp_path_factory.mktemp("hardening-pg"),
        workers=2,
        # the background jobs (prices, settlement) in the HTTP workers, as on one machine:
        # the hardening tests start no `walletcore worker` (the smoke test does)
        extra_env={
            "WALLETCORE_REPO": "sql",
            "WALLETCORE_DATABASE_URL": pg_database,
            "WALLETCORE_JOBS": "inprocess",
        },
    )
    try:
        provision(server, postgres=True)
        yield server
    finally:
        server.stop()


@pytest.fixture(
    scope="session", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(request: pytest.FixtureRequest) -> Server:
    """Each provisioned server in turn (tests using it run on SQLite, then PostgreSQL)."""
    server: Server = request.getfixturevalue(f"{request.param.replace('postgres', 'pg')}_server")
    return server


@pytest.fixture
def server(served: Server) -> Server:
    """`served`, started again if an earlier test killed it, every worker primed."""
    served.ensure_running()
    return served
