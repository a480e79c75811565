"""Building and signing of `TronGateway`'s transfers: the transaction (and a
PLATFORM top-up before it) on the node's head block, its txID the KeyStore signs;
`assemble` puts the signatures in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from walletcore.domain.errors import TransferRejected
from walletcore.ports import FeeQuote, SignedTransfer, Transfer, UnsignedTransfer
from walletcore_chains.tron import errors, proto
from walletcore_chains.tron.gateway.base import SIGNATURE, now_ms
from walletcore_chains.tron.gateway.fees import Fees


class Building(Fees):
    """Prepare, assemble, release."""

    # -- transfers ----------------------------------------------------------------------
    async def prepare(self, transfer: Transfer, fee: FeeQuote) -> UnsignedTransfer:
        contract = self._contract_of(transfer.asset)
        sponsored = transfer.fee_payer != transfer.sender
        energy = 0 if contract is None else (fee.energy or 0)
        try:
            prices = await self.client.prices()
            if contract is not None and not energy:
                energy = await self._estimate(
                    transfer.sender, contract, transfer.recipient, transfer.amount_units
                )
            head = await self.client.head()
            cost = await self._cost(
                prices, transfer.sender, transfer.recipient, contract, transfer.amount_units, energy
            )
            topup = None
            if sponsored and cost.most > 0:
                topup = await self._cost(
                    prices, transfer.fee_payer, transfer.sender, None, cost.most, 0
                )
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        if cost.most + (topup.most if topup else 0) > fee.native_units:
            raise TransferRejected(
                "Transfer rejected: the network fee rose since the quote (bandwidth or energy "
                "used up, or the chain's prices changed); nothing was sent; request a new fee quote"
            )
        block = bytes.fromhex(head.id)
        ref_bytes, ref_hash = block[6:8], block[8:16]
        expiration = head.timestamp + self.options.expiration_seconds * 1000
        now = now_ms()
        main = self._raw(
            transfer.sender,
            transfer.recipient,
            contract,
            transfer.amount_units,
            cost.fee_limit,
            ref_bytes,
            ref_hash,
            now,
            expiration,
        ).encode()
        txs = [(transfer.sender, main)]
        if topup is not None:
            top = self._raw(
                transfer.fee_payer,
                transfer.sender,
                None,
                cost.most,
                0,
                ref_bytes,
                ref_hash,
                now,
                expiration,
            ).encode()
            txs.insert(0, (transfer.fee_payer, top))
        payloads = {signer: bytes.fromhex(proto.txid(raw)) for signer, raw in txs}
        body = json.dumps({"txs": [{"signer": s, "raw": r.hex()} for s, r in txs]}).encode()
        return UnsignedTransfer(
            transfer,
            fee,
            bytes.fromhex(proto.txid(main)),
            body,
            payloads=payloads if sponsored and topup is not None else None,
        )

    def assemble(
        self, unsigned: UnsignedTransfer, signatures: Mapping[str, bytes]
    ) -> SignedTransfer:
        txs = json.loads(unsigned.body)["txs"]
        signed = []
        for tx in txs:
            signature = signatures.get(tx["signer"])
            if signature is None or len(signature) != SIGNATURE:
                raise ValueError("one 65-byte signature per signer is needed")
            signed.append(proto.signed_bytes(bytes.fromhex(tx["raw"]), [signature]).hex())
        last = bytes.fromhex(txs[-1]["raw"])
        return SignedTransfer(json.dumps({"txs": signed}).encode(), proto.txid(last))

    async def release(self, unsigned: UnsignedTransfer) -> None:
        """Nothing reserved: TRON has no nonces (a transaction is its reference block and
        expiration)."""


__all__ = ["Building"]
