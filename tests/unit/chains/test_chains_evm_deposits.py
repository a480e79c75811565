"""The pure parts of the EVM deposit scan (`walletcore_chains.evm.deposits`): the call
tree walked for value moved inside contract calls, the watch list, log positions, ranges
cut in halves, the nodes' refusals of a scan's reads (`errors.read_scan_refusal`), and the
scanner the family's `rpc` gateway carries (its span from the settings, its coin and
tokens from the served assets)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from web3.exceptions import MethodUnavailable, Web3RPCError

from walletcore.chainplugins import GatewayContext
from walletcore.clock import ManualClock
from walletcore.domain.assets import Asset, AssetKind, Chain
from walletcore.domain.catalog import Catalog
from walletcore.nonces import LocalNonceLeases
from walletcore.ports import DepositScanner
from walletcore.settings import Settings
from walletcore_chains.evm import EvmChain, EvmConfig, errors, evm_plugin
from walletcore_chains.evm.addresses import validate_address, verify_signature
from walletcore_chains.evm.config import evm_config
from walletcore_chains.evm.deposits import (
    CallCredit,
    TraceCredit,
    TraceMismatch,
    address_topic,
    call_credits,
    chunks,
    geth_credits,
    halves,
    log_position,
    parity_credits,
    quantity,
    watch_of,
)
from walletcore_chains.evm.plugin import EvmSettings

ALICE = "0x52908400098527886E0F7030069857D2E4169EE7"
BOB = "0x8617E340B3D01FA5F11F306F4090FD50E238070D"
CONTRACT = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
SENDER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"  # the contract, checksummed
WATCH = {ALICE.lower(): ALICE, BOB.lower(): BOB}


def frame(
    kind: str, to: str, value: int = 0, *calls: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "from": CONTRACT, "to": to.lower(), "value": hex(value)}
    if calls:
        out["calls"] = list(calls)
    return {**out, **extra}


def test_the_call_tree_gives_each_value_moving_frame_its_path() -> None:
    tree = [
        frame("STATICCALL", CONTRACT),
        frame(
            "CALL",
            CONTRACT,
            0,
            frame("DELEGATECALL", CONTRACT, 0, frame("CALL", ALICE, 5)),
            frame("CALL", BOB, 7),
            frame("CALLCODE", ALICE, 9),  # runs ALICE's code here: moves nothing to it
        ),
        frame("SELFDESTRUCT", ALICE, 11),
        frame("CALL", ALICE, 0),  # no value
        frame("CALL", CONTRACT, 3),  # not watched
    ]

    assert call_credits(tree, WATCH) == [
        CallCredit("1.0.0", ALICE, 5, SENDER),
        CallCredit("1.1", BOB, 7, SENDER),
        CallCredit("2", ALICE, 11, SENDER),
    ]


def test_nothing_below_a_frame_that_reverted_moved() -> None:
    tree = [
        frame("CALL", CONTRACT, 10, frame("CALL", ALICE, 10), error="execution reverted"),
        frame("CALL", BOB, 4, error="out of gas"),
        frame("CALL", CONTRACT, 0, frame("CALL", BOB, 2)),
    ]

    assert call_credits(tree, WATCH) == [CallCredit("2.0", BOB, 2, SENDER)]


TX1, TX2 = "0x" + "11" * 32, "0x" + "22" * 32
BLOCK = "0x" + "bb" * 32


def test_a_geth_trace_gives_each_transactions_own_value_and_its_calls() -> None:
    trace = [
        {"txHash": TX1, "result": frame("CALL", ALICE, 9, frame("CALL", BOB, 4))},
        {"result": frame("CALL", BOB, 6, frame("CALL", ALICE, 6), error="execution reverted")},
    ]

    assert geth_credits(trace, [TX1, TX2], WATCH) == [
        TraceCredit(TX1, "tx", ALICE, 9, SENDER),
        TraceCredit(TX1, "call:0", BOB, 4, SENDER),
    ]
    with pytest.raises(TraceMismatch):  # one transaction's trace missing
        geth_credits(trace[:1], [TX1, TX2], WATCH)
    with pytest.raises(TraceMismatch):  # another transaction's
        geth_credits([{"txHash": TX2, "result": trace[0]["result"]}], [TX1], WATCH)
    with pytest.raises(TraceMismatch):  # the node could not trace it: not "it failed"
        geth_credits([{"txHash": TX1, "error": "execution timeout"}], [TX1], WATCH)


def parity(tx: str, path: list[int], kind: str, **action: Any) -> dict[str, Any]:
    error = action.pop("error", None)
    out = {
        "action": {"from": CONTRACT, "callType": "call", **action},
        "blockHash": BLOCK,
        "traceAddress": path,
        "transactionHash": tx,
        "type": kind,
    }
    return {**out, "error": error} if error else out


def test_a_parity_trace_numbers_calls_as_a_geth_one_and_skips_what_failed() -> None:
    traces = [
        parity(TX1, [], "call", to=ALICE.lower(), value="0x9"),
        parity(TX1, [0], "call", to=CONTRACT, value="0x0", error="Reverted"),
        parity(TX1, [0, 0], "call", to=BOB.lower(), value="0x4"),  # under a failed call
        parity(TX1, [1], "call", to=BOB.lower(), value="0x3", callType="delegatecall"),
        parity(TX1, [2], "call", to=CONTRACT, value="0x0"),
        parity(TX1, [2, 0], "call", to=BOB.lower(), value="0x5"),
        parity(TX1, [3], "suicide", address=CONTRACT, refundAddress=ALICE.lower(), balance="0x7"),
        parity(TX2, [], "call", to=BOB.lower(), value="0x6", error="Out of gas"),
        parity(TX2, [0], "call", to=ALICE.lower(), value="0x6"),  # the transaction failed
        {"action": {"author": ALICE.lower(), "value": "0x1"}, "blockHash": BLOCK, "type": "reward"},
    ]

    assert parity_credits(traces, BLOCK, [TX1, TX2], WATCH) == [
        TraceCredit(TX1, "tx", ALICE, 9, SENDER),
        TraceCredit(TX1, "call:2.0", BOB, 5, SENDER),
        TraceCredit(TX1, "call:3", ALICE, 7, SENDER),
    ]
    with pytest.raises(TraceMismatch):  # of another block
        parity_credits(traces, "0x" + "cc" * 32, [TX1, TX2], WATCH)
    with pytest.raises(TraceMismatch):  # a transaction without its trace
        parity_credits(traces[:7], BLOCK, [TX1, TX2], WATCH)


def test_the_watch_list_maps_any_case_back_to_the_stored_form() -> None:
    assert watch_of([ALICE, BOB.lower(), "not an address", "0x" + "zz" * 20]) == {
        ALICE.lower(): ALICE,
        BOB.lower(): BOB.lower(),
    }
    assert address_topic(ALICE) == "0x" + "0" * 24 + ALICE.lower()[2:]


def test_chunks_ranges_and_quantities() -> None:
    assert chunks(list(range(2_500)), 1_000)[2] == list(range(2_000, 2_500))
    assert [len(c) for c in chunks(list(range(2_000)), 1_000)] == [1_000, 1_000]
    assert halves(10, 11) == ((10, 10), (11, 11))
    assert halves(10, 20) == ((10, 15), (16, 20))
    assert (quantity("0x1f"), quantity(31), quantity(None), quantity("31")) == (31, 31, 0, 31)


def test_a_logs_position_is_its_place_among_its_transactions_logs() -> None:
    logs = [{"logIndex": "0x7"}, {"logIndex": 8}, {"logIndex": "0x9"}]
    assert [log_position(logs, i) for i in (7, 8, 9)] == ["log:0", "log:1", "log:2"]
    with pytest.raises(LookupError):
        log_position(logs, 10)


def refusal(code: int, message: str) -> Web3RPCError:
    return Web3RPCError(message, rpc_response={"error": {"code": code, "message": message}})


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (-32005, "query returned more than 10000 results"),
        (-32602, "block range is too wide"),
        (-32000, "exceed maximum block range: 5000"),
        (
            -32602,
            "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range",
        ),
        (-32614, "eth_getLogs is limited to a 10,000 range"),
        (-32005, "limit exceeded"),
    ],
)
def test_a_log_query_refused_as_too_large_is_read_as_such(code: int, message: str) -> None:
    assert isinstance(errors.read_scan_refusal(refusal(code, message)), errors.RangeTooLarge)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (-32005, "daily request count exceeded, request rate limited"),
        (429, "Too many requests"),
        (-32000, "Your app has exceeded its compute units per second capacity"),
        (-32000, "internal error"),
        (-32001, "Resource not found"),
    ],
)
def test_a_rate_limit_or_another_failure_is_not_a_range(code: int, message: str) -> None:
    assert isinstance(errors.read_scan_refusal(refusal(code, message)), errors.OtherError)


def test_a_missing_method_and_a_state_the_node_no_longer_keeps() -> None:
    missing = [
        refusal(-32601, "the method debug_traceBlockByHash does not exist/is not available"),
        refusal(-32000, "debug_traceBlockByHash is not supported"),
        MethodUnavailable("Method not found"),
    ]
    assert all(isinstance(errors.read_scan_refusal(e), errors.MethodMissing) for e in missing)
    gone = [
        refusal(-32000, "required historical state unavailable (reexec stopped at block 100)"),
        refusal(-32000, "missing trie node 0xabc (path )"),
    ]
    assert all(isinstance(errors.read_scan_refusal(e), errors.StateGone) for e in gone)
    assert isinstance(errors.read_scan_refusal(ConnectionRefusedError()), errors.OtherError)


L2 = Chain("SCANCHAIN")
NATIVE = Asset(9_001, L2, "ETH", AssetKind.NATIVE, None, 18)
SERVED = Asset(9_002, L2, "USDC", AssetKind.TOKEN, "ERC20", 6)
UNSERVED = Asset(9_003, L2, "USDT", AssetKind.TOKEN, "ERC20", 6)
SPEC = EvmChain(
    chain=L2,
    assets=(NATIVE, SERVED, UNSERVED),
    networks={
        "mainnet": EvmConfig(
            L2,
            "mainnet",
            9_001,
            "ETH",
            {SERVED.id: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", UNSERVED.id: ALICE},
            confirmations=7,
        )
    },
    default_fee_cap=Decimal("0.001"),
    sandbox_gas_price_wei=10**8,
)


def test_the_family_gateway_scans_the_served_assets_over_its_span(tmp_path: Path) -> None:
    plugin = evm_plugin("scan", [SPEC])
    leases = LocalNonceLeases()
    assert plugin.settings_model is not None
    context: GatewayContext[Any] = GatewayContext(
        chain=L2,
        settings=plugin.settings_model(
            scanchain_rpc_url=SecretStr("http://127.0.0.1:1"), scanchain_scan_span=64
        ),
        core=Settings(home=tmp_path),
        clock=ManualClock(),
        catalog=Catalog({L2: (NATIVE, SERVED)}),  # the deployment serves one token
        validate_address=validate_address,
        verify_signature=verify_signature,
        keys=plugin.keys[L2],
        nonce_leases=lambda: leases,
        description=SPEC.description,
    )
    gateway: Any = plugin.gateways["rpc"].build(context)

    assert isinstance(gateway, DepositScanner)
    assert (gateway.confirmations, gateway.scan_span) == (7, 64)
    assert gateway.scanner.native_asset_id == NATIVE.id
    assert gateway.scanner.tokens == {"0x833589fcd6edb6e08f4c7c32d4f71b54bda02913": SERVED.id}
    assert plugin.settings_model().scan_span_of(L2) == 500


def test_the_evm_plugins_span_is_one_setting_for_its_chains() -> None:
    assert EvmSettings().scan_span_of(Chain.BSC) == 500
    assert EvmSettings(evm_scan_span=100).scan_span_of(Chain.POLYGON) == 100
    assert evm_config(Chain.POLYGON, "mainnet").scan_span == 500


def test_a_gateway_without_its_chains_coin_is_refused() -> None:
    from walletcore_chains.evm.gateway import EvmGateway
    from walletcore_chains.evm.plugin import rpc_web3

    config = EvmConfig(L2, "mainnet", 9_001, "ETH")
    with pytest.raises(ValueError, match="no native asset of SCANCHAIN"):
        EvmGateway(config, rpc_web3("http://127.0.0.1:1", 1.0), validate_address)
