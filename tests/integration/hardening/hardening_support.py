"""Helpers of the hardening tests: a real `walletcore serve` process (granian) on a loopback
port, the api clients, users, trades and transactions provisioned on it, forged tokens, a
throwaway PostgreSQL database, and the error-envelope assertion.

Imported by name (this directory is on `sys.path`, like `http_support` in tests/integration/
http); the fixtures that use it are in `conftest.py`.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parent
#: The file the sandbox profile generates under WALLETCORE_HOME for the token signing key
#: (`walletcore.container`: `operator_secret(settings, "token_signing_key", ...)`).
TOKEN_KEY_FILE = "token-signing.key"
#: A third-party recipient (README): never one of the wallets under test.
RECIPIENT = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
#: A password that is never any wallet's: a send or extend with it stops at 401.
WRONG_PASSWORD = "not the wallet password"
#: The envelope of every error (interface spec, Response envelope).
ERROR_FIELDS = {"message", "error", "requestId"}
#: `walletcore serve` takes a few seconds to start (imports, migrations, granian workers).
START_TIMEOUT = 60.0
#: `WALLETCORE_BODY_TIMEOUT_SECONDS` of every server started here (the default is 10 s): a
#: stalled body is cut within it (`test_connections.py`), and a loopback body never nears it.
BODY_TIMEOUT_SECONDS = 3.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_environment() -> dict[str, str]:
    """The test process's environment without any developer WALLETCORE_* setting."""
    return {k: v for k, v in os.environ.items() if not k.startswith("WALLETCORE_")}


