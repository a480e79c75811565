"""Who is calling: the authenticated api client and the request's correlation id."""

from __future__ import annotations

from dataclasses import dataclass

from walletcore.domain.clients import ApiClient
from walletcore.domain.ids import new_id


@dataclass(frozen=True, slots=True)
class Caller:
    client: ApiClient
    request_id: str

    @property
    def client_id(self) -> str:
        return self.client.client_id


def new_request_id() -> str:
    return new_id()
