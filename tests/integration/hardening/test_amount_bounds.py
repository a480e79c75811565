"""Amounts out of bounds on a real `walletcore serve` (sandbox profile, SQLite and
PostgreSQL): a quote outside the asset's trade bounds, and a send below the chain's
minimum, are 400s that name the bound and change nothing."""

from __future__ import annotations

from typing import Any

from hardening_support import Server, assert_error_envelope

ONE_WEI = "0.000000000000000001"


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
