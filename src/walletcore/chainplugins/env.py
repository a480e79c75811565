"""The environment variables of a chain plugin's settings, as its messages name them."""

from __future__ import annotations

from pydantic import AliasChoices
from pydantic_settings import BaseSettings


def env_names(model: type[BaseSettings], field_name: str) -> tuple[str, ...]:
    """The environment variables a settings field is read from, preferred first."""
    info = model.model_fields[field_name]
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(c).upper() for c in alias.choices if isinstance(c, str))
    if isinstance(alias, str):
        return (alias.upper(),)
    prefix = str(model.model_config.get("env_prefix", ""))
    return (f"{prefix}{field_name}".upper(),)


def env_name(model: type[BaseSettings], field_name: str) -> str:
    """A settings field as messages name it: `WALLETCORE_X (or WALLETCORE_Y)`."""
    names = env_names(model, field_name)
    return names[0] if len(names) == 1 else f"{names[0]} (or {', '.join(names[1:])})"


def env_aliases(*names: str) -> AliasChoices:
    """`validation_alias` of a plugin setting: `WALLETCORE_` + each name, preferred first
    (a new name, then the older ones it replaces)."""
    return AliasChoices(*(f"WALLETCORE_{name}" for name in names))


__all__ = ["env_aliases", "env_name", "env_names"]
