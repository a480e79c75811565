"""The checks every request body meets before any handler (`walletcore_litestar.bodies`) are
linear in the body's size: generated bodies of up to the 64 KiB cap, built from the pieces
that make a backtracking scanner slow (escaped quotes, lone backslashes, unterminated
strings, brackets inside and outside strings), are each decided in far under a second, and
the depth check decides exactly what a plain character-by-character count decides.

The servers' side of the same attack (a worker kept answering others meanwhile) is
`tests/integration/hardening/test_body_stall.py`.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from walletcore.domain.errors import InvalidRequest
from walletcore_litestar.bodies import MAX_JSON_DEPTH, check_depth, decode_body
from walletcore_litestar.errors import MAX_BODY_BYTES

#: Far above the few milliseconds a 64 KiB body takes, far below the seconds the
#: backtracking scanner took (8 - 9 s on a server, 39 s under a loaded test run).
SECONDS_PER_BODY = 0.5

#: The pieces of the worst bodies: each alone is cheap, repeated they were quadratic.
PIECES = [
    b"[",
    b"]",
    b"{",
    b"}",
    b'"',
    b'\\"',
    b"\\",
    b"\\\\",
    b'"\\',
    b"\\u",
    b"\\ud800",
    b'"a":',
    b",",
    b"1",
    b" ",
    b"\xff",
]


def reference_peak(body: bytes) -> int:
    """The deepest bracket nesting outside string literals, one byte at a time: the plain
    definition the fast check must agree with (an unterminated string runs to the end)."""
    depth = peak = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            peak = max(peak, depth)
        elif byte in b"]}":
            depth -= 1
    return peak


def worst_bodies() -> list[bytes]:
    """The hand-built worst cases: the reported one and its relatives, each at the cap."""
    room = MAX_BODY_BYTES - 64
    return [
        b"[" * 33 + b'"' + b'\\"' * 32_700,  # the reported stall: 8 - 9 s a request
        b"[" * 40 + b'"' * room,
        b"[" * 40 + b'"' + b"\\" * room,
        b"[" * 40 + b'"\\' * (room // 2),
        b'{"a": "' + b"[" * room + b'"}',
        b"[" + b'"\\"",' * (room // 5) + b"1]",
        b"[]" * (room // 2),
        b"[" * room,
        b'"' + b"[" * room,
    ]


def decide(body: bytes) -> float:
    """Seconds `decode_body` takes to accept or refuse `body` (a 400, never another error)."""
    started = time.perf_counter()
    try:
        decode_body(body)
    except InvalidRequest:
        pass
    return time.perf_counter() - started


@pytest.mark.parametrize("body", worst_bodies(), ids=lambda b: repr(b[:12]))
def test_the_worst_bodies_are_decided_fast(body: bytes) -> None:
    assert len(body) <= MAX_BODY_BYTES
    assert decide(body) < SECONDS_PER_BODY


@pytest.mark.parametrize("body", worst_bodies(), ids=lambda b: repr(b[:12]))
def test_the_worst_bodies_are_counted_as_the_plain_definition_counts(body: bytes) -> None:
    deep = reference_peak(body) > MAX_JSON_DEPTH
    if deep:
        with pytest.raises(InvalidRequest, match="nested too deeply"):
            check_depth(body)
    else:
        check_depth(body)


nasty_bodies = st.lists(
    st.tuples(st.sampled_from(PIECES), st.integers(min_value=1, max_value=4_000)),
    min_size=1,
    max_size=12,
).map(lambda runs: b"".join(piece * count for piece, count in runs)[:MAX_BODY_BYTES])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=nasty_bodies)
def test_generated_nasty_bodies_are_decided_fast_and_exactly(body: bytes) -> None:
    seconds = decide(body)
    assert seconds < SECONDS_PER_BODY, f"{seconds:.3f} s for {body[:40]!r}... ({len(body)} B)"
    if reference_peak(body) > MAX_JSON_DEPTH:
        with pytest.raises(InvalidRequest, match="nested too deeply"):
            check_depth(body)
    else:
        check_depth(body)
