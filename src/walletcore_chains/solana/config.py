"""The SPL mints of the asset table per network of the `rpc` gateway (docs/chains.md).

`WALLETCORE_SOLANA_NETWORK=mainnet` (or `WALLETCORE_NETWORK`) is Solana's mainnet-beta;
`testnet` is Solana's public test cluster `devnet` (where Circle's test USDC lives). USDT
has no canonical mint on devnet: it is absent unless `WALLETCORE_SOLANA_USDT_MINT` names
one (an asset without a mint answers 503 "no mint on this Solana network").
`WALLETCORE_SOLANA_USDC_MINT` overrides USDC the same way.
"""

from __future__ import annotations

from solders.pubkey import Pubkey

from walletcore.secretfiles import ConfigurationError

USDT_ID, USDC_ID = 61, 62

#: WALLETCORE_SOLANA_NETWORK -> the Solana cluster the `rpc` gateway expects its node on
CLUSTERS = {"mainnet": "mainnet-beta", "testnet": "devnet"}

#: cluster -> asset id -> mint address
MINTS: dict[str, dict[int, str]] = {
    "mainnet-beta": {
        USDT_ID: "Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB",
        USDC_ID: "EPjFWJd5AufqSSFgFujwMHefCDLhxNiZBF6nNcB5tMBS",
    },
    "devnet": {
        USDC_ID: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
    },
}


def solana_mints(
    network: str, *, usdt: str | None = None, usdc: str | None = None
) -> dict[int, Pubkey]:
    """The mints of `network` (mainnet, testnet), with the configured overrides."""
    cluster = CLUSTERS.get(network)
    if cluster is None:
        raise ConfigurationError(
            f"WALLETCORE_SOLANA_NETWORK (or WALLETCORE_NETWORK)={network} has no Solana "
            "cluster (mainnet, testnet)"
        )
    table = dict(MINTS[cluster])
    for asset_id, override, name in ((USDT_ID, usdt, "USDT"), (USDC_ID, usdc, "USDC")):
        if override:
            table[asset_id] = override.strip()
        if asset_id in table:
            try:
                Pubkey.from_string(table[asset_id])
            except ValueError:
                raise ConfigurationError(
                    f"WALLETCORE_SOLANA_{name}_MINT is not a Solana address"
                ) from None
    return {asset_id: Pubkey.from_string(mint) for asset_id, mint in table.items()}


__all__ = ["CLUSTERS", "MINTS", "solana_mints"]
