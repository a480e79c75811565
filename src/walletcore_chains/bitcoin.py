"""The chain plugin `bitcoin`: BITCOIN's addresses, signatures and keys.

No gateway yet: on the sandbox profile BITCOIN stands on the sandbox ledger, and the
production profile refuses to start. A real gateway is a `gateways={"rpc": ...}` entry
here (docs/chains.md, "Writing a chain plugin").

- Addresses, mainnet forms only: bech32 P2WPKH/P2WSH (v0), bech32m P2TR (v1), base58
  P2PKH (`1...`) or P2SH (`3...`), checksums verified, never whether the address exists.
- Keys: BIP84, `m/84'/0'/0'/0/0`, secp256k1; the wallet's address is the key's bech32
  P2WPKH (`bc1q...`). Signatures: `r || s || recovery id` over a 32-byte digest, low-S.
"""

from __future__ import annotations

from walletcore.chainplugins import ChainPlugin, KeyDerivation
from walletcore.domain.assets import Chain
from walletcore.domain.errors import InvalidRequest
from walletcore_chains import bclib
from walletcore_chains.curves import verify_secp256k1
from walletcore_chains.encodings import b58check_decode, segwit_decode

PATH = "m/84'/0'/0'/0/0"
_TESTNET_HRPS = ("tb1", "bcrt1")
_P2PKH, _P2SH = 0x00, 0x05


def validate_address(chain: Chain, address: object) -> str:
    """The address in its normalised mainnet form (lower case for bech32), or
    `InvalidRequest` saying what is wrong. Witness versions 2 to 16 are refused: nothing
    can spend them yet, so coins sent there are lost. Surrounding whitespace is ignored."""
    if not isinstance(address, str) or not address.strip():
        raise InvalidRequest(f"A {Chain(chain)} address is required")
    text = address.strip()
    lowered = text.lower()
    if lowered.startswith(_TESTNET_HRPS):
        raise InvalidRequest("Invalid BITCOIN address: testnet addresses are not accepted")
    if lowered.startswith("bc1"):
        decoded = segwit_decode("bc", text)
        if decoded is None:
            raise InvalidRequest("Invalid BITCOIN address: bad bech32 encoding or checksum")
        version, program = decoded
        if version > 1 or (version == 1 and len(program) != 32):
            raise InvalidRequest(
                f"Invalid BITCOIN address: witness version {version} is not spendable yet"
            )
        return lowered
    payload = b58check_decode(text) if len(text) <= 35 else None
    if payload is None:
        raise InvalidRequest("Invalid BITCOIN address: bad base58check encoding or checksum")
    if len(payload) != 21 or payload[0] not in (_P2PKH, _P2SH):
        raise InvalidRequest("Invalid BITCOIN address: not a mainnet P2PKH or P2SH address")
    return text


def address_of(public_key: bytes) -> str:
    """The bech32 P2WPKH address of a compressed public key."""
    key = bclib.keys().Key(bytes(public_key), network="bitcoin")
    address: str = key.address(script_type="p2wpkh", encoding="bech32")
    return address


def verify_signature(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
    return verify_secp256k1(address_of, address, payload, signature)


#: Entry point `walletcore.chains: bitcoin`.
PLUGIN: ChainPlugin[None] = ChainPlugin(
    name="bitcoin",
    chains=frozenset({Chain.BITCOIN}),
    validate_address=validate_address,
    verify_signature=verify_signature,
    keys={Chain.BITCOIN: KeyDerivation(PATH, "secp256k1", address_of)},
)

__all__ = ["PATH", "PLUGIN", "address_of", "validate_address", "verify_signature"]
