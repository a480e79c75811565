"""One api client can never reach another's users, trades, transactions or sends.

Clients A (fee payer USER) and B (PLATFORM) each have a user with an open, a completed and
a cancelled trade, a user send and a platform send (`hardening_support.provision`); C has
no platform wallet. Each of A and B in turn is the owner, the other the intruder.

The intruder calls every user-scoped endpoint with the owner's user id (in the body, and in
`X-USER-ID` over its own user's body), its own user with the owner's trade ids and tx
hashes, and every platform endpoint with the owner's tx hashes and send ids. Each answer
must be the 404 that a random id of the same shape gets, with the same message (nothing
tells "exists elsewhere" from "does not exist"), and must not contain any of the owner's
identifiers. The owner's trades and balances are unchanged afterwards.

Runs on both servers (SQLite, and PostgreSQL with two workers).
"""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest
from hardening_support import RECIPIENT, Client, Server, assert_error_envelope

PAIRS = [("A", "B"), ("B", "A")]  # (owner, intruder)
IDS = [f"{o}-by-{i}" for o, i in PAIRS]


def random_id() -> str:
    return secrets.token_hex(12)


def random_hash() -> str:
    return "0x" + secrets.token_hex(32)


def secrets_of(owner: Client) -> list[str]:
    """Every identifier of the owner that must never show in the intruder's answers."""
    values = [
        owner.client_id,
        owner.user_tx,
        owner.platform_tx,
        *owner.users,
        *owner.trades.values(),
    ]
    for addresses in owner.users.values():
        values.extend(addresses.values())
    values.extend(owner.platform.values())
    return [v.lower() for v in values if v]


def assert_no_leak(response: httpx.Response, owner: Client) -> None:
    text = response.text.lower()
    for value in secrets_of(owner):
        assert value not in text, f"{value} leaked: {response.text[:300]}"


def user_calls(user: str, trade: str, tx: str, password: str) -> list[tuple[str, dict[str, Any]]]:
    """Every user-scoped endpoint, with these ids."""
    return [
        ("/sell", {"userId": user, "assetId": 2, "cryptoAmount": "0.01"}),
        ("/order", {"userId": user, "assetId": 2, "fiatAmount": "10"}),
        ("/trade", {"userId": user, "tradeId": trade}),
        ("/trade/approve", {"userId": user, "tradeId": trade}),
        ("/trade/cancel", {"userId": user, "tradeId": trade}),
        ("/trades", {"userId": user}),
        ("/extend", {"userId": user, "password": password}),
        ("/addresses", {"userId": user}),
        ("/balance", {"userId": user, "assetId": 2}),
        ("/info", {"userId": user, "assetId": 2}),
        ("/transactions", {"userId": user, "assetId": 2}),
        ("/txid", {"userId": user, "assetId": 2, "txHash": tx}),
        ("/fee", {"userId": user, "assetId": 2, "recipient": RECIPIENT, "amount": "0.01"}),
        (
            "/send",
            {
                "userId": user,
                "assetId": 2,
                "recipient": RECIPIENT,
                "amount": "0.01",
                "password": password,
            },
        ),
    ]


def call(server: Server, path: str, body: Any, client: str, **headers: str) -> httpx.Response:
    if path in ("/send", "/platform/send") and "X_Request_Id" not in headers:
        headers["X_Request_Id"] = f"cross-{secrets.token_hex(8)}"
    return server.post(path, body, client=client, **headers)


def assert_same_404(
    server: Server, owner: Client, path: str, probe: httpx.Response, control: httpx.Response
) -> None:
    """The probe (owner's ids) is the 404 of the control (random ids), message and all."""
    probed = assert_error_envelope(probe, {404})
    controlled = assert_error_envelope(control, {404})
    assert probed["message"] == controlled["message"], (path, probed, controlled)
    assert_no_leak(probe, owner)


