#!/usr/bin/env python3
"""What the withdrawal policy costs a send: `/send` through the services with the policy's
decision, against the same send with the decision skipped, in one run.

    .venv/bin/python bench/policy_bench.py [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]
        [--sqlite] [--sends 300] [--rounds 3] [--history 2000]

On a throwaway PostgreSQL database (migrated, dropped at the end), or a fresh SQLite file
with `--sqlite`: one container as `walletcore serve` builds it (repo `sql`, sandbox prices
and chains), three api clients with 8 funded users each:
- `skipped`: `Policies.check` replaced by a no-op for this client: the send as it was
  before policies (the baseline: the same plan, signature, storage and broadcast);
- `no policy`: the decision runs (the client's lock, its versions read, the transfer
  counted, the `policy.decide` entry) and allows `(no policy)`;
- `policy`: a seven-rule policy whose last rules decide: an allowlist check (the recipient
  is another user's wallet: `own`), a per-transfer limit in USD, a per-user velocity limit
  in USD over a day with `--history` earlier counts of the client in its window, and a
  per-client one in the coin.
One send at a time (latency): p50 and p90 per variant and the ratios of the medians.
A program printing figures, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from http_bench import DEFAULT_PG_URL, pg_create_database, pg_drop_database, pg_urls

PASSWORD = "bench password 1"

POLICY = {
    "default": "deny",
    "rules": [
        {"name": "no-platform", "wallet": "platform", "action": "deny"},
        {"name": "no-tokens", "wallet": "user", "action": "deny", "assetIds": [21, 22]},
        {
            "name": "unknown-destination",
            "wallet": "user",
            "action": "deny",
            "destinations": ["other"],
        },
        {
            "name": "max-1m-usd",
            "wallet": "user",
            "action": "deny",
            "over": {"amount": "1000000", "fiat": "USD"},
        },
        {
            "name": "daily-user",
            "wallet": "user",
            "action": "deny",
            "velocity": {"amount": "100000000", "fiat": "USD", "windowSeconds": 86400},
        },
        {
            "name": "hourly-client",
            "wallet": "user",
            "action": "deny",
            "velocity": {"amount": "1000000", "assetId": 1, "windowSeconds": 3600, "per": "client"},
        },
        {"name": "users", "wallet": "user", "action": "allow"},
    ],
}


def say(text: str) -> None:
    print(text, flush=True)


async def client_with_users(container: Any, name: str) -> tuple[Any, list[tuple[str, str]]]:
    """An api client and 8 users funded on the sandbox chain: (user id, BITCOIN address)."""
    from walletcore.domain.ids import new_id
    from walletcore.services.context import Caller
    from walletcore.testing import CONTRACT_CATALOG

    issued = await container.auth().create_client(name, assets=[1])
    btc = CONTRACT_CATALOG.asset_by_id(1)
    ledger = container.gateways()[btc.chain]
    users = []
    for _ in range(8):
        made = await container.wallets().create(Caller(issued.client, new_id()), password=PASSWORD)
        users.append((made.user_id, made.addresses[btc.chain]))
        await ledger.fund(made.addresses[btc.chain], btc, 10**20)
    return issued.client, users


async def history(container: Any, client: Any, users: list[tuple[str, str]], count: int) -> None:
    """`count` earlier transfers of the client in the velocity windows."""
    from walletcore.domain.assets import Chain
    from walletcore.domain.ids import new_id
    from walletcore.domain.policies import Origin, Usage, WalletKind

    now = container.clock().now()
    async with container.storage().write() as unit:
        for n in range(count):
            await unit.policies.count(
                Usage(
                    client.client_id,
                    new_id(),
                    WalletKind.USER,
                    Origin.SEND,
                    users[n % len(users)][0],
                    Chain.BITCOIN,
                    1,
                    1000,
                    now - timedelta(seconds=n % 3000),
                )
            )


async def sends(
    container: Any, client: Any, users: list[tuple[str, str]], count: int
) -> list[float]:
    from walletcore.domain.ids import new_id
    from walletcore.services.context import Caller

    service = container.sends()
    took = []
    for i in range(count):
        uid, _ = users[i % len(users)]
        _, to = users[(i + 1) % len(users)]
        key = new_id()
        started = time.perf_counter()
        await service.send(
            Caller(client, key),
            request_id=key,
            user_id=uid,
            asset_id=1,
            recipient=to,
            amount="0.0001",
            password=PASSWORD,
        )
        took.append(time.perf_counter() - started)
    return took


def ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace) -> None:
    from walletcore.container import create_container
    from walletcore.ports import Lifecycle
    from walletcore.settings import Settings
    from walletcore_sql import migrate

    home = tempfile.TemporaryDirectory(prefix="walletcore-policybench-")
    name = None
    if args.sqlite:
        url = f"sqlite+aiosqlite:///{home.name}/bench.db"
    else:
        name = await pg_create_database(args.pg_url, "walletcore_policybench")
        if name is None:
            raise SystemExit(f"PostgreSQL unreachable at {args.pg_url}")
        url, _ = pg_urls(args.pg_url, name)
    os.environ.setdefault("WALLETCORE_JOBS", "off")
    try:
        await migrate.upgrade_async(url)
        settings = Settings(home=Path(home.name), repo="sql", database_url=url, prices="sandbox")
        container = create_container(settings)
        for provider in (container.storage, container.prices):
            adapter = provider()
            if isinstance(adapter, Lifecycle):
                await adapter.start()
        skipped = await client_with_users(container, "bench-skipped")
        bare = await client_with_users(container, "bench-no-policy")
        guarded = await client_with_users(container, "bench-policy")
        await container.policies().set_policy(guarded[0].client_id, POLICY, set_by="bench")
        await history(container, *guarded, args.history)
        policies = container.policies()
        real_check = policies.check

        async def check(client_id: str, *rest: Any, **kw: Any) -> Any:
            if client_id == skipped[0].client_id:
                return None
            return await real_check(client_id, *rest, **kw)

        policies.check = check
        results: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for label, (client, users) in (
                ("skipped", skipped),
                ("no policy", bare),
                ("policy", guarded),
            ):
                results.setdefault(label, []).extend(
                    await sends(container, client, users, args.sends)
                )
        say(
            f"storage: {'SQLite' if args.sqlite else 'PostgreSQL'}; {args.rounds} rounds of "
            f"{args.sends} sends each, one at a time; {args.history} earlier counts in the "
            "policy's windows"
        )
        base = statistics.median(results["skipped"])
        for label, took in results.items():
            say(
                f"/send, {label}: p50 {ms(took, 0.5):.2f} ms p90 {ms(took, 0.9):.2f} ms; "
                f"/ skipped p50 {statistics.median(took) / base:.2f}x"
            )
    finally:
        if name is not None:
            await pg_drop_database(args.pg_url, name)
        home.cleanup()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument("--sends", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--history", type=int, default=2000)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
