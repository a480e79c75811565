"""Finding the wallet an operation acts on, in a unit the caller holds: a user's (404 `User
not found`) or the api client's platform wallet (404 until the operator provisions it)."""

from __future__ import annotations

from walletcore.domain.errors import PlatformWalletNotFound, UserNotFound
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import UnitOfWork


async def user_wallet(unit: UnitOfWork, client_id: str, user_id: str) -> WalletRecord:
    """The user's wallet; another client's user, or none, is a 404."""
    if await unit.wallets.get_user(client_id, user_id) is None:
        raise UserNotFound()
    wallet = await unit.wallets.get(client_id, WalletOwner.USER, user_id)
    if wallet is None:
        raise UserNotFound()
    return wallet


async def platform_wallet(unit: UnitOfWork, client_id: str) -> WalletRecord:
    wallet = await platform_wallet_or_none(unit, client_id)
    if wallet is None:
        raise PlatformWalletNotFound()
    return wallet


async def platform_wallet_or_none(unit: UnitOfWork, client_id: str) -> WalletRecord | None:
    return await unit.wallets.get(client_id, WalletOwner.PLATFORM, None)


__all__ = ["platform_wallet", "platform_wallet_or_none", "user_wallet"]
