"""The httpx sender against a loopback receiver: Standard Webhooks headers whose signatures
`standardwebhooks` verifies (one per live secret), the answer's status as the outcome, and
what is refused or failed: an inside address at send time (a literal, or a name that
resolves inside: DNS rebinding), a refused connection, a name that does not resolve, a
timeout, a redirect (never followed), an untrusted certificate; and a name's certificate
checked while connecting to the address it was resolved and checked to."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from standardwebhooks.webhooks import WebhookVerificationError
from webhook_receiver import WebhookReceiver, self_signed

from walletcore.domain.webhooks import DeliveryError, WebhookSecret
from walletcore.ports.webhooks import WebhookMessage
from walletcore_webhooks.sender import RESPONSE_CAP, HttpxSender, build

BODY = b'{"id":"evt_0_1","type":"send.pending","data":{"amount":"1.5"}}'


def message(msg_id: str = "evt_0_1") -> WebhookMessage:
    return WebhookMessage(msg_id, datetime.now(UTC), BODY)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


@pytest.fixture
async def sender() -> AsyncIterator[HttpxSender]:
    sending = HttpxSender(allow_private=True)
    yield sending
    await sending.aclose()


def resolving(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"no such name {host}")
        return table[host]

    return resolve


async def test_a_message_carries_standard_webhooks_headers_that_verify(
    receiver: WebhookReceiver, sender: HttpxSender
) -> None:
    secret = WebhookSecret.new()
    sent = message()
    outcome = await sender.post(receiver.url + "/hooks?x=1", sent, [secret])
    assert outcome.ok and outcome.status == 200 and outcome.error is None
    assert 0 < outcome.seconds < 5
    [got] = receiver.received
    assert got.path == "/hooks?x=1" and got.body == BODY
    assert got.headers["webhook-id"] == "evt_0_1"
    assert got.headers["webhook-timestamp"] == str(int(sent.timestamp.timestamp()))
    assert got.headers["content-type"] == "application/json"
    assert got.headers["user-agent"].startswith("walletcore-webhooks")
    assert got.verify(secret.text) == json.loads(BODY)
    with pytest.raises(WebhookVerificationError):
        got.verify(WebhookSecret.new().text)


async def test_during_a_rotation_each_secret_verifies_on_its_own(
    receiver: WebhookReceiver, sender: HttpxSender
) -> None:
    new, old = WebhookSecret.new(), WebhookSecret.new()
    await sender.post(receiver.url, message(), [new, old])
    [got] = receiver.received
    signatures = got.headers["webhook-signature"].split(" ")
    assert len(signatures) == 2 and all(s.startswith("v1,") for s in signatures)
    assert got.verify(new.text) == got.verify(old.text) == json.loads(BODY)


async def test_the_answers_status_is_the_outcome(
    receiver: WebhookReceiver, sender: HttpxSender
) -> None:
    for status in (201, 204, 400, 410, 500, 503):
        receiver.respond = lambda _, s=status: s  # type: ignore[misc]
        outcome = await sender.post(receiver.url, message(), [WebhookSecret.new()])
        assert outcome.status == status and outcome.error is None
        assert outcome.ok is (200 <= status < 300) and outcome.gone is (status == 410)


async def test_a_redirect_is_never_followed(receiver: WebhookReceiver, sender: HttpxSender) -> None:
    with WebhookReceiver() as elsewhere:
        receiver.respond = lambda _: 307
        receiver.location = elsewhere.url + "/stolen"
        outcome = await sender.post(receiver.url, message(), [WebhookSecret.new()])
        assert outcome.status == 307 and not outcome.ok
        assert elsewhere.received == []


async def test_a_large_answer_is_not_read_past_the_cap(
    receiver: WebhookReceiver, sender: HttpxSender
) -> None:
    receiver.answer_bytes = 64 * 1024 * 1024
    started = time.monotonic()
    outcome = await sender.post(receiver.url, message(), [WebhookSecret.new()])
    assert outcome.status == 200
    assert time.monotonic() - started < 5
    for _ in range(100):  # the receiver finds the connection dropped under its writes
        if receiver.write_failed:
            break
        await asyncio.sleep(0.05)
    assert receiver.write_failed
    assert RESPONSE_CAP <= 64 * 1024


@pytest.mark.parametrize(
    ("host", "table"),
    [
        ("127.0.0.1", {}),
        ("hooks.example.test", {"hooks.example.test": ["127.0.0.1"]}),  # rebinding
        ("hooks.example.test", {"hooks.example.test": ["8.8.8.8", "10.0.0.7"]}),
        ("hooks.example.test", {"hooks.example.test": ["::ffff:127.0.0.1"]}),
        ("[::1]", {}),
    ],
)
async def test_an_inside_address_is_refused_at_send_time(
    receiver: WebhookReceiver, host: str, table: dict[str, list[str]]
) -> None:
    sending = HttpxSender(allow_private=False, resolver=resolving(table))
    try:
        url = f"http://{host}:{receiver.port}/hook"
        outcome = await sending.post(url, message(), [WebhookSecret.new()])
    finally:
        await sending.aclose()
    assert (outcome.status, outcome.error) == (None, DeliveryError.FORBIDDEN_ADDRESS)
    assert receiver.received == []


async def test_the_connection_goes_to_the_address_checked_with_the_name_as_host(
    receiver: WebhookReceiver,
) -> None:
    sending = HttpxSender(
        allow_private=True, resolver=resolving({"hooks.example.test": ["127.0.0.1"]})
    )
    try:
        url = f"http://hooks.example.test:{receiver.port}/hook"
        outcome = await sending.post(url, message(), [WebhookSecret.new()])
    finally:
        await sending.aclose()
    assert outcome.status == 200
    assert receiver.received[0].headers["host"] == f"hooks.example.test:{receiver.port}"


async def test_refused_unresolved_and_slow_endpoints_are_error_kinds(
    receiver: WebhookReceiver,
) -> None:
    sending = HttpxSender(allow_private=True, total_timeout=0.5, resolver=resolving({}))
    try:
        port = receiver.port
        receiver.stop()
        refused = await sending.post(f"http://127.0.0.1:{port}/", message(), [WebhookSecret.new()])
        assert (refused.status, refused.error) == (None, DeliveryError.CONNECT)
        unknown = await sending.post(
            "http://nowhere.example.test/", message(), [WebhookSecret.new()]
        )
        assert unknown.error is DeliveryError.DNS
        receiver.start()
        receiver.delay = 2.0
        started = time.monotonic()
        slow = await sending.post(receiver.url, message(), [WebhookSecret.new()])
        assert slow.error is DeliveryError.TIMEOUT and time.monotonic() - started < 1.5
    finally:
        await sending.aclose()


async def test_tls_checks_the_names_certificate_on_the_checked_address(tmp_path: Path) -> None:
    cert, key, pem = self_signed(tmp_path, "hooks.example.test")
    table = {"hooks.example.test": ["127.0.0.1"], "other.example.test": ["127.0.0.1"]}
    with WebhookReceiver(tls=(cert, key)) as receiver:
        trusting = HttpxSender(
            allow_private=True,
            resolver=resolving(table),
            ssl_context=ssl.create_default_context(cadata=pem.decode()),
        )
        untrusting = HttpxSender(allow_private=True, resolver=resolving(table))
        secret = WebhookSecret.new()
        try:
            url = f"https://hooks.example.test:{receiver.port}/hook"
            ok = await trusting.post(url, message(), [secret])
            assert ok.status == 200
            assert receiver.received[0].verify(secret.text)
            # the certificate is for the name, not for another name on the same address
            wrong_name = f"https://other.example.test:{receiver.port}/hook"
            mismatch = await trusting.post(wrong_name, message(), [secret])
            assert mismatch.error is DeliveryError.TLS
            untrusted = await untrusting.post(url, message(), [secret])
            assert untrusted.error is DeliveryError.TLS
            assert len(receiver.received) == 1
        finally:
            await trusting.aclose()
            await untrusting.aclose()


def test_the_entry_point_factory_builds_the_sender() -> None:
    built = build(settings=object(), allow_private=True)
    assert isinstance(built, HttpxSender) and built.allow_private
    assert "whsec" not in repr(built)
    asyncio.run(built.aclose())


def test_the_distribution_declares_the_sender_and_its_extra() -> None:
    """`walletcore.webhook_senders: httpx` names this factory; `walletcore[webhooks]` (in
    `all`) installs what it imports."""
    import importlib
    import tomllib

    project = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())["project"]
    target = project["entry-points"]["walletcore.webhook_senders"]["httpx"]
    module, _, name = target.partition(":")
    assert getattr(importlib.import_module(module), name) is build
    extras = project["optional-dependencies"]
    assert {d.split(">")[0] for d in extras["webhooks"]} == {"standardwebhooks", "httpx"}
    assert "webhooks" in extras["all"][0]
