"""The chain plugin `tron`: TRON's addresses, signatures, keys and gateway (docs/tron.md).

- Gateway `rpc` (`TronGateway`, the package `tron/gateway/`): TRX and the TRC20 tokens on a full
  node's HTTP API (java-tron, TronGrid) through tronpy; settings `TronSettings`.

- Addresses: base58check, 34 characters, version byte 0x41 (`T...`), mainnet only.
- Keys: `m/44'/195'/0'/0/0`, secp256k1; the address is the base58check of 0x41 and the
  last 20 bytes of the Keccak-256 of the uncompressed public key (tronpy). Signatures:
  `r || s || recovery id` over a 32-byte digest, low-S.
"""

from __future__ import annotations

from walletcore.chainplugins import ChainPlugin, KeyDerivation
from walletcore.domain.assets import Chain
from walletcore.domain.errors import InvalidRequest
from walletcore_chains.curves import uncompressed, verify_secp256k1
from walletcore_chains.encodings import b58check_decode
from walletcore_chains.tron.chain import CHAIN, DESCRIPTION
from walletcore_chains.tron.config import TronSettings, rpc_gateway

PATH = "m/44'/195'/0'/0/0"
_PREFIX = 0x41


def validate_address(chain: Chain, address: object) -> str:
    """The address unchanged, or `InvalidRequest` saying what is wrong. Surrounding
    whitespace is ignored."""
    if not isinstance(address, str) or not address.strip():
        raise InvalidRequest(f"A {Chain(chain)} address is required")
    text = address.strip()
    payload = b58check_decode(text) if len(text) == 34 else None
    if payload is None:
        raise InvalidRequest("Invalid TRON address: expected 34 base58check characters")
    if len(payload) != 21 or payload[0] != _PREFIX:
        raise InvalidRequest("Invalid TRON address: not a mainnet address (T...)")
    return text


def address_of(public_key: bytes) -> str:
    """The `T...` address of a compressed public key."""
    from tronpy.keys import public_key_to_base58check_addr  # type: ignore[import-untyped]

    return str(public_key_to_base58check_addr(uncompressed(public_key)))


def verify_signature(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
    return verify_secp256k1(address_of, address, payload, signature)


#: Entry point `walletcore.chains: tron` (`walletcore_chains.tron:PLUGIN`, re-exported).
PLUGIN: ChainPlugin[TronSettings] = ChainPlugin(
    name="tron",
    chains=frozenset({CHAIN}),
    settings_model=TronSettings,
    validate_address=validate_address,
    verify_signature=verify_signature,
    keys={CHAIN: KeyDerivation(PATH, "secp256k1", address_of)},
    describes={CHAIN: DESCRIPTION},
    gateways={"rpc": rpc_gateway},
)

__all__ = [
    "PATH",
    "PLUGIN",
    "TronSettings",
    "address_of",
    "validate_address",
    "verify_signature",
]
