"""``porpoise secrets``: the keyring that seals credential fields at rest (engine/secretbox.py).

    porpoise secrets init --key-file F          make a keyring file with one key (0600), unless one is there
    porpoise secrets encrypt-all                 seal every secret still stored in plain text (the upgrade step;
                                                 idempotent) and re-seal any under an older key
    porpoise secrets rotate-key                  add a new primary key to the key file, then re-seal everything
                                                 under it; the old keys stay in the file (still readable)
    porpoise secrets prune-keys                  drop from the key file the keys no stored secret uses any more

They work directly against the database (``--dsn``, default: the ``database.*`` configuration) and the key file
(``--key-file``, default: ``secrets.key_file``). Run prune-keys only once every node has seen the new key:
nodes re-read their key file when it changes.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import asyncpg

from core.errors import ConfigError, PorpoiseError
from engine.config import Config
from engine.secretbox import Keyring, ensure_key_file, key_file_lines, new_key_line, write_key_file
from engine.storage.jsoncodec import register_json
from engine.storage.secret_rows import keys_in_use, reseal_all


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    opts = argparse.ArgumentParser(add_help=False, parents=[common])
    opts.add_argument("--dsn", help="PostgreSQL DSN (default: the database.* configuration)")
    opts.add_argument("--key-file", help="the keyring file (default: secrets.key_file)")
    sec = sub.add_parser("secrets", help="the keyring sealing stored credentials").add_subparsers(
        dest="action", required=True
    )
    sec.add_parser("init", parents=[opts], help="make a keyring file with one key, unless one is there")
    sec.add_parser("encrypt-all", parents=[opts], help="seal every stored secret under the primary key")
    sec.add_parser("rotate-key", parents=[opts], help="add a new primary key, re-seal every secret under it")
    sec.add_parser("prune-keys", parents=[opts], help="drop keys no stored secret uses any more")


def _key_file(args: argparse.Namespace, cfg: Config) -> Path | None:
    path = args.key_file or cfg.secrets.key_file
    return Path(path) if path else None


def _keyring(args: argparse.Namespace, cfg: Config) -> Keyring:
    path = _key_file(args, cfg)
    keyring = Keyring.from_file(path) if path else Keyring.from_config(cfg.secrets)
    if not keyring:
        raise ConfigError("secrets: no keyring (pass --key-file, or set secrets.key_file or secrets.keys)")
    return keyring


async def _with_db(args: argparse.Namespace, cfg: Config, work: Any) -> Any:
    try:
        conn = await asyncpg.connect(args.dsn or cfg.database.url(), timeout=cfg.database.connect_timeout)
        try:
            await register_json(conn)
            return await work(conn)
        finally:
            await conn.close()
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise PorpoiseError(f"database: {type(exc).__name__}: {exc}") from None


def _report(counts: dict[str, Any], keyring: Keyring) -> None:
    for table, done in counts.items():
        print(f"{table}: {done.changed} of {done.scanned} row(s) re-sealed")
    print(f"every stored secret is sealed with key {keyring.primary}")


def run(args: argparse.Namespace, cfg: Config) -> int:
    if args.action == "init":
        path = _key_file(args, cfg)
        if path is None:
            raise ConfigError("secrets init: --key-file is required (or secrets.key_file)")
        existed = path.exists()
        ensure_key_file(path)
        print(f"{path}: {'kept the existing keyring' if existed else 'new keyring with one key'}")
        return 0
    if args.action == "rotate-key":
        path = _key_file(args, cfg)
        if path is None:
            raise ConfigError("secrets rotate-key: needs a key file (--key-file or secrets.key_file)")
        lines = key_file_lines(path) if path.exists() else []
        write_key_file(path, [new_key_line(), *lines])
        print(f"{path}: new primary key added; {len(lines)} older key(s) kept")
    keyring = _keyring(args, cfg)
    if args.action in ("encrypt-all", "rotate-key"):
        _report(asyncio.run(_with_db(args, cfg, lambda c: reseal_all(c, keyring))), keyring)
        return 0
    # prune-keys
    path = _key_file(args, cfg)
    if path is None:
        raise ConfigError("secrets prune-keys: needs a key file (--key-file or secrets.key_file)")
    used = asyncio.run(_with_db(args, cfg, keys_in_use))
    if "" in used:
        raise ConfigError("secrets prune-keys: some secrets are still plain text; run `porpoise secrets encrypt-all`")
    lines = key_file_lines(path)
    kept = [line for i, line in enumerate(lines) if i == 0 or line.split(":", 1)[0] in used]
    write_key_file(path, kept)
    print(f"{path}: kept {len(kept)} key(s), dropped {len(lines) - len(kept)}")
    return 0
