"""Amounts out of bounds on a real `walletcore serve` (sandbox profile, SQLite and
PostgreSQL): a quote outside the asset's trade bounds, and a send below the chain's
minimum (BITCOIN's dust limit, SOLANA's rent-exempt minimum of a new account), are 400s
that name the bound and change nothing."""

from __future__ import annotations

from typing import Any

from hardening_support import Server, assert_error_envelope

ONE_WEI = "0.000000000000000001"
#: third-party recipients: a P2WPKH and a P2PKH address (dust 294 and 546 sat), and a
#: SOLANA address that never held SOL
P2WPKH = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
P2PKH = "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"
NEW_SOL_ACCOUNT = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T"
DUST = "(the dust limit of its address type)"
RENT = "(the rent-exempt minimum of a new SOLANA account)"


def trades_of(server: Server, user: str) -> list[Any]:
    answer = server.post("/trades", {"userId": user})
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]  # type: ignore[no-any-return]


def test_a_one_wei_eth_buy_is_refused_naming_the_bound_and_stores_nothing(
    server: Server,
) -> None:
    user = server.clients["A"].user
    before = trades_of(server, user)
    for path in ("/order", "/sell"):
        answer = server.post(path, {"userId": user, "assetId": 2, "cryptoAmount": ONE_WEI})
        assert_error_envelope(
            answer, [400], "cryptoAmount is below the minimum trade of 0.0001 ETH"
        )
    answer = server.post("/order", {"userId": user, "assetId": 2, "fiatAmount": "0.01"})
    body = assert_error_envelope(answer, [400])
    assert body["message"].startswith("fiatAmount is below the minimum trade of 0.0001 ETH (")
    assert trades_of(server, user) == before


def test_a_huge_amount_is_refused_naming_the_bound_and_stores_nothing(server: Server) -> None:
    user = server.clients["A"].user
    before = trades_of(server, user)
    huge = {"userId": user, "assetId": 2, "cryptoAmount": "1" + "0" * 40}
    for path in ("/order", "/sell"):
        assert_error_envelope(
            server.post(path, huge), [400], "cryptoAmount is above the maximum trade of 10000 ETH"
        )
    by_fiat = {"userId": user, "assetId": 1, "fiatAmount": "9" * 45 + ".99", "fiat": "EUR"}
    body = assert_error_envelope(server.post("/order", by_fiat), [400])
    assert body["message"].startswith("fiatAmount is above the maximum trade of 1000 BTC (")
    assert body["message"].endswith(" EUR at the quoted price)")
    assert trades_of(server, user) == before


def test_amounts_at_the_bounds_are_quoted(server: Server) -> None:
    user = server.clients["A"].user
    for amount in ("0.0001", "10000"):
        answer = server.post("/order", {"userId": user, "assetId": 2, "cryptoAmount": amount})
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["cryptoAmount"] == amount


def test_sends_below_the_chains_minimum_are_refused_and_nothing_reaches_the_ledger(
    server: Server,
) -> None:
    """Client A's fee payer is USER: a native send's fee (sandbox: 1,410 sat, 5,000
    lamports) is taken from the amount, and the rest must reach the chain's minimum."""
    client = server.clients["A"]
    created = server.post("/create", {"password": client.password})
    assert created.status_code == 200, created.text
    user, addresses = created.json()["result"]["userId"], created.json()["result"]["addresses"]
    fund = ["sandbox", "fund", "--chain"]
    server.cli_batch(
        [
            [
                *fund,
                "BITCOIN",
                "--address",
                addresses["BITCOIN"],
                "--asset",
                "1",
                "--amount",
                "0.001",
            ],
            [*fund, "SOLANA", "--address", addresses["SOLANA"], "--asset", "6", "--amount", "1"],
        ]
    )
    cases = [
        (1, P2WPKH, "0.00001703", "0.00001704 BTC", f"0.00000294 BTC {DUST}"),
        (1, P2PKH, "0.00001955", "0.00001956 BTC", f"0.00000546 BTC {DUST}"),
        (6, NEW_SOL_ACCOUNT, "0.000895879", "0.00089588 SOL", f"0.00089088 SOL {RENT}"),
    ]
    for index, (asset, recipient, amount, least, minimum) in enumerate(cases):
        body = {"userId": user, "assetId": asset, "recipient": recipient, "amount": amount}
        message = (
            f"amount must be at least {least}: the recipient must receive at least {minimum}, "
            "and the network fee of "
        )
        sent = server.post(
            "/send", {**body, "password": client.password}, X_Request_Id=f"{user}-min-{index}"
        )
        assert assert_error_envelope(sent, [400])["message"].startswith(message)
        assert assert_error_envelope(server.post("/fee", body), [400])["message"].startswith(
            message
        )
    platform = {"assetId": 1, "recipient": P2WPKH, "amount": "0.00000293"}
    assert_error_envelope(
        server.post("/platform/send", platform, X_Request_Id=f"{user}-min-platform"),
        [400],
        f"amount is below the minimum send of 0.00000294 BTC to this recipient {DUST}",
    )
    for asset in (1, 6):  # only the faucet's credit: nothing was sent
        rows = server.post("/transactions", {"userId": user, "assetId": asset})
        assert [row["type"] for row in rows.json()["result"]] == ["receive"], rows.text
