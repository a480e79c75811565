"""A flood of refused `/auth` against a real `walletcore serve` grows no storage: 300
garbage calls (unknown client ids, malformed ones, wrong keys of a known client), sent 16
at a time over both workers on PostgreSQL, are each answered `401 Invalid credentials`;
the audit log gains one row (the first refusal of the known client's run), the known
client's record counts all 100 of its refusals exactly, the metrics count every refusal
by reason, and the client still authenticates with its key, which ends the run.

The server's database is read from this process: the sandbox's SQLite file under the
server's home, or the PostgreSQL database it was given.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from hardening_support import Client, Server, add_client, assert_error_envelope
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from walletcore.domain.ids import new_id
from walletcore_sql.engine import make_engine, sqlite_url

EACH = 100
#: Client ids that are not ids: nothing is looked up for them.
MALFORMED = (
    "not-an-id",
    "0" * 23,
    "0" * 25,
    "A" * 24,
    "g" * 24,
    "' OR '1'='1' --",
    "../../etc/passwd",
    "0" * 12 + "-" + "0" * 11,
)
AT_ONCE = 16
#: The refusals of a known client are written a moment after their answers.
WRITTEN_WITHIN = 15.0


def database_url(server: Server) -> str:
    """The server's database: the PostgreSQL one it was given, else the sandbox's SQLite
    file under its home."""
    given = server.env.get("WALLETCORE_DATABASE_URL")
    return given or sqlite_url(server.home / "walletcore.db")


def sql(server: Server, statement: str, **params: Any) -> list[Any]:
    """The rows of one statement on the server's database, read while it serves."""

    async def run() -> list[Any]:
        engine = make_engine(database_url(server))
        try:
            async with engine.connect() as conn:
                return list((await conn.execute(text(statement), params)).mappings())
        finally:
            await engine.dispose()

    return asyncio.run(run())


def refusals(server: Server) -> dict[str, float]:
    """`walletcore_auth_failures_total` by reason, every worker's (GET /metrics)."""
    answer = server.http.get("/metrics")
    assert answer.status_code == 200, answer.text
    return {
        sample.labels["reason"]: sample.value
        for family in text_string_to_metric_families(answer.text)
        if family.name == "walletcore_auth_failures"
        for sample in family.samples
        if sample.name == "walletcore_auth_failures_total"
    }


def garbage(victim: Client) -> list[dict[str, str]]:
    """The headers of 300 refused calls, the three kinds interleaved."""
    wrong = "wck_" + "W" * 43
    calls = []
    for n in range(EACH):
        calls.append({"x-client-id": new_id(), "x-api-key": wrong})
        calls.append({"x-client-id": MALFORMED[n % len(MALFORMED)], "x-api-key": wrong})
        calls.append({"x-client-id": victim.client_id, "x-api-key": wrong[:-2] + f"{n:02d}"})
    return calls


async def flood(base: str, calls: list[dict[str, str]]) -> list[httpx.Response]:
    gate = asyncio.Semaphore(AT_ONCE)
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:

        async def call(headers: dict[str, str]) -> httpx.Response:
            async with gate:
                return await http.post("/auth", headers=headers)

        return await asyncio.gather(*(call(h) for h in calls))


def record(server: Server, client_id: str) -> Any:
    rows = sql(
        server,
        "SELECT auth_failures, auth_failures_since, auth_failed_at FROM api_clients "
        "WHERE client_id = :client_id",
        client_id=client_id,
    )
    assert len(rows) == 1
    return rows[0]


def test_a_flood_of_refused_auth_grows_no_storage(server: Server) -> None:
    victim = add_client(server, f"Flooded {server.name} {new_id()[:6]}", platform=False)
    (mark,) = [r["mark"] for r in sql(server, "SELECT max(entry_id) AS mark FROM audit_log")]
    clients_before = sql(server, "SELECT count(*) AS n FROM api_clients")[0]["n"]
    counted_before = refusals(server)

    answers = asyncio.run(flood(server.base, garbage(victim)))

    assert len(answers) == 3 * EACH
    for answer in answers:
        assert_error_envelope(answer, {401}, "Invalid credentials")
    # the victim's 100 refusals, counted exactly across the workers (written after answers)
    deadline = time.monotonic() + WRITTEN_WITHIN
    while (counted := record(server, victim.client_id))["auth_failures"] < EACH:
        assert time.monotonic() < deadline, f"{counted} after {WRITTEN_WITHIN} s"
        time.sleep(0.1)
    assert counted["auth_failures"] == EACH
    assert counted["auth_failures_since"] <= counted["auth_failed_at"]
    # one audit row: the first refusal of the victim's run; the unknown and malformed ids
    # left none (rows of the background jobs may come meanwhile: `job-...` request ids)
    added = sql(
        server,
        "SELECT client_id, action, outcome, detail, request_id FROM audit_log "
        "WHERE entry_id > :mark ORDER BY entry_id",
        mark=mark,
    )
    ours = [dict(r) for r in added if not r["request_id"].startswith("job-")]
    assert [(r["client_id"], r["action"], r["outcome"]) for r in ours] == [
        (victim.client_id, "auth", "401")
    ], ours
    assert ours[0]["detail"].startswith("Invalid credentials (wrong key): the first failed")
    assert sql(server, "SELECT count(*) AS n FROM api_clients")[0]["n"] == clients_before
    # the metrics count every refusal by its reason, whichever worker answered
    counted_after = refusals(server)
    grown = {
        reason: counted_after[reason] - counted_before.get(reason, 0) for reason in counted_after
    }
    assert grown == {"unknown_client": EACH, "malformed": EACH, "wrong_key": EACH, "disabled": 0}
    # the operator sees the run
    (listed,) = [
        c for c in server.cli_batch([["clients", "list"]])[0] if c["clientId"] == victim.client_id
    ]
    assert listed["authFailures"] == EACH
    assert listed["authFailuresSince"] is not None and listed["authFailedAt"] is not None

    # the client still authenticates with its key, and that ends the run
    ok = server.http.post(
        "/auth", headers={"x-client-id": victim.client_id, "x-api-key": victim.api_key}
    )
    assert ok.status_code == 200, ok.text
    after = record(server, victim.client_id)
    assert (after["auth_failures"], after["auth_failures_since"]) == (0, None)
    assert after["auth_failed_at"] == counted["auth_failed_at"]
    ended = sql(
        server,
        "SELECT outcome, detail FROM audit_log WHERE client_id = :client_id AND action = 'auth' "
        "ORDER BY entry_id DESC LIMIT 1",
        client_id=victim.client_id,
    )
    assert ended[0]["outcome"] == "ok"
    assert ended[0]["detail"].startswith(f"ends a run of {EACH} failed /auth since ")
