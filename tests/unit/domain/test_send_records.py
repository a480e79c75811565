"""The send record's rules (walletcore.domain.sends, docs/idempotency.md): what a request
with a used X-Request-Id gets (replay, 409, 422, takeover with the next attempt), the
recovery points a record may move through, the fencing token, and the chain status that
is final once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from walletcore.domain.errors import (
    IdempotencyConflict,
    IdempotencyKeyReused,
    InvalidRequest,
    InvalidSendTransition,
)
from walletcore.domain.sends import SEND_LEASE, ChainStatus, SendRecord, SendState

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
FP = "a" * 64


def started(at: datetime = NOW) -> SendRecord:
    return SendRecord.start("client", "pay-1", FP, at)


def finished(follow: bool = True) -> SendRecord:
    record = started().signed(b"raw", "0xabc", NOW).broadcast(NOW)
    return record.finish({"txHash": "0xabc"}, NOW, follow=follow)


def test_a_new_record_is_started_and_leased_to_its_request() -> None:
    record = started()
    assert (record.state, record.attempt, record.locked_until) == (
        SendState.STARTED,
        1,
        NOW + SEND_LEASE,
    )
    assert record.is_locked(NOW) and not record.is_locked(NOW + SEND_LEASE)


@pytest.mark.parametrize(
    ("request_id", "message"),
    [("", "X-Request-Id is required"), ("x" * 256, "X-Request-Id is longer than 255 characters")],
)
def test_a_missing_or_overlong_request_id_is_400(request_id: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        SendRecord.start("client", request_id, FP, NOW)


def test_another_request_under_the_id_is_422_whatever_the_state() -> None:
    for record in (started(), started().release(NOW), finished()):
        with pytest.raises(IdempotencyKeyReused):
            record.claim("b" * 64, NOW)


def test_a_finished_record_is_returned_as_it_is_to_replay() -> None:
    record = finished()
    assert record.claim(FP, NOW + timedelta(days=365)) is record


def test_a_live_lease_is_409_and_a_lapsed_or_released_one_is_taken_over() -> None:
    record = started()
    with pytest.raises(IdempotencyConflict):
        record.claim(FP, NOW + SEND_LEASE - timedelta(seconds=1))
    later = NOW + SEND_LEASE
    taken = record.claim(FP, later)
    assert (taken.attempt, taken.locked_until, taken.state) == (
        2,
        later + SEND_LEASE,
        SendState.STARTED,
    )
    released = started().release(NOW)
    assert released.claim(FP, NOW).attempt == 2  # at once


def test_the_fencing_token_stops_a_request_that_lost_its_lease() -> None:
    record = started()
    taken = record.claim(FP, NOW + SEND_LEASE)
    with pytest.raises(InvalidSendTransition):
        record.require_successor(taken.signed(b"raw", "0x1", NOW))
    record.require_successor(record.signed(b"raw", "0x1", NOW))  # its own move is fine


def test_recovery_points_move_one_way() -> None:
    record = started()
    with pytest.raises(InvalidSendTransition):
        record.broadcast(NOW)  # never broadcast what was not stored signed
    done = finished()
    moves: list[Callable[[], SendRecord]] = [
        lambda: done.signed(b"raw", "0x2", NOW),
        lambda: done.broadcast(NOW),
        lambda: done.finish({}, NOW),
        lambda: done.release(NOW),
    ]
    for move in moves:
        with pytest.raises(InvalidSendTransition):
            move()


def test_an_accepted_send_is_followed_and_a_refused_one_is_not() -> None:
    followed, refused = finished(follow=True), finished(follow=False)
    assert (followed.chain_status, followed.chain_checked_at, followed.locked_until) == (
        ChainStatus.PENDING,
        NOW,
        None,
    )
    assert followed.is_followed and not refused.is_followed
    with pytest.raises(InvalidSendTransition):
        refused.tracked(ChainStatus.SUCCESS, NOW)


def test_a_chain_status_is_final_once() -> None:
    later = NOW + timedelta(minutes=5)
    stuck = finished().tracked(ChainStatus.STUCK, later, raw_tx=b"bump", tx_hash="0xdef")
    assert (stuck.tx_hash, stuck.raw_tx, stuck.chain_final_at) == ("0xdef", b"bump", None)
    assert stuck.chain_status is not None and stuck.chain_status.public == "pending"
    done = stuck.tracked(ChainStatus.SUCCESS, later)
    assert (done.chain_final_at, done.is_followed) == (later, False)
    with pytest.raises(InvalidSendTransition):
        done.tracked(ChainStatus.FAILED, later)
    with pytest.raises(InvalidSendTransition):  # a transaction comes with its hash
        stuck.tracked(ChainStatus.PENDING, later, raw_tx=b"x")


@pytest.mark.parametrize(
    ("status", "public"),
    [
        (ChainStatus.PENDING, "pending"),
        (ChainStatus.STUCK, "pending"),
        (ChainStatus.DROPPED, "pending"),
        (ChainStatus.SUCCESS, "success"),
        (ChainStatus.FAILED, "failed"),
    ],
)
def test_internal_chain_statuses_read_as_the_specs_three(status: ChainStatus, public: str) -> None:
    assert status.public == public
