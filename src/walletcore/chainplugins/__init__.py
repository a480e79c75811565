"""Chain plugins: each chain, or chain family, registered on its own (docs/chains.md,
"Writing a chain plugin").

Split by reason to change:

- the public API a plugin is written against: `ChainPlugin`, `GatewayFactory`,
  `GatewayContext`, `KeyDerivation`, `Curve` (`plugin`), the environment helpers of its
  settings (`env`), and the plugin that defines each chain (`definitions`);
- the choice of gateways: `plan_chains` picks one plugin and mode per chain and checks the
  production profile's rules (`planning`), reading the chosen plugins' settings
  (`reading`), and `build_gateways` builds them (`building`).

Every public name is importable from here. Nothing here imports a chain library.
"""

from walletcore.chainplugins.building import build_gateways
from walletcore.chainplugins.definitions import ChainDefinitions
from walletcore.chainplugins.env import env_aliases, env_name, env_names
from walletcore.chainplugins.planning import (
    SANDBOX_MODE,
    SANDBOX_PLUGIN,
    ChainChoice,
    ChainPlan,
    plan_chains,
    served_chains,
)
from walletcore.chainplugins.plugin import (
    ChainPlugin,
    Curve,
    GatewayContext,
    GatewayFactory,
    KeyDerivation,
)

__all__ = [
    "SANDBOX_MODE",
    "SANDBOX_PLUGIN",
    "ChainChoice",
    "ChainDefinitions",
    "ChainPlan",
    "ChainPlugin",
    "Curve",
    "GatewayContext",
    "GatewayFactory",
    "KeyDerivation",
    "build_gateways",
    "env_aliases",
    "env_name",
    "env_names",
    "plan_chains",
    "served_chains",
]
