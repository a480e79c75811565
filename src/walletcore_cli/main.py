"""The command line: the parser, one dispatch, JSON on stdout and the exit statuses."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
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


def _asset_fee_payer(text: str) -> tuple[int, FeePayer]:
    asset, _, payer = text.partition("=")
    try:
        return int(asset), FeePayer(payer.strip().upper())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected ASSET_ID=USER or ASSET_ID=PLATFORM, e.g. 21=PLATFORM"
        ) from None


def _version() -> str:
    try:
        return metadata.version("walletcore")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def _actions(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, text: str
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """A command whose actions are subcommands (`walletcore clients create ...`)."""
    group = commands.add_parser(name, help=text, description=text)
    return group.add_subparsers(dest="action", required=True, metavar="ACTION", help="one of:")


def _client_id(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("client_id", metavar="ID", help="the api client's id (clients list)")


def _operator_option(sub: argparse.ArgumentParser, *, required: bool = False) -> None:
    sub.add_argument(
        "--operator",
        required=required,
        default=None,
        metavar="NAME",
        help="the operator acting (their key: WALLETCORE_OPERATOR_KEY, else prompted on a "
        "terminal; never an argument)"
        + ("" if required else "; recorded as who made the change, else `cli`"),
    )


def _policy_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`walletcore policies|operators|approvals ...` (docs/policies.md)."""
    policies = _actions(
        commands,
        "policies",
        "withdrawal policies of an api client: set, show, cancel, the allowlist, a dry run "
        "(docs/policies.md)",
    )
    put = policies.add_parser(
        "set",
        help="set a new version of the client's policy (in force after the delay)",
        description="set a new version of the client's policy from a JSON document; it is "
        "in force after the delay of the policy it replaces (a client's first: at once)",
    )
    _client_id(put)
    put.add_argument("file", metavar="FILE", help="the policy document (JSON); - for stdin")
    _operator_option(put)
    shown = policies.add_parser(
        "show", help="the version in force, the pending versions and the allowlist"
    )
    _client_id(shown)
    cancel = policies.add_parser("cancel", help="cancel a version not yet in force")
    _client_id(cancel)
    cancel.add_argument("version", type=int, metavar="VERSION", help="the version's number")
    _operator_option(cancel)
    allow = policies.add_parser(
        "allow",
        help="add a destination to the client's allowlist (usable after the cooling-off)",
    )
    disallow = policies.add_parser(
        "disallow", help="remove a destination from the client's allowlist (at once)"
    )
    for sub in (allow, disallow):
        _client_id(sub)
        sub.add_argument("chain", metavar="CHAIN", help="BITCOIN, ETHEREUM, BSC, TRON, ...")
        sub.add_argument("address", metavar="ADDRESS", help="the destination's address")
        sub.add_argument(
            "--asset", type=int, default=None, metavar="ID", help="one asset of the chain"
        )
        if sub is allow:
            sub.add_argument("--label", required=True, help="what the destination is, 1-100 chars")
        _operator_option(sub)
    evaluate = policies.add_parser(
        "evaluate",
        help="dry run: the decision a transfer would get now (writes nothing)",
        description="dry run: the decision the client's policy would give a transfer now; "
        "writes nothing, exit status 0 whatever the decision",
    )
    _client_id(evaluate)
    evaluate.add_argument(
        "--wallet",
        required=True,
        choices=["user", "platform"],
        help="the sending wallet: a user's, or the client's platform wallet",
    )
    evaluate.add_argument(
        "--user", default=None, metavar="USER_ID", help="the sending user (with --wallet user)"
    )
    evaluate.add_argument("--asset", required=True, type=int, metavar="ID", help="the asset id")
    evaluate.add_argument("--to", required=True, metavar="ADDRESS", help="the recipient")
    evaluate.add_argument("--amount", required=True, help='a decimal string, e.g. "1.5"')
    evaluate.add_argument(
        "--origin",
        default=None,
        choices=["send", "platform_send", "delivery", "collection"],
        help="what asks for it (default: send for a user, platform_send for the platform)",
    )

    operators = _actions(
        commands, "operators", "the operators who approve held transfers (docs/policies.md)"
    )
    added = operators.add_parser("add", help="add an operator; their key is shown once")
    added.add_argument("name", metavar="NAME", help="1-64 letters, digits, '.', '_', '-'")
    operators.add_parser("list", help="the operators (never a key)")
    disabled = operators.add_parser("disable", help="disable an operator at once")
    disabled.add_argument("name", metavar="NAME", help="the operator's name")

    approvals = _actions(
        commands,
        "approvals",
        "transfers held for operators' approval: list, show, approve, reject (docs/policies.md)",
    )
    listing = approvals.add_parser("list", help="approvals, newest first")
    listing.add_argument("--client", default=None, metavar="ID", help="one api client's")
    listing.add_argument(
        "--status",
        default=None,
        choices=["pending", "approved", "rejected", "expired"],
        help="only those in this status",
    )
    listing.add_argument("--limit", type=int, default=100, help="at most this many (100)")
    one = approvals.add_parser("show", help="one approval")
    one.add_argument("approval_id", metavar="ID", help="the approval's id (apr_...)")
    approve = approvals.add_parser("approve", help="approve a held transfer as an operator")
    reject = approvals.add_parser("reject", help="reject a held transfer as an operator")
    for sub in (approve, reject):
        sub.add_argument("approval_id", metavar="ID", help="the approval's id (apr_...)")
        _operator_option(sub, required=True)
    reject.add_argument("--reason", default="", help="why (shown with the refusal)")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="walletcore",
        description="walletcore operator CLI. Results are JSON on stdout, messages on "
        "stderr; exit status 0 done, 1 refused (the message says why), 2 bad usage or "
        "configuration. Settings: the WALLETCORE_* environment (docs/operator.md).",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {_version()}",
        help="print the installed version of walletcore and exit",
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="one of:"
    )

    serve = commands.add_parser("serve", help="run the HTTP API", description="run the HTTP API")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (%(default)s)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (%(default)s)")
    serve.add_argument(
        "--server", choices=SERVERS, default="granian", help="the ASGI server (%(default)s)"
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the server's log level (%(default)s)",
    )

    worker = commands.add_parser(
        "worker",
        help="run background jobs: price refresh, trade settlement, send tracking (PostgreSQL)",
        description="run background jobs: price refresh, trade settlement, send tracking "
        "(PostgreSQL)",
    )
    worker.add_argument(
        "--concurrency", type=int, default=1, help="jobs this process runs at once (%(default)s)"
    )

    payers = [f.value for f in FeePayer]
    clients = _actions(commands, "clients", "api clients: create, change, disable, rotate keys")
    create = clients.add_parser(
        "create",
        help="issue a client id and api key (shown once)",
        description="issue a client id and api key (shown once)",
    )
    create.add_argument("--name", required=True, help="a name for the operator, 1-100 chars")
    create.add_argument(
        "--assets",
        type=_asset_list,
        default=None,
        help="enabled asset ids, e.g. 1,2,21 (default: the contract's sixteen; a chain "
        "a plugin adds is enabled only by naming its assets)",
    )
    create.add_argument(
        "--fee-payer",
        choices=payers,
        default="USER",
        help="who pays network fees (%(default)s)",
    )
    clients.add_parser("list", help="list api clients (never their keys)")
    update = clients.add_parser(
        "update",
        help="change a client's name, enabled assets or fee payers (/config shows it)",
        description="change a client's name, enabled assets or fee payers; only what is "
        "given changes. Running servers see it within WALLETCORE_CLIENT_CACHE_SECONDS.",
    )
    _client_id(update)
    update.add_argument("--name", default=None, help="a new name, 1-100 chars")
    update.add_argument(
        "--assets",
        type=_asset_list,
        default=None,
        help="the enabled asset ids, replacing the current ones, e.g. 1,2,21",
    )
    update.add_argument(
        "--fee-payer", choices=payers, default=None, help="who pays network fees by default"
    )
    update.add_argument(
        "--fee-payer-asset",
        type=_asset_fee_payer,
        action="append",
        default=None,
        metavar="ID=USER|PLATFORM",
        help="the fee payer of one asset, over --fee-payer (repeatable); "
        "ID=<the client's fee payer> removes the exception",
    )
    enable = clients.add_parser("enable", help="enable a disabled client; it can sign in again")
    _client_id(enable)
    disable = clients.add_parser("disable", help="disable a client; its tokens stop working")
    _client_id(disable)
    rotate = clients.add_parser("rotate", help="re-issue the api key; the old one stops working")
    _client_id(rotate)

    platform = _actions(commands, "platform", "platform wallets")
    provision = platform.add_parser("provision", help="create the client's platform wallet")
    provision.add_argument("--client-id", required=True, help="the api client's id")
    balances = platform.add_parser(
        "balances",
        help="the platform wallet's native coin on every chain (the gas of PLATFORM fees)",
    )
    _client_id(balances)
    cpfp = platform.add_parser(
        "cpfp",
        help="child pays for parent: speed up an unconfirmed BITCOIN transaction that pays "
        "the platform wallet (rpc chains; docs/bitcoin.md)",
        description="child pays for parent: a transaction spending the outputs of the "
        "unconfirmed parent that pay the client's platform wallet back to it, at the fee "
        "that brings the package to the target rate, under WALLETCORE_FEE_CAPS; signed with "
        "the platform key, broadcast and audited (platform.cpfp)",
    )
    _client_id(cpfp)
    cpfp.add_argument(
        "--txid", required=True, help="the unconfirmed parent transaction's id (64 hex digits)"
    )
    cpfp.add_argument(
        "--fee-rate",
        type=float,
        default=None,
        metavar="SAT_PER_VB",
        help="the package's target fee rate in sat/vB (default: the node's estimate)",
    )

    webhooks = _actions(
        commands,
        "webhooks",
        "signed webhooks of an api client: its URL, secret, deliveries (docs/events.md)",
    )
    for action, text in (
        ("set", "set the client's webhook URL (a new endpoint's secret is shown once)"),
        ("rotate", "a new secret, shown once; the old one signs too for the overlap"),
        ("pause", "hold the deliveries (events wait, none is lost)"),
        ("resume", "deliver again from where it stopped; enables an endpoint a 410 disabled"),
        ("show", "the endpoint: URL, state, cursor, next attempt (never the secret)"),
        ("deliveries", "the delivery log, newest first"),
        ("replay", "deliver again from an event on (it included)"),
    ):
        sub = webhooks.add_parser(action, help=text, description=text)
        sub.add_argument("--client", required=True, metavar="ID", help="the api client's id")
        if action == "set":
            sub.add_argument(
                "--url",
                required=True,
                help="https://... (plain http and private addresses on the sandbox only)",
            )
        elif action == "deliveries":
            sub.add_argument("--event", default=None, metavar="EVENT_ID", help="one event's")
            sub.add_argument("--limit", type=int, default=100, help="at most this many (100)")
        elif action == "replay":
            sub.add_argument(
                "--from",
                dest="from_event",
                required=True,
                metavar="EVENT_ID",
                help="the first event to deliver again (evt_...)",
            )

    desk = _actions(
        commands,
        "desk",
        "the desk's accounting: balances, what it owes and is owed, differences with the "
        "chain, paused deliveries (docs/settlement.md)",
    )
    desk_show = desk.add_parser(
        "show",
        help="per client and asset: the desk's balance, owed deliveries, incoming "
        "collections, differences, pauses, and the recent settlements",
    )
    desk_show.add_argument("--client", default=None, metavar="ID", help="one api client's")
    desk_show.add_argument("--asset", type=int, default=None, metavar="ID", help="one asset's")
    desk_show.add_argument(
        "--limit", type=int, default=20, help="recent settlements shown per client (20)"
    )
    for action, text in (
        ("pause", "pause the client's deliveries of an asset (each waits `short`)"),
        ("resume", "deliver the asset again: remove the pause, by hand or the reconciliation's"),
    ):
        sub = desk.add_parser(action, help=text, description=text)
        sub.add_argument("--client", required=True, metavar="ID", help="the api client's id")
        sub.add_argument("--asset", required=True, type=int, metavar="ID", help="the asset id")
        if action == "pause":
            sub.add_argument(
                "--reason", default=None, help="why (shown on the waiting settlements)"
            )

    _policy_commands(commands)

    db = _actions(commands, "db", "database schema (the SQL storage)")
    db.add_parser("upgrade", help="apply the migrations shipped with this version")
    db.add_parser("current", help="print the schema revision of the database")

    sandbox = _actions(commands, "sandbox", "the sandbox chains")
    faucet = sandbox.add_parser("fund", help="credit sandbox coins to an address (sandbox only)")
    faucet.add_argument("--chain", required=True, help="BITCOIN, ETHEREUM, BSC, TRON, ...")
    faucet.add_argument("--address", required=True, help="the address to credit")
    faucet.add_argument("--asset", required=True, help="asset id, e.g. 2 (ETH) or 21 (USDT)")
    faucet.add_argument("--amount", required=True, help='a decimal string, e.g. "1.5"')

    nonces = _actions(
        commands, "nonces", "EVM nonce floors of the rpc chains (docs/chains.md, Nonces)"
    )
    show = nonces.add_parser("show", help="mined, pending and the stored floor of an address")
    reset = nonces.add_parser(
        "reset", help="set the stored floor (after a transaction the node dropped)"
    )
    for sub in (show, reset):
        sub.add_argument("--chain", required=True, help="ETHEREUM, BSC or POLYGON")
        sub.add_argument("--address", required=True, help="the sending address, 0x...")
    reset.add_argument(
        "--to", type=int, default=None, help="the next nonce (default: the node's pending count)"
    )
    sends = _actions(
        commands, "sends", "transfers followed on chain: show, bump, cancel (docs/transfers.md)"
    )
    listing = sends.add_parser(
        "list", help="the sends not final on chain, least recently checked first"
    )
    listing.add_argument("--limit", type=int, default=100, help="at most this many (100)")
    for action, text in (
        ("show", "a send's transfer: status, current and earlier transactions, ladder left"),
        (
            "bump",
            (
                "broadcast the next fee bump (EVM, BITCOIN), or re-sign an expired platform "
                "send (SOLANA, TRON)"
            ),
        ),
        (
            "cancel",
            (
                "broadcast the cancel (EVM, BITCOIN), or end an expired transfer as failed "
                "(SOLANA, TRON)"
            ),
        ),
    ):
        sub = sends.add_parser(action, help=text)
        sub.add_argument("client_id", help="the api client's id")
        sub.add_argument("request_id", help="the send's X-Request-Id")
    return parser


