"""A dead granian worker is replaced and the service keeps answering.

Before the fix, one worker dying (a SIGSEGV from a deeply nested body) made granian shut the
whole server down. `walletcore serve` now runs granian with `respawn_failed_workers`: the
main process starts a new worker while the others keep serving.

Its own server (`--workers 2`, SQLite), so killing workers disturbs no other test. Worker
pids are the server process's children (/proc/<pid>/task/*/children); a request reaches a
chosen worker through `Server.connection_to`. The first test runs on workers that never
served a /create (the default recursion limit), the others on primed ones.

Granian treats a worker that dies again within 5.5 s of being respawned as a crash loop
and exits (granian.server.common, `_serve_loop`): respawning is a safety net, not a cure
for a crash a client can repeat. The tests wait that long between kills (`settle`).
"""

from __future__ import annotations

import http.client
import os
import signal
import time
from collections.abc import Iterator

import pytest
from hardening_support import Server, provision

#: How long granian may take to notice a death and start a worker that serves.
RESPAWN_SECONDS = 10.0
#: Granian's crash-loop window (a respawned worker dying within it stops the server).
CRASH_LOOP_SECONDS = 5.5

_last_respawn: dict[int, float] = {}


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server("respawn", tmp_path_factory.mktemp("hardening-respawn"), workers=2)
    try:
        # Clients A, B, C; started; the workers are primed by the first test using `server`.
        provision(server, full=False, prime=False)
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(two_workers: Server) -> Server:
    two_workers.ensure_running()
    assert len(two_workers.worker_pids()) == 2, two_workers.log_tail()
    return two_workers


def settle(server: Server) -> None:
    """Wait out granian's crash-loop window since the last respawn of this server."""
    since = time.monotonic() - _last_respawn.get(id(server), 0.0)
    if since < CRASH_LOOP_SECONDS + 0.5:
        time.sleep(CRASH_LOOP_SECONDS + 0.5 - since)


def prices_via(server: Server, worker: int) -> int:
    """`worker` itself answers /prices (on a connection it accepted): the status."""
    conn = server.connection_to(worker)
    try:
        conn.request(
            "POST",
            "/prices",
            headers={"Authorization": f"Bearer {server.clients['A'].token(server.base)}"},
        )
        answer = conn.getresponse()
        answer.read()
        return answer.status
    finally:
        conn.close()


def wait_for_replacement(server: Server, killed: set[int]) -> tuple[set[int], int, int]:
    """Poll until two workers run, none of them a killed one, and each answers; meanwhile
    send /prices on fresh connections. Returns (the workers, answers 200, requests sent)."""
    answered = sent = 0
    deadline = time.monotonic() + RESPAWN_SECONDS
    while time.monotonic() < deadline:
        sent += 1
        answered += server.answers()
        workers = server.worker_pids()
        assert server.alive(), f"the server shut down:\n{server.log_tail()}"
        if len(workers) == 2 and not workers & killed:
            for worker in workers:
                assert prices_via(server, worker) == 200
            _last_respawn[id(server)] = time.monotonic()
            return workers, answered, sent
        time.sleep(0.1)
    raise AssertionError(
        f"no replacement worker within {RESPAWN_SECONDS} s: {sorted(server.worker_pids())}\n"
        f"{server.log_tail()}"
    )


def deep_body_via(server: Server, worker: int, depth: int) -> int:
    """POST /trades with `userId` nested `depth` arrays deep, to `worker`: the status."""
    body = b'{"userId": ' + b"[" * depth + b"]" * depth + b"}"
    token = server.clients["A"].token(server.base)
    conn = server.connection_to(worker)
    try:
        conn.request(
            "POST",
            "/trades",
            body=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        answer = conn.getresponse()
        answer.read()
        return answer.status
    except (OSError, http.client.HTTPException) as exc:
        raise AssertionError(f"worker {worker} dropped the connection: {exc!r}") from exc
    finally:
        conn.close()


def test_fresh_workers_refuse_deep_bodies(two_workers: Server) -> None:
    """Workers that never ran a /create (the default recursion limit): a body 1,000 levels
    deep was a RecursionError there, a 500, before the fix; 30,000 levels too. Both are 400s,
    and no worker dies. (The corpus covers primed workers.)"""
    server = two_workers
    assert server.alive() and not server.primed
    workers = server.worker_pids()
    for worker in sorted(workers):
        for depth in (33, 1_000, 30_000):
            assert deep_body_via(server, worker, depth) == 400, (worker, depth)
    assert server.worker_pids() == workers, server.log_tail()


def test_a_killed_worker_is_replaced_while_the_other_keeps_serving(server: Server) -> None:
    settle(server)
    victim, survivor = sorted(server.worker_pids())
    os.kill(victim, signal.SIGKILL)

    workers, answered, sent = wait_for_replacement(server, {victim})

    assert survivor in workers, "the surviving worker was replaced too"
    assert server.alive() and server.proc is not None and server.proc.pid == server.first_pid
    # The survivor shares the listening socket: the service never stopped answering. The
    # one connection that races the kill (accepted by the dying worker, reset ~10 ms
    # after the signal) may be lost; nothing after it.
    assert sent - answered <= 1, f"only {answered} of {sent} /prices answered during the respawn"
    for _ in range(10):
        assert server.answers()


def test_all_workers_killed_at_once_are_replaced(server: Server) -> None:
    settle(server)
    before = server.worker_pids()
    for pid in before:
        os.kill(pid, signal.SIGKILL)

    # With no worker left the port refuses connections until a new one listens (about
    # two seconds here); then every new worker serves.
    wait_for_replacement(server, before)

    assert server.alive() and server.proc is not None and server.proc.pid == server.first_pid
    for _ in range(10):
        assert server.answers()


def test_a_respawned_worker_refuses_deep_bodies_before_and_after_a_create(
    server: Server,
) -> None:
    """The replacement is a fresh worker: deep bodies (1,000 levels: a RecursionError and
    a 500 before the fix; 30,000) are 400s there; then it runs a /create (eth_account
    imported: the recursion-limit trap) and the 30,000-deep body is still a 400. No
    worker dies."""
    settle(server)
    victim = min(server.worker_pids())
    os.kill(victim, signal.SIGKILL)
    workers, _, _ = wait_for_replacement(server, {victim})
    (fresh,) = workers - server.primed
    assert deep_body_via(server, fresh, 1_000) == 400
    assert deep_body_via(server, fresh, 30_000) == 400
    server.prime_workers()
    assert workers <= server.primed
    for worker in sorted(workers):
        assert deep_body_via(server, worker, 30_000) == 400
        assert deep_body_via(server, worker, 1_000) == 400
    assert server.worker_pids() == workers, server.log_tail()
    assert server.alive() and server.answers()
