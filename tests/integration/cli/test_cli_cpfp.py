"""`walletcore platform cpfp` (docs/bitcoin.md, Lifecycle) on a real regtest node: a
transaction paying the platform wallet at a fee rate blocks do not take is sped up by a
child the platform key signs; the package reaches the target rate in the node's mempool
and both are mined in the next block. Refusals exit 1 with the reason and sign nothing.

The node mines no transaction paying under 2.5 sat/vB (`-blockmintxfee`), so a parent at
1 sat/vB stays in the mempool block after block (as in tests/integration/bitcoin/
test_bitcoin_follow.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from walletcore_chains.testing.bitcoind import Bitcoind, stingy_node_or_skip
from walletcore_cli import main

pytest.register_assert_rewrite("cli_support")

from cli_support import audit_log, cli

COIN = 100_000_000
#: sat/vB: blocks take nothing paying less
BLOCK_MIN_RATE = 2.5


@pytest.fixture(scope="module")
def node() -> Iterator[Bitcoind]:
    with stingy_node_or_skip(BLOCK_MIN_RATE) as started:
        yield started


@pytest.fixture
def home(tmp_path: Path, node: Bitcoind, monkeypatch: pytest.MonkeyPatch) -> Path:
    import os

    for name in list(os.environ):  # the test's settings, not the developer's
        if name.startswith("WALLETCORE_"):
            monkeypatch.delenv(name)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    folder = tmp_path / "home"
    env = {
        "WALLETCORE_HOME": str(folder),
        "WALLETCORE_CHAINS": "rpc",
        "WALLETCORE_CHAIN_ETHEREUM": "sandbox",
        "WALLETCORE_CHAIN_BSC": "sandbox",
        "WALLETCORE_CHAIN_POLYGON": "sandbox",
        "WALLETCORE_CHAIN_SOLANA": "sandbox",
        "WALLETCORE_CHAIN_TRON": "sandbox",
        "WALLETCORE_BITCOIN_NETWORK": "regtest",
        "WALLETCORE_BITCOIN_BACKEND": "core",
        "WALLETCORE_BITCOIN_RPC_URL": node.url,
        "WALLETCORE_BITCOIN_CONFIRMATIONS": "2",
        "WALLETCORE_JOBS": "off",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return folder


def stuck_payment(node: Bitcoind, address: str, btc: str) -> str:
    """`btc` from the miner's wallet to `address` at 1 sat/vB: blocks leave it out."""
    if Decimal(str(node.call("getbalance", wallet="miner"))) < Decimal(btc) + 1:
        node.mine(101)
    txid = str(
        node.call(
            "sendtoaddress",
            address,
            btc,
            "",
            "",
            False,
            True,
            None,
            "unset",
            None,
            1,  # sat/vB
            wallet="miner",
        )
    )
    node.mine(1)
    assert txid in node.call("getrawmempool")  # left out of the block: stuck
    return txid


def package_rate(entry: dict[str, Any]) -> Decimal:
    """sat/vB of a mempool entry with its unconfirmed ancestors."""
    return Decimal(str(entry["fees"]["ancestor"])) * COIN / entry["ancestorsize"]


def test_child_pays_for_a_stuck_payment_to_the_platform_wallet(
    home: Path, node: Bitcoind, capsys: pytest.CaptureFixture[str]
) -> None:
    cid = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    platform = cli(capsys, "platform", "provision", "--client-id", cid)["BITCOIN"]
    assert platform.startswith("bcrt1q")
    parent = stuck_payment(node, platform, "0.01")
    of_parent = node.call("getmempoolentry", parent)
    assert package_rate(of_parent) < BLOCK_MIN_RATE

    target = 10
    done = cli(capsys, "platform", "cpfp", cid, "--txid", parent.upper(), "--fee-rate", "10")
    child = done["child"]
    assert (done["parent"], done["feeRate"]) == (parent, target)
    entry = node.call("getmempoolentry", child)
    assert int(Decimal(str(entry["fees"]["base"])) * COIN) == done["feeUnits"]
    assert entry["ancestorcount"] == 2 and entry["depends"] == [parent]
    assert target <= package_rate(entry) < target * Decimal("1.2")  # what was asked, no more
    tx = node.call("getrawtransaction", child, 1)
    assert [(v["txid"], v["vout"]) for v in tx["vin"]] == [
        (parent, o["n"])
        for o in node.call("getrawtransaction", parent, 1)["vout"]
        if o["scriptPubKey"].get("address") == platform
    ]
    assert [o["scriptPubKey"]["address"] for o in tx["vout"]] == [platform]  # back to itself
    assert int(Decimal(str(tx["vout"][0]["value"])) * COIN) == COIN // 100 - done["feeUnits"]

    [logged] = [e for e in audit_log(home) if e.action == "platform.cpfp"]
    assert (logged.client_id, logged.outcome, logged.target) == (cid, "ok", child)
    assert logged.detail == f"parent {parent}, fee {done['feeUnits']}"

    # a second child for the same parent: its outputs are spent already, nothing signed
    refused = cli(capsys, "platform", "cpfp", cid, "--txid", parent, "--fee-rate", "20", status=1)
    assert "spent already" in refused

    node.mine(1)  # the package pays above what blocks take: both in the next block
    assert node.call("getrawtransaction", parent, 1)["confirmations"] == 1
    assert node.call("getrawtransaction", child, 1)["confirmations"] == 1
    node.mine(1)
    balances = cli(capsys, "platform", "balances", cid)
    assert Decimal(balances["BITCOIN"]["balance"]) * COIN == COIN // 100 - done["feeUnits"]


