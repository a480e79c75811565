"""Withdrawal policies on anvil, a real EVM node with a mempool, over HTTP (docs/policies.md).
The node mines only when the test says (`--no-mining`), so what a send put in the pool
stays there to be seen.

- "allowlisted destinations only": a send to an allowlisted address (cooling-off 0) is
  signed, reaches the pool and lands; a send to any other address is a `403` naming the
  deny rule, and nothing reaches the node (pool and nonce unchanged), nothing is signed
  (no key unsealed, its send record holds no transaction); the refusal is in the audit
  log (`policy.decide`, outcome `403`, target the rule);
- a send a `require_approval` rule holds answers `202` with its approval and signs
  nothing; once two operators approved it, the same request (its X-Request-Id) signs and
  sends it, once: one transaction on chain, and every later replay answers its hash.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, rpc_env, sign_in
from litestar.testing import AsyncTestClient

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.ports import ChainSigner
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.anvil import AnvilNode, find_anvil
from walletcore_litestar import create_app

pytestmark = [
    pytest.mark.sends,
    pytest.mark.skipif(
        find_anvil() is None, reason="no anvil: run `python3 dev.py test` (it installs it)"
    ),
]
ETH = CONTRACT_CATALOG.asset_by_id(2)
#: Third parties (README's examples): never a wallet of the service.
ALLOWLISTED = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
STRANGER = "0x6Fac4D18c912343BF86fa7049364Dd4E424Ab9C0"


class CountingKeyStore:
    """The test's sealed keystore, counting the keys it unseals."""

    def __init__(self, inner: SealedKeyStore) -> None:
        self.inner = inner
        self.unsealed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def unseal(
        self, sealed: bytes, password: str | None, chain: Chain
    ) -> AbstractAsyncContextManager[ChainSigner]:
        self.unsealed += 1
        return self.inner.unseal(sealed, password, chain)


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    with AnvilNode(Chain.ETHEREUM, mining=False) as started:
        yield started


@pytest.fixture
def counting(keystore: SealedKeyStore) -> CountingKeyStore:
    return CountingKeyStore(keystore)


