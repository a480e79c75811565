"""The webhook rules of the domain: the URL an endpoint may have, the retry schedule, the
secrets' form and what a repr shows, the cursor just before an event."""

from __future__ import annotations

import base64
import ipaddress
from datetime import UTC, datetime, timedelta

import pytest

from walletcore.domain.errors import InvalidRequest
from walletcore.domain.events import EventPosition
from walletcore.domain.webhooks import (
    DEFAULT_SCHEDULE,
    RetrySchedule,
    WebhookEndpoint,
    WebhookSecret,
    address_refusal,
    check_url,
    position_before,
    url_origin,
)

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def production(url: str) -> str:
    return check_url(url, https_only=True, allow_private=False)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/walletcore",
        "https://hooks.example.com:8443/a/b?token=x",
        "https://8.8.8.8/hook",
        "https://[2606:4700:4700::1111]/hook",
        "  https://example.com/padded  ",
        "HTTPS://Example.COM/x",
    ],
)
def test_public_https_urls_are_accepted(url: str) -> None:
    assert production(url) == url.strip()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "url is required"),
        ("http://hooks.example.com/", "must be https://"),
        ("ftp://hooks.example.com/", "https:// URL"),
        ("https://user:pw@hooks.example.com/", "user or password"),
        ("https://user@hooks.example.com/", "user or password"),
        ("https://hooks.example.com/#frag", "fragment"),
        ("https:///path", "must name a host"),
        ("https://exa mple.com/", "ASCII without spaces"),
        ("https://b\u00fccher.example/", "ASCII without spaces"),
        ("https://example.com:99999/", "not a valid URL"),
        ("https://example.com:0/", "port 0"),
        ("https://-bad-.example/", "invalid host name"),
        ("https://" + "a" * 2100 + ".com/", "at most 2048"),
        # IPv4 literals
        ("https://127.0.0.1/", "loopback"),
        ("https://10.0.0.8/", "private"),
        ("https://172.16.5.4/", "private"),
        ("https://192.168.1.1/", "private"),
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://224.0.0.1/", "multicast"),
        ("https://0.0.0.0/", "unspecified"),
        ("https://240.0.0.1/", "private"),  # reserved, and private to Python
        ("https://100.64.0.1/", "not globally routable"),  # shared address space (CGNAT)
        # other spellings of an IPv4 address
        ("https://2130706433/", "unusual form"),
        ("https://0x7f.1/", "unusual form"),
        ("https://017700000001/", "unusual form"),
        # IPv6 literals, IPv4 inside IPv6 included
        ("https://[::1]/", "loopback"),
        ("https://[::]/", "unspecified"),
        ("https://[fe80::1]/", "link-local"),
        ("https://[fc00::1]/", "private"),
        ("https://[ff02::1]/", "multicast"),
        ("https://[::ffff:127.0.0.1]/", "loopback"),
        ("https://[::ffff:10.1.2.3]/", "private"),
        ("https://[2002:7f00:1::]/", "loopback"),  # 6to4 of 127.0.0.1
        ("https://[64:ff9b::a00:1]/", "private"),  # NAT64 of 10.0.0.1
        ("https://[not-an-address]/", "not a valid URL"),
        # names for this machine
        ("https://localhost/", "localhost"),
        ("https://api.localhost:8000/", "localhost"),
    ],
)
def test_each_refused_url_says_why(url: str, says: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        production(url)
    assert says in refused.value.message
    assert refused.value.status == 400


def test_plain_http_is_for_the_sandbox_profile() -> None:
    assert check_url("http://hooks.example.com/", https_only=False, allow_private=False)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080/hook", "https://[::1]:9/", "https://localhost/", "https://10.1.1.1/"],
)
def test_private_targets_pass_when_the_operator_allows_them(url: str) -> None:
    assert check_url(url, https_only=False, allow_private=True) == url
    with pytest.raises(InvalidRequest, match="WALLETCORE_WEBHOOK_ALLOW_PRIVATE"):
        check_url(url, https_only=False, allow_private=False)


