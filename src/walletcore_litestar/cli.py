"""The operator CLI, console script `walletcore`.

    walletcore serve [--host 127.0.0.1] [--port 8000] [--workers N] [--server granian|uvicorn]
    walletcore clients create --name NAME [--assets 1,2,21] [--fee-payer USER|PLATFORM]
    walletcore clients list
    walletcore clients disable ID
    walletcore clients rotate ID
    walletcore platform provision --client-id ID
    walletcore db upgrade | current
    walletcore sandbox fund --chain C --address A --asset ID --amount X
    walletcore nonces show --chain C --address A
    walletcore nonces reset --chain C --address A [--to N]

Every command reads the same settings (`WALLETCORE_*`). On the sandbox profile the storage
defaults to the SQLite database under `WALLETCORE_HOME`, so a client created here authenticates
against a running `walletcore serve` at once. Results are JSON on stdout; messages go to
stderr. Exit status: 0 done, 1 refused by the core (the message says why), 2 bad usage or
configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from walletcore.domain.assets import FeePayer
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import DomainError
from walletcore.domain.times import format_datetime
from walletcore.plugins import AdapterNotFound
from walletcore.ports import Lifecycle
from walletcore.secretfiles import ConfigurationError

SANDBOX_REPO = "sql"
#: Settings, secrets or adapters that cannot run: exit status 2 with the reason.
CONFIGURATION_ERRORS = (ConfigurationError, ValidationError, AdapterNotFound)


def apply_sandbox_defaults(environ: dict[str, str] | None = None) -> None:
    """On the sandbox profile, default `WALLETCORE_REPO` to the SQL storage (a SQLite file
    under `WALLETCORE_HOME`, migrated on first use)."""
    env = os.environ if environ is None else environ
    profile = env.get("WALLETCORE_PROFILE", "sandbox").strip().lower()
    if profile == "sandbox":
        env.setdefault("WALLETCORE_REPO", SANDBOX_REPO)


def _asset_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            "assets are asset ids separated by commas, e.g. 1,2,21"
        ) from None


def _parser() -> argparse.ArgumentParser:
    from walletcore_litestar.server import SERVERS

    parser = argparse.ArgumentParser(prog="walletcore", description="walletcore operator CLI")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--server", choices=SERVERS, default="granian")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    clients = commands.add_parser("clients", help="api clients").add_subparsers(
        dest="action", required=True
    )
    create = clients.add_parser("create", help="issue a client id and api key (shown once)")
    create.add_argument("--name", required=True)
    create.add_argument(
        "--assets", type=_asset_list, default=None, help="e.g. 1,2,21 (default: all)"
    )
    create.add_argument("--fee-payer", choices=[f.value for f in FeePayer], default="USER")
    clients.add_parser("list", help="list api clients (never their keys)")
    disable = clients.add_parser("disable", help="disable a client; its tokens stop working")
    disable.add_argument("client_id", metavar="ID")
    rotate = clients.add_parser("rotate", help="re-issue the api key; the old one stops working")
    rotate.add_argument("client_id", metavar="ID")

    platform = commands.add_parser("platform", help="platform wallets").add_subparsers(
        dest="action", required=True
    )
    provision = platform.add_parser("provision", help="create the client's platform wallet")
    provision.add_argument("--client-id", required=True)

    db = commands.add_parser("db", help="database schema (the SQL storage)").add_subparsers(
        dest="action", required=True
    )
    db.add_parser("upgrade", help="apply the migrations shipped with this version")
    db.add_parser("current", help="print the schema revision of the database")

    sandbox = commands.add_parser("sandbox", help="the sandbox chains").add_subparsers(
        dest="action", required=True
    )
    faucet = sandbox.add_parser("fund", help="credit sandbox coins to an address (sandbox only)")
    faucet.add_argument("--chain", required=True, help="BITCOIN, ETHEREUM, BSC, TRON, ...")
    faucet.add_argument("--address", required=True)
    faucet.add_argument("--asset", required=True, help="asset id, e.g. 2 (ETH) or 21 (USDT)")
    faucet.add_argument("--amount", required=True, help='a decimal string, e.g. "1.5"')

    nonces = commands.add_parser(
        "nonces", help="EVM nonce floors of the rpc chains (docs/chains.md, Nonces)"
    ).add_subparsers(dest="action", required=True)
    show = nonces.add_parser("show", help="mined, pending and the stored floor of an address")
    reset = nonces.add_parser(
        "reset", help="set the stored floor (after a transaction the node dropped)"
    )
    for sub in (show, reset):
        sub.add_argument("--chain", required=True, help="ETHEREUM, BSC or POLYGON")
        sub.add_argument("--address", required=True)
    reset.add_argument(
        "--to", type=int, default=None, help="the next nonce (default: the node's pending count)"
    )
    return parser


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


def _print(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")
    sys.stdout.flush()


async def _run(args: argparse.Namespace) -> Any:
    from walletcore.container import check_profile, create_container

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


async def _command(args: argparse.Namespace, container: Any) -> Any:
    if args.command == "clients":
        auth = container.auth()
        if args.action == "create":
            issued = await auth.create_client(
                args.name, assets=args.assets, fee_payer=FeePayer(args.fee_payer)
            )
            print(
                "Store the api key now: it is shown once and kept only as SHA-256.", file=sys.stderr
            )
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
    if args.command == "platform" and args.action == "provision":
        import msgspec

        from walletcore_litestar.schemas import ChainAddresses

        addresses = await container.wallets().provision_platform(args.client_id.strip().lower())
        return msgspec.to_builtins(ChainAddresses.of(addresses))
    if args.command == "sandbox" and args.action == "fund":
        from walletcore.sandbox.faucet import fund

        return await fund(
            container.settings(),
            container.gateways(),
            chain=args.chain,
            address=args.address,
            asset_id=args.asset,
            amount=args.amount,
        )
    if args.command == "nonces":
        return await _nonces(args, container)
    raise AssertionError(f"unhandled command {args.command}")  # pragma: no cover


async def _nonces(args: argparse.Namespace, container: Any) -> Any:
    from walletcore.domain.assets import Chain
    from walletcore.domain.errors import InvalidRequest
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


async def _db(args: argparse.Namespace, settings: Any) -> Any:
    from walletcore_sql import migrate

    url = migrate.settings_url(settings)
    if args.action == "upgrade":
        return {"revision": await migrate.upgrade_async(url)}
    return {"revision": await migrate.current_async(url), "head": migrate.head()}


async def _preflight(container: Any) -> None:
    """Open the storage once before any worker starts: the sandbox migrates its SQLite file
    here; production checks the schema and refuses an unmigrated or newer one."""
    storage = container.storage()
    if isinstance(storage, Lifecycle):
        await storage.start()
        await storage.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    apply_sandbox_defaults()
    try:
        if args.command == "serve":
            return _serve(args)
        _print(asyncio.run(_run(args)))
        return 0
    except DomainError as exc:
        print(f"walletcore: {exc.message}", file=sys.stderr)
        return 1
    except CONFIGURATION_ERRORS as exc:
        print(f"walletcore: configuration error: {exc}", file=sys.stderr)
        return 2


def _serve(args: argparse.Namespace) -> int:
    from walletcore.container import check_profile, create_container
    from walletcore_litestar.server import run

    if args.workers < 1:
        print("walletcore: --workers must be at least 1", file=sys.stderr)
        return 2
    # Fail here, with a clear message, rather than in every worker.
    container = create_container()
    check_profile(container)
    container.token_key()
    asyncio.run(_preflight(container))
    run(
        host=args.host,
        port=args.port,
        workers=args.workers,
        server=args.server,
        log_level=args.log_level,
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
