"""The wire shapes of the client's webhook delivery log (`POST /webhooks/deliveries`)."""

from __future__ import annotations

from typing import Annotated

from walletcore.domain.times import format_datetime, format_optional_datetime
from walletcore.domain.webhooks import AttemptResult, DeliveryAttempt, DeliveryError
from walletcore_litestar.events_schemas import EventId
from walletcore_litestar.wire import Body, DateTime, Envelope, Result, doc


class DeliveriesRequest(Body):
    """`/webhooks/deliveries`: the newest attempts, of one event when `eventId` is given."""

    limit: Annotated[int, doc(ge=1, le=1000, description="attempts, default 100")] | None = None
    eventId: EventId | None = None


class DeliveryView(Result):
    """One attempt to post one event to the client's webhook endpoint."""

    eventId: EventId
    attempt: Annotated[int, doc(ge=1, description="1 for the first attempt at this event")]
    at: DateTime
    status: Annotated[int | None, doc(description="the endpoint's HTTP status; null: see `error`")]
    error: Annotated[
        str | None,
        doc(
            schema_extra={"enum": [e.value for e in DeliveryError] + [None]},
            description="why no status came back (timeout, connect, dns, tls, ...)",
        ),
    ]
    result: Annotated[
        str,
        doc(
            schema_extra={"enum": [r.value for r in AttemptResult]},
            description=(
                "`delivered` (2xx: the next event follows), `retrying` (see "
                "`nextAttemptAt`), `given_up` (the schedule's last attempt failed: the "
                "event stays in the feed), `disabled` (410: the endpoint is disabled)"
            ),
        ),
    ]
    seconds: Annotated[float, doc(ge=0, description="how long the attempt took")]
    nextAttemptAt: DateTime | None

    @classmethod
    def of(cls, attempt: DeliveryAttempt) -> DeliveryView:
        return cls(
            attempt.event_id,
            attempt.attempt,
            format_datetime(attempt.at),
            attempt.status,
            None if attempt.error is None else attempt.error.value,
            attempt.result.value,
            attempt.seconds,
            format_optional_datetime(attempt.next_attempt_at),
        )


class DeliveriesEnvelope(Envelope):
    result: list[DeliveryView]


__all__ = ["DeliveriesEnvelope", "DeliveriesRequest", "DeliveryView"]
