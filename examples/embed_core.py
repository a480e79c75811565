"""The core alone (`pip install walletcore`, no extras): a user, a sell quote, an approval.

Run it with `python examples/embed_core.py`. Where a chain library, a database or a market
would be needed, it uses the in-memory fakes of `walletcore.testing`: an in-memory store, a
fixed price, a venue that fills at once and a FAKE keystore (its addresses are valid on no
chain and its seeds are not protected: never a production keystore). Swap each for a real
adapter (`walletcore[chains,sql,...]`) without touching the use cases.
"""

from __future__ import annotations

import asyncio
import tempfile
from decimal import Decimal
from pathlib import Path

from walletcore import Caller, Settings, create_container
from walletcore.domain.assets import Fiat
from walletcore.testing import (
    CONTRACT_CATALOG,
    FakeKeyStore,
    FixedHoldings,
    FixedPrices,
    InMemoryStorage,
    InstantVenue,
    LocalNonceLeases,
    ManualClock,
    autocommit,
)


async def main() -> None:
    prices = FixedPrices({"ETH": Decimal(2000), "BTC": Decimal(60000)})
    storage = InMemoryStorage()
    container = create_container(
        Settings(home=Path(tempfile.mkdtemp(prefix="walletcore-embed-"))),
        storage=storage,
        nonce_leases=LocalNonceLeases(),
        clock=ManualClock(),
        keystore=FakeKeyStore(),
        prices=prices,
        venue=InstantVenue(prices),
        holdings=FixedHoldings(storage=storage),  # FAKE addresses hold nothing on any chain
        catalog=CONTRACT_CATALOG,  # no chain plugin is installed: the assets it serves
    )
    issued = await container.auth().create_client("embedder", assets=[1, 2])
    caller = Caller(issued.client, "embed-1")

    created = await container.wallets().create(caller, password="correct horse battery staple")
    print(f"user {created.user_id} with {len(created.addresses)} addresses")

    trading = container.trading()
    quote = await trading.sell(
        caller, user_id=created.user_id, asset_id=2, crypto_amount="0.5", fiat=Fiat.EUR.value
    )
    print(f"quote {quote.trade_id} {quote.status.value} {quote.quote.fiat_amount} EUR")

    done = await trading.approve(caller, user_id=created.user_id, trade_id=quote.trade_id)
    print(f"approved {done.trade_id} {done.status.value} {done.figures.fiat_amount} EUR")

    entries = await autocommit(storage).audit.newest()
    print("audit " + ", ".join(f"{e.action}:{e.outcome}" for e in reversed(entries)))


if __name__ == "__main__":
    asyncio.run(main())
