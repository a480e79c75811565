"""Building the planned chains' gateways."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from walletcore.chainplugins.planning import ChainPlan
from walletcore.chainplugins.plugin import GatewayContext
from walletcore.domain.assets import Chain
from walletcore.domain.catalog import Catalog
from walletcore.ports import ChainGateway, Clock, NonceLeases
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Settings


def build_gateways(
    plan: ChainPlan,
    *,
    settings: Settings,
    clock: Clock,
    catalog: Catalog,
    nonce_leases: Callable[[], NonceLeases],
) -> dict[Chain, ChainGateway]:
    """One gateway per chain, from the chosen factories (in catalog order).

    A gateway must be built for its chain, and a gateway that follows transfers
    (`TransferFollower.resigns`) must replace them as the chain's description says
    (`replaces_by`): a disagreement is a `ConfigurationError` at start-up, not a transfer
    replaced the wrong way later."""
    scopes: dict[str, dict[str, Any]] = {}
    gateways: dict[Chain, ChainGateway] = {}
    for chain, choice in plan.choices.items():
        description = plan.definitions.description(chain)
        context: GatewayContext[Any] = GatewayContext(
            chain=chain,
            settings=plan.settings[choice.plugin.name],
            core=settings,
            clock=clock,
            catalog=catalog,
            validate_address=plan.definitions.validator(chain),
            verify_signature=plan.definitions.verifier(chain),
            keys=plan.definitions.derivation(chain),
            nonce_leases=nonce_leases,
            description=description,
            scope=scopes.setdefault(choice.plugin.name, {}),
        )
        gateway = choice.factory.build(context)
        built_for = getattr(gateway, "chain", chain)
        if built_for != chain:
            raise ConfigurationError(
                f"the chain plugin {choice.label} built a {built_for} gateway for {chain}"
            )
        resigns = getattr(gateway, "resigns", None)
        if isinstance(resigns, bool) and resigns != description.resigns:
            raise ConfigurationError(
                f"the chain plugin {choice.label} built a {chain} gateway that "
                f"{'re-signs' if resigns else 'bumps'} stuck transfers; {chain}'s description "
                f"says {description.replaces_by}"
            )
        gateways[chain] = gateway
    return gateways


__all__ = ["build_gateways"]
