"""A request cannot hold a worker or a connection: on a real `walletcore serve` (granian), on
SQLite (one worker) and PostgreSQL (two).

- The body checks are linear: the deep-array-of-escaped-quotes body that stalled a worker
  for 8 - 9 s (four at once: 34 s, and `/prices` on that worker waited as long) is a 400
  at once, and the worker serves others meanwhile.
- A body over the cap is answered 400 and the connection stays usable: the rest of the body
  is read and dropped, so the next request on the same connection is answered. Beyond what
  is worth reading (`arrival.DRAIN_LIMIT_BYTES`) the answer says `Connection: close`,
  every time, and the server closes the connection after it.
- A body that stalls is cut: `Content-Length: 100` and 10 bytes sent get a 400 within the
  body timeout (`WALLETCORE_BODY_TIMEOUT_SECONDS`, 3 s on these servers), and the
  connection is closed; a slow body that completes in time is served as usual.
- `Authorization` sent twice is a 400 (the first no longer wins), and so are `/auth`'s
  `x-client-id` and `x-api-key`.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest
from hardening_support import BODY_TIMEOUT_SECONDS, Server, assert_error_envelope

from walletcore_litestar.arrival import DRAIN_LIMIT_BYTES, DRAIN_SECONDS
from walletcore_litestar.bodies import TOO_DEEP
from walletcore_litestar.errors import BODY_TOO_LARGE

#: The reported attack: 33 open arrays, then an unterminated string of escaped quotes.
DEEP_STRING_ATTACK = b"[" * 33 + b'"' + b'\\"' * 32_700
#: What the worker may spend on one attack (its own `durationMs` in the request log): far
#: above the milliseconds a 64 KiB body costs now, far below the 8 - 9 s it cost before.
SERVED_SECONDS = 1.0
#: The same seen from the client, on a test machine busy with other tests: four attacks
#: took 34 s before (each waited for the others on the worker's one event loop).
ANSWER_SECONDS = 5.0
STALL_MESSAGE = (
    "Request body not received in time: the whole body must arrive within "
    f"{BODY_TIMEOUT_SECONDS:g} seconds"
)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float

    @property
    def closes(self) -> bool:
        return self.headers.get("connection", "").lower() == "close"

    def message(self) -> str:
        return str(json.loads(self.body)["message"])


def raw_post(path: str, token: str, body: bytes, *, length: int | None = None) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body) if length is None else length}"
        "\r\n\r\n"
    )
    return head.encode() + body


def read_answer(sock: socket.socket, started: float) -> Answer:
    """One HTTP/1.1 answer read off `sock` (which stays open for the next one)."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    body = response.read()
    headers = {k.lower(): v for k, v in response.getheaders()}
    return Answer(response.status, headers, body, time.monotonic() - started)


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """The server closed its side (an end of stream, or a reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except TimeoutError:
        return False
    except OSError:  # reset: closed with bytes of ours unread, which is closed too
        return True


def send_in_background(sock: socket.socket, data: bytes) -> threading.Thread:
    """Send `data` while the answer is read: the server may answer (and close) before it
    read everything, and a blocked send must not keep us from reading that answer."""

    def run() -> None:
        try:
            sock.sendall(data)
        except OSError:
            pass  # the server closed first: what it answered is what the test reads

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# -- the body checks are linear ------------------------------------------------------------
def test_the_deep_string_attack_is_refused_at_once_and_the_worker_serves_others(
    server: Server,
) -> None:
    token = server.clients["A"].token(server.base)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def attack() -> tuple[httpx.Response, float]:
        started = time.monotonic()
        with httpx.Client(base_url=server.base, timeout=60) as http:
            response = http.post("/trades", content=DEEP_STRING_ATTACK, headers=headers)
        return response, time.monotonic() - started

    def prices() -> tuple[httpx.Response, float]:
        time.sleep(0.05)  # while the attacks are being read
        started = time.monotonic()
        with httpx.Client(base_url=server.base, timeout=60) as http:
            response = http.post("/prices", headers={"Authorization": f"Bearer {token}"})
        return response, time.monotonic() - started

    with ThreadPoolExecutor(max_workers=6) as pool:
        attacks = [pool.submit(attack) for _ in range(4)]
        meanwhile = pool.submit(prices)
        answered = [f.result() for f in attacks]
        price_answer, price_seconds = meanwhile.result()
    for response, seconds in answered:
        body = assert_error_envelope(response, [400], TOO_DEEP)
        assert seconds < ANSWER_SECONDS, f"the attack was answered after {seconds:.2f} s"
        served = served_seconds(server, body["requestId"])
        assert served < SERVED_SECONDS, f"the attack held the worker {served:.3f} s"
    assert price_answer.status_code == 200, price_answer.text
    assert price_seconds < ANSWER_SECONDS, f"/prices waited {price_seconds:.2f} s"


def served_seconds(server: Server, request_id: str, wait: float = 10.0) -> float:
    """How long the worker served a request: its `durationMs` in the request log (written
    in batches a fraction of a second apart)."""
    deadline = time.monotonic() + wait
    while True:
        for line in server.log_path.read_text(errors="replace").splitlines():
            if f"requestId={request_id} " in line and "durationMs=" in line:
                return float(line.rsplit("durationMs=", 1)[1].split()[0]) / 1000.0
        assert time.monotonic() < deadline, f"no log line of request {request_id}"
        time.sleep(0.1)


# -- bodies over the cap ---------------------------------------------------------------------
def test_a_body_over_the_cap_is_drained_and_the_connection_serves_the_next_request(
    server: Server,
) -> None:
    token = server.clients["A"].token(server.base)
    big = b'{"userId": "' + b"a" * (DRAIN_LIMIT_BYTES - 14) + b'"}'
    assert len(big) == DRAIN_LIMIT_BYTES
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        for pair in range(60):
            started = time.monotonic()
            sender = send_in_background(sock, raw_post("/trades", token, big))
            refused = read_answer(sock, started)
            sender.join(timeout=30)
            assert refused.status == 400, (pair, refused.body[:200])
            assert refused.message() == BODY_TOO_LARGE
            assert not refused.closes, f"pair {pair}: the connection was given up"
            started = time.monotonic()
            sock.sendall(raw_post("/prices", token, b""))
            follow = read_answer(sock, started)
            assert follow.status == 200, (pair, follow.body[:200])


def test_a_body_beyond_the_drain_limit_is_answered_with_close_every_time(
    server: Server,
) -> None:
    token = server.clients["A"].token(server.base)
    huge = b'{"userId": "' + b"a" * (2 * DRAIN_LIMIT_BYTES) + b'"}'
    for attempt in range(20):
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            started = time.monotonic()
            sender = send_in_background(sock, raw_post("/trades", token, huge))
            answer = read_answer(sock, started)
            assert answer.status == 400, (attempt, answer.body[:200])
            assert answer.message() == BODY_TOO_LARGE
            assert answer.closes, f"attempt {attempt}: no Connection: close ({answer.headers})"
            assert closed_by_server(sock, within=10), f"attempt {attempt}: left open"
            sender.join(timeout=30)


def test_a_client_that_follows_keep_alive_gets_every_answer(server: Server) -> None:
    """What an integrator's HTTP client sees: 60 pairs of a too-large body and a /prices on
    one keep-alive client (it reuses the connection, or opens another when told to close)."""
    token = server.clients["A"].token(server.base)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=server.base, timeout=30) as http:
        for pair in range(60):
            size = DRAIN_LIMIT_BYTES if pair % 2 else 2 * DRAIN_LIMIT_BYTES
            body = b'{"userId": "' + b"a" * size + b'"}'
            try:
                refused = http.post("/trades", content=body, headers=headers)
            except httpx.TransportError:
                continue  # the server closed while we still sent: told, and closed, as above
            assert_error_envelope(refused, [400], BODY_TOO_LARGE)
            follow = http.post("/prices", headers={"Authorization": f"Bearer {token}"})
            assert follow.status_code == 200, (pair, follow.text[:200])


# -- bodies that never complete ---------------------------------------------------------------
@pytest.mark.parametrize("path", ["/trades", "/prices"])
def test_a_stalled_body_is_cut_within_the_body_timeout(server: Server, path: str) -> None:
    token = server.clients["A"].token(server.base)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(raw_post(path, token, b'{"userId":', length=100))
        answer = read_answer(sock, started)
        assert answer.status == 400, answer.body[:200]
        assert answer.message() == STALL_MESSAGE
        assert answer.closes, answer.headers
        assert BODY_TIMEOUT_SECONDS - 0.5 <= answer.seconds < BODY_TIMEOUT_SECONDS + 5, (
            f"cut after {answer.seconds:.2f} s"
        )
        assert closed_by_server(sock, within=5)


def test_a_stalled_body_with_a_bad_token_is_answered_and_closed(server: Server) -> None:
    """Refused before the body is read: the answer waits at most `DRAIN_SECONDS` for the
    rest, then says it closes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(raw_post("/trades", "not-a-token", b'{"userId":', length=100))
        answer = read_answer(sock, started)
        assert answer.status == 401, answer.body[:200]
        assert answer.message() == "Missing or expired token"
        assert answer.closes, answer.headers
        assert answer.seconds < DRAIN_SECONDS + 4, f"answered after {answer.seconds:.2f} s"
        assert closed_by_server(sock, within=5)


