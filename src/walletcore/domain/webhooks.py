"""Signed webhooks (Standard Webhooks v1): one endpoint per api client, its delivery state,
the log of its attempts, the retry schedule and the rules a target URL obeys.

An endpoint receives its client's events (walletcore.domain.events) one at a time, in feed
order: its `cursor` is the position of the last event it delivered or gave up on, and the
event after it is the head, tried until a 2xx (then the cursor moves on), a `410 Gone`
(the endpoint is disabled) or the last attempt of the schedule (the event is given up,
the cursor moves past it: the event stays in the feed, and `replay` sends it again). So a
later event never overtakes an earlier one, and each event is one message whose
`webhook-id` is the event's id (the receiver's idempotency key): delivered at least once.

Secrets: `whsec_` and the base64 of 32 random bytes; at rest sealed by the deployment
(`walletcore.ports.webhooks.SecretSealer`), so an endpoint holds sealed bytes only, and a
`WebhookSecret` shows no text in its repr. During a rotation the previous secret signs
too, until `previous_until`.

URL rules (`check_url`): `https` (plain `http` on the sandbox profile only), a host, no
user or password, no fragment, ASCII, and no IP literal that is loopback, private,
link-local, multicast, reserved, unspecified or otherwise not globally routable (IPv4,
IPv6, and IPv4 inside IPv6), nor `localhost`, unless the operator allows private targets.
Names are resolved by the sender at each delivery and held to the same rule there
(`address_refusal`), so a name that later points inside is refused too.
"""

from __future__ import annotations

import base64
import ipaddress
import re
import secrets
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from urllib.parse import urlsplit

from walletcore.domain.errors import InvalidRequest, NotFound
from walletcore.domain.events import EventPosition

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
#: The longest URL an endpoint may have.
MAX_URL_LENGTH = 2048

#: Standard Webhooks' (and Svix's) schedule, lengthened past three days: the delay before
#: each attempt at one event, the first at once (`WALLETCORE_WEBHOOK_RETRY_SCHEDULE`).
DEFAULT_SCHEDULE_SECONDS: tuple[float, ...] = (
    0,
    5,
    5 * 60,
    30 * 60,
    2 * 3600,
    5 * 3600,
    10 * 3600,
    10 * 3600,
    14 * 3600,
    20 * 3600,
    24 * 3600,
)


class WebhookNotFound(NotFound):
    default_message = "No webhook endpoint for this api client; set its URL first"


# -- secrets ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class WebhookSecret:
    """A signing secret in the clear: alive while a message is signed, or shown once to
    the operator (set, rotate). Its repr and str hide it."""

    raw: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.raw, bytes) or not 24 <= len(self.raw) <= 64:
            raise ValueError("a webhook secret is 24 to 64 bytes")

    @classmethod
    def new(cls) -> WebhookSecret:
        return cls(secrets.token_bytes(SECRET_BYTES))

    @property
    def text(self) -> str:
        """`whsec_<base64>`: what the integrator's verifier is given."""
        return SECRET_PREFIX + base64.b64encode(self.raw).decode("ascii")

    def __repr__(self) -> str:
        return "WebhookSecret(<hidden>)"

    __str__ = __repr__


