"""Who is calling: the authenticated api client and the request's correlation id."""

from __future__ import annotations

from dataclasses import dataclass

from walletcore.domain.clients import ApiClient
from walletcore.domain.ids import new_id


@dataclass(frozen=True, slots=True)
class Caller:
    client: ApiClient
    request_id: str
    #: The caller sent `request_id` (X-Request-Id) rather than having one generated: only
    #: then may a use case treat it as an idempotency key (`/create`).
    request_id_given: bool = False

    @property
    def client_id(self) -> str:
        return self.client.client_id


def new_request_id() -> str:
    return new_id()
