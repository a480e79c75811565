"""Revocation across processes: each worker keeps the api client it read to check
tokens for `client_cache_seconds` (default 1 s). A disable or a rotation made by another
process (`walletcore clients ...`) stops the client's tokens in every worker within that
bound; here every worker has the client cached (it just served the token) when the CLI
changes it, and each is polled on a connection it accepted itself.
"""

from __future__ import annotations

import http.client
import json
import time

import pytest
from hardening_support import Server, add_client

from walletcore.settings import Settings

#: The default cache period, and slack for a loaded machine.
BOUND = Settings().client_cache_seconds + 1.5


def _status(conn: http.client.HTTPConnection, token: str) -> int:
    conn.request(
        "POST",
        "/prices",
        body=b"",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    answer = conn.getresponse()
    body = json.loads(answer.read())
    if answer.status == 401:
        assert body["message"] == "Missing or expired token"
    return answer.status


def _revoked_in_every_worker(server: Server, token: str, change: list[str]) -> list[float]:
    """Warm every worker with `token`, run the CLI `change` in another process, and return
    how long each worker went on accepting the token after the CLI returned."""
    conns = {worker: server.connection_to(worker) for worker in sorted(server.worker_pids())}
    try:
        for conn in conns.values():  # each worker reads (and keeps) the client now
            assert _status(conn, token) == 200
        server.cli_batch([change])
        changed = time.monotonic()
        lags = []
        for worker, conn in conns.items():
            while _status(conn, token) == 200:
                assert time.monotonic() - changed < BOUND, f"worker {worker} still accepts"
                time.sleep(0.02)
            lags.append(time.monotonic() - changed)
        return lags
    finally:
        for conn in conns.values():
            conn.close()


@pytest.mark.parametrize("action", ["disable", "rotate"])
def test_a_change_by_another_process_stops_tokens_in_every_worker(
    server: Server, action: str
) -> None:
    client = add_client(server, f"revoked-{action}-{server.name}", platform=False)
    token = client.token(server.base)
    lags = _revoked_in_every_worker(server, token, ["clients", action, client.client_id])
    assert len(lags) == server.workers and max(lags) < BOUND
    # The old key opens no new token at once: /auth reads the client fresh.
    answer = server.http.post(
        "/auth", headers={"x-client-id": client.client_id, "x-api-key": client.api_key}
    )
    assert answer.status_code == 401 and answer.json()["message"] == "Invalid credentials"
