"""Secrets at rest (engine/secretbox.py, engine/storage/secret_rows.py, `porpoise secrets`): credential
fields are sealed in PostgreSQL, masked by the API, opened only by the worker that runs the SQL task, and a
key rotation re-seals everything while the cluster keeps working."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest

from core.errors import ConfigError
from engine.secretbox import (
    DATASOURCE_SECRETS,
    Keyring,
    SecretError,
    is_sealed,
    key_file_lines,
    new_key_line,
    open_params,
    seal_params,
    write_key_file,
)
from engine.storage.jsoncodec import register_json
from engine.storage.secret_rows import keys_in_use, reseal_all
from tests.conftest import ApiCluster
from tests.helpers import ROOT
from tests.test_api import start, wait_final

PASSWORD_FIELDS = DATASOURCE_SECRETS


# -- the keyring alone ---------------------------------------------------------------------------------


def test_sealed_values_open_only_with_their_key_and_in_their_field(tmp_path: Path) -> None:
    ring = Keyring.from_config(type("C", (), {"key_file": "", "keys": new_key_line("k1")})())
    params = {"host": "h", "user": "u", "password": "pw-0123", "port": 5432}
    sealed = seal_params(ring, params, PASSWORD_FIELDS, "datasource")
    assert sealed["host"] == "h" and sealed["port"] == 5432 and is_sealed(sealed["password"])
    assert "pw-0123" not in json.dumps(sealed)
    assert open_params(ring, sealed, PASSWORD_FIELDS, "datasource") == params
    # the same plain value seals differently each time (random nonce)
    assert seal_params(ring, params, PASSWORD_FIELDS, "datasource")["password"] != sealed["password"]
    # moved into another field (or another kind of row), it does not open
    with pytest.raises(SecretError, match="does not open"):
        open_params(ring, {"dsn": sealed["password"]}, PASSWORD_FIELDS, "datasource")
    with pytest.raises(SecretError, match="does not open"):
        open_params(ring, sealed, frozenset({"password"}), "alert_sender")
    # tampered
    bad = sealed["password"][:-3] + ("AAA" if not sealed["password"].endswith("AAA") else "BBB")
    with pytest.raises(SecretError):
        open_params(ring, {**sealed, "password": bad}, PASSWORD_FIELDS, "datasource")
    # another keyring does not hold the key
    other = Keyring.from_config(type("C", (), {"key_file": "", "keys": new_key_line("k2")})())
    with pytest.raises(SecretError, match="'k1'"):
        open_params(other, sealed, PASSWORD_FIELDS, "datasource")
    # no keyring: nothing is stored in plain text instead
    with pytest.raises(SecretError, match="no secrets key"):
        seal_params(Keyring([]), params, PASSWORD_FIELDS, "datasource")


def test_a_key_file_is_reread_when_a_rotation_added_a_key(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    write_key_file(path, [new_key_line("old")])
    assert path.stat().st_mode & 0o777 == 0o600
    node = Keyring.from_file(path)  # a running node's keyring
    write_key_file(path, [new_key_line("new"), *key_file_lines(path)])  # what rotate-key does
    rotated = Keyring.from_file(path)
    sealed = seal_params(rotated, {"password": "x-secret"}, PASSWORD_FIELDS, "datasource")
    assert sealed["password"].startswith("pps1:new:")
    assert open_params(node, sealed, PASSWORD_FIELDS, "datasource") == {"password": "x-secret"}
    assert node.primary == "new"  # and it now seals with the new key too
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        Keyring.from_file(path)


@pytest.mark.parametrize(
    ("text", "reason"),
    [("nocolon", "is not"), ("k:c2hvcnQ=", "is not"), (f"{new_key_line('a')},{new_key_line('a')}", "twice")],
)
def test_a_bad_keyring_is_refused_naming_the_setting(text: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=f"secrets.keys.*{reason}"):
        Keyring.from_config(type("C", (), {"key_file": "", "keys": text})())


# -- the upgrade step on a database holding plain text -----------------------------------------------------


async def test_encrypt_all_seals_plain_rows_and_is_idempotent(fresh_db: str) -> None:
    ring = Keyring([("k1", b"\x01" * 32)])
    conn = await asyncpg.connect(fresh_db)
    try:
        await register_json(conn)
        await conn.execute(
            "INSERT INTO datasource (name, type, connection_params) VALUES ('old', 'POSTGRESQL', $1::jsonb)",
            json.dumps({"host": "h", "password": "plain-pw-1"}),
        )
        group = await conn.fetchval("INSERT INTO alert_group (group_name) VALUES ('g') RETURNING id")
        await conn.execute(
            "INSERT INTO alert_sender (alert_group_id, plugin_type, name, params)"
            " VALUES ($1, 'WEBHOOK', 'w', $2::jsonb)",
            group,
            json.dumps({"url": "http://x/?token=plain-tok-2", "headers": {"X-Token": "plain-tok-3"}}),
        )
        await conn.execute("INSERT INTO project (code, name) VALUES (1, 'p')")
        await conn.execute(
            "INSERT INTO project_parameter (project_code, param_name, param_value, secret)"
            " VALUES (1, 'pw', 'plain-pp-4', 1), (1, 'open', 'plain-pp-5', 0)"
        )
        assert await keys_in_use(conn) == {""}
        first = await reseal_all(conn, ring, batch=1)
        assert (first["datasource"].changed, first["alert_sender"].changed) == (1, 1)
        assert first["project_parameter"].changed == 1
        dump = json.dumps([dict(r) for r in await conn.fetch("SELECT connection_params FROM datasource")])
        dump += json.dumps([dict(r) for r in await conn.fetch("SELECT params FROM alert_sender")])
        dump += json.dumps([dict(r) for r in await conn.fetch("SELECT param_value FROM project_parameter")])
        for secret in ("plain-pw-1", "plain-tok-2", "plain-tok-3", "plain-pp-4"):
            assert secret not in dump
        assert "plain-pp-5" in dump  # not a secret
        assert await keys_in_use(conn) == {"k1"}
        again = await reseal_all(conn, ring)
        assert (again["datasource"].changed, again["alert_sender"].changed) == (0, 0)
        assert again["project_parameter"].changed == 0
    finally:
        await conn.close()


# -- end to end: API, a SQL task on a password data source, rotation ------------------------------------------


def _sql_workflow(c: ApiCluster, source: str) -> int:
    doc = {
        "name": f"secret_sql_{uuid.uuid4().hex[:8]}",
        "project": "api-tests",
        "tasks": [{"name": "q", "type": "SQL", "params": {"datasource": source, "sql": "SELECT 41 + 1 AS answer"}}],
    }
    return int(c.client().request("POST", "/api/v1/workflows", doc, query={"release": True})["code"])


def _run_ok(c: ApiCluster, code: int) -> None:
    detail = wait_final(c, start(c, code))
    assert detail["state"] == "SUCCESS", detail


def _stored(c: ApiCluster, source: str) -> dict[str, Any]:
    raw = c.query("SELECT connection_params FROM datasource WHERE name = $1", source)[0][0]
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def _cli(*args: str) -> str:
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "engine", "secrets", *args],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_a_password_data_source_is_sealed_masked_runs_and_survives_a_key_rotation(api_cluster: ApiCluster) -> None:
    c = api_cluster
    url = urlsplit(c.dsn)  # the cluster's own PostgreSQL, with password authentication
    password = url.password or ""
    assert len(password) >= 8
    source = f"pw_{uuid.uuid4().hex[:8]}"
    params = {"host": url.hostname, "port": url.port, "user": url.username, "password": password,
              "database": url.path.lstrip("/")}  # fmt: skip
    shown = c.client().request("PUT", f"/api/v1/datasources/{source}", {"params": params})
    assert shown["params"]["password"] == "***"
    listed = json.dumps(c.client().get("/api/v1/datasources", size=500))
    assert password not in listed
    stored = _stored(c, source)
    assert password not in json.dumps(stored) and is_sealed(stored["password"])
    first_key = stored["password"].split(":")[1]

    code = _sql_workflow(c, source)
    assert password not in json.dumps(c.client().get(f"/api/v1/workflows/{code}"))
    _run_ok(c, code)  # the worker opened the password: the task logged in

    out = _cli("rotate-key", "--key-file", str(c.key_file), "--dsn", c.dsn)
    assert "re-sealed" in out
    new_key = key_file_lines(c.key_file)[0].split(":")[0]
    assert new_key != first_key and len(key_file_lines(c.key_file)) >= 2
    stored = _stored(c, source)
    assert stored["password"].startswith(f"pps1:{new_key}:") and password not in json.dumps(stored)
    _run_ok(c, code)  # the running worker re-read the key file

    _cli("prune-keys", "--key-file", str(c.key_file), "--dsn", c.dsn)
    assert first_key not in {line.split(":")[0] for line in key_file_lines(c.key_file)}
    assert asyncio.run(_keys(c.dsn)) == {new_key}
    _run_ok(c, code)
    # a data source saved now is sealed with the new key by the running API
    again = f"{source}_b"
    c.client().request("PUT", f"/api/v1/datasources/{again}", {"params": params})
    assert _stored(c, again)["password"].startswith(f"pps1:{new_key}:")
    for name in (source, again):
        c.client().request("DELETE", f"/api/v1/datasources/{name}")
    # nothing in the logs either
    for node in (c.api, c.master, c.worker):
        assert password not in node.proc.log_path.read_text()


async def _keys(dsn: str) -> set[str]:
    conn = await asyncpg.connect(dsn)
    try:
        await register_json(conn)
        return await keys_in_use(conn)
    finally:
        await conn.close()
