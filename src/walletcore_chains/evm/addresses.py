"""What every EVM chain shares: addresses (`0x` and 40 hex digits, EIP-55), keys
(`m/44'/60'/0'/0/0`, secp256k1, one address for every EVM chain), signatures
(`r || s || recovery id` over a 32-byte digest, low-S), and the web3 client of a JSON-RPC
node. Chain libraries are imported when used."""

from __future__ import annotations

import re
from typing import Any

from walletcore.domain.assets import Chain
from walletcore.domain.errors import InvalidRequest
from walletcore_chains.curves import verify_secp256k1

PATH = "m/44'/60'/0'/0/0"
_ADDRESS = re.compile(r"\A0x[0-9a-fA-F]{40}\Z")


def validate_address(chain: Chain, address: object) -> str:
    """The EIP-55 form of the address, or `InvalidRequest` saying what is wrong.
    Surrounding whitespace is ignored."""
    from eth_utils.address import to_checksum_address

    chain = Chain(chain)
    if not isinstance(address, str) or not address.strip():
        raise InvalidRequest(f"A {chain} address is required")
    text = address.strip()
    if not _ADDRESS.match(text):
        raise InvalidRequest(f"Invalid {chain} address: expected 0x and 40 hex digits")
    checksummed = str(to_checksum_address(text))
    body = text[2:]
    if body != body.lower() and body != body.upper() and text != checksummed:
        raise InvalidRequest(f"Invalid {chain} address: EIP-55 checksum mismatch")
    if int(body, 16) == 0:
        raise InvalidRequest(f"Invalid {chain} address: the zero address cannot receive funds")
    return checksummed


def address_of(public_key: bytes) -> str:
    """The EIP-55 address of a compressed public key."""
    from eth_keys.datatypes import PublicKey

    return str(PublicKey.from_compressed_bytes(bytes(public_key)).to_checksum_address())


def verify_signature(chain: Chain, address: str, payload: bytes, signature: bytes) -> bool:
    return verify_secp256k1(address_of, address, payload, signature)


def rpc_web3(
    url: str, timeout: float, chain: Chain | None = None, *, poa: bool | None = None
) -> Any:
    """An `AsyncWeb3` on a JSON-RPC endpoint: no retries of its own (a failed call is
    answered at once: 503, or an unknown broadcast outcome). On a proof-of-authority chain
    (`poa`; by default BSC and POLYGON, `POA_CHAINS`) a block's `extraData` holds the
    validator's seal (97 bytes and more), which web3 refuses (`ExtraDataLengthError`)
    unless `ExtraDataToPOAMiddleware` reads it first (layer 0)."""
    from web3 import AsyncHTTPProvider, AsyncWeb3
    from web3.middleware import ExtraDataToPOAMiddleware

    from walletcore_chains.evm.config import POA_CHAINS
    from walletcore_chains.evm.sessions import LoopSessions

    provider = AsyncHTTPProvider(
        url, request_kwargs={"timeout": timeout}, exception_retry_configuration=None
    )
    # web3's own session cache can be left locked for good by a cancelled call
    provider._request_session_manager = LoopSessions()
    w3 = AsyncWeb3(provider)
    if poa is None:
        poa = chain in POA_CHAINS
    if poa:
        w3.middleware_onion.inject(ExtraDataToPOAMiddleware, layer=0)
    return w3


__all__ = ["PATH", "address_of", "rpc_web3", "validate_address", "verify_signature"]
