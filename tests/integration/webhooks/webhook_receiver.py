"""A webhook receiver on loopback for the tests: a stdlib HTTP server (TLS when given a
certificate) in a thread, keeping every request and answering what the test decides; it
can be stopped (connections refused) and started again on the same port."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from standardwebhooks.webhooks import Webhook


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def verify(self, secret: str) -> Any:
        """The payload, if the signature holds for `secret` (standardwebhooks raises if not)."""
        return Webhook(secret).verify(self.body, self.headers)


class WebhookReceiver:
    """`respond(request) -> status` decides each answer (default 200); `delay` seconds
    before it; `answer_bytes` of body with it; `location` sent with a 3xx."""

    def __init__(self, *, tls: tuple[Path, Path] | None = None) -> None:
        self.received: list[Received] = []
        self.respond: Callable[[Received], int] = lambda _: 200
        self.delay = 0.0
        self.answer_bytes = 0
        self.location: str | None = None
        self.write_failed = False
        self._tls = tls
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.start()

    @property
    def url(self) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with owner._lock:
                    owner._connections.add(self.connection)

            def finish(self) -> None:
                with owner._lock:
                    owner._connections.discard(self.connection)
                super().finish()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                request = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with owner._lock:
                    owner.received.append(request)
                if owner.delay:
                    time.sleep(owner.delay)
                status = owner.respond(request)
                try:
                    self.send_response(status)
                    if owner.location and 300 <= status < 400:
                        self.send_header("Location", owner.location)
                    self.send_header("Content-Length", str(owner.answer_bytes))
                    self.end_headers()
                    chunk = b"x" * 65536
                    left = owner.answer_bytes
                    while left > 0:
                        self.wfile.write(chunk[: min(left, len(chunk))])
                        left -= len(chunk)
                except OSError:  # the client left (its timeout, its cap)
                    owner.write_failed = True
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        if self._tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*self._tls)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop listening and drop the open connections: connections to the port are
        refused until `start()`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            open_ones, self._connections = list(self._connections), set()
        for connection in open_ones:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def ids(self) -> list[str]:
        with self._lock:
            return [r.headers["webhook-id"] for r in self.received]


def self_signed(folder: Path, name: str) -> tuple[Path, Path, bytes]:
    """A certificate for `name` signed by its own key: (certificate file, key file, PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    cert_file, key_file = folder / f"{name}.crt", folder / f"{name}.key"
    cert_file.write_bytes(pem)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file, pem
