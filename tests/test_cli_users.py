"""`porpoise user` and `porpoise token` as users run them: real subprocesses against the real API
(api_cluster), and the first admin of a fresh install written straight into an empty database."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import asyncpg
import pytest

from engine.accounts.tokens import token_hash
from engine.api.tokens import token_user
from tests import tls
from tests.conftest import ApiCluster
from tests.helpers import ROOT
from tests.test_users_e2e import _http

pytestmark = pytest.mark.slow


def porpoise(c: ApiCluster | None, *args: str, stdin: str = "", token: str | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PORPOISE_")}
    if c is not None:
        env.update(PORPOISE_URL=c.url, PORPOISE_TOKEN=token or c.token, **tls.cli_env())
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        input=stdin, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip


def test_first_admin_straight_into_a_fresh_database(fresh_db: str) -> None:
    out = porpoise(None, "user", "create", "root", "--admin", "--dsn", fresh_db, "--password-stdin", "--print-token",
                   stdin="a-long-passphrase\n")  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "created admin root" and lines[1].startswith("pp_")

    async def look() -> tuple[object, str]:
        conn = await asyncpg.connect(fresh_db)
        try:
            return await token_user(conn, token_hash(lines[1])), await conn.fetchval(
                "SELECT password_hash FROM users WHERE user_name = 'root'"
            )
        finally:
            await conn.close()

    who, digest = asyncio.run(look())
    assert who is not None and who.is_admin and who.user_name == "root"  # type: ignore[attr-defined]
    assert digest.startswith("$argon2id$") and "a-long-passphrase" not in digest
    again = porpoise(None, "user", "create", "root", "--dsn", fresh_db, "--password-stdin", stdin="another-one\n")
    assert again.returncode == 1 and "already exists" in again.stderr and "Traceback" not in again.stderr
    short = porpoise(None, "user", "create", "x", "--dsn", fresh_db, "--password-stdin", stdin="short\n")
    assert short.returncode == 1 and "at least 8" in short.stderr


def test_user_and_token_commands(api_cluster: ApiCluster) -> None:
    c = api_cluster
    name = f"frank{uuid.uuid4().hex[:6]}"
    made = porpoise(c, "user", "create", name, "--password-stdin", stdin="frank-password\n")
    assert made.returncode == 0 and f"created user {name}" in made.stdout, made.stderr
    listed = json.loads(porpoise(c, "user", "list", "--json").stdout)
    assert {"name": name, "admin": False, "enabled": True}.items() <= next(
        u for u in listed if u["name"] == name
    ).items()

    reduced = json.loads(porpoise(c, "token", "create", "ro", "--user", name, "--perms", "READ", "--json").stdout)
    full = json.loads(porpoise(c, "token", "create", "cli", "--user", name, "--days", "2", "--json").stdout)
    assert reduced["perms"] == ["READ"] and full["perms"] is None
    mine = porpoise(c, "token", "list", token=full["token"])
    assert mine.returncode == 0 and "ro" in mine.stdout and "READ" in mine.stdout and "all rights" in mine.stdout
    assert full["token"] not in mine.stdout

    # a reduced token may not change the password; the full one may (old, then new password on stdin)
    refused = porpoise(c, "user", "passwd", "--password-stdin", stdin="frank-password\nnew-password\n",
                       token=reduced["token"])  # fmt: skip
    assert refused.returncode == 1 and "reduced rights" in refused.stderr
    changed = porpoise(c, "user", "passwd", "--password-stdin", stdin="frank-password\nnew-password\n",
                       token=full["token"])  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    assert _http(c, "POST", "/api/v1/login", {"user": name, "password": "new-password"})[0] == 200

    # a general user cannot list users; disabled, their tokens stop; revoked, a token stops
    denied = porpoise(c, "user", "list", token=full["token"])
    assert denied.returncode == 1 and "admin" in denied.stderr
    assert porpoise(c, "user", "disable", name).returncode == 0
    assert porpoise(c, "token", "list", token=full["token"]).returncode == 1
    assert porpoise(c, "user", "enable", name).returncode == 0
    assert porpoise(c, "token", "revoke", str(full["id"])).returncode == 0
    gone = porpoise(c, "token", "list", token=full["token"])
    assert gone.returncode == 1 and "invalid or expired" in gone.stderr
