"""RPC calls per tracked transaction per minute: what following transfers to their end
costs a deployment's nodes (docs/transfers.md).

N user sends are made through the real send service (SQL storage on SQLite, sealed keys)
on a real node; each node sits behind a counting HTTP proxy on loopback. The follow job
(`Jobs.follow_sends`, as a worker runs it) is then run through the lifecycle's situations,
one run each, and the calls its run made are divided by the sends it followed:

- `pending`: in the mempool (pool), not stuck yet;
- `stuck -> bump` (EVM): pending past the stuck time, the next rung broadcast;
- `dropped -> rebroadcast`: the node lost them; the same bytes sent again;
- `mined, below depth` and `final`: mined, then settled at the chain's depth.

Per minute = per run x runs a minute at the default `WALLETCORE_JOBS_FOLLOW_SECONDS` (15 s).
Chains: ETHEREUM on anvil (`--no-mining`), TRON on the loopback TRON node (held pool).

    .venv/bin/python bench/follow_bench.py [--sends 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import tempfile
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable
from email.message import Message
from pathlib import Path
from typing import Any

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.services.context import Caller
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore.testing.http import LoopbackHttpServer
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.sealing import KdfParams
from walletcore_sql.engine import sqlite_url

FOLLOW_SECONDS = 15.0
PASSWORD = "correct horse battery"


class CountingProxy(LoopbackHttpServer):
    """Forwards every request to `target`, counting JSON-RPC methods (or the path)."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target.rstrip("/")
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def respond(
        self, method: str, path: str, headers: Message, body: bytes
    ) -> tuple[int, str, bytes]:
        names = [path.split("?")[0]]
        if body[:1] in (b"{", b"["):
            try:
                parsed = json.loads(body)
                batch = parsed if isinstance(parsed, list) else [parsed]
                if all(isinstance(r, dict) and "method" in r for r in batch):
                    names = [str(r["method"]) for r in batch]
            except ValueError:
                pass
        with self._lock:
            self.calls.update(names)
        request = urllib.request.Request(
            self.target + path,
            data=body if method == "POST" else None,
            method=method,
            headers={"Content-Type": headers.get("Content-Type", "application/json")},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read()

    def take(self) -> Counter[str]:
        with self._lock:
            taken, self.calls = self.calls, Counter()
        return taken


def _container(home: Path, env: dict[str, str], clock: ManualClock, keystore: Any) -> Container:
    os.environ.update(
        {
            "WALLETCORE_HOME": str(home),
            "WALLETCORE_REPO": "sql",
            "WALLETCORE_DATABASE_URL": sqlite_url(home / "walletcore.db"),
            "WALLETCORE_CHAINS": "rpc",
            "WALLETCORE_JOBS": "off",
            **{f"WALLETCORE_CHAIN_{c.value}": "sandbox" for c in CONTRACT_CHAINS},
            **env,
        }
    )
    return create_container(Settings(), clock=clock, keystore=keystore)


async def _sends(
    container: Container,
    chain: Chain,
    asset_id: int,
    n: int,
    fund: Callable[[str], None],
    recipient: str,
) -> list[str]:
    issued = await container.auth().create_client("Bench", assets=[asset_id])
    caller = Caller(issued.client, "bench")
    hashes = []
    for i in range(n):
        created = await container.wallets().create(caller, password=PASSWORD)
        address = created.addresses[chain]
        fund(address)
        receipt = await container.sends().send(
            Caller(issued.client, f"s{i}"),
            request_id=f"s{i}",
            user_id=created.user_id,
            asset_id=asset_id,
            recipient=recipient,
            amount="0.01" if chain != Chain.TRON else "1",
            password=PASSWORD,
        )
        hashes.append(receipt.tx_hash)
    return hashes


async def _run(container: Container, proxy: CountingProxy, n: int) -> tuple[float, Counter[str]]:
    proxy.take()
    await container.jobs().follow_sends()
    calls = proxy.take()
    return sum(calls.values()) / n, calls


def _row(chain: str, situation: str, per_run: float, calls: Counter[str]) -> None:
    top = ", ".join(f"{k.lstrip('/')} {v}" for k, v in calls.most_common(5))
    print(
        f"| {chain} | {situation} | {per_run:.2f} | {per_run * 60 / FOLLOW_SECONDS:.1f} | {top} |"
    )


async def bench_evm(home: Path, n: int, keystore: Any) -> None:
    from walletcore_chains.testing.anvil import AnvilNode, find_anvil

    if find_anvil() is None:
        print("| ETHEREUM | skipped: no anvil (python3 dev.py test installs it) | | | |")
        return
    eth = CONTRACT_CATALOG.asset_by_id(2)
    clock = ManualClock()
    with AnvilNode(Chain.ETHEREUM, mining=False) as node, CountingProxy(node.url) as proxy:
        container = _container(
            home,
            {
                "WALLETCORE_CHAIN_ETHEREUM": "rpc",
                "WALLETCORE_EVM_NETWORK": "mainnet",
                "WALLETCORE_ETHEREUM_RPC_URL": proxy.url,
                "WALLETCORE_EVM_TOKENS": json.dumps({str(k): v for k, v in node.tokens.items()}),
            },
            clock,
            keystore,
        )
        recipient = "0x52908400098527886E0F7030069857D2E4169EE7"
        await _sends(
            container, Chain.ETHEREUM, 2, n, lambda a: node.fund(a, eth, 10**18), recipient
        )
        stuck = container.gateways()[Chain.ETHEREUM].stuck_after_seconds  # type: ignore[attr-defined]
        _row("ETHEREUM", "pending (pool)", *await _run(container, proxy, n))
        clock.advance(stuck + 1)
        _row("ETHEREUM", "stuck -> bump", *await _run(container, proxy, n))
        _row("ETHEREUM", "stuck, bumped (pool)", *await _run(container, proxy, n))
        node.drop_all()
        _row("ETHEREUM", "dropped -> rebroadcast", *await _run(container, proxy, n))
        node.mine(1)
        _row("ETHEREUM", "mined, below depth", *await _run(container, proxy, n))
        node.mine(64)
        _row("ETHEREUM", "final (settled)", *await _run(container, proxy, n))
        await container.storage().aclose()


async def bench_tron(home: Path, n: int, keystore: Any) -> None:
    from walletcore_chains.testing.tron_node import TronTestNode

    clock = ManualClock()
    with (
        TronTestNode(auto_pack=False, auto_solidify=False) as node,
        CountingProxy(node.url) as proxy,
    ):
        container = _container(
            home,
            {
                "WALLETCORE_CHAIN_TRON": "rpc",
                "WALLETCORE_TRON_NODE_URL": proxy.url,
                "WALLETCORE_TRON_NETWORK": "nile",
                "WALLETCORE_TRON_TOKENS": json.dumps({"41": node.tokens[41]}),
            },
            clock,
            keystore,
        )
        holder = "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7"
        node.fund(holder, 1_000_000)
        await _sends(container, Chain.TRON, 4, n, lambda a: node.fund(a, 50_000_000), holder)
        _row("TRON", "pending (pool)", *await _run(container, proxy, n))
        node.drop_pending()
        _row("TRON", "dropped -> rebroadcast", *await _run(container, proxy, n))
        node.pack()
        _row("TRON", "mined, not solidified", *await _run(container, proxy, n))
        node.solidify()
        _row("TRON", "final (settled)", *await _run(container, proxy, n))
        await container.storage().aclose()


async def main(n: int) -> None:
    keystore = SealedKeyStore(
        secrets.token_bytes(32), kdf=KdfParams(opslimit=1, memlimit=64 * 1024), allow_weak_kdf=True
    )
    print(f"{n} sends per chain; follow job every {FOLLOW_SECONDS:.0f} s\n")
    print("| chain | situation | RPC calls per send per run | per send per minute | calls |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for name, bench in (("evm", bench_evm), ("tron", bench_tron)):
            home = Path(folder) / name
            home.mkdir(mode=0o700)
            await bench(home, n, keystore)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=20)
    asyncio.run(main(parser.parse_args().sends))
    sys.exit(0)
