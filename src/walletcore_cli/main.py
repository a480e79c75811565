"""The command line: the parser, one dispatch, JSON on stdout and the exit statuses."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from walletcore.domain.assets import FeePayer
from walletcore.domain.errors import DomainError
from walletcore.plugins import AdapterNotFound
from walletcore.secretfiles import ConfigurationError

#: Settings, secrets or adapters that cannot run: exit status 2 with the reason.
CONFIGURATION_ERRORS = (ConfigurationError, ValidationError, AdapterNotFound)
#: The ASGI servers `walletcore serve --server` runs (`walletcore_litestar.server.SERVERS`;
#: named here so that parsing a command does not import the HTTP stack).
SERVERS = ("granian", "uvicorn")


def _asset_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            "assets are asset ids separated by commas, e.g. 1,2,21"
        ) from None


def parser() -> argparse.ArgumentParser:
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


def _print(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "serve":
            from walletcore_cli.serve import serve

            return serve(args)
        from walletcore_cli.commands import run

        _print(asyncio.run(run(args)))
        return 0
    except DomainError as exc:
        print(f"walletcore: {exc.message}", file=sys.stderr)
        return 1
    except CONFIGURATION_ERRORS as exc:
        print(f"walletcore: configuration error: {exc}", file=sys.stderr)
        return 2


__all__ = ["CONFIGURATION_ERRORS", "main", "parser"]
