"""`Transfers`: the transfer lifecycle as the container builds it, and as the sends, the
follow job and the operator's commands call it. Each call goes to the room that owns it:
signing (the ladder), following, replacing (re-signing on a `/send` replay), the operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from walletcore.domain.assets import Chain
from walletcore.domain.catalog import Catalog
from walletcore.domain.chains import ChainDescription
from walletcore.domain.sends import SendRecord
from walletcore.ports import ChainGateway, Clock, KeyStore, Storage, UnsignedTransfer
from walletcore.ports.follow import Replacement
from walletcore.services.transfers.following import Following
from walletcore.services.transfers.moves import Followed, Moves
from walletcore.services.transfers.operator import Operator
from walletcore.services.transfers.replacing import Replacing
from walletcore.services.transfers.signing import FeeCaps, TransferSettings, ladder


class Transfers:
    """The lifecycle of the transfers: followed by the job, replaced by the operator, and
    re-signed on a `/send` replay (docs/transfers.md)."""

    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        keystore: KeyStore,
        gateways: Mapping[Chain, ChainGateway],
        descriptions: Mapping[Chain, ChainDescription],
        settings: TransferSettings | None = None,
        *,
        catalog: Catalog,
    ) -> None:
        self.settings = settings or TransferSettings()
        self._caps = FeeCaps(self.settings, descriptions)
        moves = Moves(storage, clock, catalog)
        self._replacing = Replacing(moves, keystore, gateways, self.settings, self._caps, catalog)
        self._following = Following(moves, self._replacing, gateways, self.settings, catalog)
        self._operator = Operator(moves, self._replacing, gateways, catalog)

    # -- the chains' descriptions and fee caps -----------------------------------------
    def description(self, chain: Chain) -> ChainDescription:
        """The chain's description, from the plugin that defines it."""
        return self._caps.description(chain)

    def cap_units(self, chain: Chain) -> int:
        """The most one transaction of a transfer on `chain` may cost in fees, in its
        native coin's base units (`WALLETCORE_FEE_CAPS`, else the chain's default)."""
        return self._caps.units(chain)

    # -- the ladder, when a send is signed --------------------------------------------
    def ladder(self, gateway: ChainGateway, unsigned: UnsignedTransfer) -> list[Replacement]:
        """The rungs to sign with `unsigned` (none when its gateway re-signs instead)."""
        return ladder(self._caps, gateway, unsigned)

    # -- the follow job -----------------------------------------------------------------
    async def follow(self, record: SendRecord, request_id: str) -> Followed:
        """Ask the chain about one send not final yet, and move it."""
        return await self._following.follow(record, request_id)

    # -- re-signing (SOLANA, TRON) --------------------------------------------------------
    async def resign(self, record: SendRecord, password: str | None, request_id: str) -> SendRecord:
        """Re-sign an expired transfer (`password`: the user's, None for the platform
        wallet); the record as it is after (`Replacing.resign`)."""
        return await self._replacing.resign(record, password, request_id)

    # -- the operator (`walletcore sends show|bump|cancel`) -------------------------------
    async def show(self, client_id: str, request_id: str) -> dict[str, Any]:
        return await self._operator.show(client_id, request_id)

    async def replace(
        self, client_id: str, request_id: str, *, cancel: bool, request_id_audit: str
    ) -> dict[str, Any]:
        """The operator's bump or cancel of a send not final yet (`Operator.replace`)."""
        return await self._operator.replace(
            client_id, request_id, cancel=cancel, request_id_audit=request_id_audit
        )


__all__ = ["Transfers"]