def _print(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")
    sys.stdout.flush()


def _home() -> None:
    """Say on stderr which home the command acts on (the settings', as every process reads
    it), so a command run from another directory or environment cannot go unnoticed."""
    from walletcore.settings import Settings

    home = Path(Settings().home).expanduser().resolve()
    print(f"walletcore: home {home}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)  # --help and --version exit here
    if args.command == "clients" and args.action == "update":
        given = (args.name, args.assets, args.fee_payer, args.fee_payer_asset)
        if all(value is None for value in given):
            cli.error(
                "clients update: give at least one of --name, --assets, --fee-payer, "
                "--fee-payer-asset"
            )
    try:
        if args.command == "serve":  # it names its home itself, once its checks passed
            from walletcore_cli.serve import serve

            return serve(args)
        _home()
        if args.command == "worker":
            try:
                from walletcore_cli.worker import worker
            except ModuleNotFoundError as exc:
                if exc.name != "walletcore_cli.worker":
                    raise
                print("walletcore: worker is not part of this installation", file=sys.stderr)
                return 2
            return worker(args)
        from walletcore_cli.commands import run

        _print(asyncio.run(run(args)))
        return 0
    except DomainError as exc:
        print(f"walletcore: {exc.message}", file=sys.stderr)
        return 1
    except ConfigurationError as exc:
        problems = exc.problems
        if len(problems) == 1:
            print(f"walletcore: configuration error: {problems[0]}", file=sys.stderr)
        else:  # one line per setting to set or change
            print(f"walletcore: {len(problems)} configuration errors:", file=sys.stderr)
            for problem in problems:
                print(f"  - {problem}", file=sys.stderr)
        return 2
    except CONFIGURATION_ERRORS as exc:
        print(f"walletcore: configuration error: {exc}", file=sys.stderr)
        return 2


__all__ = ["CONFIGURATION_ERRORS", "main", "parser"]
