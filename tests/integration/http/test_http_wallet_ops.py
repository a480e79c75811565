"""Wallet operations over HTTP: `/balance` ... `/send` and `/platform/...` on the sandbox
chains; envelopes, the wrong password per chain, idempotent sends, the platform rules."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, sign_in

from walletcore.clock import ManualClock
from walletcore.container import Container
from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.ids import new_id
from walletcore.testing import CONTRACT_CATALOG, autocommit
from walletcore_sandbox.faucet import fund

OUTSIDE = {
    Chain.BITCOIN: "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
    Chain.ETHEREUM: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.BSC: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.POLYGON: "0x52908400098527886E0F7030069857D2E4169EE7",
    Chain.TRON: "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7",
    Chain.SOLANA: "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T",
}
ROW_KEYS = {"hash", "type", "amount", "fee", "status", "date"}
DATETIME = re.compile(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")


async def wallet(api: Api) -> tuple[str, dict[str, str], str]:
    """A new user with a wallet: (user id, addresses by chain name, seed phrase)."""
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    return created["userId"], created["addresses"], created["mnemonic"]


async def give(container: Container, address: str, asset_id: int, amount: str) -> None:
    chain = CONTRACT_CATALOG.asset_by_id(asset_id).chain.value
    await fund(
        container.settings(),
        container.gateways(),
        container.catalog(),
        chain=chain,
        address=address,
        asset_id=asset_id,
        amount=amount,
    )


def send_body(user_id: str, asset_id: int, amount: str, **extra: Any) -> dict[str, Any]:
    recipient = OUTSIDE[CONTRACT_CATALOG.asset_by_id(asset_id).chain]
    body = {"userId": user_id, "assetId": asset_id, "recipient": recipient, "amount": amount}
    return {**body, "password": PASSWORD, **extra}


# -- a user's wallet -----------------------------------------------------------------------
async def test_balance_info_history_and_lookup(
    api: Api, container: Container, clock: ManualClock
) -> None:
    user, addresses, _ = await wallet(api)
    await give(container, addresses["ETHEREUM"], 2, "1.25")
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": "2"})) == "1.25"
    sent = assert_ok(await api.post("/send", send_body(user, 2, "0.25"), X_Request_Id="pay-1"))
    assert set(sent) == {"txHash", "status", "fee", "feePayer"}
    assert sent["status"] == "pending" and re.fullmatch(r"0x[0-9a-f]{64}", sent["txHash"])
    info = assert_ok(await api.post("/info", {"userId": user, "assetId": 2}))
    assert info["address"] == addresses["ETHEREUM"] and info["balance"] == "1"
    assert [r["type"] for r in info["transactions"]] == ["send", "receive"]
    rows = assert_ok(await api.post("/transactions", {"userId": user, "assetId": 2}))
    assert all(set(r) == ROW_KEYS for r in rows) and rows == info["transactions"]
    assert rows[0]["date"] is None and rows[0]["fee"] == sent["fee"] == "0.00042"
    body = {"userId": user, "assetId": 2, "txHash": sent["txHash"]}
    assert assert_ok(await api.post("/txid", body))["status"] == "pending"
    clock.advance(3)
    row = assert_ok(await api.post("/txid", body))
    assert row["status"] == "success" and DATETIME.match(row["date"])
    assert row["amount"] == "0.24958"


async def test_fee_is_a_native_decimal_and_a_tron_object_on_tron(api: Api) -> None:
    user, _, _ = await wallet(api)

    async def fee(asset_id: int, **extra: Any) -> Any:
        body = {"userId": user, "assetId": asset_id, **extra}
        return await api.post(
            "/fee", {"recipient": OUTSIDE[CONTRACT_CATALOG.asset_by_id(asset_id).chain], **body}
        )

    assert assert_ok(await fee(2)) == "0.00042"
    assert assert_ok(await fee(1, amount="0.1")) == "0.0000141"
    assert assert_ok(await fee(4)) == {"bandwidth": 268}
    assert assert_ok(await fee(41)) == {"bandwidth": 345, "energy": 130000}
    assert_error(await fee(2, amount="0.1234567890123456789"), 400)
    bad = {"userId": user, "assetId": 4, "recipient": OUTSIDE[Chain.ETHEREUM]}
    assert_error(await api.post("/fee", bad), 400)


WRONG_PASSWORD = [
    (Chain.BITCOIN, 400, "Invalid password"),
    (Chain.ETHEREUM, 401, "Invalid credentials"),
    (Chain.BSC, 401, "Invalid credentials"),
    (Chain.TRON, 401, "Invalid credentials"),
    (Chain.POLYGON, 401, "Invalid credentials"),
    (Chain.SOLANA, 401, "Invalid password"),
]


@pytest.mark.parametrize(("chain", "status", "message"), WRONG_PASSWORD)
async def test_send_answers_a_wrong_password_per_chain(
    api: Api, container: Container, chain: Chain, status: int, message: str
) -> None:
    user, addresses, _ = await wallet(api)
    native = CONTRACT_CATALOG.native_asset(chain)
    await give(container, addresses[chain.value], native.id, "100")
    body = send_body(user, native.id, "1", password="not the password")
    assert_error(await api.post("/send", body, X_Request_Id="pay-1"), status, message)
    # Nothing was signed: the corrected request, under the same id, sends once.
    sent = assert_ok(await api.post("/send", send_body(user, native.id, "1"), X_Request_Id="pay-1"))
    again = assert_ok(
        await api.post("/send", send_body(user, native.id, "1"), X_Request_Id="pay-1")
    )
    assert again == sent


async def test_send_idempotency_over_http(api: Api, container: Container) -> None:
    user, addresses, _ = await wallet(api)
    await give(container, addresses["SOLANA"], 6, "1")
    body = send_body(user, 6, "0.5")
    assert_error(
        await api.post("/send", body),
        400,
        "X-Request-Id is required on a send: it is the idempotency key",
    )
    first = await api.post("/send", body, X_Request_Id="pay-1")
    result = assert_ok(first)
    assert first.headers["x-request-id"] == "pay-1"
    assert assert_ok(await api.post("/send", body, X_Request_Id="pay-1")) == result
    assert_error(
        await api.post("/send", {**body, "amount": "0.4"}, X_Request_Id="pay-1"),
        422,
        "X-Request-Id was already used with a different request",
    )
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 6})) == "0.5"


async def test_the_user_header_overrides_the_body(api: Api, container: Container) -> None:
    user, addresses, _ = await wallet(api)
    await give(container, addresses["TRON"], 4, "50")
    other = new_id()
    assert assert_ok(await api.post("/balance", {"userId": other, "assetId": 4}, X_USER_ID=user))
    sent = await api.post("/send", send_body(other, 4, "10"), X_USER_ID=user, X_Request_Id="pay-1")
    assert assert_ok(sent)["feePayer"] == "USER"
    assert_error(await api.post("/balance", {"userId": other, "assetId": 4}), 404)


async def test_user_endpoints_refuse_what_they_must(api: Api, container: Container) -> None:
    narrow = await sign_in(api.http, container, name="Narrow", assets=[1, 2])
    user, _, _ = await wallet(narrow)
    assert_error(await narrow.post("/balance", {"userId": user, "assetId": 21}), 403)
    assert_error(
        await narrow.post("/balance", {"userId": user, "assetId": 7}), 400, "Unknown assetId"
    )
    assert_error(await narrow.post("/balance", {"userId": user, "assetId": 1}), 404)  # indexer
    assert_error(
        await narrow.post("/txid", {"userId": user, "assetId": 2, "txHash": "0x" + "ab" * 32}), 404
    )
    assert_error(await narrow.post("/balance", {"userId": user, "assetId": 2, "extra": 1}), 400)
    assert_error(await narrow.post("/send", {"userId": user}, X_Request_Id="r"), 400)


async def test_no_secret_in_logs_error_bodies_or_audit(
    api: Api, container: Container, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    user, addresses, mnemonic = await wallet(api)
    await give(container, addresses["ETHEREUM"], 2, "1")
    bodies = []
    for password, rid in [("wrong horse battery", "p1"), (PASSWORD, "p1"), ("wrong", "p1")]:
        answer = await api.post(
            "/send", send_body(user, 2, "0.1", password=password), X_Request_Id=rid
        )
        bodies.append(answer.text)
    bodies.append(
        (
            await api.post("/send", send_body(user, 2, "9", password="9 wrong"), X_Request_Id="p2")
        ).text
    )
    audit = await autocommit(container.storage()).audit.newest(limit=500)
    texts = [caplog.text, *bodies, *map(repr, audit)]
    for secret in (mnemonic, PASSWORD, "wrong horse battery", "9 wrong"):
        assert all(secret not in text for text in texts), secret
    assert any(e.action == "wallet.send" and e.outcome == "401" for e in audit)


async def test_no_trade_password_in_logs_error_bodies_reprs_or_audit(
    api: Api, container: Container, caplog: pytest.LogCaptureFixture
) -> None:
    """The password of `/trade/approve` and `/trade/collect` signs a sell's collection: it
    never reaches a log line, an answer, a settlement or the audit log."""
    caplog.set_level(logging.DEBUG)
    user, addresses, _ = await wallet(api)
    await give(container, addresses["ETHEREUM"], 2, "1")
    await container.wallets().provision_platform(api.client_id)
    wrong, other = "wrong horse battery", "approve wrong"
    bodies = []

    async def sell() -> str:
        quote = assert_ok(
            await api.post("/sell", {"userId": user, "assetId": 2, "cryptoAmount": "0.1"})
        )
        return str(quote["tradeId"])

    first = await sell()
    for password in (other, PASSWORD):  # a wrong password, then the right one: collected
        answer = await api.post(
            "/trade/approve", {"userId": user, "tradeId": first, "password": password}
        )
        bodies.append(answer.text)
    assert_ok(await api.post("/trade", {"userId": user, "tradeId": first}))
    second = await sell()
    waiting = assert_ok(await api.post("/trade/approve", {"userId": user, "tradeId": second}))
    assert waiting["settlement"]["status"] == "awaiting_password"
    for password in (wrong, PASSWORD, PASSWORD):  # wrong, collected, answered as it stands
        answer = await api.post(
            "/trade/collect", {"userId": user, "tradeId": second, "password": password}
        )
        bodies.append(answer.text)
    assert '"status":"sent"' in bodies[-1].replace(" ", "")
    audit = await autocommit(container.storage()).audit.newest(limit=500)
    settlements = await autocommit(container.storage()).settlements.of_trades(
        api.client_id, [first, second]
    )
    assert set(settlements) == {first, second}
    texts = [caplog.text, *bodies, *map(repr, audit), *map(repr, settlements.values())]
    for secret in (PASSWORD, wrong, other):
        assert all(secret not in text for text in texts), secret
    refused = {(e.action, e.outcome) for e in audit if e.outcome == "401"}
    assert refused == {("trade.approve", "401"), ("trade.collect", "401")}


# -- the platform wallet ---------------------------------------------------------------------
PLATFORM = {
    "/platform/balance": {"assetId": 2},
    "/platform/info": {"assetId": 2},
    "/platform/transactions": {"assetId": 2},
    "/platform/txid": {"assetId": 2, "txHash": "0x" + "ab" * 32},
    "/platform/fee": {"assetId": 2, "recipient": OUTSIDE[Chain.ETHEREUM]},
    "/platform/send": {"assetId": 2, "recipient": OUTSIDE[Chain.ETHEREUM], "amount": "0.1"},
}


@pytest.mark.parametrize("path", PLATFORM)
async def test_platform_endpoints_404_before_provisioning_and_400_with_a_user(
    api: Api, container: Container, path: str
) -> None:
    assert_error(await api.post(path, PLATFORM[path], X_Request_Id="r-1"), 404)
    await container.wallets().provision_platform(api.client_id)
    assert_error(
        await api.post(path, PLATFORM[path], X_USER_ID=new_id(), X_Request_Id="r-2"),
        400,
        "X-USER-ID is not accepted on platform endpoints",
    )
    assert_error(await api.post(path, {**PLATFORM[path], "userId": new_id()}), 400)


@pytest.mark.parametrize("asset_id", [42, 51, 61])
@pytest.mark.parametrize("path", PLATFORM)
async def test_flagged_assets_are_503_on_platform_endpoints(
    api: Api, container: Container, path: str, asset_id: int
) -> None:
    await container.wallets().provision_platform(api.client_id)
    body = {**PLATFORM[path], "assetId": asset_id}
    if "recipient" in body:
        body["recipient"] = OUTSIDE[CONTRACT_CATALOG.asset_by_id(asset_id).chain]
    answer = assert_error(await api.post(path, body, X_Request_Id=f"r-{asset_id}"), 503)
    assert "not available on /platform/" in answer["message"]


async def test_platform_fee_refuses_its_own_address_and_ignores_a_sender(
    api: Api, container: Container
) -> None:
    addresses = await container.wallets().provision_platform(api.client_id)
    own = addresses[Chain.TRON]
    assert_error(
        await api.post("/platform/fee", {"assetId": 4, "recipient": own}),
        400,
        "recipient must differ from the platform wallet's own address",
    )
    body = {"assetId": 41, "recipient": OUTSIDE[Chain.TRON], "sender": OUTSIDE[Chain.TRON]}
    assert assert_ok(await api.post("/platform/fee", body)) == {"bandwidth": 345, "energy": 130000}


async def test_platform_send_and_its_history(
    api: Api, container: Container, clock: ManualClock
) -> None:
    addresses = await container.wallets().provision_platform(api.client_id)
    await give(container, addresses[Chain.POLYGON], 5, "10")
    body = {"assetId": 5, "recipient": OUTSIDE[Chain.POLYGON], "amount": "1"}
    assert_error(await api.post("/platform/send", body), 400)
    sent = assert_ok(await api.post("/platform/send", body, X_Request_Id="p-1"))
    assert (sent["fee"], sent["feePayer"]) == ("0.00063", "PLATFORM")
    assert assert_ok(await api.post("/platform/send", body, X_Request_Id="p-1")) == sent
    assert assert_ok(await api.post("/platform/balance", {"assetId": 5})) == "8.99937"
    clock.advance(3)
    row = assert_ok(await api.post("/platform/txid", {"assetId": 5, "txHash": sent["txHash"]}))
    assert (row["type"], row["amount"], row["status"]) == ("send", "1", "success")
    rows = assert_ok(await api.post("/platform/transactions", {"assetId": "5"}))
    assert rows[0]["hash"] == sent["txHash"]
    info = assert_ok(await api.post("/platform/info", {"assetId": 5}))
    assert info["address"] == addresses[Chain.POLYGON] and info["transactions"] == rows


async def test_platform_pays_a_users_fee_over_http(api: Api, container: Container) -> None:
    payer = await sign_in(api.http, container, name="Payer", fee_payer=FeePayer.PLATFORM)
    addresses = await container.wallets().provision_platform(payer.client_id)
    await give(container, addresses[Chain.ETHEREUM], 2, "1")
    user, mine, _ = await wallet(payer)
    await give(container, mine["ETHEREUM"], 21, "50")
    sent = assert_ok(await payer.post("/send", send_body(user, 21, "5"), X_Request_Id="t-1"))
    assert (sent["fee"], sent["feePayer"]) == ("0.0013", "PLATFORM")
