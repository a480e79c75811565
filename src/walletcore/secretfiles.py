"""Operator secrets (token signing key, master key): from settings, or generated on the sandbox.

In production a missing secret is a start-up error: it is never generated there.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from pydantic import SecretStr

from walletcore.settings import Profile, Settings


class ConfigurationError(RuntimeError):
    """The settings cannot run the service; the message says which and why."""


def _decode(value: str, env_name: str) -> bytes:
    try:
        raw = bytes.fromhex(value.strip())
    except ValueError:
        raise ConfigurationError(f"{env_name} must be 64 hex characters") from None
    if len(raw) != 32:
        raise ConfigurationError(f"{env_name} must be 64 hex characters")
    return raw


def operator_secret(settings: Settings, field: str, filename: str) -> bytes:
    """The 32-byte secret `field` of the settings, or the sandbox's file `home/filename`."""
    env_name = f"WALLETCORE_{field.upper()}"
    configured: SecretStr | None = getattr(settings, field)
    if configured is not None:
        return _decode(configured.get_secret_value(), env_name)
    if settings.profile is not Profile.SANDBOX:
        raise ConfigurationError(f"{env_name} is required on the {settings.profile} profile")
    return _sandbox_file_secret(settings.home / filename, env_name)


def _sandbox_file_secret(path: Path, env_name: str) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # O_EXCL: two processes starting at once agree on one secret.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # the creating process may not have written it yet
            text = path.read_text(encoding="ascii")
            if text.strip():
                break
            time.sleep(0.02)
        return _decode(text, f"{env_name} file {path}")
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    return _decode(path.read_text(encoding="ascii"), f"{env_name} file {path}")