@pytest.fixture
async def api(
    tmp_path: Path,
    node: AnvilNode,
    clock: ManualClock,
    counting: CountingKeyStore,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Api]:
    """The HTTP app on the SQL storage (SQLite) and anvil, signed in as an api client."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {
        **rpc_env(home, Chain.ETHEREUM),
        "WALLETCORE_EVM_NETWORK": "mainnet",
        "WALLETCORE_ETHEREUM_RPC_URL": node.url,
        "WALLETCORE_EVM_RPC_TIMEOUT_SECONDS": "5",
        "WALLETCORE_EVM_TOKENS": json.dumps({str(k): v for k, v in node.tokens.items()}),
        "WALLETCORE_JOBS": "off",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    container = create_container(Settings(), clock=clock, keystore=counting)
    async with AsyncTestClient(create_app(container)) as client:
        yield await sign_in(client, container)
    await container.gateways()[Chain.ETHEREUM].aclose()  # type: ignore[attr-defined]
    await container.storage().aclose()


async def funded_user(api: Api, node: AnvilNode) -> tuple[str, str]:
    """A new user holding 1 ETH: (user id, address)."""
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    address = created["addresses"]["ETHEREUM"]
    node.fund(address, ETH, 10**18)
    return created["userId"], address


def send_body(user_id: str, recipient: str, amount: str = "0.01") -> dict[str, Any]:
    return {
        "userId": user_id,
        "assetId": ETH.id,
        "recipient": recipient,
        "amount": amount,
        "password": PASSWORD,
    }


async def audit_of(container: Container, client_id: str, action: str) -> list[Any]:
    async with container.storage().read() as unit:
        entries = await unit.audit.newest(limit=500)
    return [e for e in entries if e.client_id == client_id and e.action == action]


async def test_only_allowlisted_destinations_reach_the_node(api: Api, node: AnvilNode) -> None:
    policies = api.container.policies()
    await policies.set_policy(
        api.client_id,
        {
            "rules": [
                {
                    "name": "allowlisted-only",
                    "wallet": "user",
                    "action": "allow",
                    "destinations": ["allowlisted", "own"],
                },
                {"name": "no-strangers", "wallet": "user", "action": "deny"},
            ],
            "coolingOffSeconds": 0,
        },
        set_by="test",
    )
    await policies.allow_address(
        api.client_id, Chain.ETHEREUM, ALLOWLISTED, "treasury", asset_id=None, by="test"
    )
    user_id, address = await funded_user(api, node)
    keystore: CountingKeyStore = api.container.keystore()

    allowed = assert_ok(
        await api.post("/send", send_body(user_id, ALLOWLISTED), X_Request_Id="to-treasury")
    )
    assert node.pooled() == [allowed["txHash"]]
    assert node.nonce(address, "pending") == 1
    unsealed = keystore.unsealed
    assert unsealed >= 1

    refused = await api.post("/send", send_body(user_id, STRANGER), X_Request_Id="to-stranger")
    assert_error(
        refused,
        403,
        "Transfer refused by withdrawal policy rule no-strangers: the rule denies such transfers",
    )
    assert node.pooled() == [allowed["txHash"]]  # nothing more reached the node
    assert node.nonce(address, "pending") == 1
    assert keystore.unsealed == unsealed  # no key was unsealed for it
    async with api.container.storage().read() as unit:
        record = await unit.sends.get(api.client_id, "to-stranger")
    assert record is None or (record.tx_hash is None and record.raw_tx is None), record
    decisions = await audit_of(api.container, api.client_id, "policy.decide")
    assert [(e.outcome, e.target) for e in reversed(decisions)] == [
        ("ok", "allowlisted-only"),
        ("403", "no-strangers"),
    ]
    refusal = decisions[0]
    assert refusal.request_id == refused.json()["requestId"]
    assert refusal.user_id == user_id
    assert PASSWORD not in (refusal.detail or "")
    sends = await audit_of(api.container, api.client_id, "wallet.send")
    assert ("403", None) in [(e.outcome, e.target) for e in sends]

    node.mine(1)
    landed = node.wait_receipt(allowed["txHash"])
    assert landed["status"] == "0x1"
    assert landed["to"].lower() == ALLOWLISTED.lower()
    assert node.nonce(address) == 1 and node.pooled() == []
    assert Decimal(int(node.call("eth_getBalance", ALLOWLISTED, "latest"), 16)) > 0


async def test_a_held_send_is_signed_once_after_two_operators_approve(
    api: Api, node: AnvilNode
) -> None:
    policies = api.container.policies()
    await policies.set_policy(
        api.client_id,
        {
            "rules": [
                {
                    "name": "four-eyes",
                    "wallet": "user",
                    "action": "require_approval",
                    "approvals": 2,
                    "over": {"amount": "0.05", "assetId": ETH.id},
                },
                {"name": "small", "wallet": "user", "action": "allow"},
            ],
        },
        set_by="test",
    )
    alice, _ = await policies.add_operator("alice")
    bob, _ = await policies.add_operator("bob")
    user_id, address = await funded_user(api, node)
    keystore: CountingKeyStore = api.container.keystore()
    body = send_body(user_id, STRANGER, "0.1")
    before = keystore.unsealed

    held = await api.post("/send", body, X_Request_Id="big-one")
    assert held.status_code == 202, held.text
    result = held.json()["result"]
    assert (result["txHash"], result["status"], result["rule"]) == (
        None,
        "awaiting_approval",
        "four-eyes",
    )
    assert (result["approvals"], result["required"]) == (0, 2)
    again = await api.post("/send", body, X_Request_Id="big-one")  # still waiting
    assert again.status_code == 202, again.text
    assert again.json()["result"]["approvalId"] == result["approvalId"]
    assert node.pooled() == [] and node.nonce(address, "pending") == 0
    assert keystore.unsealed == before  # nothing was signed

    first = await policies.approve(result["approvalId"], alice)
    assert (str(first.status), first.approvers) == ("pending", ("alice",))
    waiting = await api.post("/send", body, X_Request_Id="big-one")
    assert waiting.status_code == 202 and waiting.json()["result"]["approvals"] == 1
    assert node.pooled() == []
    second = await policies.approve(result["approvalId"], bob)
    assert (str(second.status), second.approvers) == ("approved", ("alice", "bob"))

    sent = assert_ok(await api.post("/send", body, X_Request_Id="big-one"))
    assert node.pooled() == [sent["txHash"]]
    replays = [assert_ok(await api.post("/send", body, X_Request_Id="big-one")) for _ in range(3)]
    assert {r["txHash"] for r in replays} == {sent["txHash"]}
    assert node.pooled() == [sent["txHash"]] and node.nonce(address, "pending") == 1
    node.mine(1)
    assert node.wait_receipt(sent["txHash"])["status"] == "0x1"
    assert node.nonce(address) == 1  # one transaction from the wallet, ever
    async with api.container.storage().read() as unit:
        record = await unit.sends.get(api.client_id, "big-one")
    assert record is not None and record.tx_hash == sent["txHash"]
    decisions = await audit_of(api.container, api.client_id, "policy.decide")
    assert [(e.outcome, e.target) for e in reversed(decisions)] == [
        ("202", "four-eyes"),
        ("202", "four-eyes"),
        ("202", "four-eyes"),
        ("ok", "four-eyes"),
    ]
