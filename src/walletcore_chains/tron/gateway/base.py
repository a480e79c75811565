"""What every part of `TronGateway` shares: its client, options and token contracts,
the chain it serves (`Chain.TRON` unless told another), addresses, and the shape of a
transaction (`_raw`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from eth_abi.abi import encode as abi_encode
from tronpy.keys import to_raw_address  # type: ignore[import-untyped]

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.errors import AssetUnavailableOnEndpoint, InvalidRequest
from walletcore.ports import AddressValidator
from walletcore_chains.tron import proto, rows
from walletcore_chains.tron.client import TronClient

SIGNATURE = 65
#: TRX's asset id (`walletcore.domain.assets`)
TRX_ID = 4


@dataclass(frozen=True, slots=True)
class TronOptions:
    network: str = "mainnet"
    #: fee_limit = energy estimate x (1 + margin), priced
    energy_margin: float = 0.2
    expiration_seconds: int = 300
    #: how long a PLATFORM top-up may take to reach a block before the transfer goes
    receipt_timeout: float = 60.0
    #: TronGrid's history pages read at most (200 rows each)
    history_pages: int = 3
    #: seconds a broadcast may stay pending before it counts as stuck (`TransferFollower`)
    stuck_after_seconds: float = 60.0
    #: a transaction not on chain reads EXPIRED only once the solidified head is this many
    #: seconds past its expiration (`sighting`; docs/tron.md, "Following a transfer")
    expiry_margin_seconds: float = 30.0
    #: blocks deep (its own included) a deposit's block must be to be `confirmed`: the
    #: depth at which java-tron solidifies a block on mainnet (70% of the 27 super
    #: representatives built on it: the solidified head is 18 blocks below the head), the
    #: point the transfer lifecycle calls final (`DepositScanner`; docs/tron.md, "Deposits")
    confirmations: int = 19
    #: most blocks one deposit scan covers (`DepositScanner.scan_span`)
    scan_span: int = 100
    #: most blocks asked for in one `wallet/getblockbylimitnext` (java-tron answers at most
    #: 100; a node refusing fewer is asked for half as many, and so on)
    blocks_per_call: int = 100
    #: receipt reads (`wallet/gettransactioninfobyblocknum`) of one scan at once
    scan_concurrency: int = 4


class GatewayBase:
    """The state the parts of `TronGateway` share."""

    chain: Chain

    def __init__(
        self,
        client: TronClient,
        validator: AddressValidator,
        *,
        tokens: Mapping[int, str],
        options: TronOptions | None = None,
        chain: Chain = Chain.TRON,
        native_asset_id: int = TRX_ID,
    ) -> None:
        """`tokens`: the TRC20 contracts (asset id -> `T...`); `native_asset_id`: the
        chain's coin (TRX, asset 4), as deposits name it."""
        self.chain = chain
        self.native_asset_id = native_asset_id
        self.client = client
        self._validator = validator
        self._tokens = dict(tokens)
        self.options = options or TronOptions()
        self.stuck_after_seconds = self.options.stuck_after_seconds
        self.confirmations = self.options.confirmations
        self.scan_span = self.options.scan_span

    def __repr__(self) -> str:
        return f"TronGateway({self.options.network})"

    async def aclose(self) -> None:
        await self.client.aclose()

    async def check(self) -> None:
        """`walletcore.ports.HealthCheck`: the node answers `wallet/getnowblock`."""
        await self.client.head()

    def token_address(self, asset: Asset) -> str:
        contract = self._tokens.get(asset.id)
        if contract is None:
            raise AssetUnavailableOnEndpoint(
                f"{asset.symbol} has no contract on {self.chain} {self.options.network}; contact "
                "the operator"
            )
        return contract

    def _contract_of(self, asset: Asset) -> str | None:
        if asset.chain != self.chain:
            raise ValueError(f"{asset.symbol} is not on {self.chain}")
        return None if asset.is_native else self.token_address(asset)

    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest(f"A {self.chain} address must be a string")
        return self._validator(self.chain, address)

    def _raw(
        self,
        owner: str,
        to: str,
        contract: str | None,
        amount: int,
        fee_limit: int,
        ref_bytes: bytes,
        ref_hash: bytes,
        now: int,
        expiration: int | None = None,
    ) -> proto.Raw:
        if contract is None:
            call = proto.Contract(proto.TRANSFER, raw21(owner), raw21(to), amount)
        else:
            data = rows.TRANSFER_METHOD_ID + abi_encode(
                ["address", "uint256"], [evm_address(to), amount]
            )
            call = proto.Contract(proto.TRIGGER, raw21(owner), raw21(contract), 0, data)
        expires = (
            expiration if expiration is not None else now + self.options.expiration_seconds * 1000
        )
        return proto.Raw(call, ref_bytes, ref_hash, expires, now, fee_limit)


def raw21(address: str) -> bytes:
    return bytes(to_raw_address(address))


def evm_address(address: str) -> str:
    """The 20-byte EVM form of a `T...` address (what the TVM's ABI carries)."""
    return "0x" + raw21(address)[1:].hex()


def now_ms() -> int:
    return int(time.time() * 1000)


__all__ = ["SIGNATURE", "TRX_ID", "GatewayBase", "TronOptions", "evm_address", "now_ms", "raw21"]