def test_without_a_rate_the_package_reaches_the_gateways_estimate(
    home: Path,
    node: Bitcoind,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a regtest node has no estimate of its own: the gateway's is the configured fallback
    assert "feerate" not in node.call("estimatesmartfee", 3)
    monkeypatch.setenv("WALLETCORE_BITCOIN_FALLBACK_FEE_RATE", "6")
    cid = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    platform = cli(capsys, "platform", "provision", "--client-id", cid)["BITCOIN"]
    parent = stuck_payment(node, platform, "0.01")
    done = cli(capsys, "platform", "cpfp", cid, "--txid", parent)
    assert (done["parent"], done["feeRate"]) == (parent, 6)
    entry = node.call("getmempoolentry", done["child"])
    assert 6 <= package_rate(entry) < 6 * Decimal("1.2")
    node.mine(1)
    assert node.call("getrawtransaction", done["child"], 1)["confirmations"] == 1


def test_refusals_exit_1_and_sign_nothing(
    home: Path,
    node: Bitcoind,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cid = cli(capsys, "clients", "create", "--name", "Acme")["clientId"]
    argv = ["--fee-rate", "10"]
    # no platform wallet yet
    refused = cli(capsys, "platform", "cpfp", cid, "--txid", "ab" * 32, *argv, status=1)
    assert "No platform wallet for this api client" in refused
    platform = cli(capsys, "platform", "provision", "--client-id", cid)["BITCOIN"]
    parent = stuck_payment(node, platform, "0.02")
    mempool = set(node.call("getrawmempool"))

    # an unknown client, well-formed or not
    for unknown in ("0" * 24, "not-a-client"):
        refused = cli(capsys, "platform", "cpfp", unknown, "--txid", parent, *argv, status=1)
        assert "Api client not found" in refused
    # a parent unknown to the node, or not a transaction id
    refused = cli(capsys, "platform", "cpfp", cid, "--txid", "ab" * 32, *argv, status=1)
    assert "unknown to the network" in refused
    refused = cli(capsys, "platform", "cpfp", cid, "--txid", "xyz", *argv, status=1)
    assert "64 hexadecimal digits" in refused
    # a rate of nothing, or a child over the cap (WALLETCORE_FEE_CAPS, default 0.0005 BTC)
    for rate in ("0", "-3", "nan"):
        refused = cli(
            capsys, "platform", "cpfp", cid, "--txid", parent, "--fee-rate", rate, status=1
        )
        assert "target fee rate must be above 0" in refused
    refused = cli(capsys, "platform", "cpfp", cid, "--txid", parent, "--fee-rate", "1000", status=1)
    assert "exceeds the cap of 0.0005 BTC" in refused
    monkeypatch.setenv("WALLETCORE_FEE_CAPS", json.dumps({"BITCOIN": "0.000001"}))
    refused = cli(capsys, "platform", "cpfp", cid, "--txid", parent, *argv, status=1)
    assert "exceeds the cap of 0.000001 BTC" in refused
    monkeypatch.delenv("WALLETCORE_FEE_CAPS")
    # BITCOIN without a node: nothing to ask
    monkeypatch.setenv("WALLETCORE_CHAIN_BITCOIN", "sandbox")
    refused = cli(capsys, "platform", "cpfp", cid, "--txid", parent, *argv, status=1)
    assert "BITCOIN has no rpc gateway here" in refused
    monkeypatch.delenv("WALLETCORE_CHAIN_BITCOIN")
    assert set(node.call("getrawmempool")) == mempool  # nothing was broadcast

    # a confirmed parent: nothing to speed up
    node.call("prioritisetransaction", parent, 0, 10_000)  # a miner's favour
    node.mine(1)
    assert node.call("getrawtransaction", parent, 1)["confirmations"] == 1
    refused = cli(capsys, "platform", "cpfp", cid, "--txid", parent, *argv, status=1)
    assert "confirmed already" in refused
    # bad usage: exit 2 before anything runs
    for bad in (["--fee-rate", "fast"], []):
        with pytest.raises(SystemExit) as exited:
            main(["platform", "cpfp", cid, *bad])
        assert exited.value.code == 2
        assert "error:" in capsys.readouterr().err

    entries = [e for e in audit_log(home) if e.action == "platform.cpfp"][::-1]
    assert [e.outcome for e in entries] == [
        "404",
        "404",
        "404",
        "400",
        "400",
        "400",
        "400",
        "400",
        "502",
        "502",
        "400",
        "400",
    ]
    assert [e.client_id for e in entries[1:3]] == ["0" * 24, None]  # never what was mistyped
    assert all(e.target is None for e in entries)
