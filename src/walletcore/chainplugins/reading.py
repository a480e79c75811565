"""Reading a chosen plugin's settings from the environment, every error naming its
variable (never its value)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from walletcore.chainplugins.env import env_name, env_names
from walletcore.chainplugins.plugin import ChainPlugin


def read_settings(plugin: ChainPlugin[Any], given: Any, problems: list[str]) -> Any:
    """The plugin's settings instance: `given` (checked to be its model's), else read from
    the environment; None without a model, or when reading fails (told in `problems`)."""
    model = plugin.settings_model
    if model is None:
        return None
    if given is not None:
        if not isinstance(given, model):
            raise TypeError(
                f"the settings given for the chain plugin {plugin.name} are a "
                f"{type(given).__name__}, not its {model.__name__}"
            )
        return given
    try:
        return model()
    except ValidationError as exc:
        problems.extend(described(plugin, exc))
        return None


def described(plugin: ChainPlugin[Any], exc: ValidationError) -> list[str]:
    """The errors of a settings model, each naming its variable (never its value)."""
    model = plugin.settings_model
    fields: dict[str, str] = {}
    if isinstance(model, type) and issubclass(model, BaseSettings):
        for field_name in model.model_fields:
            for key in (field_name, *env_names(model, field_name)):
                fields[key.lower()] = env_name(model, field_name)
    out = []
    for error in exc.errors(include_input=False, include_url=False):
        loc = error.get("loc") or ("",)
        where = fields.get(str(loc[0]).lower(), str(loc[0]).upper())
        out.append(f"{where}: {error['msg']} (chain plugin {plugin.name})")
    return out


__all__ = ["described", "read_settings"]