def snapshot(server: Server, owner: Client) -> dict[str, Any]:
    """What the owner sees of its own user: trade states and balance."""
    user = owner.user
    trades = {
        status: server.post("/trade", {"userId": user, "tradeId": t}, client=owner.name).json()[
            "result"
        ]["status"]
        for status, t in owner.trades.items()
    }
    balance = server.post("/balance", {"userId": user, "assetId": 2}, client=owner.name)
    platform = server.post("/platform/balance", {"assetId": 2}, client=owner.name)
    return {
        "trades": trades,
        "balance": balance.json()["result"],
        "platform": platform.json()["result"],
    }


@pytest.mark.parametrize(("owner_name", "intruder"), PAIRS, ids=IDS)
def test_user_endpoints_with_the_owners_user_id_are_404(
    server: Server, owner_name: str, intruder: str
) -> None:
    owner = server.clients[owner_name]
    before = snapshot(server, owner)
    probes = user_calls(owner.user, owner.trades["open"], owner.user_tx or "", owner.password)
    controls = user_calls(random_id(), random_id(), random_hash(), owner.password)
    for (path, body), (_, control_body) in zip(probes, controls, strict=True):
        probe = call(server, path, body, intruder)
        control = call(server, path, control_body, intruder)
        assert_same_404(server, owner, path, probe, control)
    assert snapshot(server, owner) == before, "the intruder changed the owner's state"


@pytest.mark.parametrize(("owner_name", "intruder"), PAIRS, ids=IDS)
def test_x_user_id_with_the_owners_user_is_404(
    server: Server, owner_name: str, intruder: str
) -> None:
    """The header overrides the intruder's own (valid) user in the body: still 404."""
    owner, own = server.clients[owner_name], server.clients[intruder]
    before = snapshot(server, owner)
    bodies = user_calls(own.user, owner.trades["open"], owner.user_tx or "", owner.password)
    for path, body in bodies:
        probe = call(server, path, body, intruder, X_USER_ID=owner.user)
        control = call(server, path, body, intruder, X_USER_ID=random_id())
        assert_same_404(server, owner, path, probe, control)
    assert snapshot(server, owner) == before


@pytest.mark.parametrize(("owner_name", "intruder"), PAIRS, ids=IDS)
def test_own_user_with_the_owners_trades_and_hashes_is_404(
    server: Server, owner_name: str, intruder: str
) -> None:
    owner, own = server.clients[owner_name], server.clients[intruder]
    before = snapshot(server, owner)
    user = own.user
    for trade in owner.trades.values():
        for path in ("/trade", "/trade/approve", "/trade/cancel"):
            probe = call(server, path, {"userId": user, "tradeId": trade}, intruder)
            control = call(server, path, {"userId": user, "tradeId": random_id()}, intruder)
            assert_same_404(server, owner, path, probe, control)
    for tx in (owner.user_tx, owner.platform_tx):
        probe = call(server, "/txid", {"userId": user, "assetId": 2, "txHash": tx}, intruder)
        control = call(
            server, "/txid", {"userId": user, "assetId": 2, "txHash": random_hash()}, intruder
        )
        assert_same_404(server, owner, "/txid", probe, control)
    # The intruder's own lists hold none of the owner's trades or transactions.
    for path, body in (
        ("/trades", {"userId": user}),
        ("/transactions", {"userId": user, "assetId": 2}),
        ("/info", {"userId": user, "assetId": 2}),
    ):
        listed = call(server, path, body, intruder)
        assert listed.status_code == 200, listed.text
        assert_no_leak(listed, owner)
    assert snapshot(server, owner) == before