# -- the api clients -----------------------------------------------------------------------
@dataclass
class Client:
    """An api client of the served service, and what was provisioned for it."""

    name: str
    client_id: str
    api_key: str
    fee_payer: str
    password: str = field(default_factory=lambda: "pw-" + secrets.token_hex(8))
    #: The platform wallet's addresses (chain -> address); empty when not provisioned.
    platform: dict[str, str] = field(default_factory=dict)
    #: userId -> the addresses /create returned.
    users: dict[str, dict[str, str]] = field(default_factory=dict)
    #: status -> tradeId of the first user's trades (`open`, `completed`, `cancelled`).
    trades: dict[str, str] = field(default_factory=dict)
    #: The hash of the first user's ETH send, and of the platform wallet's.
    user_tx: str | None = None
    platform_tx: str | None = None
    #: The X-Request-Id of those two sends (the idempotency keys).
    user_send_id: str | None = None
    platform_send_id: str | None = None
    _token: str | None = None
    _token_until: float = 0.0

    @property
    def user(self) -> str:
        """The first user (the one with trades and a send)."""
        return next(iter(self.users))

    def token(self, base: str) -> str:
        """A bearer token from /auth, cached until a minute before its `expiresAt` (a token
        lasts 15 minutes; the spec's advice), then fetched again."""
        if self._token is None or time.monotonic() >= self._token_until:
            answer = httpx.post(
                f"{base}/auth",
                headers={"x-client-id": self.client_id, "x-api-key": self.api_key},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            result = answer.json()["result"]
            expires = datetime.fromisoformat(result["expiresAt"])
            left = (expires - datetime.now(UTC)).total_seconds()
            self._token = result["token"]
            self._token_until = time.monotonic() + left - 60
        return self._token


# -- the served process ----------------------------------------------------------------------
class Server:
    """`walletcore serve --port P --workers N` (granian) in its own process group, with its
    WALLETCORE_HOME under `root` and the settings in `extra_env`.

    `restarts` counts how often `ensure_running` had to start it again after it died: a
    test that kills it fails itself, and the next one still gets a server.
    """

    def __init__(
        self,
        name: str,
        root: Path,
        *,
        workers: int = 1,
        extra_env: dict[str, str] | None = None,
        umask: int = -1,
    ) -> None:
        self.name = name
        self.root = root
        self.workers = workers
        #: the server process's umask (-1: the test process's)
        self.umask = umask
        self.home = root / "home"
        self.env = clean_environment()
        self.env["WALLETCORE_HOME"] = str(self.home)
        self.env["WALLETCORE_BODY_TIMEOUT_SECONDS"] = str(BODY_TIMEOUT_SECONDS)
        self.env.update(extra_env or {})
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = root / f"server-{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.first_pid: int | None = None
        self.restarts = 0
        self.clients: dict[str, Client] = {}
        #: Workers that have served a /create (so eth_account, and py_ecc's raised
        #: recursion limit, are loaded in them).
        self.primed: set[int] = set()
        self._log: Any = None
        #: One client for all requests (building an httpx.Client costs ~20 ms: its TLS
        #: context). `Connection: close` where a fresh connection matters.
        self.http = httpx.Client(base_url=self.base, timeout=60)

    def __repr__(self) -> str:
        return f"Server({self.name}, {self.base}, workers={self.workers})"

    # -- the CLI ------------------------------------------------------------------------
    def cli_batch(self, commands: Iterable[list[str]]) -> list[Any]:
        """Several CLI commands in one interpreter (`cli_batch.py`): one start-up instead
        of one per command. The same `walletcore_cli.main` as the console script."""
        commands = list(commands)
        done = subprocess.run(
            [sys.executable, str(HERE / "cli_batch.py"), json.dumps(commands)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, f"{commands}: {done.stderr}\n{done.stdout}"
        return [json.loads(out) for out in json.loads(done.stdout)]

    # -- the process --------------------------------------------------------------------
    def start(self) -> None:
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                str(BIN / "walletcore"),
                "serve",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
            ],
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            umask=self.umask,
        )
        if self.first_pid is None:
            self.first_pid = self.proc.pid
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                self.http.post("/prices", headers={"Connection": "close"}, timeout=2)
                if len(self.worker_pids()) >= self.workers:
                    break
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self} did not start:\n{self.log_tail()}")
            time.sleep(0.2)
        self.primed.clear()

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        try:  # the workers too, whatever state the main process left them in
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.http.close()
        self.http = httpx.Client(base_url=self.base, timeout=60)
        if self._log is not None:
            self._log.close()
            self._log = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def worker_pids(self) -> set[int]:
        """The live (not zombie) child processes of the server: granian's workers (not
        the `multiprocessing` resource tracker the spawn start method runs beside them)."""
        if self.proc is None:
            return set()
        return {
            pid
            for pid in children(self.proc.pid)
            if process_state(pid) not in ("Z", "X", None) and not _resource_tracker(pid)
        }

    def answers(self, client: str = "A") -> bool:
        """POST /prices with a valid token, on a fresh connection (any worker may take
        it): 200?"""
        try:
            headers = {
                "Authorization": f"Bearer {self.clients[client].token(self.base)}",
                "Connection": "close",
            }
            return self.http.post("/prices", headers=headers, timeout=10).status_code == 200
        except (httpx.TransportError, AssertionError):
            return False

    def ensure_running(self) -> None:
        """Start it again if a previous test killed it (or stopped it as unhealthy);
        prime every worker not primed yet (a respawned one too)."""
        if not self.alive():
            self.stop()
            self.restarts += 1
            self.start()
        self.prime_workers()

    # -- requests -----------------------------------------------------------------------
    def headers(self, client: str = "A", **extra: str) -> dict[str, str]:
        merged = {"Authorization": f"Bearer {self.clients[client].token(self.base)}"}
        merged.update({k.replace("_", "-"): v for k, v in extra.items()})
        return merged

    def post(
        self, path: str, body: Any = None, client: str = "A", **headers: str
    ) -> httpx.Response:
        """A JSON POST as `client` (extra headers as keyword arguments, `_` for `-`)."""
        kwargs: dict[str, Any] = {"headers": self.headers(client, **headers)}
        if body is not None:
            kwargs["json"] = body
        return self.http.post(path, **kwargs)

    def connection_to(self, worker: int, attempts: int = 200) -> http.client.HTTPConnection:
        """A connection that `worker` accepted. Which worker accepts a connection is the
        kernel's choice, so each connection's server side is looked up in /proc (the
        worker holding that socket) until the wanted one has it."""
        for attempt in range(attempts):
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            # The kernel may hand every connection to the same worker (a fresh worker can
            # wait long for its first): after a few tries the other workers are paused
            # (SIGSTOP) while the connection is made, so only `worker` can accept it.
            paused = self.worker_pids() - {worker} if attempt >= 5 else set()
            for other in paused:
                os.kill(other, signal.SIGSTOP)
            try:
                conn.connect()
                workers = self.worker_pids() | {worker}
                accepted = worker_of_connection(workers, self.port, conn.sock.getsockname()[1])
            except ConnectionRefusedError:  # no worker listening yet (a respawn)
                time.sleep(0.05)
                continue
            finally:
                for other in paused:
                    os.kill(other, signal.SIGCONT)
            if accepted == worker:
                return conn
            conn.close()
        raise AssertionError(f"worker {worker} of {self} accepted none of {attempts} connections")

    def prime_workers(self, password: str = "priming the worker 1") -> None:
        """Run a /create in every worker not primed yet: the first /create imports
        eth_account, whose py_ecc raises the recursion limit (the trap: a deeply nested body
        then overflowed the C stack instead of raising RecursionError)."""
        token = self.clients["A"].token(self.base)
        for worker in sorted(self.worker_pids() - self.primed):
            conn = self.connection_to(worker)
            try:
                conn.request(
                    "POST",
                    "/create",
                    body=json.dumps({"password": password}),
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Content-Type": "application/json",
                    },
                )
                answer = conn.getresponse()
                answer.read()
                assert answer.status == 200, f"/create answered {answer.status}"
                self.primed.add(worker)
            finally:
                conn.close()


