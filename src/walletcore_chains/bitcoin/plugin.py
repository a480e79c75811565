"""The chain plugin `bitcoin`: BITCOIN's addresses, signatures, keys and gateway
(docs/bitcoin.md).

- Network: one per process, `WALLETCORE_BITCOIN_NETWORK` = mainnet (default), testnet,
  testnet4, signet or regtest (`bitcoin/network.py`). It sets the addresses derived and
  accepted: `bc1` on mainnet, `tb1` on the test networks, `bcrt1` on regtest.
- Addresses of that network only: bech32 P2WPKH/P2WSH (v0), bech32m P2TR (v1), base58
  P2PKH or P2SH, checksums verified, never whether the address exists.
- Keys: BIP84, `m/84'/0'/0'/0/0`, secp256k1; the wallet's address is the key's bech32
  P2WPKH. Signatures: `r || s || recovery id` over a 32-byte digest, low-S; a transaction
  spending several coins of one signer has one digest per coin, signed in one call
  (`n x 32` bytes in, `n x 65` out).
- Gateway `rpc` (`BitcoinGateway`): on an Esplora HTTP API (the default) or a Bitcoin Core
  node's JSON-RPC (a watch-only descriptor wallet); settings `BitcoinSettings`.
"""

from __future__ import annotations

from walletcore.chainplugins import ChainPlugin, KeyDerivation
from walletcore.domain.assets import Chain
from walletcore.domain.errors import InvalidRequest
from walletcore_chains import bclib
from walletcore_chains.bitcoin.chain import CHAIN, DESCRIPTION
from walletcore_chains.bitcoin.config import BitcoinSettings, rpc_gateway
from walletcore_chains.bitcoin.network import current_network
from walletcore_chains.curves import verify_secp256k1
from walletcore_chains.encodings import b58check_decode, segwit_decode

PATH = "m/84'/0'/0'/0/0"
#: longest first: `bcrt1` also starts with `bc`
_ALL_HRPS = ("bcrt1", "tb1", "bc1")
_SIGNATURE, _DIGEST = 65, 32


def validate_address(chain: Chain, address: object) -> str:
    """The address in its normalised form (lower case for bech32), or `InvalidRequest`
    saying what is wrong. Only the process's network's addresses are accepted. Witness
    versions 2 to 16 are refused: nothing can spend them yet, so coins sent there are lost.
    Surrounding whitespace is ignored."""
    if not isinstance(address, str) or not address.strip():
        raise InvalidRequest(f"A {Chain(chain)} address is required")
    network = current_network()
    text = address.strip()
    lowered = text.lower()
    ours = network.hrp + "1"
    prefix = next((p for p in _ALL_HRPS if lowered.startswith(p)), None)
    if prefix is not None and prefix != ours:
        kind = "mainnet" if prefix == "bc1" else "testnet"
        raise InvalidRequest(
            f"Invalid BITCOIN address: {kind} addresses are not accepted on {network.name} "
            f"(expected {ours}...)"
        )
    if prefix is not None:
        decoded = segwit_decode(network.hrp, text)
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
    if len(payload) != 21 or payload[0] not in (network.p2pkh, network.p2sh):
        raise InvalidRequest(f"Invalid BITCOIN address: not a {network.name} P2PKH or P2SH address")
    return text


def address_of(public_key: bytes) -> str:
    """The bech32 P2WPKH address of a compressed public key, on the process's network."""
    network = current_network()
    key = bclib.keys().Key(bytes(public_key), network=network.bitcoinlib)
    address: str = key.address(script_type="p2wpkh", encoding="bech32")
    return address


def verify_signature(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
    """Whether the key of `address` made `signature`: one 65-byte signature per 32-byte
    digest of `payload` (a transaction spending several coins has one digest per coin)."""
    count = len(payload) // _DIGEST
    if count < 1 or len(payload) != count * _DIGEST or len(signature) != count * _SIGNATURE:
        return False
    return all(
        verify_secp256k1(
            address_of,
            address,
            payload[i * _DIGEST : (i + 1) * _DIGEST],
            signature[i * _SIGNATURE : (i + 1) * _SIGNATURE],
        )
        for i in range(count)
    )


#: Entry point `walletcore.chains: bitcoin` (`walletcore_chains.bitcoin:PLUGIN`, re-exported).
PLUGIN: ChainPlugin[BitcoinSettings] = ChainPlugin(
    name="bitcoin",
    chains=frozenset({CHAIN}),
    settings_model=BitcoinSettings,
    validate_address=validate_address,
    verify_signature=verify_signature,
    keys={CHAIN: KeyDerivation(PATH, "secp256k1", address_of)},
    describes={CHAIN: DESCRIPTION},
    gateways={"rpc": rpc_gateway},
)

__all__ = [
    "PATH",
    "PLUGIN",
    "BitcoinSettings",
    "address_of",
    "validate_address",
    "verify_signature",
]
