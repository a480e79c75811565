"""A real `bitcoind -regtest` for the tests: started on free loopback ports in a temporary
data directory, with `-txindex` (the Core backend needs it) and a `miner` wallet that
mines and funds.

The binary: `$WALLETCORE_BITCOIND`, else `bitcoind` on PATH, else the one `python3 dev.py
test` installs under `.venv/bitcoind/` (`find_bitcoind`). No network at run time.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

ENV = "WALLETCORE_BITCOIND"


def find_bitcoind() -> str | None:
    """The path of a working bitcoind, or None."""
    candidates = [os.environ.get(ENV), shutil.which("bitcoind")]
    root = Path(__file__).resolve()
    for parent in root.parents:
        candidates.append(str(parent / ".venv" / "bitcoind" / "bitcoind"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Bitcoind:
    """One regtest node; `url` carries its RPC credentials (a test secret)."""

    def __init__(
        self, binary: str, datadir: str | None = None, extra_args: Sequence[str] = ()
    ) -> None:
        self.binary = binary
        #: more options, e.g. `-blockmintxfee=0.00002` (blocks leave cheaper transactions
        #: in the mempool: a send at the minimum relay fee stays stuck)
        self.extra_args = tuple(extra_args)
        self._own_dir = datadir is None
        self.datadir = datadir or tempfile.mkdtemp(prefix="walletcore-regtest-")
        self.port = free_port()
        self.user, self.password = "walletcore", "regtest-" + os.urandom(8).hex()
        self.process: subprocess.Popen[bytes] | None = None
        self._http = httpx.Client(auth=(self.user, self.password), timeout=120)

    @property
    def url(self) -> str:
        return f"http://{self.user}:{self.password}@127.0.0.1:{self.port}"

    @property
    def plain_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Bitcoind:
        args = [
            self.binary,
            "-regtest",
            f"-datadir={self.datadir}",
            f"-rpcport={self.port}",
            f"-port={free_port()}",
            "-rpcbind=127.0.0.1",
            "-rpcallowip=127.0.0.1",
            f"-rpcuser={self.user}",
            f"-rpcpassword={self.password}",
            "-listen=0",
            "-dnsseed=0",
            "-txindex=1",
            "-fallbackfee=0.0002",
            "-rpcworkqueue=64",
            "-rpcthreads=8",
            "-printtoconsole=0",
            *self.extra_args,
        ]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.call("getblockchaininfo")
                break
            except Exception:
                if self.process.poll() is not None:
                    err = self.process.stderr.read().decode() if self.process.stderr else ""
                    raise RuntimeError(f"bitcoind exited: {err[-500:]}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.call("createwallet", "miner")
        self.miner = self.call("getnewaddress", "", "bech32", wallet="miner")
        return self

    def call(self, method: str, *params: Any, wallet: str | None = None) -> Any:
        path = f"/wallet/{wallet}" if wallet else "/"
        body = {"jsonrpc": "1.0", "id": 1, "method": method, "params": list(params)}
        response = self._http.post(self.plain_url + path, content=json.dumps(body))
        answer = json.loads(response.content, parse_float=Decimal)
        if answer.get("error"):
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def mine(self, blocks: int = 1, address: str | None = None) -> list[str]:
        hashes: list[str] = self.call("generatetoaddress", blocks, address or self.miner)
        return hashes

    def fund(self, address: str, btc: str | Decimal) -> str:
        """Send `btc` from the miner's wallet (mined and matured on first use)."""
        balance = Decimal(str(self.call("getbalance", wallet="miner")))
        if balance < Decimal(str(btc)) + 1:
            self.mine(101)
        txid: str = self.call("sendtoaddress", address, str(btc), wallet="miner")
        return txid

    def evict_mempool(self) -> None:
        """Drop every transaction now in the mempool, as a node does with those older than
        `-mempoolexpiry` (two weeks): the clock is moved past it, one new transaction (from
        the miner's wallet, to itself) makes the node expire the old ones, and the clock is
        moved back. Nothing is mined meanwhile. The new transaction stays."""
        self.call("setmocktime", int(time.time()) + 15 * 86_400)
        try:
            self.call("sendtoaddress", self.miner, "0.001", wallet="miner")
        finally:
            self.call("setmocktime", 0)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                self.call("stop")
                self.process.wait(timeout=30)
            except Exception:  # noqa: BLE001 - not answering: kill it
                self.process.kill()
                self.process.wait(timeout=10)
        self._http.close()
        if self._own_dir:
            shutil.rmtree(self.datadir, ignore_errors=True)


__all__ = ["ENV", "Bitcoind", "find_bitcoind", "free_port"]


#: How to get a node when there is none, for a test's skip message.
MISSING = "no bitcoind: run `python3 dev.py test` (it installs one) or set WALLETCORE_BITCOIND"


@contextmanager
def stingy_node(binary: str, block_min_rate: float) -> Iterator[Bitcoind]:
    """A started regtest node whose blocks take nothing paying under `block_min_rate`
    sat/vB (`-blockmintxfee`): a send at the relay minimum stays in the mempool block after
    block, as a stuck one does on a busy network. 101 blocks are mined (a mature coin);
    the node stops at the end."""
    node = Bitcoind(binary, extra_args=[f"-blockmintxfee={block_min_rate / 100_000:.8f}"])
    node.start()
    try:
        node.mine(101)
        yield node
    finally:
        node.stop()


@contextmanager
def stingy_node_or_skip(block_min_rate: float) -> Iterator[Bitcoind]:
    """`stingy_node` on the bitcoind found here; the calling test is skipped (`MISSING`)
    when there is none. For a pytest fixture: `with stingy_node_or_skip(rate) as node:
    yield node`."""
    import pytest

    binary = find_bitcoind()
    if binary is None:
        pytest.skip(MISSING)
    with stingy_node(binary, block_min_rate) as node:
        yield node
