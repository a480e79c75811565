"""A production smoke test a deployer could run: the production profile on real parts
(PostgreSQL, anvil, bitcoind, the loopback Solana and Tron nodes and market servers), two
HTTP instances and a worker as separate processes, and a scripted session over HTTP that
calls every endpoint of the contract; then what the deployment did is checked."""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from decimal import Decimal
from typing import Any

import httpx
import pytest
from deployment import (
    PRICE_INTERVAL,
    Deployment,
    environment,
    query,
    start_nodes,
    wait_for,
)

from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.testing.anvil import find_anvil
from walletcore_chains.testing.bitcoind import find_bitcoind
from walletcore_sql.testing import create_database, drop_database

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        find_anvil() is None or find_bitcoind() is None,
        reason="needs anvil and bitcoind: run `python3 dev.py test` (it installs both)",
    ),
]
PASSWORD = "smoke test password, long enough"
OUTSIDE = {
    Chain.BITCOIN: "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080",
    Chain.ETHEREUM: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.TRON: "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7",
    Chain.SOLANA: "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T",
}
BTC, ETH, TRX, SOL = (CONTRACT_CATALOG.native_asset(c).id for c in (Chain.BITCOIN, Chain.ETHEREUM,
                                                   Chain.TRON, Chain.SOLANA))  # fmt: skip


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    home = tmp_path_factory.mktemp("deployment")
    home.chmod(0o700)
    database, name = create_database("wcsmoke")
    with ExitStack() as stack:
        stack.callback(drop_database, name)
        nodes = start_nodes(stack)
        made = Deployment(home=home, env=environment(home, database, nodes), **nodes)
        stack.callback(made.stop_all)
        made.cli("db", "upgrade")
        yield made


class Client:
    """An api client of the deployment, signed in on every HTTP instance."""

    def __init__(self, deployment: Deployment, http: httpx.AsyncClient) -> None:
        self.deployment, self.http = deployment, http
        self.tokens: dict[str, str] = {}
        self.calls = 0

    async def sign_in(self, client_id: str, api_key: str, urls: list[str]) -> None:
        for url in urls:
            answer = await self.http.post(
                f"{url}/auth", headers={"x-client-id": client_id, "x-api-key": api_key}
            )
            assert answer.status_code == 200, answer.text
            self.tokens[url] = answer.json()["result"]["token"]

    async def post(self, path: str, body: Any = None, **headers: str) -> Any:
        """The call on the next instance in turn (a load balancer's round robin)."""
        urls = list(self.tokens)
        url = urls[self.calls % len(urls)]
        self.calls += 1
        sent = {"Authorization": f"Bearer {self.tokens[url]}", **headers}
        answer = await self.http.post(f"{url}{path}", json=body, headers=sent)
        assert answer.status_code == 200, f"{path}: {answer.status_code} {answer.text}"
        return answer.json()["result"]


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        yield client


