"""HD keys: one BIP39 mnemonic per wallet, one key and address per chain, as the chain's
plugin says (`walletcore.chainplugins.KeyDerivation`: path, curve, address of a public key).

| chain                      | path                | scheme                 | address            |
|----------------------------|---------------------|------------------------|--------------------|
| BITCOIN                    | m/84'/0'/0'/0/0     | BIP32 secp256k1        | bech32 P2WPKH bc1q |
| ETHEREUM, BSC, POLYGON     | m/44'/60'/0'/0/0    | BIP32 secp256k1        | EIP-55 0x...       |
| TRON                       | m/44'/195'/0'/0/0   | BIP32 secp256k1        | base58check T...   |
| SOLANA                     | m/44'/501'/0'/0'    | SLIP-0010 ed25519      | base58 pubkey      |

Libraries do the work: bitcoinlib (mnemonic), eth-account's BIP32 (`HDPath`, on
libsecp256k1 through eth-keys' coincurve backend: 28 times bitcoinlib's pure-Python curve
here, the same keys, held to the BIP32 and BIP84 vectors by the tests), solders (SLIP-0010),
and the chain plugins' (eth-keys, tronpy, solders) for addresses. Mainnet forms everywhere. Private keys
come back as `bytearray`s the caller wipes; everything else is a local variable of one call.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection, Mapping

from walletcore.chainplugins import KeyDerivation
from walletcore.domain.assets import Chain
from walletcore.domain.catalog import chain_order
from walletcore_chains import bclib, curves

MNEMONIC_WORDS = 24
ENTROPY_BYTES = 32  # 256 bits -> 24 words
SEED_BYTES = 64

#: chain -> its key derivation; by default the installed plugins'
#: (`walletcore.plugins.chain_definitions`).
Derivations = Mapping[Chain, KeyDerivation]


def derivations() -> Derivations:
    """The key derivation of every chain, from the plugins that define them."""
    from walletcore.plugins import chain_definitions

    defined = chain_definitions()
    return {chain: defined.derivation(chain) for chain in sorted(defined, key=chain_order)}


def paths(keys: Derivations | None = None) -> dict[Chain, str]:
    """The derivation path of each chain's single address."""
    return {chain: k.path for chain, k in (keys or derivations()).items()}


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


def seed_of_new_mnemonic(mnemonic: str) -> bytes:
    """`seed_from_mnemonic` of a phrase `new_mnemonic` just made: the same PBKDF2-HMAC-SHA512
    (2048 rounds, salt "mnemonic", no passphrase) without bitcoinlib's language detection
    and checksum check, which cost 30 times the PBKDF2 on every /create. Only for phrases
    this module generated (lower-case English words, single spaces): a phrase from outside
    goes through `seed_from_mnemonic`."""
    seed = hashlib.pbkdf2_hmac("sha512", mnemonic.encode("utf-8"), b"mnemonic", 2048)
    if len(seed) != SEED_BYTES:  # pragma: no cover - PBKDF2 with sha512 is 64 bytes
        raise ValueError("a BIP39 seed is 64 bytes")
    return seed


# -- keys ---------------------------------------------------------------------------------
def _derivation(chain: Chain | KeyDerivation, keys: Derivations | None) -> KeyDerivation:
    if isinstance(chain, KeyDerivation):
        return chain
    table = keys if keys is not None else derivations()
    found = table.get(Chain(chain))
    if found is None:
        raise ValueError(f"no key derivation for chain {chain}")
    return found


def derive_private_key(
    seed: bytes, chain: Chain | KeyDerivation, keys: Derivations | None = None
) -> bytearray:
    """The 32-byte private key of `chain` (secp256k1 scalar, or ed25519 seed)."""
    _check_seed(seed)
    derivation = _derivation(chain, keys)
    if derivation.curve == "ed25519":
        from solders.keypair import Keypair

        return bytearray(Keypair.from_seed_and_derivation_path(seed, derivation.path).secret())
    return bytearray(_bip32(seed, derivation.path))


def _bip32(seed: bytes, path: str) -> bytes:
    """The BIP32 secp256k1 private key at `path` (`m/...`, `'` for hardened)."""
    from eth_account.hdaccount.deterministic import HDPath

    return bytes(HDPath(path).derive(bytes(seed)))


def address_of(
    chain: Chain | KeyDerivation, private_key: bytes | bytearray, keys: Derivations | None = None
) -> str:
    """The mainnet address of `private_key` on `chain`."""
    derivation = _derivation(chain, keys)
    return derivation.address(curves.public_key(derivation.curve, private_key))


def derive_addresses(
    seed: bytes, chains: Collection[Chain], keys: Derivations | None = None
) -> dict[Chain, str]:
    """One address per chain in `chains`, in the order given. Chains on one curve and path
    (the EVM chains) share one key, derived once."""
    _check_seed(seed)
    table = keys if keys is not None else derivations()
    publics: dict[tuple[str, str], bytes] = {}
    addresses: dict[Chain, str] = {}
    for chain in chains:
        derivation = _derivation(chain, table)
        where = (derivation.curve, derivation.path)
        if where not in publics:
            key = derive_private_key(seed, derivation)
            try:
                publics[where] = curves.public_key(derivation.curve, key)
            finally:
                wipe(key)
        addresses[chain] = derivation.address(publics[where])
    return addresses


def wipe(buffer: bytearray) -> None:
    """Overwrite key material we own. Best effort: libraries keep their own copies."""
    for i in range(len(buffer)):
        buffer[i] = 0


def _check_seed(seed: bytes) -> None:
    if not isinstance(seed, (bytes, bytearray)) or len(seed) != SEED_BYTES:
        raise ValueError("a BIP39 seed is 64 bytes")
