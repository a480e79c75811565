"""`WALLETCORE_LOG_FORMAT=json`: `configure_logging` makes the serve handler write one JSON
object a line, and every record made while a request is served carries its request id,
including the records of the core, which never sees the id."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from walletcore.domain.trade import Order
from walletcore_litestar.logs import BatchingStderrHandler, JsonFormatter, RequestIdFilter
from walletcore_litestar.server import configure_logging

pytest.register_assert_rewrite("http_support")

from http_support import Api, assert_error, assert_ok


class BrokenVenue:
    """A venue that fails in a way no domain error names: the trade stays executing."""

    async def execute(self, order: Order) -> Any:
        raise RuntimeError("the venue's socket closed")

    async def status(self, order: Order) -> Any:
        raise RuntimeError("the venue's socket closed")

    async def cancel(self, order: Order) -> Any:
        raise RuntimeError("the venue's socket closed")


@pytest.fixture
def json_logs(tmp_path: Path) -> Iterator[Any]:
    """`configure_logging(log_format="json")` on the `walletcore` logger, undone after; the
    function it gives returns every line written so far, parsed.

    The handler writes to `sys.stderr.fileno()`: here a file of the test's own, read whole
    each time and never truncated (capfd's `readouterr` truncates its file, and a batch the
    handler's flush thread wrote between that read and the truncation was lost)."""
    written_to = tmp_path / "stderr.log"
    ours = written_to.open("a")
    logger = logging.getLogger("walletcore")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    stderr, sys.stderr = sys.stderr, ours  # only while the handler takes its file descriptor
    try:
        configure_logging("info", log_format="json")
    finally:
        sys.stderr = stderr
    (handler,) = [h for h in logger.handlers if isinstance(h, BatchingStderrHandler)]
    assert isinstance(handler.formatter, JsonFormatter)
    assert any(isinstance(f, RequestIdFilter) for f in handler.filters)

    def written() -> list[dict[str, Any]]:
        # The access line of a request is written after its answer was sent, by the app's
        # thread of the test client: a read right after the answer may come before it.
        lines: list[dict[str, Any]] = []
        for _ in range(50):
            handler.flush()
            complete = written_to.read_text().split("\n")[:-1]  # a line ends with its \n
            lines = [json.loads(line) for line in complete if line.strip()]
            if any(e.get("logger") == "walletcore.http" for e in lines):
                break
            time.sleep(0.05)
        return lines

    try:
        yield written
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.handlers[:], logger.level, logger.propagate = saved
        ours.close()


async def test_each_line_is_json_with_the_request_id(
    json_logs: Any, api: Api, http: AsyncTestClient[Litestar]
) -> None:
    assert_ok(await api.post("/prices", X_Request_Id="ops-json-1"))
    assert (await http.get("/health/live", headers={"X-Request-Id": "ops-json-2"})).is_success
    lines = json_logs()
    assert lines, "nothing was logged"
    for entry in lines:
        assert {"time", "level", "logger", "message"} <= set(entry)
        assert entry["time"].endswith("Z") and entry["level"] in {"INFO", "WARNING", "ERROR"}
    by_id = {e.get("requestId"): e for e in lines if e["logger"] == "walletcore.http"}
    assert by_id["ops-json-1"]["message"].startswith("method=POST path=/prices status=200")
    assert by_id["ops-json-2"]["message"].startswith("method=GET path=/health/live status=200")
    # Never a credential: the api key sent to /auth, the token every call carries.
    text = json.dumps(lines)
    assert api.issued.api_key not in text and api.token not in text


@pytest.mark.parametrize("overrides", [{"venue": BrokenVenue()}])
async def test_a_record_of_the_core_carries_the_request_id(json_logs: Any, api: Api) -> None:
    user_id = await api.new_user()
    trade = assert_ok(
        await api.post("/sell", {"userId": user_id, "assetId": 1, "cryptoAmount": "1"})
    )
    ids = {"userId": user_id, "tradeId": trade["tradeId"]}
    assert_error(await api.post("/trade/approve", ids, X_Request_Id="ops-json-approve"), 504)
    for _ in range(50):  # the lines are written by the logging thread: wait for this one
        lines = json_logs()
        found = [e for e in lines if e["logger"] == "walletcore.trading"]
        if found:
            break
        await asyncio.sleep(0.05)
    (failed,) = found
    # The trading service logs without knowing the request; the line knows it all the same.
    assert failed["level"] == "ERROR" and failed["requestId"] == "ops-json-approve"
    assert trade["tradeId"] in failed["message"]
    assert "RuntimeError" in failed["exception"]  # the traceback, inside the one line
    outside = logging.getLogger("walletcore.test")
    outside.warning("between requests")
    for _ in range(50):  # written by the logging thread: wait for it
        between_lines = [e for e in json_logs() if e["message"] == "between requests"]
        if between_lines:
            break
        await asyncio.sleep(0.05)
    (between,) = between_lines
    assert "requestId" not in between
