"""BITCOIN's networks: address forms, bitcoinlib's name, genesis block, confirmations.

The network is one per process (`WALLETCORE_BITCOIN_NETWORK`, default `mainnet`): it
decides the addresses the KeyStore derives (`bc1`, `tb1`, `bcrt1`) and the addresses the
validator accepts, so every wallet of a deployment lives on one network. It is read from
the environment, not from a gateway's settings, because the keys and the validator are
used before (and without) any gateway: on the sandbox profile too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from walletcore.secretfiles import ConfigurationError

ENV = "WALLETCORE_BITCOIN_NETWORK"


@dataclass(frozen=True)
class BitcoinNetwork:
    name: str
    #: bech32 human-readable part of segwit addresses
    hrp: str
    #: base58check version bytes of P2PKH and P2SH addresses
    p2pkh: int
    p2sh: int
    #: bitcoinlib's network name
    bitcoinlib: str
    #: the genesis block hash (CAIP-2 `bip122:` + its first 32 hex digits keys the leases)
    genesis: str
    #: blocks deep before a transaction reads `success` (WALLETCORE_BITCOIN_CONFIRMATIONS)
    confirmations: int

    @property
    def lease_key(self) -> str:
        return f"bip122:{self.genesis[:32]}"


NETWORKS: dict[str, BitcoinNetwork] = {
    "mainnet": BitcoinNetwork(
        "mainnet",
        "bc",
        0x00,
        0x05,
        "bitcoin",
        "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f",
        3,
    ),
    "testnet": BitcoinNetwork(  # testnet3
        "testnet",
        "tb",
        0x6F,
        0xC4,
        "testnet",
        "000000000933ea01ad0ee984209779baaec3ced90fa3f408719526f8d77f4943",
        3,
    ),
    "testnet4": BitcoinNetwork(
        "testnet4",
        "tb",
        0x6F,
        0xC4,
        "testnet4",
        "00000000da84f2bafbbc53dee25a72ae507ff4914b867c565be350b0da8bf043",
        3,
    ),
    "signet": BitcoinNetwork(
        "signet",
        "tb",
        0x6F,
        0xC4,
        "signet",
        "00000008819873e925422c1ff0f99f7cc9bbb232af63a077a480a3633bee1ef6",
        3,
    ),
    "regtest": BitcoinNetwork(
        "regtest",
        "bcrt",
        0x6F,
        0xC4,
        "regtest",
        "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206",
        1,
    ),
}


def network_named(name: str) -> BitcoinNetwork:
    found = NETWORKS.get(name.strip().lower())
    if found is None:
        raise ConfigurationError(f"{ENV}={name} is not a Bitcoin network ({', '.join(NETWORKS)})")
    return found


def current_network() -> BitcoinNetwork:
    """The process's Bitcoin network (`WALLETCORE_BITCOIN_NETWORK`, default mainnet)."""
    return network_named(os.environ.get(ENV) or "mainnet")


__all__ = ["ENV", "NETWORKS", "BitcoinNetwork", "current_network", "network_named"]
