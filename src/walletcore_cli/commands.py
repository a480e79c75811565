"""The commands other than `serve`: each builds the container from the settings, runs one
use case, and returns what is printed as JSON."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from walletcore.container import Container, check_profile, create_container
from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.times import format_datetime
from walletcore.ports import Lifecycle
from walletcore.settings import Settings


async def run(args: argparse.Namespace) -> Any:
    container = create_container()
    if args.command == "db":
        return await _db(args, container.settings())
    check_profile(container)
    try:
        return await _command(args, container)
    finally:  # this event loop ends with the command: its connections go now
        storage = container.storage()
        if isinstance(storage, Lifecycle):
            await storage.aclose()


async def _command(args: argparse.Namespace, container: Container) -> Any:
    if args.command == "clients":
        return await _clients(args, container)
    if args.command == "platform" and args.action == "provision":
        import msgspec

        from walletcore_litestar.schemas import ChainAddresses

        addresses = await container.wallets().provision_platform(args.client_id.strip().lower())
        return msgspec.to_builtins(ChainAddresses.of(addresses))
    if args.command == "sandbox" and args.action == "fund":
        return await _sandbox_fund(args, container)
    if args.command == "nonces":
        return await _nonces(args, container)
    raise AssertionError(f"unhandled command {args.command}")  # pragma: no cover


async def _clients(args: argparse.Namespace, container: Container) -> Any:
    auth = container.auth()
    if args.action == "create":
        issued = await auth.create_client(
            args.name, assets=args.assets, fee_payer=FeePayer(args.fee_payer)
        )
        print("Store the api key now: it is shown once and kept only as SHA-256.", file=sys.stderr)
        return {"clientId": issued.client.client_id, "apiKey": issued.api_key}
    if args.action == "list":
        return [_client_view(c) for c in await auth.list_clients()]
    if args.action == "disable":
        client = await auth.disable_client(args.client_id.strip().lower())
        return {"clientId": client.client_id, "disabled": client.disabled}
    if args.action == "rotate":
        issued = await auth.rotate_key(args.client_id.strip().lower())
        print("The old api key and its tokens no longer work.", file=sys.stderr)
        return {"clientId": issued.client.client_id, "apiKey": issued.api_key}
    raise AssertionError(f"unhandled action {args.action}")  # pragma: no cover


def _client_view(client: ApiClient) -> dict[str, Any]:
    return {
        "clientId": client.client_id,
        "name": client.name,
        "assets": list(client.enabled_assets),
        "feePayer": client.fee_payer.value,
        "disabled": client.disabled,
        "keyGeneration": client.key_generation,
        "createdAt": format_datetime(client.created_at) if client.created_at else None,
    }


async def _sandbox_fund(args: argparse.Namespace, container: Container) -> Any:
    from walletcore_sandbox.faucet import fund

    gateways = container.gateways()
    try:
        return await fund(
            container.settings(),
            gateways,
            chain=args.chain,
            address=args.address,
            asset_id=args.asset,
            amount=args.amount,
        )
    finally:
        for gateway in gateways.values():
            if isinstance(gateway, Lifecycle):
                await gateway.aclose()


async def _nonces(args: argparse.Namespace, container: Container) -> Any:
    from walletcore_chains.evm.gateway import EvmGateway

    name = args.chain.strip().upper()
    gateway = container.gateways().get(Chain(name)) if name in Chain.__members__ else None
    if not isinstance(gateway, EvmGateway):
        raise InvalidRequest(
            f"{args.chain} has no EVM gateway here: nonce floors are kept for ETHEREUM, BSC "
            "and POLYGON on WALLETCORE_CHAINS=rpc"
        )
    storage = container.storage()
    if isinstance(storage, Lifecycle):
        await storage.start()
    try:
        if args.action == "show":
            return await gateway.nonce_status(args.address)
        print(
            "Lowering the floor reuses nonces: do it only for a transaction the node dropped.",
            file=sys.stderr,
        )
        return await gateway.reset_nonce_floor(args.address, args.to)
    finally:
        await gateway.aclose()
        if isinstance(storage, Lifecycle):
            await storage.aclose()


async def _db(args: argparse.Namespace, settings: Settings) -> Any:
    from walletcore_sql import migrate

    url = migrate.settings_url(settings)
    if args.action == "upgrade":
        return {"revision": await migrate.upgrade_async(url)}
    return {"revision": await migrate.current_async(url), "head": migrate.head()}
