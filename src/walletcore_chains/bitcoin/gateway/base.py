"""What every part of `BitcoinGateway` shares: its options, its network, backend and
leases, the chain it serves (`Chain.BITCOIN` unless told another: a UTXO chain of the same
rules reuses it), addresses and the native-asset check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from walletcore.domain.assets import CONTRACT_ASSETS, Asset, Chain
from walletcore.domain.errors import InvalidRequest
from walletcore.ports import AddressValidator
from walletcore_chains.bitcoin.backend import Backend
from walletcore_chains.bitcoin.network import BitcoinNetwork
from walletcore_chains.bitcoin.scripts import is_witness, locking_script
from walletcore_chains.evm.nonces import NonceBook

COINBASE_MATURITY = 100
#: how long this process keeps coins a broadcast spent out of its selections, when the
#: backend has not shown the spend yet (a lagging indexer, an unknown outcome)
RESERVE_SECONDS = 600.0
#: seconds pending before a send is `stuck` (and bumped), when not configured: a block is
#: ten minutes on average, an hour is six of them; regtest mines on demand
STUCK_AFTER_SECONDS = 3600.0
REGTEST_STUCK_AFTER_SECONDS = 30.0
#: blocks one deposit scan reads (`DepositScanner.scan_span`): some 75 MB of raw blocks
#: on mainnet, one block in memory at a time
SCAN_SPAN = 50


@dataclass(frozen=True)
class GatewayOptions:
    confirmations: int = 3
    fee_target: int = 3
    fallback_rate: float | None = None
    index_wait: float = 10.0
    #: seconds pending before a send is `stuck`; None: the network's default (one hour,
    #: 30 s on regtest)
    stuck_after: float | None = None

    @classmethod
    def of(cls, settings: Any, network: BitcoinNetwork) -> GatewayOptions:
        fallback = settings.bitcoin_fallback_fee_rate
        return cls(
            confirmations=settings.bitcoin_confirmations or network.confirmations,
            fee_target=settings.bitcoin_fee_target_blocks,
            fallback_rate=fallback,
            index_wait=settings.bitcoin_index_wait_seconds,
            stuck_after=settings.bitcoin_stuck_after_seconds,
        )


async def first_turn() -> int:
    return 0


class GatewayBase:
    """The state the parts of `BitcoinGateway` share."""

    chain: Chain

    def __init__(
        self,
        network: BitcoinNetwork,
        backend: Backend,
        validator: AddressValidator,
        nonces: NonceBook | None = None,
        options: GatewayOptions | None = None,
        *,
        chain: Chain = Chain.BITCOIN,
        native: Asset | None = None,
    ) -> None:
        """`native`: the chain's coin (its factory passes the catalog's); by default the
        contract's of `chain`."""
        self.chain = chain
        self.native = native if native is not None else _contract_native(chain)
        self.network = network
        self.backend = backend
        self._validator = validator
        self._turns = nonces or NonceBook(lease=120.0)
        self.options = options or GatewayOptions(confirmations=network.confirmations)
        stuck = self.options.stuck_after
        if stuck is None:
            regtest = network.name == "regtest"
            stuck = REGTEST_STUCK_AFTER_SECONDS if regtest else STUCK_AFTER_SECONDS
        self.stuck_after_seconds: float = stuck
        #: outpoint -> until when this process keeps it out of selections
        self._reserved: dict[tuple[str, int], float] = {}
        #: txid -> the leases' turns its broadcast gives back
        self._held: dict[str, dict[str, int]] = {}
        #: the deposit scan (`scanning.py`, `DepositScanner`): the depth a deposit is
        #: confirmed at (the lifecycle's), the most blocks one scan covers, and each
        #: watched address's locking script (None: not an address of this network)
        self.confirmations: int = self.options.confirmations
        self.scan_span: int = SCAN_SPAN
        self._scripts: dict[str, bytes | None] = {}

    def __repr__(self) -> str:
        return f"BitcoinGateway({self.network.name}, {self.backend.name})"

    async def start(self) -> None:
        """Nothing to open: the backend connects on first use."""

    async def aclose(self) -> None:
        await self.backend.aclose()

    async def check(self) -> None:
        """`walletcore.ports.HealthCheck`: the backend answers its tip height (Esplora
        `/blocks/tip/height`, Core `getblockcount`)."""
        await self.backend.tip_height()

    # -- addresses ----------------------------------------------------------------------
    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest(f"A {self.chain} address must be a string")
        return self._validator(self.chain, address)

    def _script(self, address: str) -> tuple[int, bool]:
        """The length of the locking script the transaction will hold for an address, and
        whether it is a witness program (so the fee, the dust limit and the build agree)."""
        script = locking_script(self.network, address)
        return len(script), is_witness(script)

    def _native(self, asset: Asset) -> None:
        if asset.chain != self.chain or not asset.is_native:
            raise InvalidRequest(f"{asset.symbol} is not {self.chain}'s coin")


def _contract_native(chain: Chain) -> Asset:
    found = [a for a in CONTRACT_ASSETS if a.chain == chain and a.is_native]
    if not found:
        raise ValueError(f"{chain} is not a contract chain: name its native asset")
    return found[0]


def btc(units: int) -> str:
    from walletcore.domain.money import format_balance

    return format_balance(units, 8)


__all__ = [
    "COINBASE_MATURITY",
    "REGTEST_STUCK_AFTER_SECONDS",
    "RESERVE_SECONDS",
    "SCAN_SPAN",
    "STUCK_AFTER_SECONDS",
    "GatewayBase",
    "GatewayOptions",
    "btc",
    "first_turn",
]
