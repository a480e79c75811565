"""The wire shape of a trade (`walletcore_litestar.schemas.TradeView`): exact field names,
strings cut to 6 places, optional fields omitted when unset."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import msgspec

from walletcore.domain.assets import Fiat
from walletcore.domain.trade import Figures, FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore_litestar.schemas import TradeView

CREATED = datetime(2026, 1, 1, 12, 0, 30, 123456, tzinfo=UTC)
TRADE = Trade(
    trade_id="0123456789abcdef01234567",
    client_id="c" * 24,
    user_id="u" * 24,
    side=Side.BUY,
    asset_id=21,
    symbol="USDT",
    fiat=Fiat.EUR,
    fixed_leg=FixedLeg.FIAT,
    quote=Quote(
        Decimal("108.69565217"),
        Decimal("100.00"),
        Decimal("0.92000000"),
        CREATED + timedelta(seconds=60),
    ),
    status=TradeStatus.OPEN,
    created_at=CREATED,
)


def trade_view(trade: Trade) -> Any:
    return msgspec.to_builtins(TradeView.of(trade))


def test_an_open_quote() -> None:
    assert trade_view(TRADE) == {
        "tradeId": "0123456789abcdef01234567",
        "side": "buy",
        "status": "open",
        "assetId": 21,
        "symbol": "USDT",
        "fiat": "EUR",
        "cryptoAmount": "108.695652",
        "fiatAmount": "100",
        "price": "0.92",
        "quote": {
            "cryptoAmount": "108.695652",
            "fiatAmount": "100",
            "price": "0.92",
            "expiresAt": "2026-01-01T12:01:30.123Z",
        },
        "createdAt": "2026-01-01T12:00:30.123Z",
        "approvedAt": None,
        "completedAt": None,
    }


def test_a_settled_trade_shows_executed_figures_over_an_unchanged_quote() -> None:
    done = replace(
        TRADE,
        status=TradeStatus.COMPLETED,
        approved_at=CREATED + timedelta(seconds=10),
        completed_at=CREATED + timedelta(seconds=11),
        approved=Figures(Decimal("108.1"), Decimal(100), Decimal("0.925")),
        executed=Figures(Decimal("108.00000099"), Decimal(100), Decimal("0.9259259259")),
        reference="SBX-1",
    )
    view = trade_view(done)
    assert (view["cryptoAmount"], view["fiatAmount"], view["price"]) == ("108", "100", "0.925925")
    assert view["quote"] == trade_view(TRADE)["quote"]
    assert (view["approvedAt"], view["completedAt"]) == (
        "2026-01-01T12:00:40.123Z",
        "2026-01-01T12:00:41.123Z",
    )
    assert view["reference"] == "SBX-1" and "failureReason" not in view


def test_a_failed_trade_carries_its_reason_and_an_unreadable_amount_is_null() -> None:
    failed = replace(
        TRADE,
        status=TradeStatus.FAILED,
        failure_reason="no liquidity",
        completed_at=CREATED,
        quote=replace(TRADE.quote, crypto_amount=None),
    )
    view = trade_view(failed)
    assert view["failureReason"] == "no liquidity" and "reference" not in view
    assert view["cryptoAmount"] is None and view["quote"]["cryptoAmount"] is None


def test_the_bytes_keep_the_field_order_of_the_spec() -> None:
    encoded = msgspec.json.encode(TradeView.of(replace(TRADE, reference="SBX-1")))
    assert encoded.startswith(b'{"tradeId":"0123456789abcdef01234567","side":"buy","status":"open"')
    assert encoded.endswith(b'"approvedAt":null,"completedAt":null,"reference":"SBX-1"}')


def test_secrets_stay_out_of_reprs() -> None:
    from walletcore.services.auth import IssuedToken
    from walletcore.services.wallets import CreatedWallet as Created
    from walletcore_litestar.schemas import (
        ApproveRequest,
        AuthResult,
        CollectRequest,
        CreatedWallet,
        CreateWalletRequest,
    )
    from walletcore_litestar.wallet_ops_schemas import WalletSendRequest

    shown = [
        repr(CreatedWallet.of(Created("u" * 24, {}, "abandon ability able"))),
        repr(AuthResult.of(IssuedToken("tok.en.secret", CREATED))),
        repr(CreateWalletRequest(password="correct horse battery")),
        repr(WalletSendRequest(assetId=2, recipient="x", amount="1", password="hunter22")),
        repr(ApproveRequest(tradeId="a" * 24, password="approve secret")),
        repr(CollectRequest(tradeId="a" * 24, password="collect secret")),
    ]
    for text in shown:
        assert "<hidden>" in text
    joined = " ".join(shown)
    for secret in ("abandon", "tok.en.secret", "correct horse", "hunter22", "approve secret"):
        assert secret not in joined
    for secret in ("collect secret",):
        assert secret not in joined
