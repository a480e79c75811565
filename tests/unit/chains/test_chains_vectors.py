"""HD derivation against published vectors, each checked by a second, independent computation.

Sources: BIP39 (Trezor's vectors, passphrase "TREZOR"), BIP32 test vector 1, BIP84's test
vector, SLIP-0010 ed25519 test vector 1, and the well-known addresses of the test mnemonic
"abandon ... about" on the ETH, TRON and Solana paths.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

import base58
import pytest
from eth_account import Account
from eth_account.hdaccount import key_from_seed
from eth_utils.crypto import keccak
from nacl.signing import SigningKey

from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore_chains import bclib, hd, tron
from walletcore_chains.addresses import validate_address

ABANDON = "abandon " * 11 + "about"

#: (entropy, mnemonic, seed with passphrase "TREZOR") from trezor/python-mnemonic vectors.json
TREZOR_VECTORS = [
    (
        "00000000000000000000000000000000",
        ABANDON,
        (
            "c55257c360c07c72029aebc1b53c05ed0362ada38ead3e3e9efa3708e53495531f09a6987599d18264c1"
            "e1c92f2cf141630c7a3c4ab7c81b2f001698e7463b04"
        ),
    ),
    (
        "7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f",
        "legal winner thank year wave sausage worth useful legal winner thank yellow",
        (
            "2e8905819b8723fe2c1d161860e5ee1830318dbf49a83bd451cfb8440c28bd6fa457fe1296106559a3c8"
            "0937a1c1069be3a3a5bd381ee6260e8d9739fce1f607"
        ),
    ),
    (
        "00" * 32,
        "abandon " * 23 + "art",
        (
            "bda85446c68413707090a52022edd26a1c9462295029f2e60cd7c4f2bbd3097170af7a4d73245cafa9c3"
            "cca8d561a7c3de6f5d4a10be8ed2a5e608d68f92fcc8"
        ),
    ),
    (
        "ff" * 32,
        "zoo " * 23 + "vote",
        (
            "dd48c104698c30cfe2b6142103248622fb7bb0ff692eebb00089b32d22484e1613912f0a5b694407be89"
            "9ffd31ed3992c456cdf60f5d4564b8ba3f05a69890ad"
        ),
    ),
    (
        "68a79eaca2324873eacc50cb9c6eca8cc68ea5d936f98787c60c7ebc74e6ce7c",
        (
            "hamster diagram private dutch cause delay private meat slide toddler razor book happy "
            "fancy gospel tennis maple dilemma loan word shrug inflict delay length"
        ),
        (
            "64c87cde7e12ecf6704ab95bb1408bef047c22db4cc7491c4271d170a1b213d20b385bc1588d9c7b38f1"
            "b39d415665b8a9030c9ec653d75e65f847d8fc1fc440"
        ),
    ),
]

BIP32_SEED_1 = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
BIP32_VECTOR_1 = {
    "m": "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNN"
    "U3TGtRBeJgk33yuGBxrMPHi",
    "m/0'": "xprv9uHRZZhk6KAJC1avXpDAp4MDc3sQKNxDiPvvkX8Br5ngLNv1TxvUxt4cV1rGL5hj6KCesnDYUhd7oWgT"
    "11eZG7XnxHrnYeSvkzY7d2bhkJ7",
    "m/0'/1": "xprv9wTYmMFdV23N2TdNG573QoEsfRrWKQgWeibmLntzniatZvR9BmLnvSxqu53Kw1UmYPxLgboyZQaXwTC"
    "g8MSY3H2EU4pWcQDnRnrVA1xe8fs",
}

#: SLIP-0010 ed25519 test vector 1: path -> (chain code, private key, public key)
SLIP10_VECTOR_1 = {
    (): (
        "90046a93de5380a72b5e45010748567d5ea02bbf6522f979e05c0d8d8ca9fffb",
        "2b4be7f19ee27bbf30c667b642d5f4aa69fd169872f8fc3059c08ebae2eb19e7",
        "00a4b2856bfec510abab89753fac1ac0e1112364e7d250545963f135f2a33188ed",
    ),
    (0,): (
        "8b59aa11380b624e81507a27fedda59fea6d0b779a778918a2fd3590e16e9c69",
        "68e0fe46dfb67e368c75379acec591dad19df3cde26e63b93a8e704f1dade7a3",
        "008c8a13df77a28f3445213a0f432fde644acaa215fc72dcdf300d5efaa85d350c",
    ),
}

ABANDON_ADDRESSES = {
    Chain.BITCOIN: "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu",  # BIP84 test vector
    Chain.ETHEREUM: "0x9858EfFD232B4033E47d90003D41EC34EcaEda94",
    Chain.BSC: "0x9858EfFD232B4033E47d90003D41EC34EcaEda94",
    Chain.TRON: "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH",
    Chain.POLYGON: "0x9858EfFD232B4033E47d90003D41EC34EcaEda94",
    Chain.SOLANA: "HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpqk",
}


# -- independent reference computations (standard library + primitives only) ------------
def reference_seed(mnemonic: str, passphrase: str = "") -> bytes:
    return hashlib.pbkdf2_hmac("sha512", mnemonic.encode(), b"mnemonic" + passphrase.encode(), 2048)


def reference_slip10(seed: bytes, path: tuple[int, ...]) -> tuple[bytes, bytes]:
    """SLIP-0010 ed25519 (hardened only): (private key, chain code)."""
    digest = hmac.new(b"ed25519 seed", seed, hashlib.sha512).digest()
    key, chain_code = digest[:32], digest[32:]
    for index in path:
        data = b"\0" + key + (index | 0x80000000).to_bytes(4, "big")
        digest = hmac.new(chain_code, data, hashlib.sha512).digest()
        key, chain_code = digest[:32], digest[32:]
    return key, chain_code


def reference_tron_address(private_key: bytes) -> str:
    from coincurve import PrivateKey

    public = PrivateKey(private_key).public_key.format(compressed=False)[1:]
    return base58.b58encode_check(b"\x41" + keccak(public)[-20:]).decode()


# -- BIP39 ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("entropy", "mnemonic", "seed"), TREZOR_VECTORS)
def test_bip39_trezor_vectors(entropy: str, mnemonic: str, seed: str) -> None:
    assert hd.mnemonic_from_entropy(bytes.fromhex(entropy)) == mnemonic
    assert hd.seed_from_mnemonic(mnemonic, "TREZOR").hex() == seed
    assert reference_seed(mnemonic, "TREZOR").hex() == seed


def test_new_mnemonic_is_24_words_of_fresh_entropy() -> None:
    first, second = hd.new_mnemonic(), hd.new_mnemonic()
    assert len(first.split()) == hd.MNEMONIC_WORDS == 24
    assert first != second
    assert len(hd.seed_from_mnemonic(first)) == 64  # the checksum verifies


@pytest.mark.parametrize("phrase", ["abandon " * 11 + "abandon", "abandon " * 12 + "about"])
def test_a_bad_mnemonic_is_refused_without_quoting_it(phrase: str) -> None:
    with pytest.raises(ValueError) as caught:
        hd.seed_from_mnemonic(phrase)
    assert str(caught.value) == "not a valid BIP39 mnemonic"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# -- BIP32 / BIP84 ------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "xprv"), BIP32_VECTOR_1.items())
def test_bip32_vector_1(path: str, xprv: str) -> None:
    master = bclib.keys().HDKey.from_seed(BIP32_SEED_1, witness_type="legacy")
    assert master.key_for_path(path).wif_private() == xprv


@pytest.mark.parametrize(("path", "xprv"), BIP32_VECTOR_1.items())
def test_the_bip32_derivation_hd_uses_gives_vector_1s_keys(path: str, xprv: str) -> None:
    """`hd` derives with eth-account's BIP32 (libsecp256k1): each key of vector 1 is the
    last 32 bytes of the vector's serialised private key, and bitcoinlib agrees."""
    serialised = base58.b58decode_check(xprv)
    assert hd._bip32(BIP32_SEED_1, path) == serialised[-32:]
    master = bclib.keys().HDKey.from_seed(BIP32_SEED_1, witness_type="legacy")
    assert hd._bip32(BIP32_SEED_1, path) == master.key_for_path(path).private_byte


