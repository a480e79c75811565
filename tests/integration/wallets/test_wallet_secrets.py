"""No secret (password, seed phrase, seed, private key, master key) in logs, reprs or the audit;
and the container wires the wallet use cases to the sealed KeyStore at full parameters."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from walletcore import Caller, Settings, create_container
from walletcore.clock import ManualClock
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.errors import DomainError, InvalidCredentials, WrongWalletPassword
from walletcore.domain.wallet import WalletOwner
from walletcore.services.wallets import WalletService
from walletcore.testing import InMemoryStorage, autocommit
from walletcore_chains import hd, sealing
from walletcore_chains.keystore import SealedKeyStore

if TYPE_CHECKING:
    from conftest import Wallets

PASSWORD = "Tr0ub4dor&3 is my wallet password"
WRONG = "Tr0ub4dor&3 is NOT my wallet password"
BTC, ETH, TRX, SOL = 1, 2, 4, 6


def _secret_forms(mnemonic: str, seed: bytes, keys: list[bytes], extra: list[bytes]) -> list[str]:
    words = mnemonic.split()
    forms = [PASSWORD, WRONG, mnemonic, seed.hex()]
    # any four consecutive words of the phrase, in case it were logged split or re-joined
    forms += [" ".join(words[i : i + 4]) for i in range(len(words) - 3)]
    forms += [k.hex() for k in keys] + [k.hex() for k in extra]
    return forms


async def test_no_secret_in_logs_reprs_or_audit(
    wallets: Wallets, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[Any] = []
    client = await wallets.client(BTC, TRX)
    caller = await wallets.caller(client)

    created = await wallets.service.create(caller, password=PASSWORD)
    seen.append(created)
    await wallets.db.clients.update(replace(client, enabled_assets=(BTC, ETH, TRX, SOL)))
    caller = await wallets.caller(client, "req-2")
    with pytest.raises(InvalidCredentials) as wrong:
        await wallets.service.extend(caller, user_id=created.user_id, password=WRONG)
    seen += [wrong.value, str(wrong.value), wrong.value.args]
    seen.append(await wallets.service.extend(caller, user_id=created.user_id, password=PASSWORD))
    seen.append(await wallets.service.addresses(caller, user_id=created.user_id))
    seen.append(await wallets.service.provision_platform(client.client_id))
    seen.append(await wallets.service.platform_addresses(caller))

    record = await wallets.db.wallets.get(client.client_id, WalletOwner.USER, created.user_id)
    platform = await wallets.db.wallets.get(client.client_id, WalletOwner.PLATFORM, None)
    assert record is not None and platform is not None
    seen += [record, platform, wallets.keystore, wallets.service, *await wallets.db.audit.newest()]
    for chain in CONTRACT_CHAINS:
        async with wallets.keystore.unseal(record.sealed, PASSWORD, chain) as signer:
            signer.sign(b"\7" * 32)
            seen.append(signer)
        seen.append(signer)
    with pytest.raises(WrongWalletPassword) as unseal_wrong:
        async with wallets.keystore.unseal(record.sealed, WRONG, Chain.SOLANA):
            pass  # pragma: no cover
    seen.append(unseal_wrong.value)

    seed = hd.seed_from_mnemonic(created.mnemonic)
    keys = [bytes(hd.derive_private_key(seed, chain)) for chain in CONTRACT_CHAINS]
    platform_seed = bytes(sealing.open_with_master_key(platform.sealed, wallets.master_key))
    platform_keys = [
        bytes(hd.derive_private_key(platform_seed, chain)) for chain in CONTRACT_CHAINS
    ]
    secrets = _secret_forms(
        created.mnemonic, seed, keys, [wallets.master_key, platform_seed, *platform_keys]
    )

    bitcoinlib_log = Path(os.environ["BCL_DATA_DIR"]) / "bitcoinlib.log"
    haystacks = {
        "logs": caplog.text + "".join(r.getMessage() + str(r.args) for r in caplog.records),
        "reprs": "\n".join(repr(o) + str(o) for o in seen),
        "bitcoinlib log": bitcoinlib_log.read_text() if bitcoinlib_log.exists() else "",
    }
    for where, text in haystacks.items():
        for secret in secrets:
            assert secret not in text, f"a secret reached the {where}"


async def test_the_container_wires_wallets_at_full_parameters(tmp_path: Path) -> None:
    clock = ManualClock()
    home = tmp_path / "home"
    container = create_container(Settings(home=home), clock=clock, storage=InMemoryStorage())
    service = container.wallets()
    assert isinstance(service, WalletService)
    keystore = container.keystore()
    assert isinstance(keystore, SealedKeyStore) and keystore.kdf == sealing.PRODUCTION_KDF
    master_file = home / "master.key"
    assert stat.S_IMODE(master_file.stat().st_mode) == 0o600

    issued = await container.auth().create_client("Acme Pay", assets=[BTC, SOL])
    caller = Caller(issued.client, "req-1")
    created = await service.create(caller, password=PASSWORD)
    assert list(created.addresses) == [Chain.BITCOIN, Chain.SOLANA]
    db = autocommit(container.storage())
    record = await db.wallets.get(issued.client.client_id, WalletOwner.USER, created.user_id)
    assert record is not None
    assert sealing.record_params(record.sealed) == sealing.PRODUCTION_KDF
    with pytest.raises(DomainError) as caught:
        await service.extend(caller, user_id=created.user_id, password=WRONG)
    assert (caught.value.status, caught.value.message) == (401, "Invalid credentials")
    assert (
        await service.extend(caller, user_id=created.user_id, password=PASSWORD)
        == created.addresses
    )
    platform = await service.provision_platform(issued.client.client_id)
    assert await service.platform_addresses(caller) == platform
