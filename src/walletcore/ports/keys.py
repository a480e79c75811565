"""Ports of the keys: wallets made from fresh entropy, seeds kept sealed, and the one-chain
signer a send borrows for the length of one block."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

from walletcore.domain.assets import Chain


@dataclass(frozen=True, slots=True)
class NewWallet:
    """A freshly created wallet. `mnemonic` is shown once (user wallets) and never kept."""

    sealed: bytes = field(repr=False)
    addresses: Mapping[Chain, str]
    mnemonic: str | None = field(default=None, repr=False)


class ChainSigner(Protocol):
    """One chain's private key, alive only inside one `KeyStore.unseal` block.

    It never shows the key itself: its repr names the chain and address only, and after the
    block it is wiped and refuses to sign.
    """

    chain: Chain
    #: The address of the key on `chain`; compare it with the stored one before signing.
    address: str

    def sign(self, payload: bytes) -> bytes:
        """Sign `payload`.

        - BITCOIN, ETHEREUM, BSC, POLYGON, TRON: `payload` is a 32-byte digest (sighash,
          transaction hash); the answer is 65 bytes `r || s || recovery id`, low-S. BITCOIN
          may pass several digests back to back (one per coin the signer spends): the
          answer is one 65-byte signature per digest, in order.
        - SOLANA: `payload` is the message; the answer is the 64-byte ed25519 signature.
        """
        ...


class KeyStore(Protocol):
    """Creates wallets from fresh entropy and keeps their seeds sealed.

    User wallets are sealed under the wallet password; platform wallets under the operator
    secret (pass `password=None` to open them). A wrong password raises
    `WrongWalletPassword` before anything else happens, after the full key-derivation time.
    Adapters bound the number of unseals running at once.
    """

    async def create_wallet(self, password: str, chains: Collection[Chain]) -> NewWallet:
        """A new user wallet: mnemonic (shown once), addresses for `chains`, sealed seed."""
        ...

    async def create_platform_wallet(self, chains: Collection[Chain]) -> NewWallet:
        """A new platform wallet, sealed under the operator secret; `mnemonic` is None."""
        ...

    async def derive_addresses(
        self, sealed: bytes, password: str | None, chains: Collection[Chain]
    ) -> Mapping[Chain, str]:
        """Unseal (password for a user wallet, None for a platform wallet) and derive.

        The password is checked even when `chains` is empty.
        """
        ...

    def unseal(
        self, sealed: bytes, password: str | None, chain: Chain
    ) -> AbstractAsyncContextManager[ChainSigner]:
        """`async with keystore.unseal(sealed, password, chain) as signer:` the chain's key
        for the length of the block, wiped when it ends. The password is checked on entry."""
        ...


__all__ = ["ChainSigner", "KeyStore", "NewWallet"]
