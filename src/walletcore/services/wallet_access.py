"""Finding the wallet an operation acts on: a user's (404 `User not found`) or the api
client's platform wallet (404 until the operator provisions it)."""

from __future__ import annotations

from collections.abc import Mapping

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.errors import PlatformWalletNotFound, UserNotFound
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import ChainGateway, Repo


class WalletAccess:
    def __init__(self, repo: Repo, gateways: Mapping[Chain, ChainGateway]) -> None:
        self._repo = repo
        self._gateways = gateways

    async def user_wallet(self, client_id: str, user_id: str) -> WalletRecord:
        """The user's wallet; another client's user, or none, is a 404."""
        if await self._repo.get_user(client_id, user_id) is None:
            raise UserNotFound()
        wallet = await self._repo.get_wallet(client_id, WalletOwner.USER, user_id)
        if wallet is None:
            raise UserNotFound()
        return wallet

    async def platform_wallet(self, client_id: str) -> WalletRecord:
        wallet = await self.platform_wallet_or_none(client_id)
        if wallet is None:
            raise PlatformWalletNotFound()
        return wallet

    async def platform_wallet_or_none(self, client_id: str) -> WalletRecord | None:
        return await self._repo.get_wallet(client_id, WalletOwner.PLATFORM, None)

    def gateway(self, asset: Asset) -> ChainGateway:
        return self._gateways[asset.chain]
