"""Secrets at rest: credential fields sealed with AES-256-GCM under an operator-provided keyring.

A sealed value is a string ``pps1:<key id>:<base64url(nonce + ciphertext + tag)>`` standing where the
plain value stood in a JSON document (``datasource.connection_params``, ``alert_sender.params``), so
the other fields stay readable and queryable and no column changes. The plain value is JSON-encoded
before sealing (a header mapping seals each value on its own, so the API can still show the names). The
associated data binds a ciphertext to its kind and field (``datasource.password``): a sealed password
moved into another field does not open.

The keyring is the operator's: ``secrets.key_file`` (a file, mode 0600, one ``<id>:<base64 key>`` a line,
the first line the *primary* that seals; the others only open) or ``secrets.keys`` (the same lines,
comma-separated, e.g. from ``PORPOISE_SECRETS_KEYS``). Rotation adds a new primary line, re-seals every
value (``porpoise secrets rotate-key``), and only then may the old lines go (``prune-keys``). A node
re-reads its key file when it meets a key id it does not know, so nodes need no restart after a rotation.

Who holds the keyring: the API (seals what it is given, opens alert sender params to deliver) and the
workers (open a SQL task's data source just before starting it). Masters pass sealed values through
untouched and need no key.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from core.errors import ConfigError, PorpoiseError

PREFIX = "pps1:"
MASK = "***"
#: secret fields of a data source's connection params
DATASOURCE_SECRETS = frozenset({"password", "dsn"})
#: the secret field of a project parameter (engine/api/project_params.py), sealed as ``project_parameter.value``
PROJECT_PARAM_SECRETS = frozenset({"value"})


class SecretError(PorpoiseError):
    """A sealed value could not be opened (no keyring, unknown key id, tampered or mis-bound ciphertext)."""


def is_sealed(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def key_id_of(value: str) -> str:
    return value[len(PREFIX) :].split(":", 1)[0]


def new_key_line(key_id: str | None = None) -> str:
    """A fresh keyring line: a random id (or ``key_id``) and a random 256-bit key."""
    kid = key_id or secrets.token_hex(4)
    return f"{kid}:{base64.urlsafe_b64encode(AESGCM.generate_key(bit_length=256)).decode()}"


def _parse(lines: Iterable[str], where: str) -> list[tuple[str, bytes]]:
    keys: list[tuple[str, bytes]] = []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        kid, sep, b64 = line.partition(":")
        try:
            key = base64.urlsafe_b64decode(b64.encode())
        except ValueError:
            key = b""
        if not sep or not kid or ":" in b64 or len(key) != 32:
            raise ConfigError(f"{where}: entry {n} is not '<key id>:<base64 of 32 bytes>'")
        if any(kid == k for k, _ in keys):
            raise ConfigError(f"{where}: key id {kid!r} appears twice")
        keys.append((kid, key))
    return keys


class Keyring:
    """The keys of one node. ``seal`` uses the primary; ``open`` any key by its id."""

    def __init__(self, keys: list[tuple[str, bytes]], path: Path | None = None) -> None:
        self._keys = dict(keys)
        self.primary = keys[0][0] if keys else ""
        self.path = path
        self._lock = threading.Lock()
        self._mtime = self._stat()

    @classmethod
    def from_config(cls, cfg: Any) -> Keyring:
        """From a ``SecretsConfig`` (``key_file`` wins over ``keys``); an empty keyring when neither is set."""
        if cfg.key_file:
            return cls.from_file(Path(cfg.key_file))
        if cfg.keys:
            return cls(_parse(cfg.keys.split(","), "secrets.keys"))
        return cls([])

    @classmethod
    def from_file(cls, path: Path) -> Keyring:
        try:
            mode = path.stat().st_mode
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"secrets.key_file: cannot read {path}: {exc.strerror}") from exc
        if mode & 0o077:
            raise ConfigError(f"secrets.key_file: {path} is readable by others (mode {mode & 0o777:o}); chmod 600 it")
        keys = _parse(text.splitlines(), f"secrets.key_file {path}")
        if not keys:
            raise ConfigError(f"secrets.key_file: {path} holds no key")
        return cls(keys, path)

    def __bool__(self) -> bool:
        return bool(self._keys)

    @property
    def ids(self) -> list[str]:
        return list(self._keys)

    def _stat(self) -> float:
        try:
            return self.path.stat().st_mtime if self.path else 0.0
        except OSError:
            return 0.0

    def reload(self) -> bool:
        """Re-read the key file if it changed (a rotation added a key); whether anything changed."""
        if self.path is None or self._stat() == self._mtime:
            return False
        fresh = Keyring.from_file(self.path)
        with self._lock:
            self._keys, self.primary, self._mtime = fresh._keys, fresh.primary, fresh._mtime
        return True

    def seal(self, value: Any, context: str) -> str:
        self.reload()  # a rotation may have made a new primary: seal under it at once
        if not self.primary:
            raise SecretError(
                f"{context}: no secrets key configured (secrets.key_file or secrets.keys); refusing to store it"
            )
        nonce = os.urandom(12)
        blob = AESGCM(self._keys[self.primary]).encrypt(nonce, json.dumps(value).encode(), context.encode())
        return f"{PREFIX}{self.primary}:{base64.urlsafe_b64encode(nonce + blob).decode()}"

    def open(self, sealed: str, context: str) -> Any:
        kid, _, b64 = sealed[len(PREFIX) :].partition(":")
        key = self._keys.get(kid)
        if key is None and self.reload():
            key = self._keys.get(kid)
        if key is None:
            known = ", ".join(self._keys) or "none"
            raise SecretError(f"{context}: sealed with key {kid!r}, which this node does not hold (known: {known})")
        try:
            raw = base64.urlsafe_b64decode(b64.encode())
            plain = AESGCM(key).decrypt(raw[:12], raw[12:], context.encode())
            return json.loads(plain)
        except (ValueError, InvalidTag) as exc:
            raise SecretError(f"{context}: sealed value does not open (tampered, or not of this field)") from exc


def _walk(params: Mapping[str, Any], fields: frozenset[str], kind: str, fn: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key not in fields or value in (None, ""):
            out[key] = value
        elif isinstance(value, Mapping):
            out[key] = {k: fn(v, f"{kind}.{key}.{k}") for k, v in value.items()}
        else:
            out[key] = fn(value, f"{kind}.{key}")
    return out


def seal_params(keyring: Keyring, params: Mapping[str, Any], fields: frozenset[str], kind: str) -> dict[str, Any]:
    """``params`` with every value of a secret field sealed (already sealed values kept as they are)."""
    return _walk(params, fields, kind, lambda v, ctx: v if is_sealed(v) else keyring.seal(v, ctx))


def reseal_params(keyring: Keyring, params: Mapping[str, Any], fields: frozenset[str], kind: str) -> dict[str, Any]:
    """``params`` with every secret value sealed under the primary key (plain ones sealed, others re-sealed)."""

    def fn(v: Any, ctx: str) -> Any:
        if is_sealed(v):
            if key_id_of(v) == keyring.primary:
                return v
            v = keyring.open(v, ctx)
        return keyring.seal(v, ctx)

    return _walk(params, fields, kind, fn)


def open_params(keyring: Keyring, params: Mapping[str, Any], fields: frozenset[str], kind: str) -> dict[str, Any]:
    """``params`` with every sealed value opened (plain values of a not yet upgraded row pass through)."""
    return _walk(params, fields, kind, lambda v, ctx: keyring.open(v, ctx) if is_sealed(v) else v)


def key_ids(params: Mapping[str, Any], fields: frozenset[str]) -> set[str]:
    """The key ids the sealed values of ``params`` use; ``""`` for a plain secret value."""
    found: set[str] = set()

    def note(v: Any, _: str) -> Any:
        found.add(key_id_of(v) if is_sealed(v) else "")
        return v

    _walk(params, fields, "", note)
    return found


def write_key_file(path: Path, lines: list[str]) -> None:
    """Write a keyring file atomically, readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("".join(f"{line}\n" for line in lines))
    os.chmod(tmp, 0o600)
    tmp.replace(path)


def ensure_key_file(path: Path) -> Path:
    """A keyring file with one key at ``path`` unless one is there (standalone, cluster and tests)."""
    if not path.exists():
        write_key_file(path, [new_key_line()])
    return path


def key_file_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