def test_hd_keys_agree_with_bitcoinlib_on_every_secp256k1_path() -> None:
    for _ in range(5):
        seed = secrets.token_bytes(64)
        master = bclib.keys().HDKey.from_seed(seed, network="bitcoin")
        for chain in (Chain.BITCOIN, Chain.ETHEREUM, Chain.TRON):
            path = hd.paths()[chain]
            assert (
                bytes(hd.derive_private_key(seed, chain)) == master.key_for_path(path).private_byte
            )


def test_bip32_vector_1_master_by_hand() -> None:
    digest = hmac.new(b"Bitcoin seed", BIP32_SEED_1, hashlib.sha512).digest()
    serialised = bytes.fromhex("0488ade4") + b"\0" * 9 + digest[32:] + b"\0" + digest[:32]
    assert base58.b58encode_check(serialised).decode() == BIP32_VECTOR_1["m"]


def test_bip84_vector() -> None:
    seed = hd.seed_from_mnemonic(ABANDON)
    assert hd.derive_addresses(seed, [Chain.BITCOIN]) == {
        Chain.BITCOIN: ABANDON_ADDRESSES[Chain.BITCOIN]
    }
    # BIP84 lists the next receive address and the first change address too.
    master = bclib.keys().HDKey.from_seed(seed)
    assert master.key_for_path("m/84'/0'/0'/0/1").address() == (
        "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g"
    )
    assert master.key_for_path("m/84'/0'/0'/1/0").address() == (
        "bc1q8c6fshw2dlwun7ekn9qwf37cu2rn755upcp6el"
    )


