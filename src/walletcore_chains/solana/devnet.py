"""The devnet Solana chain: a LiteSVM runtime in-process, with the asset table's SPL mints
created at start-up and a faucet (a funded keypair of the devnet, never a wallet's key).
Its transactions land at once and are finalized at once (`LiteSvmNode.finality_slots`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from solders.keypair import Keypair
from solders.message import Message
from solders.pubkey import Pubkey
from solders.system_program import (
    CreateAccountParams,
    TransferParams,
    create_account,
    transfer,
)
from solders.transaction import Transaction
from spl.token.constants import TOKEN_PROGRAM_ID
from spl.token.instructions import (
    create_idempotent_associated_token_account,
    get_associated_token_address,
    initialize_mint,
    mint_to,
)
from spl.token.models import InitializeMintParams, MintToParams

from walletcore.domain.assets import CONTRACT_ASSETS, Asset, Chain
from walletcore.domain.errors import InvalidRequest
from walletcore.ports import AddressValidator
from walletcore_chains.solana.gateway import SolanaGateway
from walletcore_chains.solana.node import LiteSvmNode

MINT_SIZE = 82
FAUCET_LAMPORTS = 10**13  # 10,000 SOL


class DevnetSolanaGateway(SolanaGateway):
    node: LiteSvmNode

    def __init__(
        self, validator: AddressValidator, assets: Iterable[Asset] | None = None, **options: Any
    ) -> None:
        """`assets`: SOLANA's served assets (its factory passes the catalog's), whose
        mints are created, by default the contract's; `options`: `SolanaGateway`'s
        (commitment, compute-unit prices, ...)."""
        node = LiteSvmNode()
        self._faucet = Keypair()
        node.svm.airdrop(self._faucet.pubkey(), FAUCET_LAMPORTS)
        mints = {
            asset.id: self._create_mint(node, asset)
            for asset in (CONTRACT_ASSETS if assets is None else assets)
            if asset.chain == Chain.SOLANA and not asset.is_native
        }
        super().__init__(node, validator, mints, **options)

    def __repr__(self) -> str:
        return "DevnetSolanaGateway()"

    def _run(self, node: LiteSvmNode, instructions: list, *extra: Keypair) -> str:  # type: ignore[type-arg]
        blockhash, _ = node.latest_blockhash_now()
        message = Message.new_with_blockhash(instructions, self._faucet.pubkey(), blockhash)
        return node.execute(Transaction([self._faucet, *extra], message, message.recent_blockhash))

    def _create_mint(self, node: LiteSvmNode, asset: Asset) -> Pubkey:
        mint = Keypair()
        rent = int(node.svm.minimum_balance_for_rent_exemption(MINT_SIZE))
        create = CreateAccountParams(
            from_pubkey=self._faucet.pubkey(),
            to_pubkey=mint.pubkey(),
            lamports=rent,
            space=MINT_SIZE,
            owner=TOKEN_PROGRAM_ID,
        )
        init = InitializeMintParams(
            decimals=asset.decimals,
            program_id=TOKEN_PROGRAM_ID,
            mint=mint.pubkey(),
            mint_authority=self._faucet.pubkey(),
        )
        self._run(node, [create_account(create), initialize_mint(init)], mint)
        return mint.pubkey()

    async def fund(self, address: str, asset: Asset, units: int) -> int:
        """Pay `units` of `asset` to `address` from the faucet (lands at once); the new
        balance."""
        if asset.chain != self.chain:
            raise InvalidRequest(f"asset {asset.id} is not on {self.chain}")
        if units <= 0:
            raise InvalidRequest("amount must be greater than zero")
        owner = Pubkey.from_string(self.validate_address(address))
        faucet = self._faucet.pubkey()
        if asset.is_native:
            params = TransferParams(from_pubkey=faucet, to_pubkey=owner, lamports=units)
            self._run(self.node, [transfer(params)])
        else:
            mint = self.mint(asset)
            params_ = MintToParams(
                program_id=TOKEN_PROGRAM_ID,
                mint=mint,
                dest=get_associated_token_address(owner, mint),
                mint_authority=faucet,
                amount=units,
            )
            ata = create_idempotent_associated_token_account(faucet, owner, mint)
            self._run(self.node, [ata, mint_to(params_)])
        return await self.balance(str(owner), asset)


__all__ = ["DevnetSolanaGateway"]
