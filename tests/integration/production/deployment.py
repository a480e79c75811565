"""A production deployment on loopback, as a deployer would run it: the production profile on
PostgreSQL (a fresh database on the test server), anvil for the three EVM chains (chain ids
1, 56, 137), bitcoind in regtest, the loopback Solana and Tron nodes, the loopback CoinGecko
and Binance; HTTP instances and workers as separate `walletcore` processes."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from walletcore.domain.assets import Chain
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.testing.anvil import AnvilNode
from walletcore_chains.testing.bitcoind import Bitcoind, find_bitcoind
from walletcore_chains.testing.solana_rpc_node import RpcTestNode
from walletcore_chains.testing.tron_node import TronTestNode
from walletcore_markets.testing.binance_server import BinanceTestServer
from walletcore_markets.testing.coingecko_server import CoinGeckoTestServer

BIN = Path(sys.executable).parent
EVM_CHAINS = (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON)
#: Seconds between two price refreshes of the deployment.
PRICE_INTERVAL = 2
#: Seconds a `walletcore serve` may take to answer: a few on a quiet machine, but its
#: imports and a worker's start share the CPU with the rest of a parallel test run.
START_SECONDS = 180


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


@dataclass
class Deployment:
    home: Path
    env: dict[str, str]
    anvils: dict[Chain, AnvilNode]
    bitcoind: Bitcoind
    tron: TronTestNode
    solana: DevnetSolanaGateway
    solana_node: RpcTestNode
    gecko: CoinGeckoTestServer
    exchange: BinanceTestServer
    processes: list[Process] = field(default_factory=list)

    # -- the operator's CLI ----------------------------------------------------------------
    def cli(self, *args: str) -> Any:
        done = subprocess.run(
            [str(BIN / "walletcore"), *args], env=self.env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"walletcore {' '.join(args)}: {done.stderr}"
        return json.loads(done.stdout) if done.stdout.strip() else None

    # -- processes ---------------------------------------------------------------------------
    def spawn(self, name: str, *args: str, port: int | None = None) -> Process:
        log = self.home / f"{name}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                [str(BIN / "walletcore"), *args], env=self.env, stdout=out, stderr=out
            )
        process = Process(name, popen, log, port)
        self.processes.append(process)
        return process

    def serve(self, name: str) -> Process:
        port = free_port()
        process = self.spawn(
            name, "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            port=port,
        )  # fmt: skip
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert process.popen.poll() is None, process.log.read_text()
            try:
                if httpx.post(f"{process.url}/prices", timeout=2).status_code == 401:
                    return process
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{name} did not start: {process.log.read_text()}")

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    # -- chains ---------------------------------------------------------------------------------
    async def fund(self, address: str, asset_id: int, amount: str) -> None:
        asset = CONTRACT_CATALOG.asset_by_id(asset_id)
        units = int(Decimal(amount).scaleb(asset.decimals))
        if asset.chain in self.anvils:
            self.anvils[asset.chain].fund(address, asset, units)
        elif asset.chain == Chain.BITCOIN:
            self.bitcoind.fund(address, Decimal(amount))
            self.bitcoind.mine(2)
        elif asset.chain == Chain.TRON:
            if asset.is_native:
                self.tron.fund(address, units)
            else:
                self.tron.fund_token(address, asset_id, units)
        else:
            await self.solana.fund(address, asset, units)

    def advance_chains(self) -> None:
        """What time does on the chains without interval mining: a bitcoin block."""
        self.bitcoind.mine(1)


def environment(deployment_home: Path, database_url: str, nodes: dict[str, Any]) -> dict[str, str]:
    anvils: dict[Chain, AnvilNode] = nodes["anvils"]
    tokens = {str(k): v for node in anvils.values() for k, v in node.tokens.items()}
    solana: DevnetSolanaGateway = nodes["solana"]
    tron: TronTestNode = nodes["tron"]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("WALLETCORE_") and k not in ("HTTP_PROXY", "HTTPS_PROXY")
    }
    env.update({
        "WALLETCORE_PROFILE": "production",
        "WALLETCORE_HOME": str(deployment_home),
        "WALLETCORE_DATABASE_URL": database_url,
        "WALLETCORE_TOKEN_SIGNING_KEY": secrets.token_hex(32),
        "WALLETCORE_MASTER_KEY": secrets.token_hex(32),
        "WALLETCORE_PRICE_REFRESH_SECONDS": str(PRICE_INTERVAL),
        "WALLETCORE_JOBS_SETTLE_SECONDS": "1",
        "WALLETCORE_JOBS_FOLLOW_SECONDS": "1",
        "WALLETCORE_CHAINS": "rpc",
        "WALLETCORE_EVM_NETWORK": "mainnet",
        "WALLETCORE_ETHEREUM_RPC_URL": anvils[Chain.ETHEREUM].url,
        "WALLETCORE_BSC_RPC_URL": anvils[Chain.BSC].url,
        "WALLETCORE_POLYGON_RPC_URL": anvils[Chain.POLYGON].url,
        "WALLETCORE_EVM_TOKENS": json.dumps(tokens),
        "WALLETCORE_BITCOIN_NETWORK": "regtest",
        "WALLETCORE_BITCOIN_BACKEND": "core",
        "WALLETCORE_BITCOIN_RPC_URL": nodes["bitcoind"].url,
        "WALLETCORE_BITCOIN_CONFIRMATIONS": "1",
        "WALLETCORE_TRON_NODE_URL": tron.url,
        "WALLETCORE_TRON_NETWORK": "nile",
        "WALLETCORE_TRON_TOKENS": json.dumps({"41": tron.tokens[41], "42": tron.tokens[42]}),
        "WALLETCORE_SOLANA_RPC_URL": nodes["solana_node"].url,
        "WALLETCORE_SOLANA_NETWORK": "testnet",
        "WALLETCORE_SOLANA_USDT_MINT": str(solana.mint(CONTRACT_CATALOG.asset_by_id(61))),
        "WALLETCORE_SOLANA_USDC_MINT": str(solana.mint(CONTRACT_CATALOG.asset_by_id(62))),
        "WALLETCORE_RPC_TIMEOUT_SECONDS": "10",
        "WALLETCORE_PRICES": "coingecko",
        "WALLETCORE_COINGECKO_URL": f"{nodes['gecko'].url}/api/v3",
        "WALLETCORE_VENUE": "exchange",
        "WALLETCORE_EXCHANGE_URL": nodes["exchange"].url,
        "WALLETCORE_EXCHANGE_API_KEY": nodes["exchange"].api_key,
        "WALLETCORE_EXCHANGE_SECRET": "loopback-secret",
        "WALLETCORE_EXCHANGE_ADJUST_FOR_TIME_DIFFERENCE": "false",
        "WALLETCORE_EXCHANGE_RATE_LIMIT_MS": "0",
        "BCL_DATA_DIR": str(deployment_home / "bitcoinlib"),
    })  # fmt: skip
    return env


def start_nodes(stack: ExitStack) -> dict[str, Any]:
    binary = find_bitcoind()
    if binary is None:
        raise FileNotFoundError("no bitcoind: run `python3 dev.py test` (it installs one)")
    anvils = {chain: stack.enter_context(AnvilNode(chain)) for chain in EVM_CHAINS}
    bitcoind = Bitcoind(binary).start()
    stack.callback(bitcoind.stop)
    bitcoind.mine(101)
    tron = stack.enter_context(TronTestNode())
    from walletcore_chains.addresses import validate_address

    solana = DevnetSolanaGateway(validate_address)
    solana_node = stack.enter_context(RpcTestNode(solana.node))
    gecko = stack.enter_context(CoinGeckoTestServer())
    gecko.set_price("bitcoin", "usd", "100000")
    gecko.set_price("ethereum", "usd", "4000")
    gecko.set_price("tether", "usd", "1")
    exchange = stack.enter_context(BinanceTestServer())
    return {
        "anvils": anvils, "bitcoind": bitcoind, "tron": tron, "solana": solana,
        "solana_node": solana_node, "gecko": gecko, "exchange": exchange,
    }  # fmt: skip


async def wait_for(check: Any, seconds: float, what: str, step: float = 0.25) -> Any:
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        found = await check()
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(step)


async def query(sa_url: str, sql: str) -> list[Any]:
    """Rows of one SQL statement on the deployment's database (what the operator sees)."""
    from walletcore_sql.engine import make_engine

    engine = make_engine(sa_url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(text(sql))).mappings())
    finally:
        await engine.dispose()