def children(pid: int) -> list[int]:
    """Child process ids of `pid` (every thread's children list)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
        except OSError:
            continue
        found.extend(int(p) for p in text.split())
    return found


def process_state(pid: int) -> str | None:
    """The state letter of /proc/<pid>/stat (R, S, Z, ...), None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[0]


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    return inodes


def _server_side_inode(server_port: int, client_port: int) -> int | None:
    """The inode of the accepted socket serving our connection (from /proc/net/tcp*)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, remote, inode = parts[1], parts[2], int(parts[9])
            if (
                int(local.rsplit(":", 1)[1], 16) == server_port
                and int(remote.rsplit(":", 1)[1], 16) == client_port
                and inode
            ):
                return inode
    return None


def worker_of_connection(workers: set[int], server_port: int, client_port: int) -> int | None:
    """Which worker accepted the connection from `client_port` (None: not accepted yet)."""
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        inode = _server_side_inode(server_port, client_port)
        if inode is not None:
            for pid in workers:
                if inode in _socket_inodes(pid):
                    return pid
        time.sleep(0.01)
    return None


# -- what each server gets: clients, users, trades, sends ------------------------------------
def provision(
    server: Server, *, postgres: bool = False, full: bool = True, prime: bool = True
) -> None:
    """Through the operator CLI and the API, as an integrator would:

    - `A`: fee payer USER, platform wallet provisioned;
    - `B`: fee payer PLATFORM, platform wallet provisioned;
    - `C`: fee payer USER, no platform wallet (its platform endpoints are 404s).

    With `full`: A and B each get a user (ETH funded) with an `open`, a `completed` and a
    `cancelled` sell, an ETH send from that user and one from the platform wallet (each
    with its X-Request-Id). The server is started here (after the clients exist) and
    every worker is primed with a /create (without `full`, only if `prime`).
    """
    commands = [["db", "upgrade"]] if postgres else []
    commands += [
        ["clients", "create", "--name", "Hardening A", "--fee-payer", "USER"],
        ["clients", "create", "--name", "Hardening B", "--fee-payer", "PLATFORM"],
        ["clients", "create", "--name", "Hardening C", "--fee-payer", "USER"],
    ]
    outputs = server.cli_batch(commands)[-3:]
    for name, payer, issued in zip("ABC", ("USER", "PLATFORM", "USER"), outputs, strict=True):
        server.clients[name] = Client(name, issued["clientId"], issued["apiKey"], payer)
    provisioned = server.cli_batch(
        [["platform", "provision", "--client-id", server.clients[n].client_id] for n in "AB"]
    )
    for name, addresses in zip("AB", provisioned, strict=True):
        server.clients[name].platform = addresses
    server.start()
    if not full:
        if prime:
            server.prime_workers()
        return
    for name in "AB":
        client = server.clients[name]
        created = server.post("/create", {"password": client.password}, client=name)
        assert created.status_code == 200, created.text
        result = created.json()["result"]
        client.users[result["userId"]] = result["addresses"]
    server.prime_workers()
    server.cli_batch(
        [
            [
                "sandbox",
                "fund",
                "--chain",
                "ETHEREUM",
                "--address",
                address,
                "--asset",
                "2",
                "--amount",
                "1",
            ]
            for name in "AB"
            for address in (
                server.clients[name].users[server.clients[name].user]["ETHEREUM"],
                server.clients[name].platform["ETHEREUM"],
            )
        ]
    )
    for name in "AB":
        _trade_and_send(server, server.clients[name])
    for name in "AB":
        _wait_confirmed(server, server.clients[name])


def add_client(
    server: Server, name: str, *, fee_payer: str = "USER", platform: bool = True
) -> Client:
    """Another api client on a running server, through the CLI (`clients create`, and
    `platform provision` when `platform`), registered under `name`."""
    issued = server.cli_batch([["clients", "create", "--name", name, "--fee-payer", fee_payer]])[0]
    client = Client(name, issued["clientId"], issued["apiKey"], fee_payer)
    if platform:
        client.platform = server.cli_batch(
            [["platform", "provision", "--client-id", client.client_id]]
        )[0]
    server.clients[name] = client
    return client


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, f"{response.request.url}: {response.text}"
    return response.json()["result"]


def _trade_and_send(server: Server, client: Client) -> None:
    name, user = client.name, client.user
    quote = {"userId": user, "assetId": 2, "fiat": "EUR", "cryptoAmount": "0.01"}
    for status in ("open", "completed", "cancelled"):
        trade = _ok(server.post("/sell", quote, client=name))["tradeId"]
        if status == "completed":
            done = _ok(server.post("/trade/approve", {"userId": user, "tradeId": trade}, name))
            assert done["status"] == "completed", done
        elif status == "cancelled":
            _ok(server.post("/trade/cancel", {"userId": user, "tradeId": trade}, name))
        client.trades[status] = trade
    client.user_send_id = f"hardening-{name}-user-send"
    sent = _ok(
        server.post(
            "/send",
            {
                "userId": user,
                "assetId": 2,
                "recipient": RECIPIENT,
                "amount": "0.01",
                "password": client.password,
            },
            client=name,
            X_Request_Id=client.user_send_id,
        )
    )
    client.user_tx = sent["txHash"]
    client.platform_send_id = f"hardening-{name}-platform-send"
    sent = _ok(
        server.post(
            "/platform/send",
            {"assetId": 2, "recipient": RECIPIENT, "amount": "0.01"},
            client=name,
            X_Request_Id=client.platform_send_id,
        )
    )
    client.platform_tx = sent["txHash"]


def _wait_confirmed(server: Server, client: Client) -> None:
    """Until both sends are confirmed (a sandbox credit, such as a sponsor's gas top-up,
    counts once confirmed): the balances stay put from here on."""
    name = client.name
    lookups = [
        ("/txid", {"userId": client.user, "assetId": 2, "txHash": client.user_tx}),
        ("/platform/txid", {"assetId": 2, "txHash": client.platform_tx}),
    ]
    deadline = time.monotonic() + 30
    for path, body in lookups:
        while _ok(server.post(path, body, client=name))["status"] == "pending":
            assert time.monotonic() < deadline, f"{path} {body} stayed pending"
            time.sleep(0.2)


# -- tokens ----------------------------------------------------------------------------------
def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def token_seed(home: Path) -> bytes:
    """The 32-byte Ed25519 seed the server signs its tokens with (hex in its home)."""
    return bytes.fromhex((home / TOKEN_KEY_FILE).read_text(encoding="ascii").strip())


def forge_token(
    home: Path,
    payload: dict[str, Any] | bytes,
    *,
    header: dict[str, Any] | bytes | None = None,
    seed: bytes | None = None,
) -> str:
    """A compact JWS signed with the server's own Ed25519 token key (or `seed`): the
    service's format (`walletcore.services.tokens`), any claims we like."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if seed is None:
        seed = token_seed(home)
    head = header if header is not None else {"alg": "EdDSA", "typ": "JWT"}
    head_bytes = head if isinstance(head, bytes) else json.dumps(head).encode()
    body_bytes = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    signing_input = f"{b64url(head_bytes)}.{b64url(body_bytes)}"
    signature = Ed25519PrivateKey.from_private_bytes(seed).sign(signing_input.encode("ascii"))
    return f"{signing_input}.{b64url(signature)}"