# -- the retry schedule -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """The delay before each attempt at one event: `delays[0]` before the first (0: at
    once), `delays[n]` after the n-th failed. After `len(delays)` attempts the event is
    given up."""

    delays: tuple[timedelta, ...]

    def __post_init__(self) -> None:
        if not self.delays:
            raise ValueError("a retry schedule has at least one attempt")
        if any(d < timedelta(0) for d in self.delays):
            raise ValueError("a retry delay is not negative")

    @classmethod
    def of_seconds(cls, seconds: tuple[float, ...] | list[float]) -> RetrySchedule:
        return cls(tuple(timedelta(seconds=s) for s in seconds))

    @property
    def attempts(self) -> int:
        return len(self.delays)

    @property
    def span(self) -> timedelta:
        """From the first attempt to the last."""
        return sum(self.delays[1:], timedelta(0))

    def after_failure(self, attempt: int) -> timedelta | None:
        """The wait after failed attempt number `attempt` (1-based); None: it was the last."""
        if attempt >= len(self.delays):
            return None
        return self.delays[attempt]


DEFAULT_SCHEDULE = RetrySchedule.of_seconds(DEFAULT_SCHEDULE_SECONDS)


# -- endpoints ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class WebhookEndpoint:
    """An api client's webhook endpoint: what the operator set, and how far delivery got."""

    client_id: str
    url: str
    #: The current secret, sealed (`SecretSealer`); the previous one signs as well until
    #: `previous_until` (a rotation's overlap).
    secret: bytes = field(repr=False)
    created_at: datetime
    updated_at: datetime
    previous_secret: bytes | None = field(default=None, repr=False)
    previous_until: datetime | None = None
    #: Set by the operator: no delivery until resumed; events wait, none is lost.
    paused: bool = False
    #: Set by a `410 Gone` from the endpoint (why, in words): no delivery until the
    #: operator resumes it or sets a URL.
    disabled_reason: str | None = None
    disabled_at: datetime | None = None
    #: The last event delivered or given up (None: none yet, the head is the feed's first).
    cursor: EventPosition | None = None
    #: Attempts made at the head event so far, and when the next one is due.
    attempts: int = 0
    next_attempt_at: datetime | None = None
    #: The worker delivering it, and until when (`WebhookStore.claim`): None when free.
    lease_owner: str | None = None
    lease_until: datetime | None = None

    @property
    def disabled(self) -> bool:
        return self.disabled_reason is not None

    @property
    def active(self) -> bool:
        return not self.paused and not self.disabled

    def due(self, now: datetime) -> bool:
        """Active, its next attempt due, and no live lease on it."""
        return (
            self.active
            and (self.next_attempt_at is None or self.next_attempt_at <= now)
            and (self.lease_until is None or self.lease_until <= now)
        )

    def live_secrets(self, now: datetime) -> tuple[bytes, ...]:
        """The sealed secrets that sign a message sent at `now`: the current one, and the
        previous one during its overlap."""
        if (
            self.previous_secret is not None
            and self.previous_until is not None
            and now < self.previous_until
        ):
            return (self.secret, self.previous_secret)
        return (self.secret,)

    def rotating_until(self, now: datetime) -> datetime | None:
        """The end of the rotation's overlap, while it lasts."""
        return self.previous_until if len(self.live_secrets(now)) > 1 else None

    # -- the delivery state's moves (`WebhookStore.advance`) ---------------------------
    def leased(self, owner: str, until: datetime) -> WebhookEndpoint:
        return replace(self, lease_owner=owner, lease_until=until)

    def released(self) -> WebhookEndpoint:
        return replace(self, lease_owner=None, lease_until=None)

    def delivered(self, position: EventPosition, now: datetime) -> WebhookEndpoint:
        """The head was delivered (or given up): the next event is the head, due now."""
        return replace(self, cursor=position, attempts=0, next_attempt_at=now)

    def failed(self, now: datetime, wait: timedelta) -> WebhookEndpoint:
        """The head's attempt failed: the next one in `wait`."""
        return replace(self, attempts=self.attempts + 1, next_attempt_at=now + wait)

    def gone(self, now: datetime, reason: str) -> WebhookEndpoint:
        """A `410 Gone`: disabled; the head stays the head, for when it is resumed."""
        return replace(self, disabled_reason=reason, disabled_at=now, next_attempt_at=now)


class AttemptResult(StrEnum):
    """What an attempt led to."""

    #: 2xx: the cursor moved past the event
    DELIVERED = "delivered"
    #: anything else: the next attempt is scheduled
    RETRYING = "retrying"
    #: it was the schedule's last attempt: the cursor moved past the event
    GIVEN_UP = "given_up"
    #: `410 Gone`: the endpoint is disabled
    DISABLED = "disabled"


class DeliveryError(StrEnum):
    """Why an attempt got no HTTP status."""

    TIMEOUT = "timeout"
    #: refused, reset or unreachable
    CONNECT = "connect"
    #: the name did not resolve
    DNS = "dns"
    TLS = "tls"
    #: the name resolved to an address the URL rules refuse (DNS rebinding)
    FORBIDDEN_ADDRESS = "forbidden_address"
    #: the endpoint answered something that is not HTTP
    PROTOCOL = "protocol"
    #: the stored secret could not be opened (a master key changed): nothing was sent
    SECRET = "secret"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    """One attempt at one event, as the delivery log keeps it: never a secret, never the
    body (the event is in the feed, under its id)."""

    client_id: str
    event_id: str
    #: 1 for the first attempt at this event (a replay starts again at 1)
    attempt: int
    at: datetime
    #: the HTTP status, or None with `error`
    status: int | None
    error: DeliveryError | None
    seconds: float
    result: AttemptResult
    #: when the next attempt is due (`RETRYING`)
    next_attempt_at: datetime | None = None


