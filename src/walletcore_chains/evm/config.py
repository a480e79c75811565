"""EVM chain configurations: chain id, native coin, token contracts and confirmation depth,
per chain and network (`mainnet`, `testnet`, `devnet`).

`devnet` is the in-process py-evm chain (eth-tester): its chain id is the node's and its
token contracts are deployed at start-up (`walletcore_chains.evm.devnet`), so the devnet
table names no address.

`WALLETCORE_EVM_TOKENS` (asset id -> contract) adds or replaces token contracts of the
`rpc` chains: Sepolia has no canonical USDT and BSC's testnet none of the two, so a
testnet deployment names its own. Each address must be checksummed (EIP-55): a typo in a
contract address would send tokens nowhere.

`stuck_after_seconds`: how long a broadcast transfer may stay unmined before the transfer
lifecycle counts it as stuck and broadcasts the next rung of its replacement ladder
(`walletcore.ports.TransferFollower`): a few block times past what a fairly priced
transaction waits on the chain (ETHEREUM 12 s blocks: 180; BSC 3 s: 45; POLYGON 2 s: 60;
the in-process devnet: 30). `WALLETCORE_EVM_STUCK_AFTER_SECONDS` overrides it for every EVM
chain of a deployment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from walletcore.domain.assets import CONTRACT_ASSETS, Asset, Chain
from walletcore.secretfiles import ConfigurationError

NETWORKS = ("mainnet", "testnet", "devnet")


@dataclass(frozen=True, slots=True)
class EvmConfig:
    chain: Chain
    network: str
    #: None: whatever the node answers (the devnet).
    chain_id: int | None
    native_symbol: str
    #: asset id -> token contract address (checksummed)
    tokens: Mapping[int, str] = field(default_factory=dict)
    #: blocks on top of a transaction's (its own included) before it reads `success`
    confirmations: int = 12
    #: whether the chain prices gas with EIP-1559 (base fee + tip) or a legacy gas price
    eip1559: bool = True
    #: how many recent blocks `history` scans (see docs/chains.md: production wants an indexer)
    history_blocks: int = 2_000
    #: seconds a broadcast may stay unmined before it counts as stuck (and is replaced)
    stuck_after_seconds: float = 180.0
    #: most blocks one deposit scan covers (`walletcore_chains.evm.deposits`)
    scan_span: int = 500


#: per chain: seconds before an unmined broadcast counts as stuck (about 15 block times)
STUCK_AFTER_SECONDS = {Chain.ETHEREUM: 180.0, Chain.BSC: 45.0, Chain.POLYGON: 60.0}
#: the in-process devnet mines every transaction at once: anything unmined is stuck soon
DEVNET_STUCK_AFTER_SECONDS = 30.0


_MAINNET = {
    Chain.ETHEREUM: EvmConfig(
        Chain.ETHEREUM,
        "mainnet",
        1,
        "ETH",
        {
            21: "0xdAC17F958D2ee523a2206206994597C13D831ec7",
            22: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
        },
        confirmations=12,
        stuck_after_seconds=STUCK_AFTER_SECONDS[Chain.ETHEREUM],
    ),
    Chain.BSC: EvmConfig(
        Chain.BSC,
        "mainnet",
        56,
        "BNB",
        {
            31: "0x55d398326f99059fF775485246999027B3197955",
            32: "0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d",
        },
        confirmations=15,
        stuck_after_seconds=STUCK_AFTER_SECONDS[Chain.BSC],
    ),
    Chain.POLYGON: EvmConfig(
        Chain.POLYGON,
        "mainnet",
        137,
        "POL",
        {
            51: "0xc2132D05D31c914a87C6611C10748AEb04B58e8F",
            52: "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359",
        },
        confirmations=64,
        stuck_after_seconds=STUCK_AFTER_SECONDS[Chain.POLYGON],
    ),
}

_TESTNET = {
    Chain.ETHEREUM: EvmConfig(
        Chain.ETHEREUM,
        "testnet",
        11155111,
        "ETH",  # Sepolia
        {22: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238"},
        confirmations=3,
        stuck_after_seconds=STUCK_AFTER_SECONDS[Chain.ETHEREUM],
    ),
    Chain.BSC: EvmConfig(
        Chain.BSC,
        "testnet",
        97,
        "BNB",
        {},
        confirmations=3,
        stuck_after_seconds=STUCK_AFTER_SECONDS[Chain.BSC],
    ),
    Chain.POLYGON: EvmConfig(
        Chain.POLYGON,
        "testnet",
        80002,
        "POL",  # Amoy
        {52: "0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582"},
        confirmations=3,
        stuck_after_seconds=STUCK_AFTER_SECONDS[Chain.POLYGON],
    ),
}

_DEVNET_SYMBOLS = {Chain.ETHEREUM: "ETH", Chain.BSC: "BNB", Chain.POLYGON: "POL"}


def rpc_networks(chain: Chain) -> dict[str, EvmConfig]:
    """The `rpc` networks of one of the asset table's EVM chains: network -> config."""
    return {"mainnet": _MAINNET[chain], "testnet": _TESTNET[chain]}


