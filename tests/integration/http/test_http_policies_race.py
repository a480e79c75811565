"""Withdrawal policies under a race, over real HTTP (docs/policies.md): fifty `/send`s of one
api client, each with its own X-Request-Id, from several users at once, against a velocity
limit per client, served by two `walletcore serve` processes on one database (SQLite, then
PostgreSQL) and the sandbox chain. The client's policy decides one transfer after the other
across the processes (`Policies.check` under the client's lock):

- exactly floor(limit / amount) sends are signed and sent; every other one is a `403`
  naming the rule, with nothing signed (its send record holds no transaction);
- what reached the chain (the sandbox ledger) and what the send records hold sum to at
  most the limit, and each is one of the answered transactions;
- every refusal is in the audit log (`policy.decide`, outcome `403`, target the rule).

The limit in the asset's units, and in a fiat at the current price (the sandbox's ETH
moves ±3 % around its base: the figures are chosen so that the count is the same wherever
in that band the price is).

The policy is set through the `Policies` service of a container on the served database,
as the operator's command does.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from walletcore.clock import SystemClock
from walletcore.container import Container, create_container
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_sandbox.faucet import fund
from walletcore_sandbox.ledger import DATA_FILE as LEDGER_FILE
from walletcore_sandbox.ledger import SandboxLedger
from walletcore_sql.testing import create_database, drop_database

sys.path.insert(0, str(Path(__file__).parents[1] / "hardening"))
if "hardening_support" not in sys.modules:
    pytest.register_assert_rewrite("hardening_support")

from hardening_support import RECIPIENT, Client, Server

pytestmark = pytest.mark.sends

ETH = 2
ETH_ASSET = CONTRACT_CATALOG.asset_by_id(ETH)
USERS = 5
SENDS = 50
AMOUNT = Decimal("0.1")
PASSWORD = "race the policy 1"


@dataclass
class Served:
    """Two served processes (one granian worker each) on one WALLETCORE_HOME and database,
    and the settings of a container (the operator's) on that database."""

    servers: tuple[Server, Server]
    settings: Settings

    @property
    def first(self) -> Server:
        return self.servers[0]


def _serve(name: str, root: Path, extra_env: dict[str, str]) -> Iterator[Served]:
    env = {"WALLETCORE_JOBS": "off", **extra_env}
    first = Server(f"{name}-1", root, workers=1, extra_env=env)
    second = Server(f"{name}-2", root, workers=1, extra_env=env)
    try:
        if "WALLETCORE_DATABASE_URL" in extra_env:
            first.cli_batch([["db", "upgrade"]])
        with ThreadPoolExecutor(2) as starting:  # both at once (migrations queue on a lock)
            list(starting.map(Server.start, (first, second)))
        url = extra_env.get("WALLETCORE_DATABASE_URL")
        settings = Settings(
            home=first.home, repo="sql", database_url=SecretStr(url) if url else None
        )
        yield Served((first, second), settings)
    finally:
        with ThreadPoolExecutor(2) as stopping:
            list(stopping.map(Server.stop, (first, second)))


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp(f"policies-race-{request.param}")
    if request.param == "sqlite":
        yield from _serve("sqlite", root, {})
        return
    url, name = create_database("wcrace")
    try:
        yield from _serve(
            "postgres",
            root,
            {
                "WALLETCORE_REPO": "sql",
                "WALLETCORE_DATABASE_URL": url,
                # 8 connections a process: the fifty sends queue for them rather than take
                # most of the server's 100, shared with the tests running beside this one
                "WALLETCORE_DB_POOL_SIZE": "8",
            },
        )
    finally:
        drop_database(name)


@pytest.fixture
async def operator(served: Served) -> AsyncIterator[Container]:
    """The operator's container on the served database, its storage closed after."""
    container = create_container(served.settings)
    yield container
    await container.storage().aclose()


async def new_client(
    served: Served, operator: Container, name: str
) -> tuple[Client, dict[str, str]]:
    """An api client (fee payer USER) with `USERS` users (made over HTTP, on both
    processes), each holding 2 ETH: the client, and its users' ETHEREUM addresses by id."""
    issued = await operator.auth().create_client(name)
    client = Client(name, issued.client.client_id, issued.api_key, "USER", password=PASSWORD)
    for server in served.servers:
        server.clients[name] = client
    token = client.token(served.first.base)
    async with httpx.AsyncClient(timeout=120) as http:

        async def create(server: Server) -> tuple[str, str]:
            answer = await http.post(
                f"{server.base}/create",
                json={"password": PASSWORD},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert answer.status_code == 200, answer.text
            result = answer.json()["result"]
            return result["userId"], result["addresses"]["ETHEREUM"]

        made = await asyncio.gather(
            *(create(served.servers[i % len(served.servers)]) for i in range(USERS))
        )
    users = dict(made)
    for address in users.values():
        await fund(
            operator.settings(),
            operator.gateways(),
            operator.catalog(),
            chain="ETHEREUM",
            address=address,
            asset_id=ETH,
            amount="2",
        )
    return client, users


async def race(
    served: Served, client: Client, users: list[str]
) -> list[tuple[str, httpx.Response]]:
    """`SENDS` sends of `AMOUNT` ETH at once, the users in turn, every other one to the
    second process: (X-Request-Id, answer) of each."""
    token = client.token(served.first.base)
    limits = httpx.Limits(max_connections=SENDS, max_keepalive_connections=SENDS)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:

        async def send(index: int) -> tuple[str, httpx.Response]:
            request_id = f"race-{index}-{uuid.uuid4().hex[:8]}"
            server = served.servers[index % len(served.servers)]
            body = {
                "userId": users[index % len(users)],
                "assetId": ETH,
                "recipient": RECIPIENT,
                "amount": str(AMOUNT),
                "password": PASSWORD,
            }
            headers = {"Authorization": f"Bearer {token}", "X-Request-Id": request_id}
            answer = await http.post(f"{server.base}/send", json=body, headers=headers)
            return request_id, answer

        return await asyncio.gather(*(send(index) for index in range(SENDS)))


async def on_chain(home: Path, senders: set[str]) -> dict[str, int]:
    """The sandbox chain's transactions sent from `senders`: tx hash -> the units that left
    the sender (a user's ETH send pays its fee out of the amount)."""
    ledger = SandboxLedger(
        home / LEDGER_FILE, SystemClock(), lambda *_: False, catalog=CONTRACT_CATALOG
    )
    try:
        return {
            tx.tx_hash: tx.amount_units + (tx.fee_units if tx.fee_payer in (None, tx.sender) else 0)
            for tx in await ledger.transactions()
            if tx.sender in senders
        }
    finally:
        await ledger.aclose()


def units(amount: Decimal) -> int:
    return int(amount.scaleb(ETH_ASSET.decimals))


async def check_race(
    served: Served,
    operator: Container,
    client: Client,
    users: dict[str, str],
    *,
    rule: str,
    allowed: int,
    limit_units: int | None,
) -> dict[str, Any]:
    """Race the sends and check every outcome; the figures of the run."""
    started = time.monotonic()
    answers = await race(served, client, list(users))
    elapsed = time.monotonic() - started
    sent = {rid: a.json()["result"]["txHash"] for rid, a in answers if a.status_code == 200}
    refused = [(rid, a) for rid, a in answers if a.status_code == 403]
    others = [(rid, a.status_code, a.text) for rid, a in answers if a.status_code not in (200, 403)]
    assert not others, others
    assert len(sent) == allowed, (len(sent), allowed)
    assert len(refused) == SENDS - allowed
    for _, answer in refused:
        body = answer.json()
        assert set(body) == {"message", "error", "requestId"}, body
        assert body["error"] == "403"
        assert body["message"].startswith(f"Transfer refused by withdrawal policy rule {rule}: ")
        assert "would take the total over" in body["message"]

    chain = await on_chain(served.first.home, set(users.values()))
    assert set(chain) == set(sent.values())
    assert sum(chain.values()) == allowed * units(AMOUNT)
    if limit_units is not None:
        assert sum(chain.values()) <= limit_units
    async with operator.storage().read() as unit:
        records = {rid: await unit.sends.get(client.client_id, rid) for rid, _ in answers}
        audit = await unit.audit.newest(limit=20 * SENDS)
    signed = {rid: r.tx_hash for rid, r in records.items() if r is not None and r.raw_tx}
    assert signed == sent  # the refused ones hold no transaction
    spent = [r.spend for r in records.values() if r is not None and r.raw_tx]
    assert sum(s.units for s in spent if s is not None) == sum(chain.values())
    for rid, _ in refused:
        record = records[rid]
        assert record is None or (record.tx_hash is None and record.raw_tx is None), record
    decisions = [
        e for e in audit if e.client_id == client.client_id and e.action == "policy.decide"
    ]
    refusals = {e.request_id for e in decisions if e.outcome == "403" and e.target == rule}
    assert refusals == {answer.json()["requestId"] for _, answer in refused}
    allowances = {e.request_id for e in decisions if e.outcome == "ok"}
    assert allowances == {a.json()["requestId"] for _, a in answers if a.status_code == 200}
    return {
        "sent": len(sent),
        "refused": len(refused),
        "total": Decimal(sum(chain.values())).scaleb(-ETH_ASSET.decimals),
        "seconds": round(elapsed, 2),
    }


async def test_fifty_sends_racing_a_velocity_limit_in_eth_send_exactly_ten(
    served: Served, operator: Container
) -> None:
    client, users = await new_client(served, operator, f"Race ETH {uuid.uuid4().hex[:6]}")
    limit = Decimal("1.0")
    await operator.policies().set_policy(
        client.client_id,
        {
            "rules": [
                {
                    "name": "eth-velocity",
                    "wallet": "user",
                    "action": "deny",
                    "velocity": {
                        "amount": str(limit),
                        "assetId": ETH,
                        "windowSeconds": 600,
                        "per": "client",
                    },
                },
                {"name": "the-rest", "wallet": "user", "action": "allow"},
            ],
            "default": "deny",
        },
        set_by="test",
    )
    figures = await check_race(
        served,
        operator,
        client,
        users,
        rule="eth-velocity",
        allowed=int(limit / AMOUNT),
        limit_units=units(limit),
    )
    assert figures["total"] == limit
    print(f"\nvelocity {limit} ETH per client in 600 s, {SENDS} x {AMOUNT}: {figures}")


async def test_fifty_sends_racing_a_fiat_velocity_limit_send_what_the_price_allows(
    served: Served, operator: Container
) -> None:
    """1000 EUR per client: 0.1 ETH is 286 to 304 EUR in the sandbox's band (3200 USD
    ±3 %, 0.92 EUR per USD), so three sends fit and a fourth never does."""
    client, users = await new_client(served, operator, f"Race EUR {uuid.uuid4().hex[:6]}")
    await operator.policies().set_policy(
        client.client_id,
        {
            "rules": [
                {
                    "name": "eur-velocity",
                    "wallet": "user",
                    "action": "deny",
                    "velocity": {
                        "amount": "1000",
                        "fiat": "EUR",
                        "windowSeconds": 600,
                        "per": "client",
                    },
                },
                {"name": "the-rest", "wallet": "user", "action": "allow"},
            ],
        },
        set_by="test",
    )
    figures = await check_race(
        served, operator, client, users, rule="eur-velocity", allowed=3, limit_units=None
    )
    prices = served.first.post("/prices", client=client.name)
    eth_eur = Decimal(str(prices.json()["result"]["ETH"]["EUR"]))
    assert figures["total"] * eth_eur <= Decimal(1000), eth_eur
    figures["eur"] = figures["total"] * eth_eur
    print(f"\nvelocity 1000 EUR per client in 600 s, {SENDS} x {AMOUNT} ETH: {figures}")
