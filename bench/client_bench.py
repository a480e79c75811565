"""What the Python client (`walletcore_client`) adds to a call, against a served sandbox
(`walletcore serve`, one worker, SQLite) over loopback HTTP.

The baseline does the same work by hand with the same httpx client: the same POST with the
cached bearer token, the envelope parsed with `parse_float=Decimal` and the result read as
the client reads it (a `Decimal` balance; the `/trade` object's amounts as `Decimal`, its
times as `datetime`). The two are interleaved call by call, so the machine's load falls on
both alike.

    .venv/bin/python bench/client_bench.py [--rounds 2000] [--concurrency 50]

Prints, per operation, the median and 90th percentile in microseconds of the client and of
the baseline and their ratio; then the wall time of `--concurrency` concurrent calls of a
fresh `AsyncClient` (its one `/auth` included) against the same calls by hand after one
`/auth`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "client"))

import httpx
from client_support import PASSWORD, Sandbox

from walletcore_client import AsyncClient, Client


def by_hand(http: httpx.Client, token: str) -> Callable[[str, dict[str, Any]], Any]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(path: str, body: dict[str, Any]) -> Any:
        answer = http.post(path, content=json.dumps(body).encode(), headers=headers)
        answer.raise_for_status()
        return json.loads(answer.content, parse_float=Decimal)["result"]

    return call


def trade_by_hand(result: dict[str, Any]) -> dict[str, Any]:
    """The `/trade` object as the client reads it: amounts `Decimal`, times `datetime`."""
    read = dict(result)
    for name in ("cryptoAmount", "fiatAmount", "price"):
        read[name] = Decimal(read[name])
    for name in ("createdAt", "approvedAt", "completedAt"):
        if read.get(name) is not None:
            read[name] = datetime.fromisoformat(read[name])
    return read


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(sandbox: Sandbox, client_id: str, api_key: str, rounds: int) -> None:
    client = Client(sandbox.base_url, client_id, api_key)
    wallet = client.create(PASSWORD)
    user = wallet.userId
    sandbox.fund("ETHEREUM", wallet.addresses["ETHEREUM"], 2, "2")
    trade = client.sell(user, 2, crypto_amount="0.1")
    http = httpx.Client(base_url=sandbox.base_url, timeout=10)
    token = client.auth().token
    call = by_hand(http, token)
    cases: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "/balance": (
            lambda: client.balance(user, 2),
            lambda: Decimal(call("/balance", {"userId": user, "assetId": 2})),
        ),
        "/trade": (
            lambda: client.trade(user, trade.tradeId),
            lambda: trade_by_hand(call("/trade", {"userId": user, "tradeId": trade.tradeId})),
        ),
    }
    for name, (with_client, baseline) in cases.items():
        assert with_client() is not None and baseline() is not None
        mine: list[float] = []
        theirs: list[float] = []
        for n in range(rounds + 50):  # the first 50 warm up, uncounted
            for fn, out in ((with_client, mine), (baseline, theirs)):
                started = time.perf_counter()
                fn()
                if n >= 50:
                    out.append((time.perf_counter() - started) * 1e6)
        ratio = statistics.median(mine) / statistics.median(theirs)
        print(
            f"{name:10} client p50 {statistics.median(mine):7.0f} us p90 "
            f"{percentile(mine, 0.9):7.0f} us | by hand p50 {statistics.median(theirs):7.0f} "
            f"us p90 {percentile(theirs, 0.9):7.0f} us | {ratio:.2f}x"
        )
    http.close()
    client.close()


async def concurrent(sandbox: Sandbox, client_id: str, api_key: str, calls: int) -> None:
    async with AsyncClient(sandbox.base_url, client_id, api_key) as warm:
        user = (await warm.create(PASSWORD)).userId
    for _ in range(3):
        started = time.perf_counter()
        async with AsyncClient(sandbox.base_url, client_id, api_key) as api:
            await asyncio.gather(*(api.balance(user, 2) for _ in range(calls)))
        with_client = time.perf_counter() - started

        started = time.perf_counter()
        async with httpx.AsyncClient(base_url=sandbox.base_url, timeout=10) as http:
            auth = await http.post("/auth", headers={"x-client-id": client_id, "x-api-key": api_key})
            token = auth.json()["result"]["token"]
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            body = json.dumps({"userId": user, "assetId": 2}).encode()

            async def one() -> Decimal:
                answer = await http.post("/balance", content=body, headers=headers)
                return Decimal(json.loads(answer.content, parse_float=Decimal)["result"])

            await asyncio.gather(*(one() for _ in range(calls)))
        baseline = time.perf_counter() - started
        print(
            f"{calls} concurrent /balance with one /auth: client {with_client * 1e3:6.1f} ms, "
            f"by hand {baseline * 1e3:6.1f} ms ({with_client / baseline:.2f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        sandbox = Sandbox(Path(folder))
        sandbox.start()
        try:
            created = sandbox.cli("clients", "create", "--name", "Client bench")
            client_id, api_key = created["clientId"], created["apiKey"]
            measure(sandbox, client_id, api_key, args.rounds)
            asyncio.run(concurrent(sandbox, client_id, api_key, args.concurrency))
        finally:
            sandbox.stop()


if __name__ == "__main__":
    main()
