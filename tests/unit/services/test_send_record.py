"""What a send keeps in its record (walletcore.services.send_record): the signed transfer
with its lifecycle, in every format the store may hold, and the answer a finished record
replays."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.errors import InvalidSendTransition
from walletcore.domain.sends import SendRecord
from walletcore.services.send_record import (
    Attempt,
    ReplayedFailure,
    SendReceipt,
    SignedSend,
    replay,
)
from walletcore.testing import CONTRACT_CATALOG

from .conftest import ETH

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
RAW = b"\x00signed bytes\xff"


def rung(kind: str, n: int, fee: int) -> Attempt:
    return Attempt(kind, f"h{kind}{n}", bytes([n]), fee)


def transfer() -> SignedSend:
    return SignedSend(
        Chain.ETHEREUM,
        ETH,
        "h0",
        RAW,
        1_000,
        FeePayer.USER,
        sender="fake-sender",
        user_id="u1",
        recipient="fake-recipient",
        amount_units=5 * 10**17,
        fee_payer_address="fake-sender",
        at=NOW,
        ladder=(rung("bump", 1, 1_300), rung("bump", 2, 1_700), rung("cancel", 3, 2_200)),
    )


def test_the_current_format_round_trips_and_never_shows_its_bytes() -> None:
    signed = transfer().moved_to(transfer().ladder[0], NOW)
    again = SignedSend.from_bytes(signed.to_bytes())
    assert again == signed
    assert RAW.hex() not in repr(signed) and "ladder" not in repr(signed)


@pytest.mark.parametrize(
    ("value", "followable"),
    [
        (
            b'{"v":1,"chain":"ETHEREUM","assetId":2,"txHash":"h","raw":"AA==","fee":1,"feePayer":"USER"}',
            False,
        ),
        (
            b'{"v":2,"chain":"ETHEREUM","assetId":2,"txHash":"h","raw":"AA==","fee":1,"feePayer":"USER","sender":"s","userId":null}',
            True,
        ),
    ],
)
def test_older_formats_still_read(value: bytes, followable: bool) -> None:
    signed = SignedSend.from_bytes(value)
    assert (signed.tx_hash, signed.followable, signed.ladder, signed.earlier) == (
        "h",
        followable,
        (),
        (),
    )
    assert signed.receipt(CONTRACT_CATALOG.native_asset(signed.chain)).as_result() == {
        "txHash": "h",
        "status": "pending",
        "fee": "0.000000000000000001",
        "feePayer": "USER",
    }


@pytest.mark.parametrize("value", [None, b'{"v":9,"chain":"ETHEREUM"}'])
def test_an_unreadable_transaction_is_a_bug_not_a_guess(value: bytes | None) -> None:
    with pytest.raises(InvalidSendTransition):
        SignedSend.from_bytes(value)


def test_a_rung_becomes_current_and_leaves_the_ladder_with_the_cheaper_ones() -> None:
    signed = transfer()
    moved = signed.moved_to(signed.ladder[1], NOW)
    assert (moved.kind, moved.tx_hash, moved.fee_units, moved.at) == ("bump", "hbump2", 1_700, NOW)
    assert [a.tx_hash for a in moved.earlier] == ["h0"]
    assert [r.tx_hash for r in moved.ladder] == ["hcancel3"]
    assert moved.next_rung("bump") is None and moved.next_rung("cancel") is not None
    assert [a.tx_hash for a in moved.attempts] == ["hbump2", "h0"]  # newest first


def test_an_earlier_transaction_found_mined_becomes_current_again() -> None:
    bumped = transfer().moved_to(transfer().ladder[0], NOW)
    back = bumped.moved_to(bumped.earlier[0], NOW)
    assert (back.tx_hash, back.kind) == ("h0", "send")
    assert [a.tx_hash for a in back.earlier] == ["hbump1"]


def test_a_resigned_transaction_clears_the_ladder() -> None:
    resigned = transfer().moved_to(Attempt("resign", "hr", b"r", 900, NOW), NOW)
    assert (resigned.kind, resigned.ladder, resigned.cancelled) == ("resign", (), False)
    cancelled = transfer().moved_to(transfer().ladder[2], NOW)
    assert cancelled.cancelled


def record(result: Mapping[str, object]) -> SendRecord:
    started = SendRecord.start("c", "pay-1", "f" * 64, NOW)
    return started.finish(result, NOW)


def test_a_finished_record_replays_its_receipt_or_raises_its_error_again() -> None:
    receipt = SendReceipt("h", "pending", "0.00042", FeePayer.PLATFORM)
    assert replay(record(receipt.as_result())) == receipt
    with pytest.raises(ReplayedFailure) as failure:
        replay(record({"error": {"status": 502, "message": "Transfer rejected"}}))
    assert (failure.value.status, failure.value.message) == (502, "Transfer rejected")
