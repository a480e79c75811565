"""No wallet password or seed phrase in logs, errors, results, the audit log, the send record
or the sandbox ledger, whatever a send goes through."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from ops_support import ELSEWHERE, PASSWORD, Ops

from walletcore.domain.assets import CONTRACT_CHAINS, Chain, FeePayer
from walletcore.domain.errors import DomainError
from walletcore.testing import CONTRACT_CATALOG
from walletcore_sandbox.ledger import DATA_FILE

WRONG = "battery horse correct"


async def test_no_secret_leaks_from_any_send(ops: Ops, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = await ops.client(fee_payer=FeePayer.PLATFORM, platform=True)
    created = await ops.container.wallets().create(ops.caller(client), password=PASSWORD)
    mnemonic, user = created.mnemonic, created.user_id
    answers: list[Any] = []
    errors: list[DomainError] = []

    async def attempt(**kwargs: Any) -> None:
        try:
            answers.append(await ops.send(client, user, **kwargs))
        except DomainError as exc:
            errors.append(exc)

    for chain in CONTRACT_CHAINS:
        native = CONTRACT_CATALOG.native_asset(chain)
        await ops.fund(created.addresses[chain], native.id, "5")
        await attempt(asset_id=native.id, amount="1", request_id=f"{chain}-1", password=WRONG)
        await attempt(asset_id=native.id, amount="1", request_id=f"{chain}-1")
        await attempt(asset_id=native.id, amount="1", request_id=f"{chain}-1", password=WRONG)
        await attempt(asset_id=native.id, amount="50", request_id=f"{chain}-2")
    ops.gateways[Chain.ETHEREUM].lose_answers = 1
    await attempt(asset_id=2, amount="0.1", request_id="lost")
    await attempt(asset_id=2, amount="0.1", request_id="lost")
    await attempt(asset_id=21, amount="1", request_id="token", password=WRONG)
    await attempt(
        asset_id=2, amount="1", request_id="bad", recipient=ELSEWHERE[Chain.TRON], password=WRONG
    )
    assert len(answers) == 13 and len(errors) == 15

    texts = [r.getMessage() for r in caplog.records]
    texts += [caplog.text]
    texts += [f"{e!r} {e}" for e in errors]
    texts += [repr(a) for a in answers]
    texts += [repr(e) for e in await ops.db.audit.newest(limit=1000)]
    for record in ops.storage._tables.sends.values():  # the stored records themselves
        texts += [repr(record), json.dumps(record.result), (record.raw_tx or b"").decode()]
    with contextlib.closing(sqlite3.connect(Path(ops.container.settings().home) / DATA_FILE)) as db:
        texts.append("\n".join(db.iterdump()))  # every row of the ledger, as SQL text
    hashed = [hashlib.sha256(p.encode()).hexdigest() for p in (PASSWORD, WRONG)]
    for secret in (mnemonic, PASSWORD, WRONG, *hashed):
        assert all(secret not in text for text in texts), secret