# -- positions ----------------------------------------------------------------------------
_LAST_SEQ = 2**63 - 1


def position_before(position: EventPosition) -> EventPosition | None:
    """The cursor whose next event is `position` (no position lies between them); None when
    `position` is the first there can be."""
    if position.seq > 0:
        return EventPosition(position.tx, position.seq - 1)
    if position.tx > 0:
        return EventPosition(position.tx - 1, _LAST_SEQ)
    return None


# -- URL rules ----------------------------------------------------------------------------
#: A host made of digits, dots and hex: an IPv4 address in a form other than dotted
#: decimal (`2130706433`, `0x7f.1`, `017700000001`), which resolvers may still read as one.
_NUMERIC_HOST = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+))*\.?", re.IGNORECASE)
_HOST_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)", re.IGNORECASE)


def address_refusal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an endpoint may not be at `address` (None: it may): loopback, private,
    link-local, multicast, reserved, unspecified or not globally routable. An IPv6
    address that carries an IPv4 one (mapped, 6to4, Teredo, NAT64) is judged by that
    one too."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # the IPv4 address itself, on a v6 socket
            return address_refusal(address.ipv4_mapped)
        inner = [address.sixtofour]
        if address.teredo is not None:
            inner.append(address.teredo[1])
        if address in ipaddress.IPv6Network("64:ff9b::/96"):
            inner.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        for carried in inner:
            if carried is not None and (why := address_refusal(carried)) is not None:
                return why
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_private:
        return "private"
    if address.is_reserved:
        return "reserved"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "site-local"
    if not address.is_global:
        return "not globally routable"
    return None


def check_url(url: object, *, https_only: bool, allow_private: bool) -> str:
    """The endpoint URL, or `InvalidRequest` naming the rule it breaks (module rules).
    `https_only`: off on the sandbox profile only; `allow_private`: the operator allows
    targets inside (on in the sandbox profile and in tests)."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidRequest("url is required")
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        raise InvalidRequest(f"url must be at most {MAX_URL_LENGTH} characters")
    if not url.isascii() or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise InvalidRequest(
            "url must be ASCII without spaces (an international name in its xn-- form)"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidRequest("url is not a valid URL (its port or address)") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise InvalidRequest("url must be an https:// URL")
    if scheme == "http" and https_only:
        raise InvalidRequest("url must be https:// (plain http is for the sandbox profile only)")
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        raise InvalidRequest("url must not carry a user or password (user:pass@host)")
    if parts.fragment or url.endswith("#"):
        raise InvalidRequest("url must not have a #fragment")
    host = (parts.hostname or "").lower()
    if not host:
        raise InvalidRequest("url must name a host")
    if port == 0:
        raise InvalidRequest("url must not name port 0")
    literal = _ip_literal(host)
    if literal is not None:
        why = address_refusal(literal)
        if why is not None and not allow_private:
            raise InvalidRequest(
                f"url points at a {why} address ({host}); the deployment does not allow "
                "private targets (WALLETCORE_WEBHOOK_ALLOW_PRIVATE)"
            )
    elif _NUMERIC_HOST.fullmatch(host):
        raise InvalidRequest("url names an IP address in an unusual form: write it dotted")
    else:
        name = host.rstrip(".")
        labels = name.split(".")
        if len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
            raise InvalidRequest("url has an invalid host name")
        if (name == "localhost" or name.endswith(".localhost")) and not allow_private:
            raise InvalidRequest(
                "url points at localhost; the deployment does not allow private targets "
                "(WALLETCORE_WEBHOOK_ALLOW_PRIVATE)"
            )
    return url


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a URL's host names literally (`[...]` already stripped by urlsplit;
    an IPv6 zone is refused as not an address)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        if ":" in host:  # brackets held something that is no address (a zone, say)
            raise InvalidRequest("url has an invalid IPv6 address") from None
        return None


def url_origin(url: str) -> str:
    """The URL's scheme and host (and port): what logs and audit entries name, never the
    path or query, which may carry a token of the integrator's."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}"


__all__ = [
    "DEFAULT_SCHEDULE",
    "DEFAULT_SCHEDULE_SECONDS",
    "SECRET_PREFIX",
    "AttemptResult",
    "DeliveryAttempt",
    "DeliveryError",
    "RetrySchedule",
    "WebhookEndpoint",
    "WebhookNotFound",
    "WebhookSecret",
    "address_refusal",
    "check_url",
    "position_before",
    "url_origin",
]