def test_allowing_private_targets_keeps_the_other_rules() -> None:
    for url in ("https://u:p@127.0.0.1/", "https://2130706433/", "ftp://127.0.0.1/"):
        with pytest.raises(InvalidRequest):
            check_url(url, https_only=False, allow_private=True)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),  # the IPv4 address itself, as a v6 socket reports it
        ("2002:808:808::", None),  # 6to4 of a public address
        ("127.0.0.2", "loopback"),
        ("::ffff:169.254.1.1", "link-local"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "private"),  # Teredo: not global
        ("192.0.2.10", "private"),  # documentation
    ],
)
def test_address_refusal_of_resolved_addresses(address: str, why: str | None) -> None:
    """What the sender applies to each address a name resolves to (DNS rebinding)."""
    assert address_refusal(ipaddress.ip_address(address)) == why


def test_the_origin_drops_path_query_and_credentials() -> None:
    assert (
        url_origin("https://hooks.example.com:8443/a?token=s3cret")
        == "https://hooks.example.com:8443"
    )
    assert url_origin("https://[2606:4700::1]/x") == "https://[2606:4700::1]"


def test_the_default_schedule_is_eleven_attempts_over_three_days() -> None:
    seconds = [d.total_seconds() for d in DEFAULT_SCHEDULE.delays]
    assert seconds == [0, 5, 300, 1800, 7200, 18000, 36000, 36000, 50400, 72000, 86400]
    assert DEFAULT_SCHEDULE.attempts == 11
    assert timedelta(days=3) < DEFAULT_SCHEDULE.span < timedelta(days=4)
    assert DEFAULT_SCHEDULE.after_failure(1) == timedelta(seconds=5)
    assert DEFAULT_SCHEDULE.after_failure(10) == timedelta(hours=24)
    assert DEFAULT_SCHEDULE.after_failure(11) is None  # the last: given up


def test_a_schedule_needs_an_attempt_and_no_negative_delay() -> None:
    with pytest.raises(ValueError):
        RetrySchedule(())
    with pytest.raises(ValueError):
        RetrySchedule.of_seconds([0, -1])
    assert RetrySchedule.of_seconds([0]).after_failure(1) is None


def test_a_secret_is_whsec_and_32_random_bytes_and_never_shown_by_repr() -> None:
    one, two = WebhookSecret.new(), WebhookSecret.new()
    assert one != two
    assert one.text.startswith("whsec_")
    assert base64.b64decode(one.text.removeprefix("whsec_")) == one.raw
    assert len(one.raw) == 32
    for shown in (repr(one), str(one), f"{one}", repr([one])):
        assert one.text not in shown and "whsec_" not in shown
    with pytest.raises(ValueError):
        WebhookSecret(b"short")


def test_an_endpoint_repr_shows_no_secret() -> None:
    endpoint = WebhookEndpoint(
        "c" * 24, "https://hooks.example.com/", b"sealed-now", T0, T0, previous_secret=b"sealed-old"
    )
    assert "sealed-now" not in repr(endpoint) and "sealed-old" not in repr(endpoint)


def test_the_previous_secret_signs_until_the_overlap_ends() -> None:
    endpoint = WebhookEndpoint(
        "c" * 24,
        "https://hooks.example.com/",
        b"new",
        T0,
        T0,
        previous_secret=b"old",
        previous_until=T0 + timedelta(hours=24),
    )
    assert endpoint.live_secrets(T0) == (b"new", b"old")
    assert endpoint.rotating_until(T0) == T0 + timedelta(hours=24)
    later = T0 + timedelta(hours=24)
    assert endpoint.live_secrets(later) == (b"new",)
    assert endpoint.rotating_until(later) is None


def test_due_means_active_due_and_not_leased() -> None:
    endpoint = WebhookEndpoint("c" * 24, "https://h.example/", b"s", T0, T0, next_attempt_at=T0)
    assert endpoint.due(T0)
    assert not endpoint.due(T0 - timedelta(seconds=1))
    assert not endpoint.leased("w", T0 + timedelta(seconds=60)).due(T0)
    assert endpoint.leased("w", T0).due(T0)  # a lapsed lease
    assert not WebhookEndpoint("c" * 24, "u", b"s", T0, T0, paused=True).due(T0)
    assert not endpoint.gone(T0, "410").due(T0)


def test_the_position_before_an_event() -> None:
    assert position_before(EventPosition(0, 7)) == EventPosition(0, 6)
    assert position_before(EventPosition(912, 1)) == EventPosition(912, 0)
    before = position_before(EventPosition(912, 0))
    assert before is not None and before < EventPosition(912, 0)
    assert before > EventPosition(911, 10**12)
    assert position_before(EventPosition(0, 0)) is None
