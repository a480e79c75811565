"""The HTTP side of the loopback test servers: a stdlib `ThreadingHTTPServer` on 127.0.0.1
(a free port) in a daemon thread, handing each request to the server's `respond`. Used as a
context manager; `url` is the server's. `LoopbackRpcServer` is the JSON-RPC one: one request
or a batch per POST, each handed to the node's `answer`."""

from __future__ import annotations

import json
import sys
import threading
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self


class RpcError(Exception):
    """A JSON-RPC error object the node answers with (`{"code": ..., "message": ...}`)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message

    def reply(self, request_id: Any) -> dict[str, Any]:
        error = {"code": self.code, "message": self.message}
        return {"jsonrpc": "2.0", "error": error, "id": request_id}


class LoopbackHttpServer:
    """Serves `respond(method, path, headers, body) -> (status, content type, body)` over
    HTTP/1.1 (keep-alive) on loopback for each request whose method is in `methods` (others
    get the stdlib's 501); subclasses respond. An exception out of `respond` drops the
    connection unanswered (the stdlib logs it); a client that left (a connection reset
    or closed under the server, as a client's timeout or a pool's close does) is not
    logged."""

    methods: ClassVar[tuple[str, ...]] = ("GET", "POST")

    def __init__(self) -> None:
        owner = self

        def serve(handler: BaseHTTPRequestHandler) -> None:
            length = int(handler.headers.get("Content-Length", 0))
            body = handler.rfile.read(length) if length else b""
            status, kind, data = owner.respond(handler.command, handler.path, handler.headers, body)
            handler.send_response(status)
            handler.send_header("Content-Type", kind)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)

        def log_message(handler: BaseHTTPRequestHandler, *args: Any) -> None:
            pass

        attributes: dict[str, Any] = {
            "protocol_version": "HTTP/1.1",
            "disable_nagle_algorithm": True,  # headers and body are two writes
            "log_message": log_message,
        }
        attributes.update({f"do_{method}": serve for method in self.methods})
        handler = type("Handler", (BaseHTTPRequestHandler,), attributes)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        logged = self._server.handle_error

        def handle_error(request: Any, client_address: Any) -> None:
            if not isinstance(sys.exc_info()[1], ConnectionError):
                logged(request, client_address)

        self._server.handle_error = handle_error  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def respond(
        self, method: str, path: str, headers: Message, body: bytes
    ) -> tuple[int, str, bytes]:
        """(status, Content-Type, body) of the answer to one request."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class LoopbackRpcServer(LoopbackHttpServer):
    """Serves `answer(request) -> response` as JSON-RPC over HTTP POST; subclasses answer."""

    methods = ("POST",)

    def respond(
        self, method: str, path: str, headers: Message, body: bytes
    ) -> tuple[int, str, bytes]:
        request = json.loads(body)
        if isinstance(request, list):
            reply: Any = [self.answer(r) for r in request]
        else:
            reply = self.answer(request)
        return 200, "application/json", json.dumps(reply).encode()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


__all__ = ["LoopbackHttpServer", "LoopbackRpcServer", "RpcError"]
