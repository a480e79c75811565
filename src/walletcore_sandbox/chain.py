"""Sandbox chain gateways: one per chain over the shared `SandboxLedger`, with fees that
follow each chain's model roughly, and real signatures. The chain plugin `sandbox`
(`PLUGIN`, sandbox profile only) serves every chain, with each chain's own validator and
verifier from the plugin that defines it.

Fee models (native base units; figures in `FeeModel` below):
- BITCOIN: virtual size x fee rate. A one-input, two-output P2WPKH transfer is 141 vB; a
  sponsor adds an input and its change (+99 vB). 10 sat/vB.
- ETHEREUM, BSC, POLYGON: gas x gas price. 21,000 gas for the native coin, 65,000 for a
  token transfer; 20 / 3 / 30 gwei.
- TRON: bandwidth (268 bytes for TRX, 345 for TRC20) and, for TRC20, energy (65,000, or
  130,000 when the recipient never held the token), burned as TRX when not staked
  (sandbox accounts stake nothing): 1,000 sun per bandwidth point, 210 sun per energy unit.
- SOLANA: 5,000 lamports per signature (two when a sponsor pays), plus the rent of the
  recipient's associated token account (2,039,280 lamports) on an SPL transfer to an
  address that has none.
- any other chain (a plugin's): a flat 1,000 base units.

Minimums (`MinimumSends`), as the real chains refuse less: BITCOIN's dust limit of the
recipient's address type (294 sat P2WPKH, 330 P2WSH and P2TR, 540 P2SH, 546 P2PKH, read from
the address's form); SOLANA's rent-exempt minimum of a new account (890,880 lamports) for a
native transfer to an address that holds no SOL.

A transfer's body is canonical JSON; secp256k1 keys sign its SHA-256, ed25519 keys (SOLANA)
sign the body itself. Hashes have each chain's form: 64 hex (BITCOIN, TRON, others), `0x` +
64 hex (EVM), the base58 of the first signature (SOLANA).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import base58
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.chainplugins import ChainPlugin, GatewayContext, GatewayFactory
from walletcore.domain.assets import CONTRACT_CHAINS, Asset, Chain
from walletcore.domain.errors import (
    AddressUnknown,
    InvalidRequest,
    TransactionNotFound,
    TransferRejected,
)
from walletcore.domain.wallet import TxRow
from walletcore.ports import (
    AddressValidator,
    ChainGateway,
    FeeQuote,
    MinimumSends,
    SendMinimum,
    SignatureVerifier,
    SignedTransfer,
    Transfer,
    UnsignedTransfer,
)
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Profile
from walletcore_sandbox.ledger import DATA_FILE, LedgerTx, SandboxLedger, row_of

EVM_CHAINS = frozenset({Chain.ETHEREUM, Chain.BSC, Chain.POLYGON})


@dataclass(frozen=True, slots=True)
class FeeModel:
    btc_sat_per_vbyte: int = 10
    btc_transfer_vbytes: int = 141
    btc_sponsor_vbytes: int = 99
    evm_native_gas: int = 21_000
    evm_token_gas: int = 65_000
    tron_native_bandwidth: int = 268
    tron_token_bandwidth: int = 345
    tron_energy_holder: int = 65_000
    tron_energy_new_holder: int = 130_000
    tron_sun_per_bandwidth: int = 1_000
    tron_sun_per_energy: int = 210
    sol_lamports_per_signature: int = 5_000
    sol_token_account_rent: int = 2_039_280
    #: the rent-exempt minimum of an account with no data: the least SOL a new one takes
    sol_account_rent: int = 890_880
    #: the node's dust relay fee (sat/kvB): an output worth less than spending it is refused
    btc_dust_relay_sat_per_kvb: int = 3_000
    #: any other chain (a plugin's new one): a flat fee in its native base units
    other_native_units: int = 1_000


#: wei per gas on each EVM chain
GAS_PRICE = {Chain.ETHEREUM: 20 * 10**9, Chain.BSC: 3 * 10**9, Chain.POLYGON: 30 * 10**9}
#: the rules of the chains' minimums, as a refusal names them
DUST_RULE = "the dust limit of its address type"
RENT_RULE = "the rent-exempt minimum of a new SOLANA account"
#: human-readable parts of the bech32 addresses of Bitcoin's networks
_BECH32_HRPS = frozenset({"bc", "tb", "bcrt"})


def btc_dust_limit(address: str, sat_per_kvb: int = 3_000) -> int:
    """The node's dust limit of an output to `address` (`GetDustThreshold`: the output and
    the input that spends it, at the dust relay fee), its locking script read from the
    address's form: a bech32 address holds a 20-byte (P2WPKH) or a 32-byte program (P2WSH,
    P2TR); a base58 one is P2SH when it starts with `3` or `2`, else P2PKH."""
    hrp, separator, data = address.lower().rpartition("1")
    if separator and hrp in _BECH32_HRPS:
        script, spend = (22 if len(data) == 39 else 34), 32 + 4 + 1 + 107 // 4 + 4
    else:
        script, spend = (23 if address[:1] in ("3", "2") else 25), 32 + 4 + 1 + 107 + 4
    return (8 + 1 + script + spend) * sat_per_kvb // 1000


class SandboxGateway(ChainGateway, MinimumSends):
    def __init__(
        self,
        chain: Chain,
        ledger: SandboxLedger,
        validator: AddressValidator,
        fees: FeeModel | None = None,
        *,
        signs_digest: bool | None = None,
    ) -> None:
        """`signs_digest`: whether the chain's keys sign the body's SHA-256 (secp256k1) or
        the body itself (ed25519); by default, the body on SOLANA only."""
        self.chain = Chain(chain)
        self._ledger = ledger
        self._validator = validator
        self._fees = fees or FeeModel()
        if signs_digest is None:
            signs_digest = self.chain != Chain.SOLANA
        self._signs_digest = signs_digest

    def __repr__(self) -> str:
        return f"SandboxGateway({self.chain.value})"

    # -- reads --------------------------------------------------------------------------
    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest(f"A {self.chain} address must be a string")
        return self._validator(self.chain, address)

    async def balance(self, address: str, asset: Asset) -> int:
        if self.chain == Chain.BITCOIN:  # an indexer knows only addresses it has seen
            known = await self._ledger.known_balance(self.chain, address, asset.id)
            if known is None:
                raise AddressUnknown()
            return known
        return await self._ledger.balance(self.chain, address, asset.id)

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        return await self._ledger.history(self.chain, address, asset.id, limit)

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        wanted = tx_hash if self.chain == Chain.SOLANA else tx_hash.lower()  # hex: any case
        tx = await self._ledger.find(wanted)
        if tx is None or tx.chain != self.chain or tx.asset_id != asset.id:
            raise TransactionNotFound()
        if address not in (tx.sender, tx.recipient):
            raise TransactionNotFound()
        return row_of(tx, address, self._ledger.now())

    async def fee(
        self,
        sender: str,
        recipient: str,
        asset: Asset,
        amount_units: int | None,
        *,
        fee_payer: str | None = None,
    ) -> FeeQuote:
        sponsored = fee_payer is not None and fee_payer != sender
        f, chain = self._fees, self.chain
        if chain == Chain.BITCOIN:
            vbytes = f.btc_transfer_vbytes + (f.btc_sponsor_vbytes if sponsored else 0)
            return FeeQuote(vbytes * f.btc_sat_per_vbyte)
        if chain in EVM_CHAINS:
            gas = f.evm_native_gas if asset.is_native else f.evm_token_gas
            return FeeQuote(gas * GAS_PRICE[chain])
        if chain == Chain.TRON:
            if asset.is_native:
                bandwidth = f.tron_native_bandwidth
                return FeeQuote(bandwidth * f.tron_sun_per_bandwidth, bandwidth=bandwidth)
            bandwidth = f.tron_token_bandwidth
            holder = await self._ledger.has_received(chain, recipient, asset.id)
            energy = f.tron_energy_holder if holder else f.tron_energy_new_holder
            units = bandwidth * f.tron_sun_per_bandwidth + energy * f.tron_sun_per_energy
            return FeeQuote(units, bandwidth=bandwidth, energy=energy)
        if chain != Chain.SOLANA:
            return FeeQuote(f.other_native_units)
        lamports = f.sol_lamports_per_signature * (2 if sponsored else 1)
        if not asset.is_native and not await self._ledger.has_received(chain, recipient, asset.id):
            lamports += f.sol_token_account_rent
        return FeeQuote(lamports)

    async def minimum_send(self, recipient: str, asset: Asset) -> SendMinimum | None:
        """BITCOIN's dust limit, and SOLANA's rent-exempt minimum of a new account (the
        module's docstring); None on the other chains."""
        if self.chain == Chain.BITCOIN:
            return SendMinimum(
                btc_dust_limit(recipient, self._fees.btc_dust_relay_sat_per_kvb), DUST_RULE
            )
        new_account = (
            self.chain == Chain.SOLANA
            and asset.is_native
            and await self._ledger.balance(self.chain, recipient, asset.id) == 0
        )
        return SendMinimum(self._fees.sol_account_rent, RENT_RULE) if new_account else None

    # -- transfers ----------------------------------------------------------------------
    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        if transfer.asset.chain != self.chain:
            raise ValueError(f"{transfer.asset.symbol} is not on {self.chain}")
        body = _canonical(
            {
                "v": 1,
                "chain": self.chain.value,
                "asset": transfer.asset.id,
                "from": transfer.sender,
                "to": transfer.recipient,
                "amount": transfer.amount_units,
                "fee": fee.native_units,
                "feePayer": transfer.fee_payer,
                "nonce": secrets.token_hex(16),
            }
        )
        return UnsignedTransfer(transfer, fee, self._payload(body), body)

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        signers = unsigned.transfer.signers
        if set(signatures) != set(signers):
            raise ValueError("one signature per signer is needed")
        raw = _canonical(
            {
                "body": unsigned.body.decode("utf-8"),
                "signatures": [[s, signatures[s].hex()] for s in signers],
            }
        )
        return SignedTransfer(raw, self._hash(unsigned.body, raw, signatures[signers[0]]))

    async def broadcast(self, signed: SignedTransfer) -> str:
        try:
            envelope = json.loads(signed.raw)
            body_text: str = envelope["body"]
            body = json.loads(body_text)
            signatures = {str(a): bytes.fromhex(s) for a, s in envelope["signatures"]}
            tx = LedgerTx(
                tx_hash=signed.tx_hash,
                chain=Chain(body["chain"]),
                asset_id=int(body["asset"]),
                sender=str(body["from"]),
                recipient=str(body["to"]),
                amount_units=int(body["amount"]),
                fee_units=int(body["fee"]),
                fee_payer=str(body["feePayer"]),
                accepted_at=self._ledger.now(),
                confirm_at=self._ledger.now(),
            )
        except (ValueError, KeyError, TypeError):
            raise TransferRejected("Transfer rejected by the network: malformed transaction")
        raw_body = body_text.encode("utf-8")
        first = signatures.get(tx.fee_payer or "", b"")
        if tx.chain != self.chain or self._hash(raw_body, signed.raw, first) != tx.tx_hash:
            raise TransferRejected("Transfer rejected by the network: malformed transaction")
        if tx.amount_units <= 0 or tx.fee_units < 0:
            raise TransferRejected("Transfer rejected by the network: invalid amount")
        await self._ledger.accept(tx, self._payload(raw_body), signatures)
        return tx.tx_hash

    async def release(self, unsigned: UnsignedTransfer) -> None:
        """Nothing to give back: a sandbox transfer reserves nothing."""

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Nothing to start: the ledger opens its database on first use."""

    async def aclose(self) -> None:
        """Close the ledger's connection (shared by the container's sandbox gateways; the
        next call opens it again)."""
        await self._ledger.aclose()

    async def check(self) -> None:
        """`walletcore.ports.HealthCheck`: the ledger (this sandbox's node) answers a read."""
        await self._ledger.knows(self.chain, "")

    # -- the sandbox faucet -------------------------------------------------------------
    async def fund(self, address: str, asset: Asset, units: int) -> int:
        """Credit `units` of `asset` to `address` (confirmed at once); the new balance."""
        if asset.chain != self.chain:
            raise InvalidRequest(f"asset {asset.id} is not on {self.chain}")
        if units <= 0:
            raise InvalidRequest("amount must be greater than zero")
        noise = secrets.token_bytes(64)
        tx_hash = self._hash(noise, noise, noise)
        return await self._ledger.credit(self.chain, address, asset.id, units, tx_hash)

    # -- chain formats ------------------------------------------------------------------
    def _payload(self, body: bytes) -> bytes:
        return hashlib.sha256(body).digest() if self._signs_digest else body

    def _hash(self, body: bytes, raw: bytes, first_signature: bytes) -> str:
        if self.chain == Chain.SOLANA:
            return b58encode(first_signature)
        if self.chain == Chain.TRON:
            return hashlib.sha256(body).hexdigest()
        if self.chain == Chain.BITCOIN:
            return hashlib.sha256(hashlib.sha256(raw).digest()).digest()[::-1].hex()
        if self.chain in EVM_CHAINS:
            return "0x" + hashlib.sha3_256(raw).hexdigest()
        return hashlib.sha256(raw).hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def b58encode(data: bytes) -> str:
    """Base58 (Bitcoin alphabet), for SOLANA transaction signatures."""
    return base58.b58encode(data).decode("ascii")


class SandboxChainSettings(BaseSettings):
    """Settings of the `sandbox` chain plugin."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", extra="ignore")

    #: Seconds from broadcast until a transaction reads `success`
    #: (`WALLETCORE_SANDBOX_CONFIRM_SECONDS`).
    sandbox_confirm_seconds: float = Field(default=3.0, ge=0, le=3600)


def _ledger_gateway(context: GatewayContext[SandboxChainSettings]) -> SandboxGateway:
    """One chain's gateway on the ledger every sandbox chain of the container shares, in
    `WALLETCORE_HOME/sandbox-chain.db`; signatures are checked with each chain's own
    verifier, and the payload signed follows the chain's curve."""
    if context.core.profile is not Profile.SANDBOX:
        raise ConfigurationError(
            "the sandbox chain is a sandbox adapter; the production profile refuses it"
        )
    verifiers: dict[Chain, SignatureVerifier] = context.shared("verifiers", dict)
    verifiers[context.chain] = context.verify_signature

    def verify(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
        own = verifiers.get(chain)
        return own is not None and own(chain, address, payload, signature)

    ledger = context.shared(
        "ledger",
        lambda: SandboxLedger(
            Path(context.core.home) / DATA_FILE,
            context.clock,
            verify,
            confirm_seconds=context.settings.sandbox_confirm_seconds,
            catalog=context.catalog,
        ),
    )
    return SandboxGateway(
        context.chain,
        ledger,
        context.validate_address,
        signs_digest=context.keys.curve == "secp256k1",
    )


#: Entry point `walletcore.chains: sandbox`: every chain on the sandbox ledger (sandbox
#: profile only). It stands in for a chain that has no gateway of the mode asked for.
PLUGIN: ChainPlugin[SandboxChainSettings] = ChainPlugin(
    name="sandbox",
    chains=frozenset(CONTRACT_CHAINS),
    settings_model=SandboxChainSettings,
    gateways={"sandbox": GatewayFactory(_ledger_gateway, sandbox_only=True)},
)


__all__ = [
    "PLUGIN",
    "FeeModel",
    "SandboxChainSettings",
    "SandboxGateway",
    "b58encode",
    "btc_dust_limit",
]