async def settled(
    api: Client, body: dict[str, Any], deployment: Deployment, path: str = "/txid"
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        row = await api.post(path, body)
        if row["status"] == "pending":
            deployment.advance_chains()
            return None
        return row  # type: ignore[no-any-return]

    found: dict[str, Any] = await wait_for(check, 60, f"the send {body['txHash']}")
    return found


async def test_a_scripted_session_over_every_endpoint(
    deployment: Deployment, http: httpx.AsyncClient
) -> None:
    issued = deployment.cli("clients", "create", "--name", "smoke")
    client_id, api_key = issued["clientId"], issued["apiKey"]
    deployment.cli("platform", "provision", "--client-id", client_id)
    first = deployment.serve("http-1")  # before any worker: it says that none runs, and why
    assert "warning: no worker: no `walletcore worker` has ever run" in first.log.read_text()
    unready = (await http.get(f"{first.url}/health/ready")).json()
    assert unready["status"] == "unavailable", unready
    assert unready["checks"]["jobs"]["status"] == "warning", unready
    assert unready["checks"]["jobs"]["error"].startswith("no worker: "), unready
    assert unready["checks"]["prices"]["error"] == "no prices", unready
    deployment.spawn("worker-1", "worker")
    second = deployment.serve("http-2")
    api = Client(deployment, http)
    await api.sign_in(client_id, api_key, [first.url, second.url])

    async def priced() -> bool:  # the worker's first refresh, shared by both instances
        return bool((await api.post("/prices"))["BTC"]["USD"] == 100000.0)

    await wait_for(priced, 30, "the first price refresh")

    async def ready() -> bool:  # every node at the network's chain id, a worker alive
        answer = await http.get(f"{first.url}/health/ready")
        return answer.status_code == 200 and answer.json()["checks"]["jobs"]["status"] == "ok"

    await wait_for(ready, 30, "readiness with a worker")
    config = await api.post("/config")
    assert config["feePayer"] in ("USER", "PLATFORM") and config["assets"]

    created = await api.post("/create", {"password": PASSWORD})
    user, addresses = created["userId"], created["addresses"]
    assert set(addresses) == {c.value for c in CONTRACT_CHAINS}
    assert (await api.post("/addresses", {"userId": user}))["addresses"] == addresses
    await api.post("/extend", {"userId": user, "password": PASSWORD})

    for asset_id, amount in ((BTC, "0.5"), (ETH, "2"), (TRX, "100"), (SOL, "5")):
        await deployment.fund(addresses[_chain(asset_id).value], asset_id, amount)
        balance = await api.post("/balance", {"userId": user, "assetId": asset_id})
        assert Decimal(balance) == Decimal(amount), (asset_id, balance)
        info = await api.post("/info", {"userId": user, "assetId": asset_id})
        assert info
        await api.post("/transactions", {"userId": user, "assetId": asset_id})

    sends = {}
    for asset_id, amount in ((ETH, "0.5"), (BTC, "0.1"), (TRX, "10"), (SOL, "1")):
        chain = _chain(asset_id)
        body = {"userId": user, "assetId": asset_id, "recipient": OUTSIDE[chain], "amount": amount}
        fee = await api.post("/fee", body)
        assert fee is not None
        sent = await api.post(
            "/send", {**body, "password": PASSWORD}, **{"X-Request-Id": f"smoke-{asset_id}"}
        )
        replay = await api.post(
            "/send", {**body, "password": PASSWORD}, **{"X-Request-Id": f"smoke-{asset_id}"}
        )
        assert replay["txHash"] == sent["txHash"]  # one transfer per X-Request-Id
        sends[asset_id] = sent["txHash"]
    for asset_id, tx_hash in sends.items():
        row = await settled(api, {"userId": user, "assetId": asset_id, "txHash": tx_hash},
                            deployment)  # fmt: skip
        assert row["status"] == "success", (asset_id, row)

    sold = await api.post("/sell", {"userId": user, "assetId": BTC, "cryptoAmount": "0.01"})
    done = await api.post("/trade/approve", {"userId": user, "tradeId": sold["tradeId"]})
    assert done["status"] == "completed" and done["reference"]
    bought = await api.post("/order", {"userId": user, "assetId": ETH, "fiatAmount": "100"})
    bought = await api.post("/trade/approve", {"userId": user, "tradeId": bought["tradeId"]})
    assert bought["status"] == "completed"
    cancelled = await api.post("/sell", {"userId": user, "assetId": ETH, "cryptoAmount": "0.1"})
    cancelled = await api.post("/trade/cancel", {"userId": user, "tradeId": cancelled["tradeId"]})
    assert cancelled["status"] == "cancelled"
    polled = await api.post("/trade", {"userId": user, "tradeId": sold["tradeId"]})
    assert polled["status"] == "completed"
    listed = await api.post("/trades", {"userId": user})
    assert [t["tradeId"] for t in listed][:3] == [
        cancelled["tradeId"],
        bought["tradeId"],
        sold["tradeId"],
    ]
    assert deployment.exchange.placed == 2  # each fill placed once
    await the_worker_is_replaced_mid_run(api, deployment, user)

    platform = await api.post("/platform/addresses")
    eth_platform = platform["ETHEREUM"]  # chain -> address
    await deployment.fund(eth_platform, ETH, "1")
    assert Decimal(await api.post("/platform/balance", {"assetId": ETH})) == 1
    await api.post("/platform/info", {"assetId": ETH})
    await api.post("/platform/transactions", {"assetId": ETH})
    body = {"assetId": ETH, "recipient": OUTSIDE[Chain.ETHEREUM]}
    assert Decimal(await api.post("/platform/fee", body)) > 0
    sent = await api.post(
        "/platform/send", {**body, "amount": "0.25"}, **{"X-Request-Id": "smoke-platform"}
    )
    row = await settled(
        api, {"assetId": ETH, "txHash": sent["txHash"]}, deployment, "/platform/txid"
    )
    assert row["status"] == "success"
    await every_send_followed_once(deployment, expected=len(sends) + 1)


def _chain(asset_id: int) -> Chain:
    return CONTRACT_CATALOG.asset_by_id(asset_id).chain


async def the_worker_is_replaced_mid_run(api: Client, deployment: Deployment, user: str) -> None:
    """An order the exchange works slowly is approved (`approved`); the worker is killed
    (SIGKILL) and another started; the new worker settles the trade, once, with no client
    polling, and prices go on being refreshed once per interval for the whole deployment."""
    started = time.monotonic()
    refreshes_before = deployment.gecko.count("/api/v3/simple/price")
    deployment.exchange.hold_orders(1)
    quoted = await api.post("/sell", {"userId": user, "assetId": BTC, "cryptoAmount": "0.02"})
    working = await api.post("/trade/approve", {"userId": user, "tradeId": quoted["tradeId"]})
    assert working["status"] == "approved"
    [worker] = [p for p in deployment.processes if p.name == "worker-1"]
    worker.stop(signal.SIGKILL)
    deployment.spawn("worker-2", "worker")
    deployment.exchange.tick()  # the exchange fills it

    async def settled_by_the_worker() -> bool:
        listed = await api.post("/trades", {"userId": user})  # a list never asks the venue
        return bool(
            listed[0]["tradeId"] == quoted["tradeId"] and listed[0]["status"] == "completed"
        )

    await wait_for(settled_by_the_worker, 60, "the new worker to settle the trade")
    assert deployment.exchange.placed == 3  # the held order, placed once

    async def refreshed_again() -> bool:
        return deployment.gecko.count("/api/v3/simple/price") > refreshes_before + 1

    await wait_for(refreshed_again, 30, "the new worker to refresh the prices")
    elapsed = time.monotonic() - started
    refreshes = deployment.gecko.count("/api/v3/simple/price") - refreshes_before
    # one refresh per interval for the whole deployment (two HTTP instances, two workers
    # over time), with one interval of slack for the periods at either end
    assert refreshes <= elapsed / PRICE_INTERVAL + 2, (refreshes, elapsed)


async def every_send_followed_once(deployment: Deployment, expected: int) -> None:
    """The worker followed each broadcast send to `success`, once: one `send.settle` entry
    per send, whoever polled `/txid` meanwhile."""
    url = deployment.env["WALLETCORE_DATABASE_URL"]

    async def all_final() -> bool:
        rows = await query(url, "SELECT chain_status FROM sends WHERE chain_status IS NOT NULL")
        return len(rows) == expected and all(r["chain_status"] == "success" for r in rows)

    await wait_for(all_final, 60, "the worker to follow every send to success")
    entries = await query(
        url,
        "SELECT target, count(*) AS n FROM audit_log WHERE action = 'send.settle' GROUP BY target",
    )
    assert len(entries) == expected and all(e["n"] == 1 for e in entries), entries