def claims(client: Client, **changes: Any) -> dict[str, Any]:
    """Valid claims for `client` (generation 1, issued now, 15 minutes), then `changes`."""
    now = int(time.time())
    values: dict[str, Any] = {
        "sub": client.client_id,
        "gen": 1,
        "iat": now,
        "exp": now + 900,
        "jti": secrets.token_hex(12),
    }
    values.update(changes)
    return values


# -- assertions ------------------------------------------------------------------------------
def assert_error_envelope(
    response: httpx.Response, statuses: Iterable[int], message: str | None = None
) -> dict[str, Any]:
    """A client error with the error envelope: the status is one of `statuses` (all 4xx),
    the body is exactly `{message, error, requestId}`, `error == str(status)`, JSON, and
    `requestId` is the X-Request-Id header of the answer."""
    wanted = set(statuses)
    assert response.status_code in wanted, (
        f"{response.status_code} (wanted {sorted(wanted)}): {response.text[:300]!r}"
    )
    assert response.headers.get("content-type", "").startswith("application/json"), (
        response.headers.get("content-type")
    )
    body = response.json()
    assert isinstance(body, dict) and set(body) == ERROR_FIELDS, body
    assert body["error"] == str(response.status_code), body
    assert isinstance(body["message"], str) and body["message"], body
    assert isinstance(body["requestId"], str) and body["requestId"], body
    assert body["requestId"] == response.headers.get("x-request-id"), body
    if message is not None:
        assert body["message"] == message, body
    return body  # type: ignore[no-any-return]


def iter_chunks(data: bytes, size: int = 4096) -> Iterator[bytes]:
    """A body sent with Transfer-Encoding: chunked (no Content-Length)."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _resource_tracker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"resource_tracker" in cmdline.read()
    except OSError:
        return False
