"""Operator secrets (token signing key, master key): from settings, or generated on the sandbox.

In production a missing secret is a start-up error: it is never generated there.

Also the one place that makes folders and files private: `WALLETCORE_HOME` holds sealed
seeds, key hashes, the audit log and the sandbox's secrets, so it is 0700 and what is
created in it is 0600, whatever the process's umask.
"""

from __future__ import annotations

import os
import secrets
import stat
import time
from pathlib import Path

from pydantic import SecretStr

from walletcore.settings import Profile, Settings


class ConfigurationError(RuntimeError):
    """The settings cannot run the service; the message says which and why.

    `problems` lists them one by one (one per missing or wrong setting); the message joins
    them with "; "."""

    def __init__(self, message: str = "", *, problems: list[str] | tuple[str, ...] = ()) -> None:
        self.problems: tuple[str, ...] = tuple(problems) if problems else (message,)
        super().__init__(message or "; ".join(self.problems))


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


PRIVATE_FOLDER_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_folder(path: Path) -> Path:
    """`path` as a folder only its owner can enter: created 0700 (parents as usual), or
    narrowed to 0700 if it exists with group or other bits (it holds secrets).

    A shared folder is never narrowed: one with the sticky bit (`/tmp`, where everyone
    keeps files) or one another user owns. The files created in it are still 0600."""
    path = Path(path).expanduser()
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER_MODE)
    found = path.stat()
    shared = bool(found.st_mode & stat.S_ISVTX) or (
        hasattr(os, "getuid") and found.st_uid != os.getuid()
    )
    if found.st_mode & 0o077 and not shared:
        os.chmod(path, PRIVATE_FOLDER_MODE)
    return path


def private_file(path: Path) -> Path:
    """`path` as a file only its owner can read: created empty 0600 in a private folder
    (a program that opens it later, SQLite say, keeps that mode), or narrowed to 0600."""
    path = Path(path).expanduser()
    private_folder(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return path


def _sandbox_file_secret(path: Path, env_name: str) -> bytes:
    private_folder(path.parent)
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
