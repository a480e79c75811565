"""The rules of `_core` without a server: which answers may be retried, the 401 split,
decoding without float loss, no secret in a repr."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import httpx
import pytest

from walletcore_client import errors, models
from walletcore_client._core import (
    OPERATIONS,
    Answer,
    RetryPolicy,
    amount_text,
    decode_model,
    error_of,
    read_answer,
    should_retry,
    transport_error,
)


def err(path: str, status: int, message: str = "x") -> errors.WalletcoreError:
    return error_of(OPERATIONS[path], status, message, "rid")


@pytest.mark.parametrize(
    ("path", "status", "message", "cls", "safe", "retried"),
    [
        ("/prices", 401, "Missing or expired token", errors.TokenExpired, True, False),
        ("/auth", 401, "Invalid credentials", errors.InvalidCredentials, False, False),
        ("/send", 401, "Invalid credentials", errors.InvalidCredentials, False, False),
        ("/send", 401, "Invalid password", errors.InvalidCredentials, False, False),
        ("/send", 400, "Invalid password", errors.BadRequest, False, False),
        ("/send", 409, "A request with this X-Request-Id is still in progress",
         errors.Conflict, True, True),
        ("/send", 422, "X-Request-Id was already used with a different request",
         errors.IdempotencyKeyReused, False, False),
        ("/send", 500, "Internal error", errors.InternalError, True, True),
        ("/send", 504, "Broadcast outcome unknown", errors.GatewayTimeout, True, True),
        ("/send", 502, "refused", errors.BadGateway, True, False),
        ("/send", 403, "Refused by rule big", errors.Forbidden, False, False),
        ("/trade/approve", 504, "Order outcome unknown", errors.GatewayTimeout, False, False),
        ("/trade/approve", 502, "Order rejected: no", errors.OrderRejected, False, False),
        ("/trade/approve", 502, "No usable price", errors.BadGateway, False, False),
        ("/trade/approve", 500, "Internal error", errors.InternalError, False, False),
        ("/trade/approve", 409, "Trade is executing", errors.Conflict, False, False),
        ("/sell", 504, "Pricing timed out", errors.GatewayTimeout, True, True),
        ("/sell", 502, "No usable price", errors.BadGateway, True, True),
        ("/sell", 503, "Trading unavailable", errors.ServiceUnavailable, False, False),
        ("/trade", 500, "Internal error", errors.InternalError, True, True),
        ("/create", 500, "Internal error", errors.InternalError, False, False),
        ("/events", 410, "Cursor expired: ...", errors.CursorExpired, False, False),
        ("/events", 400, "Unknown cursor: ...", errors.UnknownCursor, False, False),
        ("/trade", 404, "Trade not found", errors.NotFound, False, False),
    ],
)  # fmt: skip
def test_each_error_answer_has_its_class_and_retry_rule(
    path: str, status: int, message: str, cls: type, safe: bool, retried: bool
) -> None:
    error = err(path, status, message)
    assert type(error) is cls
    assert (error.status, error.message, error.request_id) == (status, message, "rid")
    assert error.retry_safe is safe
    assert should_retry(OPERATIONS[path], error) is retried


def test_no_answer_is_retried_only_where_nothing_could_happen_twice() -> None:
    lost = httpx.RemoteProtocolError("Server disconnected without sending a response")
    refused = httpx.ConnectError("refused")
    approve = OPERATIONS["/trade/approve"]
    nothing_sent = transport_error(approve, refused, None)
    assert nothing_sent.retry_safe and not should_retry(approve, nothing_sent)  # never
    assert not transport_error(approve, lost, None).retry_safe
    assert transport_error(OPERATIONS["/send"], lost, "k").retry_safe
    assert transport_error(OPERATIONS["/create"], refused, None).retry_safe
    assert not transport_error(OPERATIONS["/create"], lost, None).retry_safe
    assert not transport_error(OPERATIONS["/sell"], lost, None).retry_safe


def test_the_retry_budget_ends_at_the_attempts_or_the_deadline() -> None:
    policy = RetryPolicy(attempts=3, base_delay=1.0, max_delay=4.0, deadline=10.0)
    first = policy.next_delay(0, 0.0)
    assert first is not None and 0.5 <= first <= 1.0
    second = policy.next_delay(1, 0.0)
    assert second is not None and 1.0 <= second <= 2.0
    assert policy.next_delay(2, 0.0) is None  # the third attempt was the last
    assert policy.next_delay(0, 9.9) is None  # no time left


def test_amounts_and_prices_decode_without_float_loss() -> None:
    answer = read_answer(
        OPERATIONS["/prices"],
        200,
        b'{"result":{"BTC":{"USD":65000.123456789012345,"EUR":1,"GBP":0.1,"CAD":2}},'
        b'"requestId":"r"}',
        None,
    )
    assert isinstance(answer, Answer)
    prices = decode_model(models.FiatPrices, answer.result["BTC"])
    assert prices.USD == Decimal("65000.123456789012345") and prices.GBP == Decimal("0.1")


def test_timestamps_are_aware_utc() -> None:
    token = decode_model(models.Token, {"token": "t", "expiresAt": "2026-01-01T12:00:30.000Z"})
    assert token.expiresAt == datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)


def test_a_float_amount_is_refused() -> None:
    with pytest.raises(TypeError):
        amount_text(0.1)  # type: ignore[arg-type]
    assert amount_text(Decimal("1E+2")) == "100"


def test_secrets_are_never_in_a_repr() -> None:
    token = models.Token("eyJ-secret-token", datetime(2026, 1, 1, tzinfo=UTC))
    wallet = models.CreatedWallet("a" * 24, {}, "abandon abandon secret words")
    assert "secret" not in repr(token) and "secret" not in repr(wallet)


def test_an_answer_that_is_not_walletcores_is_an_error() -> None:
    outcome = read_answer(OPERATIONS["/trade"], 502, b"<html>bad gateway</html>", "rid")
    assert isinstance(outcome, errors.WalletcoreError) and outcome.status == 502
    assert not outcome.retry_safe
