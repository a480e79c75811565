"""HD keys: one BIP39 mnemonic per wallet, one key and address per chain on the usual paths.

| chain                      | path                | scheme                 | address            |
|----------------------------|---------------------|------------------------|--------------------|
| BITCOIN                    | m/84'/0'/0'/0/0     | BIP32 secp256k1        | bech32 P2WPKH bc1q |
| ETHEREUM, BSC, POLYGON     | m/44'/60'/0'/0/0    | BIP32 secp256k1        | EIP-55 0x...       |
| TRON                       | m/44'/195'/0'/0/0   | BIP32 secp256k1        | base58check T...   |
| SOLANA                     | m/44'/501'/0'/0'    | SLIP-0010 ed25519      | base58 pubkey      |

Libraries do the work: bitcoinlib (mnemonic, BIP32, bech32), eth-account (EIP-55),
tronpy (TRON address), solders (SLIP-0010 and the Solana pubkey). Mainnet forms everywhere.
Private keys come back as `bytearray`s the caller wipes; everything else is a local variable
of one call.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Mapping
from types import MappingProxyType

from walletcore.domain.assets import Chain
from walletcore_chains import bclib

MNEMONIC_WORDS = 24
ENTROPY_BYTES = 32  # 256 bits -> 24 words
SEED_BYTES = 64

BITCOIN_PATH = "m/84'/0'/0'/0/0"
EVM_PATH = "m/44'/60'/0'/0/0"
TRON_PATH = "m/44'/195'/0'/0/0"
SOLANA_PATH = "m/44'/501'/0'/0'"

#: The derivation path of each chain's single address.
PATHS: Mapping[Chain, str] = MappingProxyType(
    {
        Chain.BITCOIN: BITCOIN_PATH,
        Chain.ETHEREUM: EVM_PATH,
        Chain.BSC: EVM_PATH,
        Chain.TRON: TRON_PATH,
        Chain.POLYGON: EVM_PATH,
        Chain.SOLANA: SOLANA_PATH,
    }
)
EVM_CHAINS = frozenset({Chain.ETHEREUM, Chain.BSC, Chain.POLYGON})
SECP256K1_CHAINS = frozenset({Chain.BITCOIN, Chain.TRON}) | EVM_CHAINS


# -- BIP39 --------------------------------------------------------------------------------
def new_mnemonic() -> str:
    """24 English words from 256 bits of fresh OS entropy."""
    return mnemonic_from_entropy(secrets.token_bytes(ENTROPY_BYTES))


def mnemonic_from_entropy(entropy: bytes) -> str:
    # check_on_curve=False: BIP39 entropy is not a key and every value of it is valid.
    words: str = bclib.mnemonic().Mnemonic().to_mnemonic(entropy, check_on_curve=False)
    return words


def seed_from_mnemonic(mnemonic: str, passphrase: str = "") -> bytes:
    """The 64-byte BIP39 seed (PBKDF2-HMAC-SHA512, 2048 rounds); the checksum is verified.

    A phrase that does not verify raises `ValueError` without bitcoinlib's message, which
    quotes the entropy (a secret) in its text.
    """
    try:
        seed: bytes = bclib.mnemonic().Mnemonic().to_seed(mnemonic, passphrase)
    except Exception:  # noqa: BLE001 - any failure; its message may quote the entropy
        raise ValueError("not a valid BIP39 mnemonic") from None
    if len(seed) != SEED_BYTES:  # pragma: no cover - PBKDF2 with sha512 is 64 bytes
        raise ValueError("a BIP39 seed is 64 bytes")
    return seed


# -- keys ---------------------------------------------------------------------------------
def derive_private_key(seed: bytes, chain: Chain) -> bytearray:
    """The 32-byte private key of `chain` (secp256k1 scalar, or ed25519 seed for SOLANA)."""
    _check_seed(seed)
    path = PATHS[chain]
    if chain is Chain.SOLANA:
        from solders.keypair import Keypair

        return bytearray(Keypair.from_seed_and_derivation_path(seed, path).secret())
    master = bclib.keys().HDKey.from_seed(seed, network="bitcoin")
    return bytearray(master.key_for_path(path).private_byte)


def address_of(chain: Chain, private_key: bytes | bytearray) -> str:
    """The mainnet address of `private_key` on `chain`."""
    key = bytes(private_key)
    if chain is Chain.BITCOIN:
        btc = bclib.keys().Key(key, network="bitcoin", compressed=True, is_private=True)
        address: str = btc.address(script_type="p2wpkh", encoding="bech32")
        return address
    if chain in EVM_CHAINS:
        from eth_account import Account

        return str(Account.from_key(key).address)
    if chain is Chain.TRON:
        from tronpy.keys import PrivateKey  # type: ignore[import-untyped]

        return str(PrivateKey(key).public_key.to_base58check_address())
    if chain is Chain.SOLANA:
        from solders.keypair import Keypair

        return str(Keypair.from_seed(key).pubkey())
    raise ValueError(f"no derivation for chain {chain}")  # pragma: no cover


def derive_addresses(seed: bytes, chains: Collection[Chain]) -> dict[Chain, str]:
    """One address per chain in `chains`, in the order given; EVM chains share one."""
    by_path: dict[str, str] = {}
    addresses: dict[Chain, str] = {}
    for chain in chains:
        path = PATHS[chain]
        if path not in by_path:
            key = derive_private_key(seed, chain)
            try:
                by_path[path] = address_of(chain, key)
            finally:
                wipe(key)
        addresses[chain] = by_path[path]
    return addresses


def wipe(buffer: bytearray) -> None:
    """Overwrite key material we own. Best effort: libraries keep their own copies."""
    for i in range(len(buffer)):
        buffer[i] = 0


def _check_seed(seed: bytes) -> None:
    if not isinstance(seed, (bytes, bytearray)) or len(seed) != SEED_BYTES:
        raise ValueError("a BIP39 seed is 64 bytes")
