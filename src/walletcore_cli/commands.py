"""The commands other than `serve`: each builds the container from the settings, runs one
use case, and returns what is printed as JSON."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from walletcore.container import Container, check_profile, create_container
from walletcore.domain.assets import Asset, Chain, FeePayer
from walletcore.domain.clients import ApiClient
from walletcore.domain.desk import DeskPause, Mismatch
from walletcore.domain.errors import (
    AddressUnknown,
    ApiClientNotFound,
    BroadcastTimeout,
    DomainError,
    InvalidRequest,
)
from walletcore.domain.ids import is_id
from walletcore.domain.money import format_balance, parse_amount, to_base_units
from walletcore.domain.policies import ApprovalStatus, Operator, Origin, WalletKind
from walletcore.domain.times import format_datetime, format_optional_datetime
from walletcore.ports import ChainGateway, Lifecycle
from walletcore.services.desk import ClientDesk, DeskAccounts
from walletcore.services.policies import (
    Policies,
    allowlist_view,
    approval_view,
    decision_view,
    overview_view,
    version_view,
)
from walletcore.services.wallet_access import platform_wallet
from walletcore.settings import Settings

#: Seconds `platform balances` waits for one chain's node before it reports that chain.
BALANCE_TIMEOUT_SECONDS = 15.0


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
    if args.command == "platform" and args.action == "balances":
        return await _platform_balances(args.client_id.strip().lower(), container)
    if args.command == "platform" and args.action == "cpfp":
        return await _platform_cpfp(args, container)
    if args.command == "sandbox" and args.action == "fund":
        return await _sandbox_fund(args, container)
    if args.command == "nonces":
        return await _nonces(args, container)
    if args.command == "sends":
        return await _sends(args, container)
    if args.command == "webhooks":
        return await _webhooks(args, container)
    if args.command == "desk":
        return await _desk(args, container)
    if args.command == "policies":
        return await _policies(args, container)
    if args.command == "operators":
        return await _operators(args, container)
    if args.command == "approvals":
        return await _approvals(args, container)
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
    if args.action == "update":
        client = await auth.update_client(
            args.client_id.strip().lower(),
            name=args.name,
            assets=args.assets,
            fee_payer=None if args.fee_payer is None else FeePayer(args.fee_payer),
            asset_fee_payers=dict(args.fee_payer_asset or []),
        )
        return _client_view(client)
    if args.action in ("disable", "enable"):
        change = auth.disable_client if args.action == "disable" else auth.enable_client
        client = await change(args.client_id.strip().lower())
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
        "assetFeePayers": {str(a): p.value for a, p in sorted(client.asset_fee_payers.items())},
        "disabled": client.disabled,
        "keyGeneration": client.key_generation,
        "createdAt": format_datetime(client.created_at) if client.created_at else None,
        # failed /auth: the run since the last successful one, its first, the latest ever
        "authFailures": client.auth_failures.count,
        "authFailuresSince": format_optional_datetime(client.auth_failures.since),
        "authFailedAt": format_optional_datetime(client.auth_failures.last_at),
    }


async def _platform_balances(client_id: str, container: Container) -> dict[str, Any]:
    """The platform wallet's native coin on every chain: the gas its PLATFORM fees are paid
    from. Every chain, whether the client has assets enabled on it or not; a chain whose
    node cannot be read shows `error` instead of `balance`, and the others still show."""
    if not is_id(client_id):
        raise ApiClientNotFound()
    async with container.storage().read() as unit:
        if await unit.clients.get(client_id) is None:
            raise ApiClientNotFound()
        wallet = await platform_wallet(unit, client_id)  # 404 until provisioned
    catalog = container.catalog()
    gateways = container.gateways()
    try:
        chains = catalog.chains
        read = [
            _native_balance(gateways.get(c), c, catalog.native_asset(c), wallet.addresses.get(c))
            for c in chains
        ]
        return dict(zip((c.value for c in chains), await asyncio.gather(*read), strict=True))
    finally:
        await _close_gateways(gateways)


async def _native_balance(
    gateway: ChainGateway | None, chain: Chain, asset: Asset, address: str | None
) -> dict[str, Any]:
    shown: dict[str, Any] = {"asset": asset.id, "symbol": asset.symbol, "address": address}
    if address is None:
        return {**shown, "error": f"the platform wallet has no {chain} address"}
    if gateway is None:
        return {**shown, "error": f"no gateway for {chain} here"}
    try:
        async with asyncio.timeout(BALANCE_TIMEOUT_SECONDS):
            units = await gateway.balance(address, asset)
    except AddressUnknown:  # a BITCOIN indexer knows no address without transactions
        units = 0
    except DomainError as exc:
        return {**shown, "error": exc.message}
    except TimeoutError:
        return {**shown, "error": f"the node did not answer within {BALANCE_TIMEOUT_SECONDS:g} s"}
    except Exception as exc:  # noqa: BLE001 - one node, whatever its driver raises
        # The type only: a driver's message may hold the node's URL, a secret.
        return {**shown, "error": f"the node could not be read ({type(exc).__name__})"}
    return {**shown, "balance": format_balance(units, asset.decimals)}


async def _platform_cpfp(args: argparse.Namespace, container: Container) -> dict[str, Any]:
    """`walletcore platform cpfp`: child pays for parent on the platform wallet's BITCOIN
    address (docs/bitcoin.md, Lifecycle). The unspent outputs of the unconfirmed parent
    that pay the platform go back to it, at the fee that brings the package to the target
    rate (`--fee-rate`, default the gateway's estimate), under the fee cap
    (`WALLETCORE_FEE_CAPS`); signed with the platform key, broadcast, audited
    (`platform.cpfp`, target the child)."""
    from walletcore.domain.ids import new_id
    from walletcore.services.transfers import Wallets, sign_transfer
    from walletcore_chains.bitcoin.chain import CHAIN as BITCOIN
    from walletcore_chains.bitcoin.gateway import BitcoinGateway

    client_id = args.client_id.strip().lower()
    storage = container.storage()
    if isinstance(storage, Lifecycle):
        await storage.start()  # the address's lease is kept in the storage
    gateways = container.gateways()
    request_id = f"operator-cpfp-{new_id()}"
    audit_id = client_id if is_id(client_id) else None  # never what an operator mistyped
    try:
        async with container.auditor().record("platform.cpfp", request_id, audit_id) as note:
            if audit_id is None:
                raise ApiClientNotFound()
            async with storage.read() as unit:
                if await unit.clients.get(client_id) is None:
                    raise ApiClientNotFound()
                wallet = await platform_wallet(unit, client_id)  # 404 until provisioned
            gateway = gateways.get(BITCOIN)
            if not isinstance(gateway, BitcoinGateway):
                raise InvalidRequest(
                    "BITCOIN has no rpc gateway here: child-pays-for-parent needs a node "
                    "(WALLETCORE_CHAINS=rpc or WALLETCORE_CHAIN_BITCOIN=rpc, docs/bitcoin.md)"
                )
            address = wallet.addresses.get(BITCOIN)
            if address is None:
                raise InvalidRequest("the platform wallet has no BITCOIN address")
            rate = args.fee_rate if args.fee_rate is not None else await gateway.fee_rate()
            cap = container.transfers().cap_units(BITCOIN)
            unsigned = await gateway.prepare_cpfp(address, args.txid, rate, cap_units=cap)
            parent = args.txid.strip().lower()  # checked by prepare_cpfp
            try:
                signed, _ = await sign_transfer(
                    container.keystore(), gateway, unsigned, Wallets(wallet), None
                )
            except BaseException:
                await gateway.release(unsigned)  # never broadcast: the address's turn back
                raise
            try:
                child = await gateway.broadcast(signed)
            except BroadcastTimeout:
                raise BroadcastTimeout(
                    f"Broadcast outcome unknown: the child {signed.tx_hash} may have reached "
                    "the network; look it up before running the command again (a second "
                    "child for the same parent is refused while the first one is known)"
                ) from None
            fee = unsigned.fee.native_units
            entry = note.entry(target=child, detail=f"parent {parent}, fee {fee}")
            async with storage.write() as unit:
                await unit.audit.append(entry)
            note.carried(entry)
            return {"parent": parent, "child": child, "feeUnits": fee, "feeRate": rate}
    finally:
        await _close_gateways(gateways)


async def _sandbox_fund(args: argparse.Namespace, container: Container) -> Any:
    from walletcore_sandbox.faucet import fund

    gateways = container.gateways()
    try:
        return await fund(
            container.settings(),
            gateways,
            container.catalog(),
            chain=args.chain,
            address=args.address,
            asset_id=args.asset,
            amount=args.amount,
        )
    finally:
        await _close_gateways(gateways)


async def _nonces(args: argparse.Namespace, container: Container) -> Any:
    from walletcore_chains.evm.gateway import EvmGateway

    try:
        chain: Chain | None = Chain(args.chain.strip().upper())
    except ValueError:
        chain = None
    gateway = None if chain is None else container.gateways().get(chain)
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


async def _sends(args: argparse.Namespace, container: Container) -> Any:
    """`walletcore sends list|show|bump|cancel` (docs/transfers.md)."""
    from walletcore.domain.ids import new_id
    from walletcore.services.transfers import describe

    storage = container.storage()
    if isinstance(storage, Lifecycle):
        await storage.start()
    if args.action == "list":
        async with storage.read() as unit:
            followed = await unit.sends.following(args.limit)
        return [
            {
                k: v
                for k, v in describe(r).items()
                if k in ("clientId", "requestId", "chain", "chainStatus", "current", "checkedAt")
            }
            for r in followed
        ]
    transfers = container.transfers()
    client_id, request_id = args.client_id.strip().lower(), args.request_id
    try:
        if args.action == "show":
            return await transfers.show(client_id, request_id)
        audit_id = f"operator-{args.action}-{new_id()}"
        if args.action == "cancel":
            print(
                "A cancel takes the transfer's place: if it is mined first, nothing is sent.",
                file=sys.stderr,
            )
        return await transfers.replace(
            client_id, request_id, cancel=args.action == "cancel", request_id_audit=audit_id
        )
    finally:
        await _close_gateways(container.gateways())


async def _webhooks(args: argparse.Namespace, container: Container) -> Any:
    """`walletcore webhooks set|rotate|pause|resume|show|deliveries|replay`
    (docs/events.md, "Webhooks")."""
    from walletcore.services.webhooks import describe

    webhooks = container.webhooks()
    client_id = args.client.strip().lower()
    now = container.clock().now
    if args.action in ("set", "rotate"):
        if args.action == "set":
            setup = await webhooks.set_url(client_id, args.url)
        else:
            setup = await webhooks.rotate(client_id)
        shown: dict[str, Any] = {"endpoint": describe(setup.endpoint, now())}
        if setup.secret is not None:
            print(
                "Hand the secret to the integrator now: it is shown once, and kept sealed.",
                file=sys.stderr,
            )
            shown["secret"] = setup.secret.text
        return shown
    if args.action in ("pause", "resume"):
        change = webhooks.pause if args.action == "pause" else webhooks.resume
        return describe(await change(client_id), now())
    if args.action == "show":
        return describe(await webhooks.show(client_id), now())
    if args.action == "replay":
        return describe(await webhooks.replay(client_id, args.from_event), now())
    found = await webhooks.deliveries(client_id, event_id=args.event, limit=args.limit)
    return [
        {
            "eventId": a.event_id,
            "attempt": a.attempt,
            "at": format_datetime(a.at),
            "status": a.status,
            "error": None if a.error is None else a.error.value,
            "result": a.result.value,
            "seconds": a.seconds,
            "nextAttemptAt": format_optional_datetime(a.next_attempt_at),
        }
        for a in found
    ]


async def _desk(args: argparse.Namespace, container: Container) -> Any:
    """`walletcore desk show|pause|resume` (docs/settlement.md, "The desk's accounting")."""
    accounts = container.desk()
    if not isinstance(accounts, DeskAccounts):
        raise InvalidRequest("Trades move no coins here (WALLETCORE_SETTLEMENT_ENABLED=false)")
    client_id = None if args.client is None else args.client.strip().lower()
    if args.action == "pause":
        assert client_id is not None
        return _pause_view(await accounts.pause(client_id, args.asset, args.reason))
    if args.action == "resume":
        assert client_id is not None
        resumed = await accounts.resume(client_id, args.asset)
        return {**_pause_view(resumed), "paused": False}
    if not 0 <= args.limit <= 1000:
        raise InvalidRequest("--limit is 0 to 1000")
    try:
        desks = await accounts.show(client_id, args.asset, recent=args.limit)
    finally:
        await _close_gateways(container.gateways())
    return [_desk_view(d, container) for d in desks]


def _desk_view(desk: ClientDesk, container: Container) -> dict[str, Any]:
    catalog = container.catalog()

    def amount(units: int, asset_id: int) -> str:
        return format_balance(units, catalog.asset_by_id(asset_id).decimals)

    def mismatch(m: Mismatch) -> dict[str, Any]:
        return {
            "kind": m.kind.value,
            "assetId": m.asset_id,
            "symbol": catalog.asset_by_id(m.asset_id).symbol,
            "tradeIds": list(m.trade_ids),
            "detail": m.detail,
            "amount": amount(m.units, m.asset_id) if m.units else None,
            "userId": m.user_id,
        }

    assets = []
    for a in desk.assets:
        assets.append(
            {
                "assetId": a.asset.id,
                "symbol": a.asset.symbol,
                "chain": a.asset.chain.value,
                "address": a.address,
                "balance": None if a.balance is None else amount(a.balance, a.asset.id),
                "balanceError": a.balance_error,
                "owed": amount(a.owed, a.asset.id),
                "inFlight": amount(a.in_flight, a.asset.id),
                "incoming": amount(a.incoming, a.asset.id),
                "short": amount(a.short, a.asset.id),
                "owedTrades": list(a.owed_trades),
                "incomingTrades": list(a.incoming_trades),
                "paused": None if a.pause is None else _pause_view(a.pause),
                "mismatches": [mismatch(m) for m in a.mismatches],
            }
        )
    return {
        "clientId": desk.client_id,
        "assets": assets,
        "pauses": [_pause_view(p) for p in desk.pauses],
        "mismatches": [mismatch(m) for m in desk.mismatches],
        "settlements": [
            {
                "tradeId": s.trade_id,
                "userId": s.user_id,
                "side": s.side.value,
                "assetId": s.asset_id,
                "symbol": catalog.asset_by_id(s.asset_id).symbol if s.asset_id in catalog else None,
                "amount": amount(s.units, s.asset_id) if s.asset_id in catalog else str(s.units),
                "status": s.status.value,
                "attempt": s.attempt,
                "transfer": s.request_id,
                "txHash": s.tx_hash,
                "reason": s.reason,
                "updatedAt": format_datetime(s.updated_at),
            }
            for s in desk.recent
        ],
    }


def _pause_view(pause: DeskPause) -> dict[str, Any]:
    return {
        "clientId": pause.client_id,
        "assetId": pause.asset_id,
        "reason": pause.reason,
        "pausedAt": format_datetime(pause.paused_at),
    }


#: Where an operator's key is read from (else a prompt on a terminal; never an argument).
OPERATOR_KEY_VARIABLE = "WALLETCORE_OPERATOR_KEY"


def _operator_key(name: str) -> str:
    """The key of the operator acting: `WALLETCORE_OPERATOR_KEY`, else asked on the
    terminal without echo. Never from argv (a shell history, a process list), never
    printed or logged."""
    key = os.environ.get(OPERATOR_KEY_VARIABLE, "")
    if key:
        return key
    if not sys.stdin.isatty():
        raise InvalidRequest(
            f"The operator key of {name} is needed: set {OPERATOR_KEY_VARIABLE}, or run the "
            "command on a terminal to be asked for it"
        )
    return getpass.getpass(f"Operator key of {name}: ")


async def _operator(policies: Policies, name: str) -> Operator:
    """The operator `name`, authenticated with their key (`OperatorRefused` otherwise)."""
    return await policies.authenticate(name, _operator_key(name))


async def _acting(policies: Policies, name: str | None) -> str:
    """Who makes a policy change: the operator named (authenticated), else `cli`."""
    return "cli" if name is None else (await _operator(policies, name)).name


def _policy_document(path: str) -> Any:
    """The JSON document of FILE (`-`: stdin); a 1 with the reason when it is none."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"Cannot read the policy document {path}: {exc}") from None
    try:
        # amounts as written (0.1 is 0.1, not the float nearest it)
        return json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"The policy document is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None


def _chain(text: str, container: Container) -> Chain:
    name = text.strip().upper()
    chains = container.catalog().chains
    if name not in {c.value for c in chains}:
        raise InvalidRequest(f"Unknown chain {text!r}: one of {', '.join(c.value for c in chains)}")
    return Chain(name)


async def _policies(args: argparse.Namespace, container: Container) -> Any:
    """`walletcore policies set|show|cancel|allow|disallow|evaluate` (docs/policies.md)."""
    policies = container.policies()
    client_id = args.client_id.strip().lower()
    if not is_id(client_id):
        raise ApiClientNotFound()
    async with container.storage().read() as unit:
        if await unit.clients.get(client_id) is None:
            raise ApiClientNotFound()
    if args.action == "show":
        return overview_view(await policies.overview(client_id))
    if args.action == "evaluate":
        return await _evaluate(args, client_id, container)
    by = await _acting(policies, args.operator)
    if args.action == "set":
        document = _policy_document(args.file)
        version = await policies.set_policy(client_id, document, set_by=by)
        return version_view(version)
    if args.action == "cancel":
        await policies.cancel_policy(client_id, args.version, by=by)
        return {"clientId": client_id, "version": args.version, "cancelled": True}
    chain = _chain(args.chain, container)
    address = container.address_validator()(chain, args.address)
    if args.action == "allow":
        entry = await policies.allow_address(
            client_id, chain, address, args.label, asset_id=args.asset, by=by
        )
        return allowlist_view(entry)
    await policies.disallow_address(client_id, chain, address, asset_id=args.asset, by=by)
    return {"chain": chain.value, "address": address, "assetId": args.asset, "removed": True}


async def _evaluate(args: argparse.Namespace, client_id: str, container: Container) -> Any:
    """`walletcore policies evaluate`: the decision, written nowhere."""
    wallet = WalletKind(args.wallet)
    if wallet is WalletKind.USER and args.user is None:
        raise InvalidRequest("--user is required with --wallet user")
    if wallet is WalletKind.PLATFORM and args.user is not None:
        raise InvalidRequest("--user goes with --wallet user only")
    default = Origin.SEND if wallet is WalletKind.USER else Origin.PLATFORM_SEND
    asset = container.catalog().asset_by_id(args.asset)
    amount = parse_amount(args.amount, asset.decimals, "--amount")
    recipient = container.address_validator()(asset.chain, args.to)
    decision, transfer = await container.policies().evaluate(
        client_id,
        wallet=wallet,
        origin=default if args.origin is None else Origin(args.origin),
        user_id=None if args.user is None else args.user.strip().lower(),
        asset=asset,
        amount_units=to_base_units(amount, asset.decimals),
        recipient=recipient,
    )
    return decision_view(decision, transfer)


async def _operators(args: argparse.Namespace, container: Container) -> Any:
    """`walletcore operators add|list|disable` (docs/policies.md, "Operators")."""
    policies = container.policies()
    if args.action == "add":
        operator, key = await policies.add_operator(args.name)
        print(
            "Hand the key to the operator now: it is shown once and kept only as SHA-256.",
            file=sys.stderr,
        )
        return {**_operator_view(operator), "key": key}
    if args.action == "disable":
        await policies.disable_operator(args.name)
        return {"name": args.name, "active": False}
    return [_operator_view(o) for o in await policies.operators()]


def _operator_view(operator: Operator) -> dict[str, Any]:
    return {
        "name": operator.name,
        "active": operator.active,
        "createdAt": format_datetime(operator.created_at),
        "disabledAt": format_optional_datetime(operator.disabled_at),
    }


async def _approvals(args: argparse.Namespace, container: Container) -> Any:
    """`walletcore approvals list|show|approve|reject` (docs/policies.md, "Approvals")."""
    policies = container.policies()
    if args.action == "list":
        if not 1 <= args.limit <= 1000:
            raise InvalidRequest("--limit is 1 to 1000")
        found = await policies.approvals(
            client_id=None if args.client is None else args.client.strip().lower(),
            statuses=None if args.status is None else frozenset({ApprovalStatus(args.status)}),
            limit=args.limit,
        )
        return [approval_view(a) for a in found]
    if args.action == "show":
        return approval_view(await policies.approval(args.approval_id.strip()))
    operator = await _operator(policies, args.operator)
    approval_id = args.approval_id.strip()
    if args.action == "approve":
        return approval_view(await policies.approve(approval_id, operator))
    return approval_view(await policies.reject(approval_id, operator, args.reason.strip()))


async def _close_gateways(gateways: Any) -> None:
    """The command's chain gateways closed (their connections, their nodes' sessions)."""
    for gateway in gateways.values():
        if isinstance(gateway, Lifecycle):
            await gateway.aclose()


async def _db(args: argparse.Namespace, settings: Settings) -> Any:
    from walletcore_sql import migrate

    url = migrate.settings_url(settings)
    if args.action == "upgrade":
        return {"revision": await migrate.upgrade_async(url)}
    return {"revision": await migrate.current_async(url), "head": migrate.head()}