def test_a_slow_body_that_completes_in_time_is_served(server: Server) -> None:
    client = server.clients["A"]
    token = client.token(server.base)
    body = json.dumps({"userId": client.user}).encode()
    pieces = [body[:5], body[5:20], body[20:]]
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(raw_post("/trades", token, b"", length=len(body)))
        for piece in pieces:
            time.sleep(BODY_TIMEOUT_SECONDS / 6)
            sock.sendall(piece)
        answer = read_answer(sock, started)
        assert answer.status == 200, answer.body[:200]
        assert not answer.closes
        sock.sendall(raw_post("/prices", token, b""))  # the same connection serves on
        assert read_answer(sock, time.monotonic()).status == 200


# -- headers that identify the caller, sent twice --------------------------------------------
@pytest.mark.parametrize("valid_first", [True, False])
def test_authorization_sent_twice_is_a_400(server: Server, valid_first: bool) -> None:
    token = f"Bearer {server.clients['A'].token(server.base)}"
    values = [token, "Bearer garbage"] if valid_first else ["Bearer garbage", token]
    for path in ("/prices", "/trades"):
        response = server.http.post(
            path,
            headers=[("Authorization", v) for v in values],
            json={"userId": server.clients["A"].user} if path == "/trades" else None,
        )
        assert_error_envelope(response, [400], "Authorization must be sent once")


@pytest.mark.parametrize("header", ["x-client-id", "x-api-key"])
def test_auth_credentials_sent_twice_are_a_400(server: Server, header: str) -> None:
    client = server.clients["A"]
    sent = [("x-client-id", client.client_id), ("x-api-key", client.api_key)]
    sent += [(k, v) for k, v in sent if k == header]
    response = server.http.post("/auth", headers=sent)
    assert_error_envelope(response, [400], f"{header} must be sent once")
    once = server.http.post("/auth", headers=sent[:2])  # the same credentials, once each
    assert once.status_code == 200, once.text
