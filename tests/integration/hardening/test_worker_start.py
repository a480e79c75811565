"""A freshly started `walletcore serve` answers its very first requests, all at once: the
libraries a request needs are imported before a worker takes traffic (bitcoinlib, by the
KeyStore when the service is built), and a lazy import another thread is still running is
never handed out half done. What the server writes under its home is private whatever the
umask it runs under.

Its own server (`--workers 2`, SQLite, umask 000), started again several times: each
start's first requests arrive together while its workers are fresh, `/create`s (a
mnemonic, BITCOIN's key: bitcoinlib, in the KeyStore's threads) and `/platform/fee`s to a
BITCOIN address (its check: bitcoinlib's bech32, on the event loop's thread).
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from hardening_support import Server, add_client

#: Starts of the server, and requests sent at once right after each.
STARTS = 3
CONCURRENT = 12
#: A third party's BITCOIN address (mainnet, the server's network).
RECIPIENT = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server("fresh", tmp_path_factory.mktemp("hardening-fresh"), workers=2, umask=0)
    # bitcoinlib's folder in the home, as deployed (the test run pins one of its own)
    server.env.pop("BCL_DATA_DIR", None)
    try:
        add_client(server, "A")
        yield server
    finally:
        server.stop()


def _first_request(server: Server, n: int) -> int:
    if n % 2:
        answer = server.post("/platform/fee", {"assetId": 1, "recipient": RECIPIENT})
    else:
        answer = server.post("/create", {"password": f"first request {n:02d}"})
    return answer.status_code


def test_concurrent_first_requests_after_each_start_all_succeed(fresh: Server) -> None:
    for start in range(STARTS):
        fresh.start()
        try:
            with ThreadPoolExecutor(CONCURRENT) as pool:
                statuses = list(pool.map(lambda n: _first_request(fresh, n), range(CONCURRENT)))
        finally:
            fresh.stop()
        assert statuses == [200] * CONCURRENT, f"start {start}: {statuses}\n{fresh.log_tail()}"

    # umask 000: still 0700 folders and 0600 files under the home, bitcoinlib's included
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in [fresh.home, *fresh.home.rglob("*")]}
    loose = {str(p): oct(m) for p, m in modes.items() if m != (0o700 if p.is_dir() else 0o600)}
    assert loose == {}
    assert (fresh.home / "bitcoinlib" / "networks.json").is_file()
    assert not (fresh.home / "bitcoinlib" / "bitcoinlib.log").exists()