@pytest.mark.parametrize(("owner_name", "intruder"), PAIRS, ids=IDS)
def test_platform_endpoints_never_reach_the_owners_wallet(
    server: Server, owner_name: str, intruder: str
) -> None:
    owner, own = server.clients[owner_name], server.clients[intruder]
    before = snapshot(server, owner)
    # Lookups of the owner's hashes (platform and user sends) are the 404 of a random hash.
    for tx in (owner.platform_tx, owner.user_tx):
        probe = call(server, "/platform/txid", {"assetId": 2, "txHash": tx}, intruder)
        control = call(server, "/platform/txid", {"assetId": 2, "txHash": random_hash()}, intruder)
        assert_same_404(server, owner, "/platform/txid", probe, control)
    # Reads answer with the intruder's own wallet, nothing of the owner's.
    addresses = call(server, "/platform/addresses", None, intruder)
    assert addresses.status_code == 200 and addresses.json()["result"] == own.platform
    for path in ("/platform/balance", "/platform/info", "/platform/transactions"):
        read = call(server, path, {"assetId": 2}, intruder)
        assert read.status_code == 200, read.text
        assert_no_leak(read, owner)
    # `sender` is ignored: naming the owner's wallet changes nothing.
    fee = {"assetId": 2, "recipient": RECIPIENT}
    plain = call(server, "/platform/fee", fee, intruder)
    with_sender = call(
        server, "/platform/fee", {**fee, "sender": owner.platform["ETHEREUM"]}, intruder
    )
    assert plain.status_code == with_sender.status_code == 200, with_sender.text
    assert plain.json()["result"] == with_sender.json()["result"]
    # X-USER-ID (the owner's user) on a platform endpoint: 400, as for any user.
    for path, body in (
        ("/platform/addresses", None),
        ("/platform/balance", {"assetId": 2}),
        ("/platform/txid", {"assetId": 2, "txHash": owner.platform_tx}),
    ):
        refused = call(server, path, body, intruder, X_USER_ID=owner.user)
        assert_error_envelope(refused, {400})
        assert_no_leak(refused, owner)
    assert snapshot(server, owner) == before


@pytest.mark.parametrize(("owner_name", "intruder"), PAIRS, ids=IDS)
def test_the_owners_send_ids_are_not_the_intruders(
    server: Server, owner_name: str, intruder: str
) -> None:
    """X-Request-Id is the idempotency key of a client's sends, not of the service: the
    owner's ids replay nothing for the intruder (no receipt, no 409/422 'in use').

    The platform send is the intruder's own, real (0.001 ETH): a fresh send. The user send
    uses a wrong password: the 401 of any new send, not the owner's receipt."""
    owner, own = server.clients[owner_name], server.clients[intruder]
    body = {"assetId": 2, "recipient": RECIPIENT, "amount": "0.001"}
    sent = call(server, "/platform/send", body, intruder, X_Request_Id=owner.platform_send_id)
    assert sent.status_code == 200, sent.text
    assert sent.json()["result"]["txHash"] not in (owner.platform_tx, owner.user_tx)
    assert_no_leak(sent, owner)

    user_body = {
        "userId": own.user,
        "assetId": 2,
        "recipient": RECIPIENT,
        "amount": "0.01",
        "password": "not this wallet's password",
    }
    probe = call(server, "/send", user_body, intruder, X_Request_Id=owner.user_send_id)
    control = call(server, "/send", user_body, intruder, X_Request_Id=f"fresh-{random_id()}")
    assert probe.status_code == control.status_code == 401, (probe.text, control.text)
    assert probe.json()["message"] == control.json()["message"]
    assert_no_leak(probe, owner)


@pytest.mark.parametrize("owner_name", ["A", "B"])
def test_a_client_without_a_platform_wallet_gets_404_everywhere(
    server: Server, owner_name: str
) -> None:
    """C has no platform wallet: every platform endpoint is its 404, whatever ids it sends."""
    owner = server.clients[owner_name]
    calls = [
        ("/platform/addresses", None),
        ("/platform/balance", {"assetId": 2}),
        ("/platform/info", {"assetId": 2}),
        ("/platform/transactions", {"assetId": 2}),
        ("/platform/txid", {"assetId": 2, "txHash": owner.platform_tx}),
        ("/platform/txid", {"assetId": 2, "txHash": owner.user_tx}),
        (
            "/platform/fee",
            {"assetId": 2, "recipient": RECIPIENT, "sender": owner.platform["ETHEREUM"]},
        ),
        ("/platform/send", {"assetId": 2, "recipient": RECIPIENT, "amount": "0.001"}),
    ]
    for path, body in calls:
        answer = call(server, path, body, "C", X_Request_Id=owner.platform_send_id or "x")
        assert_error_envelope(answer, {404})
        assert_no_leak(answer, owner)
