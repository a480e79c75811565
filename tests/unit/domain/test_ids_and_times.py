"""24-hex ids and the wire form of datetimes."""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from walletcore.domain import ids
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.ids import is_id, new_id, parse_id
from walletcore.domain.times import format_datetime, format_optional_datetime, utc

WIRE_DATETIME = re.compile(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")


def test_new_ids_are_24_lower_hex_and_distinct() -> None:
    ids = {new_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{24}", i) and is_id(i) for i in ids)


def test_ids_are_drawn_in_batches_and_each_handed_out_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    draws: list[int] = []
    real = os.urandom

    def counted(size: int) -> bytes:
        draws.append(size)
        return real(size)

    monkeypatch.setattr(ids.os, "urandom", counted)
    ids._drawn.clear()
    made = [new_id() for _ in range(3 * ids.ID_BATCH)]
    assert draws == [12 * ids.ID_BATCH] * 3  # one system call per batch
    assert len(set(made)) == len(made) and all(is_id(i) for i in made)


def test_ids_made_by_many_threads_at_once_are_distinct() -> None:
    ids._drawn.clear()
    with ThreadPoolExecutor(max_workers=8) as pool:
        made = list(pool.map(lambda _: [new_id() for _ in range(500)], range(8)))
    flat = [i for batch in made for i in batch]
    assert len(set(flat)) == len(flat) == 4000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_hands_out_its_parents_next_ids() -> None:
    """What the parent drew but has not handed out yet is not the child's: after a fork
    each draws its own."""
    ids._drawn.clear()
    new_id()  # the parent has ID_BATCH - 1 drawn, not yet handed out
    pending = set(ids._drawn)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(new_id() for _ in range(ids.ID_BATCH)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    assert len(child) == ids.ID_BATCH and all(is_id(i) for i in child)
    assert not child & pending
    assert set(ids._drawn) == pending  # the parent's are still its own


def test_parse_id_normalises_upper_case() -> None:
    assert parse_id("ABCDEF0123456789ABCDEF01", "userId") == "abcdef0123456789abcdef01"


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "abc",
        "g" * 24,
        "a" * 23,
        "a" * 25,
        " " + "a" * 23,
        "a" * 24 + "\n",
        12345,
        ["a" * 24],
        "0x" + "a" * 22,
    ],
    ids=repr,
)
def test_parse_id_rejects_what_is_not_24_hex(value: object) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_id(value, "tradeId")
    assert raised.value.status == 400 and "tradeId" in raised.value.message
    assert not is_id(value)


def test_datetime_has_milliseconds_and_z() -> None:
    moment = datetime(2026, 11, 22, 4, 6, 23, 123999, tzinfo=UTC)
    assert format_datetime(moment) == "2026-11-22T04:06:23.123Z"  # truncated, not rounded
    assert format_datetime(moment.replace(microsecond=0)) == "2026-11-22T04:06:23.000Z"
    assert format_optional_datetime(None) is None


def test_datetime_is_always_utc() -> None:
    paris = timezone(timedelta(hours=1))
    assert (
        format_datetime(datetime(2026, 1, 1, 13, 0, 0, tzinfo=paris)) == "2026-01-01T12:00:00.000Z"
    )
    assert (
        format_datetime(datetime(2026, 1, 1, 12, 0, 0)) == "2026-01-01T12:00:00.000Z"
    )  # naive = UTC
    assert utc(datetime(2026, 1, 1, 13, tzinfo=paris)).tzinfo is UTC


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7, minutes=-30))]),
    )
)
def test_datetime_wire_form_parses_back_to_the_same_millisecond(moment: datetime) -> None:
    text = format_datetime(moment)
    assert WIRE_DATETIME.match(text), text
    back = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert timedelta(0) <= moment - back < timedelta(milliseconds=1)


def test_format_datetime_matches_the_strftime_form_it_replaced() -> None:
    """`format_datetime` goes through isoformat: the same text for any instant as the
    strftime form it replaced."""
    import random

    rng = random.Random(14)
    for _ in range(2000):
        moment = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(
            seconds=rng.randrange(0, 100 * 365 * 86400), microseconds=rng.randrange(0, 10**6)
        )
        old = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        assert format_datetime(moment) == old
