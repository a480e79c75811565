"""The batching stderr handler of `walletcore serve`."""

from __future__ import annotations

import logging
import os
import time

from walletcore_litestar.logs import MAX_BATCH_BYTES, BatchingStderrHandler


def test_lines_are_batched_then_flushed_and_errors_at_once() -> None:
    read, write = os.pipe()
    os.set_blocking(read, False)
    handler = BatchingStderrHandler(write, interval=0.05)
    logger = logging.getLogger("walletcore.test")
    logger.propagate, logger.level = False, logging.INFO
    logger.addHandler(handler)
    try:
        logger.info("method=%s path=%s", "POST", "/prices")
        logger.error("boom")  # written at once, with the line before it
        first = os.read(read, 65536).decode()
        lines = first.splitlines()
        assert lines[0].endswith("INFO walletcore.test method=POST path=/prices")
        assert lines[1].endswith("ERROR walletcore.test boom")
        logger.info("later")
        time.sleep(0.2)  # the flusher writes within its interval
        assert os.read(read, 65536).decode().endswith("INFO walletcore.test later\n")
        for i in range(200):  # batches stay below one atomic pipe write
            logger.info("x" * 100 + str(i))
        handler.flush()
        chunk = os.read(read, 1 << 20)
        assert chunk.count(b"\n") == 200
    finally:
        logger.removeHandler(handler)
        handler.close()
        os.close(read)
        os.close(write)
    assert MAX_BATCH_BYTES < 4096
