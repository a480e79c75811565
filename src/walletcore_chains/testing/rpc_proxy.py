"""A JSON-RPC node in front of another one (anvil, say), for tests that need a node's
refusals the engine behind would not give: stdlib `http.server` on 127.0.0.1 (a free port)
in a thread, forwarding every request to `upstream` and answering what it answered,
except the requests a refusal names.

- `refuse(method, code, message, when=...)`: the method answers that JSON-RPC error (for
  the requests `when(params)` picks; every one by default), and nothing is forwarded.
- `limit_logs(blocks, ...)`: `eth_getLogs` over more than `blocks` blocks is refused as
  public providers refuse it (Infura's `-32005 query returned more than 10000 results` by
  default); `logs_asked` keeps the `(from, to)` of every query the proxy answered.
- `calls`: how many times each method was asked (refused ones included).
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from walletcore.testing.http import LoopbackRpcServer, RpcError

#: Infura's answer to a log query over too many results.
TOO_MANY_RESULTS = (-32005, "query returned more than 10000 results")


def _every(params: list[Any]) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class _Refusal:
    code: int
    message: str
    when: Callable[[list[Any]], bool]


class RpcProxy(LoopbackRpcServer):
    def __init__(self, upstream: str, *, timeout: float = 30.0) -> None:
        self.upstream = upstream
        self.timeout = timeout
        self.calls: Counter[str] = Counter()
        #: `(fromBlock, toBlock)` of each `eth_getLogs` answered (not refused)
        self.logs_asked: list[tuple[int, int]] = []
        self._refusals: dict[str, _Refusal] = {}
        self._lock = threading.Lock()
        super().__init__()

    def refuse(
        self,
        method: str,
        code: int,
        message: str,
        when: Callable[[list[Any]], bool] = _every,
    ) -> None:
        """`method` answers `{code, message}` from now on, for the requests `when` picks."""
        self._refusals[method] = _Refusal(code, message, when)

    def allow(self, method: str) -> None:
        """`method` is forwarded again."""
        self._refusals.pop(method, None)

    def limit_logs(
        self, blocks: int, code: int = TOO_MANY_RESULTS[0], message: str = TOO_MANY_RESULTS[1]
    ) -> None:
        """`eth_getLogs` over more than `blocks` blocks answers `{code, message}`."""

        def too_wide(params: list[Any]) -> bool:
            first, last = _range(params)
            return last - first + 1 > blocks

        self.refuse("eth_getLogs", code, message, too_wide)

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.logs_asked.clear()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        method, params = str(request["method"]), list(request.get("params") or [])
        with self._lock:
            self.calls[method] += 1
        refusal = self._refusals.get(method)
        if refusal is not None and refusal.when(params):
            return RpcError(refusal.code, refusal.message).reply(request.get("id"))
        if method == "eth_getLogs":
            with self._lock:
                self.logs_asked.append(_range(params))
        body = json.dumps(request).encode()
        forwarded = urllib.request.Request(
            self.upstream, body, {"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(forwarded, timeout=self.timeout) as reply:
            answered: dict[str, Any] = json.loads(reply.read())
        return answered


def _range(params: list[Any]) -> tuple[int, int]:
    query = params[0] if params else {}
    return _block(query.get("fromBlock")), _block(query.get("toBlock"))


def _block(value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.startswith("0x"):
        return int(value, 16)
    raise ValueError(f"the proxy reads numbered blocks only, not {value!r}")


__all__ = ["TOO_MANY_RESULTS", "RpcProxy"]