def evm_config(chain: Chain, network: str, tokens: Mapping[int, str] | None = None) -> EvmConfig:
    """The configuration of `chain` on `network`, with the contracts of `chain` among
    `tokens` (`WALLETCORE_EVM_TOKENS`: asset id -> contract, for any EVM chain) over the
    table's; `ValueError` for an unknown network, `ConfigurationError` for a bad token."""
    if network == "mainnet":
        config = _MAINNET[chain]
    elif network == "testnet":
        config = _TESTNET[chain]
    elif network == "devnet":
        config = EvmConfig(
            chain,
            "devnet",
            None,
            _DEVNET_SYMBOLS[chain],
            {},
            confirmations=1,
            stuck_after_seconds=DEVNET_STUCK_AFTER_SECONDS,
        )
    else:
        raise ValueError(f"unknown network {network!r}; known: {', '.join(NETWORKS)}")
    overrides = token_overrides(chain, tokens or {})
    return replace(config, tokens={**config.tokens, **overrides}) if overrides else config


def token_overrides(
    chain: Chain,
    tokens: Mapping[int, str],
    assets: Mapping[int, Asset] | None = None,
    variable: str = "WALLETCORE_EVM_TOKENS",
) -> dict[int, str]:
    """The contracts of `chain` among `tokens`, each checked: the asset is a token of one
    of the family's chains (`assets`: asset id -> asset; by default the contract's
    ETHEREUM, BSC and POLYGON assets), and the address a checksummed (EIP-55) one.
    `variable` names the setting in messages. The address is never echoed (a key pasted by
    mistake must not reach a log)."""
    from eth_utils.address import is_checksum_address

    if assets is None:
        assets = {a.id: a for a in CONTRACT_ASSETS if a.chain in EVM_CHAINS}
    family = list(dict.fromkeys(a.chain.value for a in assets.values()))
    out: dict[int, str] = {}
    for key, address in tokens.items():
        try:
            asset = assets.get(int(key))
        except (TypeError, ValueError):
            asset = None
        if asset is None or asset.is_native:
            raise ConfigurationError(
                f"{variable}: asset {key} is not a token of {', '.join(family)}"
            )
        if not isinstance(address, str) or not is_checksum_address(address.strip()):
            raise ConfigurationError(
                f"{variable}: the contract of asset {asset.id} ({asset.symbol} on "
                f"{asset.chain.value}) is not a checksummed (EIP-55) 0x address"
            )
        if asset.chain == chain:
            out[asset.id] = address.strip()
    return out


EVM_CHAINS = (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON)
#: chains whose blocks carry a validator's seal in `extraData` (97 bytes and more, where
#: web3 expects 32): web3 reads them through `ExtraDataToPOAMiddleware`
POA_CHAINS = frozenset({Chain.BSC, Chain.POLYGON})
#: the chain ids of the asset table's EVM chains on their main networks
MAINNET_CHAIN_IDS: dict[Chain, int] = {c: cfg.chain_id or 0 for c, cfg in _MAINNET.items()}

__all__ = [
    "DEVNET_STUCK_AFTER_SECONDS",
    "EVM_CHAINS",
    "MAINNET_CHAIN_IDS",
    "NETWORKS",
    "POA_CHAINS",
    "STUCK_AFTER_SECONDS",
    "EvmConfig",
    "evm_config",
    "rpc_networks",
    "token_overrides",
]
