"""What a user's wallet holds of an asset, read on its chain: sells are backed by it.

Rules:
- `/sell` and its approval refuse (`400`) a sell of more than the user's wallet holds of the
  asset, read from the chain's gateway at that moment (a BITCOIN address the indexer does
  not know yet holds 0);
- a wallet with no address on the asset's chain holds nothing of it (`400`, add it with
  `/extend`);
- no user (or another client's) is a `404`, as everywhere.

Where trades move coins (walletcore.services.settlements), what the wallet's sells hold
until collected and what its sends in flight spend is not free to sell: the check is of
the balance on chain less those (`check_backed`'s `taken`).

The balance is read from the chain every time (a cached balance would let a sell through on
coins already sent away). The wallet's address is remembered per process: a chain's address
is derived from the wallet's sealed seed, which never changes, and users are never removed,
so an address once read is the address for good (`/extend` only adds chains; a chain not
remembered is read again). A quote and its approval then make one storage read fewer.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Protocol

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.errors import AddressUnknown, InvalidRequest, UserNotFound
from walletcore.domain.money import format_balance
from walletcore.domain.wallet import WalletOwner
from walletcore.ports import ChainGateway, Storage

#: Wallet addresses one process remembers (about 200 bytes each).
REMEMBERED_ADDRESSES = 100_000


class Holdings(Protocol):
    async def units(self, client_id: str, user_id: str, asset: Asset) -> int:
        """The smallest units of `asset` the user's wallet holds now (404 no such user)."""
        ...


class WalletHoldings(Holdings):
    """Holdings read from the user's wallet record and its chain's gateway."""

    def __init__(
        self,
        storage: Storage,
        gateways: Mapping[Chain, ChainGateway],
        *,
        remembered: int = REMEMBERED_ADDRESSES,
    ) -> None:
        self._storage = storage
        self._gateways = gateways
        self._remembered = remembered
        #: (client id, user id, chain) -> the wallet's address there (see the docstring)
        self._addresses: dict[tuple[str, str, Chain], str] = {}

    async def units(self, client_id: str, user_id: str, asset: Asset) -> int:
        address = self._addresses.get((client_id, user_id, asset.chain))
        if address is None:  # not remembered (or none on that chain): read the wallet
            address = await self._read_address(client_id, user_id, asset.chain)
            if address is None:
                return 0
        try:
            return await self._gateways[asset.chain].balance(address, asset)
        except AddressUnknown:
            return 0

    async def _read_address(self, client_id: str, user_id: str, chain: Chain) -> str | None:
        """The wallet's address on `chain` (None: it has none there), remembered once read."""
        key = (client_id, user_id, chain)
        async with self._storage.read() as unit:  # one read: a user is stored with its wallet
            wallet = await unit.wallets.get(client_id, WalletOwner.USER, user_id)
        if wallet is None:  # no such user, or another client's
            raise UserNotFound()
        address = wallet.addresses.get(chain)
        if address is not None:
            if len(self._addresses) >= self._remembered:
                self._addresses.clear()  # bounded: start over rather than grow
            self._addresses[key] = address
        return address


def check_backed(held: int, asset: Asset, amount: Decimal, taken: int = 0) -> None:
    """`400` unless `held` (smallest units) less `taken` (held for the wallet's sells being
    settled and spent by its sends in flight) covers `amount` (whole coins) of `asset`."""
    if Decimal(held - taken).scaleb(-asset.decimals) >= amount:
        return
    holds = f"{format_balance(held, asset.decimals)} {asset.symbol}"
    if taken:
        free = format_balance(max(held - taken, 0), asset.decimals)
        reserved = format_balance(taken, asset.decimals)
        holds = (
            f"{holds}, of which {free} {asset.symbol} are free ({reserved} {asset.symbol} "
            "reserved for sells being settled or spent by sends in flight)"
        )
    raise InvalidRequest(
        f"The wallet holds {holds}, less than the {amount.normalize():f} {asset.symbol} to sell"
    )
