"""A send a withdrawal policy holds for operators' approval: `HeldSend` (the `202`), the
client's `approvals` and `policy`, and `wait_for_send` sending the same request again until
an operator approved it, then signed once."""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal

from client_support import PASSWORD, RECIPIENT, FaultProxy, Sandbox

from walletcore_client import Client, HeldSend, Polling, SendResult

POLICY = {
    "default": "deny",
    "rules": [
        {
            "name": "big-needs-one",
            "wallet": "user",
            "action": "require_approval",
            "approvals": 1,
            "over": {"amount": "1", "assetId": 2},
        },
        {"name": "users-otherwise", "wallet": "user", "action": "allow"},
    ],
}


def test_a_held_send_is_a_result_and_is_signed_once_after_the_approval(
    sandbox: Sandbox, proxy: FaultProxy
) -> None:
    created = sandbox.cli("clients", "create", "--name", "Held sends")
    document = sandbox.root / "policy.json"
    document.write_text(json.dumps(POLICY))
    sandbox.cli("policies", "set", created["clientId"], str(document))
    operator = sandbox.cli("operators", "add", "alice")
    client = Client(proxy.url, created["clientId"], created["apiKey"], polling=Polling(0.1, 0.5))
    assert client.policy().inForce is not None

    wallet = client.create(PASSWORD)
    sandbox.fund("ETHEREUM", wallet.addresses["ETHEREUM"], 2, "3")
    held = client.send(wallet.userId, 2, RECIPIENT, Decimal("1.5"), PASSWORD)
    assert isinstance(held, HeldSend)
    assert held.rule == "big-needs-one" and (held.approvals, held.required) == (0, 1)
    assert held.txHash is None and held.request_id
    pending = client.approvals(status="pending")
    assert [(a.id, a.requestId, a.amount) for a in pending] == [
        (held.approvalId, held.request_id, Decimal("1.5"))
    ]

    def approve_later() -> None:
        time.sleep(0.5)
        env = {"WALLETCORE_OPERATOR_KEY": operator["key"]}
        sandbox.cli("approvals", "approve", held.approvalId, "--operator", "alice", env=env)

    approver = threading.Thread(target=approve_later)
    approver.start()
    sent = client.wait_for_send(
        held,
        user_id=wallet.userId,
        asset_id=2,
        recipient=RECIPIENT,
        amount=Decimal("1.5"),
        password=PASSWORD,
        timeout=30,
    )
    approver.join()
    assert isinstance(sent, SendResult) and sent.request_id == held.request_id
    assert set(proxy.request_ids("/send")) == {held.request_id}
    assert proxy.count("/send") >= 2
    assert client.balance(wallet.userId, 2) == Decimal("1.5")  # signed once
    assert [a.status for a in client.approvals()] == ["approved"]