# -- SLIP-0010 ------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "expected"), SLIP10_VECTOR_1.items())
def test_slip10_ed25519_vector_1(path: tuple[int, ...], expected: tuple[str, str, str]) -> None:
    chain_code, private, public = expected
    key, code = reference_slip10(BIP32_SEED_1, path)
    assert (code.hex(), key.hex()) == (chain_code, private)
    assert "00" + SigningKey(key).verify_key.encode().hex() == public


@pytest.mark.parametrize("path", [(0,), (44, 501, 0, 0), (44, 501, 7, 0), (1, 2, 3)])
def test_solders_agrees_with_the_slip10_reference(path: tuple[int, ...]) -> None:
    """solders (what production uses) needs a 64-byte seed, so vector 1 runs on the reference
    above and solders is held to the reference on 64-byte seeds."""
    from solders.keypair import Keypair

    for seed in (secrets.token_bytes(64), hd.seed_from_mnemonic(ABANDON)):
        text = "m/" + "/".join(f"{i}'" for i in path)
        assert (
            Keypair.from_seed_and_derivation_path(seed, text).secret()
            == (reference_slip10(seed, path)[0])
        )


# -- the standard test mnemonic on every chain -------------------------------------------
def test_abandon_mnemonic_addresses_on_every_chain() -> None:
    seed = hd.seed_from_mnemonic(ABANDON)
    assert seed == reference_seed(ABANDON)
    assert hd.derive_addresses(seed, list(CONTRACT_CHAINS)) == ABANDON_ADDRESSES


def test_abandon_mnemonic_addresses_by_independent_computations() -> None:
    seed = reference_seed(ABANDON)
    Account.enable_unaudited_hdwallet_features()
    assert Account.from_mnemonic(ABANDON).address == ABANDON_ADDRESSES[Chain.ETHEREUM]
    tron_key = key_from_seed(seed, tron.PATH)
    assert reference_tron_address(tron_key) == ABANDON_ADDRESSES[Chain.TRON]
    solana_key, _ = reference_slip10(seed, (44, 501, 0, 0))
    public = SigningKey(solana_key).verify_key.encode()
    assert base58.b58encode(public).decode() == ABANDON_ADDRESSES[Chain.SOLANA]


@pytest.mark.parametrize("chain", [Chain.BITCOIN, Chain.ETHEREUM, Chain.TRON])
def test_secp256k1_keys_agree_between_bitcoinlib_and_eth_account(chain: Chain) -> None:
    seed = secrets.token_bytes(64)
    assert bytes(hd.derive_private_key(seed, chain)) == key_from_seed(seed, hd.paths()[chain])


def test_evm_chains_share_one_address() -> None:
    addresses = hd.derive_addresses(secrets.token_bytes(64), list(CONTRACT_CHAINS))
    assert addresses[Chain.ETHEREUM] == addresses[Chain.BSC] == addresses[Chain.POLYGON]


def test_derived_addresses_pass_validation_unchanged() -> None:
    for _ in range(5):
        addresses = hd.derive_addresses(secrets.token_bytes(64), list(CONTRACT_CHAINS))
        for chain, address in addresses.items():
            assert validate_address(chain, address) == address


def test_paths_are_the_standard_ones() -> None:
    contract = {c: p for c, p in hd.paths().items() if c in CONTRACT_CHAINS}  # + plugins'
    assert contract == {
        Chain.BITCOIN: "m/84'/0'/0'/0/0",
        Chain.ETHEREUM: "m/44'/60'/0'/0/0",
        Chain.BSC: "m/44'/60'/0'/0/0",
        Chain.TRON: "m/44'/195'/0'/0/0",
        Chain.POLYGON: "m/44'/60'/0'/0/0",
        Chain.SOLANA: "m/44'/501'/0'/0'",
    }


def test_a_seed_must_be_64_bytes() -> None:
    with pytest.raises(ValueError):
        hd.derive_private_key(b"\1" * 32, Chain.ETHEREUM)


def test_the_seed_of_a_new_mnemonic_is_its_bip39_seed() -> None:
    """/create's shortcut (PBKDF2 alone) gives the seed the full BIP39 path gives."""
    for _ in range(20):
        mnemonic = hd.new_mnemonic()
        assert hd.seed_of_new_mnemonic(mnemonic) == hd.seed_from_mnemonic(mnemonic)
