"""The audit log (one entry per state change, with request id and outcome, never a secret)
and the auth service's operator side."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import astuple
from datetime import timedelta

import pytest

from walletcore.domain.audit import AuditEntry
from walletcore.domain.errors import DomainError
from walletcore.domain.ids import new_id
from walletcore.ports import UnitOfWork
from walletcore.services.auth import TOKEN_LIFETIME, hash_api_key
from walletcore.testing import InMemoryStorage

from ..conftest import Core, CoreFactory


async def audit_of(core: Core, request_id: str) -> AuditEntry:
    entries = [e for e in await core.db.audit.newest(1000) if e.request_id == request_id]
    assert len(entries) == 1, entries
    return entries[0]


async def audit_all(core: Core, request_id: str) -> list[AuditEntry]:
    """The entries of one request, oldest first."""
    entries = [e for e in await core.db.audit.newest(1000) if e.request_id == request_id]
    return entries[::-1]


async def attempt(call: object) -> DomainError | None:
    try:
        await call  # type: ignore[misc]
    except DomainError as exc:
        return exc
    return None


async def test_every_trade_state_change_is_audited_with_request_id_and_outcome(core: Core) -> None:
    t = core.trading
    uid = core.user_id
    sell = await t.sell(core.caller("r-sell"), user_id=uid, asset_id=1, crypto_amount="0.5")
    await t.approve(core.caller("r-approve"), user_id=uid, trade_id=sell.trade_id)
    await attempt(t.cancel(core.caller("r-cancel-409"), user_id=uid, trade_id=sell.trade_id))
    rejected = await t.order(core.caller("r-order"), user_id=uid, asset_id=2, fiat_amount="502")
    await attempt(t.approve(core.caller("r-approve-502"), user_id=uid, trade_id=rejected.trade_id))
    unknown = await t.sell(core.caller("r-sell-2"), user_id=uid, asset_id=1, fiat_amount="504")
    await attempt(t.approve(core.caller("r-approve-504"), user_id=uid, trade_id=unknown.trade_id))
    await attempt(
        t.sell(
            core.caller("r-sell-403"), user_id=uid, asset_id=1, crypto_amount="1", fiat_amount="1"
        )
    )

    # request id -> its entries, oldest first: (action, outcome, target)
    expected = {
        "r-sell": [("trade.sell", "ok", sell.trade_id)],
        # the sold coins held, the approval (open -> executing), the fill (executing ->
        # completed) and the collection waiting for the password, each written with its
        # own move
        "r-approve": [
            ("trade.reserve", "ok", sell.trade_id),
            ("trade.approve", "ok", sell.trade_id),
            ("trade.settle", "ok", sell.trade_id),
            ("trade.settlement", "ok", sell.trade_id),
        ],
        "r-cancel-409": [("trade.cancel", "409", sell.trade_id)],
        "r-order": [("trade.order", "ok", rejected.trade_id)],
        # approved, then the venue refused: the failed move, the buy's settlement
        # released, then the request's 502
        "r-approve-502": [
            ("trade.reserve", "ok", rejected.trade_id),
            ("trade.approve", "ok", rejected.trade_id),
            ("trade.settle", "ok", rejected.trade_id),
            ("trade.release", "ok", rejected.trade_id),
            ("trade.approve", "502", rejected.trade_id),
        ],
        "r-sell-2": [("trade.sell", "ok", unknown.trade_id)],
        # approved; the venue's answer is unknown: it stays executing
        "r-approve-504": [
            ("trade.reserve", "ok", unknown.trade_id),
            ("trade.approve", "ok", unknown.trade_id),
            ("trade.approve", "504", unknown.trade_id),
        ],
        "r-sell-403": [("trade.sell", "400", None)],
    }
    for request_id, rows in expected.items():
        entries = await audit_all(core, request_id)
        assert [(e.action, e.outcome, e.target) for e in entries] == rows, entries
        for entry in entries:
            assert (entry.client_id, entry.user_id) == (core.client.client_id, uid)
            assert entry.at == core.clock.now()
    settled = await audit_all(core, "r-approve-502")
    assert settled[2].detail is not None and settled[2].detail.startswith("executing -> failed: ")
    assert settled[3].detail == "reserved -> released"
    assert settled[4].detail is not None and settled[4].detail.startswith("Order rejected: ")
    assert (await audit_all(core, "r-approve"))[2].detail == "executing -> completed"


async def test_a_replay_is_told_apart_from_the_change(core: Core) -> None:
    """Only the request that moved the trade is `ok`; the ones that answered the stored
    result are `replay`; a cancel of a cancelled trade too."""
    t, uid = core.trading, core.user_id
    sell = await core.sell(crypto_amount="0.5")
    await t.approve(core.caller("r-first"), user_id=uid, trade_id=sell.trade_id)
    await t.approve(core.caller("r-again"), user_id=uid, trade_id=sell.trade_id)
    other = await core.sell(crypto_amount="0.5")
    await t.cancel(core.caller("r-cancel"), user_id=uid, trade_id=other.trade_id)
    await t.cancel(core.caller("r-cancel-again"), user_id=uid, trade_id=other.trade_id)

    assert [(e.action, e.outcome) for e in await audit_all(core, "r-again")] == [
        ("trade.approve", "replay")
    ]
    assert [(e.action, e.outcome) for e in await audit_all(core, "r-cancel")] == [
        ("trade.cancel", "ok")
    ]
    assert [(e.action, e.outcome) for e in await audit_all(core, "r-cancel-again")] == [
        ("trade.cancel", "replay")
    ]
    approvals = [e for e in await core.db.audit.newest(1000) if e.action == "trade.approve"]
    assert sorted(e.outcome for e in approvals) == ["ok", "replay"]


async def test_a_settlement_seen_on_a_poll_is_written_with_the_move(core: Core) -> None:
    trade = await core.sell(fiat_amount="202")  # the sandbox venue accepts, settles on a poll
    await core.trading.approve(
        core.caller("r-approve"), user_id=core.user_id, trade_id=trade.trade_id
    )
    await core.trading.get(core.caller("r-poll"), user_id=core.user_id, trade_id=trade.trade_id)
    assert [(e.action, e.outcome, e.detail) for e in await audit_all(core, "r-approve")] == [
        ("trade.reserve", "ok", "none -> reserved"),
        ("trade.approve", "ok", None),
        ("trade.settle", "ok", "executing -> approved"),
    ]
    assert [(e.action, e.outcome, e.detail) for e in await audit_all(core, "r-poll")] == [
        ("trade.settle", "ok", "approved -> completed"),
        ("trade.settlement", "ok", "reserved -> awaiting_password"),
    ]


async def test_a_lapsed_quote_is_expired_once_with_its_entry(core: Core) -> None:
    trade = await core.sell(crypto_amount="0.5")
    other = await core.sell(crypto_amount="0.25")
    core.clock.advance(61)
    await core.trading.get(core.caller("r-read"), user_id=core.user_id, trade_id=trade.trade_id)
    await core.trading.get(core.caller("r-read-2"), user_id=core.user_id, trade_id=trade.trade_id)
    await core.trading.list(core.caller("r-list"), user_id=core.user_id)
    await core.trading.list(core.caller("r-list-2"), user_id=core.user_id)
    assert [(e.action, e.target) for e in await audit_all(core, "r-read")] == [
        ("trade.expire", trade.trade_id)
    ]
    assert [(e.action, e.target) for e in await audit_all(core, "r-list")] == [
        ("trade.expire", other.trade_id)
    ]
    assert await audit_all(core, "r-read-2") == await audit_all(core, "r-list-2") == []


async def test_reads_are_not_audited(core: Core) -> None:
    trade = await core.sell(crypto_amount="0.5")
    before = len(await core.db.audit.newest(1000))
    await core.trading.get(core.caller("r-get"), user_id=core.user_id, trade_id=trade.trade_id)
    await core.trading.list(core.caller("r-list"), user_id=core.user_id)
    assert len(await core.db.audit.newest(1000)) == before


async def test_auth_and_operator_actions_are_audited_without_any_secret(core: Core) -> None:
    auth = core.auth
    cid = core.client.client_id
    issued = await auth.authenticate(cid, core.api_key, "r-auth")
    await attempt(auth.authenticate(cid, core.api_key + "x", "r-auth-wrong"))
    await attempt(auth.authenticate(cid, core.api_key + "y", "r-auth-wrong-again"))
    await attempt(auth.authenticate("not-an-id", core.api_key, "r-auth-bad-id"))
    await attempt(auth.authenticate(new_id(), core.api_key, "r-auth-unknown"))
    await auth.failures.settled()  # a known client's refusals are written after the answer
    rotated = await auth.rotate_key(cid, "r-rotate")
    await auth.disable_client(cid, "r-disable")

    assert [
        (e.action, e.outcome, e.client_id)
        for e in [
            await audit_of(core, r) for r in ("r-auth", "r-auth-wrong", "r-rotate", "r-disable")
        ]
    ] == [
        ("auth", "ok", cid),
        ("auth", "401", cid),  # the first failure of a run of the client's
        ("client.rotate", "ok", cid),
        ("client.disable", "ok", cid),
    ]
    # the run's next failure, a malformed id and an unknown one write no entry
    for request_id in ("r-auth-wrong-again", "r-auth-bad-id", "r-auth-unknown"):
        assert await audit_all(core, request_id) == []
    secrets = (core.api_key, rotated.api_key, issued.token, core.api_key + "x")
    for entry in await core.db.audit.newest(1000):
        text = repr(entry) + repr(astuple(entry))
        assert not [s for s in secrets if s in text], entry


async def test_a_failing_audit_write_does_not_fail_the_request(make_core: CoreFactory) -> None:
    """An entry of its own (a replay, a refusal) that cannot be written is logged; the
    answer stands. (A carried entry that cannot be written fails its change: the contract.)"""

    class BrokenAudit(InMemoryStorage):
        """Every write unit that only appends to the audit log fails (the disk is full)."""

        @asynccontextmanager
        async def write(self) -> AsyncIterator[UnitOfWork]:
            async with super().write() as unit:
                yield unit
                if not any(layer.maps[0] for layer in vars(unit.tables).values()):  # type: ignore[attr-defined]
                    raise OSError("disk full")

    core = await make_core(storage=BrokenAudit())
    trade = await core.sell(crypto_amount="0.5")
    approved = await core.trading.approve(
        core.caller(), user_id=core.user_id, trade_id=trade.trade_id
    )
    assert approved.status.value == "completed"
    again = await core.trading.approve(
        core.caller("r-replay"), user_id=core.user_id, trade_id=trade.trade_id
    )
    assert again == approved
    assert [e.action for e in await core.db.audit.newest()] == [
        "trade.settlement",
        "trade.settle",
        "trade.approve",
        "trade.reserve",
        "trade.sell",
        "client.create",
    ]  # the replay's own entry could not be written


# -- auth: the operator side -------------------------------------------------------------------
async def test_only_the_sha256_of_the_key_is_stored(core: Core) -> None:
    stored = await core.db.clients.get(core.client.client_id)
    assert stored is not None
    assert (
        stored.key_hash
        == hashlib.sha256(core.api_key.encode()).hexdigest()
        == hash_api_key(core.api_key)
    )
    assert core.api_key not in repr(stored) and stored.key_hash not in repr(stored)


async def test_tokens_last_fifteen_minutes_to_the_second(core: Core) -> None:
    assert TOKEN_LIFETIME == timedelta(minutes=15)
    core.clock.advance(0.75)  # issued mid-second: the lifetime counts from the whole second
    issued = await core.auth.authenticate(core.client.client_id, core.api_key, "r")
    assert issued.expires_at == core.clock.now().replace(microsecond=0) + TOKEN_LIFETIME
    assert issued.token not in repr(issued)
    core.clock.set(issued.expires_at - timedelta(microseconds=1))
    assert (await core.auth.verify(f"Bearer {issued.token}")).client_id == core.client.client_id
    core.clock.set(issued.expires_at)
    error = await attempt(core.auth.verify(f"Bearer {issued.token}"))
    assert error is not None and (error.status, error.message) == (401, "Missing or expired token")


async def test_bearer_scheme_is_case_insensitive(core: Core) -> None:
    issued = await core.auth.authenticate(core.client.client_id, core.api_key, "r")
    assert await core.auth.verify(f"bearer {issued.token}")


async def test_operator_actions_on_an_unknown_client_are_404(core: Core) -> None:
    for call in (core.auth.rotate_key(new_id()), core.auth.disable_client("nonsense")):
        error = await attempt(call)
        assert error is not None and error.status == 404


@pytest.mark.parametrize(
    ("name", "assets"), [("", None), (" ", None), ("x" * 101, None), ("Acme", [7]), ("Acme", [])]
)
async def test_create_client_validates_its_input(
    core: Core, name: str, assets: list[int] | None
) -> None:
    error = await attempt(core.auth.create_client(name, assets=assets))
    assert error is not None and error.status == 400


async def test_new_clients_get_distinct_keys_and_ids(core: Core) -> None:
    issued = [await core.auth.create_client(f"Client {n}", assets=[2, 1]) for n in range(5)]
    assert len({i.api_key for i in issued}) == len({i.client.client_id for i in issued}) == 5
    assert all(i.client.enabled_assets == (1, 2) for i in issued)  # catalog order
    assert all(i.api_key not in repr(i) for i in issued)
