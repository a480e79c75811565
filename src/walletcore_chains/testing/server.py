"""The HTTP side of the loopback JSON-RPC test nodes: a stdlib `ThreadingHTTPServer` on
127.0.0.1 (a free port) in a daemon thread, taking one request or a batch per POST and
handing each to the node's `answer`. Used as a context manager; `url` is the node's."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class RpcError(Exception):
    """A JSON-RPC error object the node answers with (`{"code": ..., "message": ...}`)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message

    def reply(self, request_id: Any) -> dict[str, Any]:
        error = {"code": self.code, "message": self.message}
        return {"jsonrpc": "2.0", "error": error, "id": request_id}


class LoopbackRpcServer:
    """Serves `answer(request) -> response` over HTTP on loopback; subclasses answer."""

    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                request = json.loads(self.rfile.read(length))
                if isinstance(request, list):
                    body: Any = [owner.answer(r) for r in request]
                else:
                    body = owner.answer(request)
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


__all__ = ["LoopbackRpcServer", "RpcError"]
