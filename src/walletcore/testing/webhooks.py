"""`RecordingSender`: a FAKE `WebhookSender` that posts nothing: it records each message
with the secrets it would be signed with, and answers what the test scripted."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from walletcore.domain.webhooks import DeliveryError, WebhookSecret
from walletcore.ports.webhooks import SendOutcome, WebhookMessage, WebhookSender

#: What a scripted answer is: an HTTP status, or an error kind (a timeout, a refusal...).
Answer = int | DeliveryError


@dataclass(frozen=True, slots=True)
class Posted:
    url: str
    msg_id: str
    timestamp: datetime
    body: bytes = field(repr=False)
    secrets: tuple[WebhookSecret, ...] = field(repr=False)
    #: the answer it got
    answer: Answer


class RecordingSender(WebhookSender):
    """Answers each post with the next scripted answer (`script(...)`), else `default`;
    `answer=` a function of the message decides instead. `gate`: when set, each post
    waits for it (to hold a delivery in flight)."""

    def __init__(
        self,
        default: Answer = 200,
        *,
        answer: Callable[[str, WebhookMessage], Answer] | None = None,
    ) -> None:
        self.default = default
        self._answer = answer
        self._script: deque[Answer] = deque()
        self.posted: list[Posted] = []
        self.gate: asyncio.Event | None = None
        self.in_flight = 0
        self.most_in_flight = 0

    def script(self, *answers: Answer) -> None:
        self._script.extend(answers)

    @property
    def ids(self) -> list[str]:
        """The `webhook-id` of every post, in order."""
        return [p.msg_id for p in self.posted]

    async def post(
        self, url: str, message: WebhookMessage, secrets: Sequence[WebhookSecret]
    ) -> SendOutcome:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self._script:
                answer = self._script.popleft()
            elif self._answer is not None:
                answer = self._answer(url, message)
            else:
                answer = self.default
            self.posted.append(
                Posted(url, message.msg_id, message.timestamp, message.body, tuple(secrets), answer)
            )
        finally:
            self.in_flight -= 1
        if isinstance(answer, DeliveryError):
            return SendOutcome(None, answer, 0.01)
        return SendOutcome(answer, None, 0.01)


__all__ = ["Answer", "Posted", "RecordingSender"]
