"""Versioned migrations against real databases.

- A database made and filled by the first release's own code (66d9067, run from ``git archive``: its
  master, worker and API ran a workflow, queued a command and stored a schedule) goes through ``porpoise
  db upgrade``: every row is still there, and today's nodes, logged in as the runtime role, accept the
  old admin's old token, show the old workflow in its project and run the queued command.
- A database built by migrating from 0001 has the same catalog as one made by ``porpoise db init``.
- A database made by the code between that release and versioned migrations (its whole-file schema.sql
  applied at every node start, ``schema_digest`` rows) upgrades to the same catalog and keeps its data;
  one of the private launcher before database roles (everything the superuser's) is handed to the owner.
- ``porpoise db version|init|upgrade`` and the first admin (``porpoise user create --admin --dsn``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from engine.client import ApiClient, Target
from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from engine.infra.postgres import OWNER_ROLE, RUNTIME_ROLE, PostgresServer
from engine.infra.process import ManagedProcess
from engine.storage.schema import head, migrations, upgrade
from tests import databases, tls
from tests.databases import EmptyDb
from tests.helpers import ROOT, TEST_SECRET, NodeProc, http_json, node_env, wait_sync
from tests.schema_catalog import differences, snapshot

#: the first released schema: migration 0001 is its schema.sql, verbatim
FIRST_RELEASE = "66d9067"
#: main just before versioned migrations (the hand-written, idempotent schema.sql every node applied) and
#: an older one, from before users and grants
LEGACY = ("e6ecfb3", "49f4bc1")

#: the nodes claim and take work however loaded the shared test machine is (the guard is another test's subject)
NO_LOAD_GUARD = {"PORPOISE_MASTER_MAX_CPU_LOAD_AVG": "100000", "PORPOISE_WORKER_MAX_CPU_LOAD_AVG": "100000"}

WORKFLOW = """\
name: old_pipeline
project: default
tasks:
  - name: first
    type: SHELL
    params: {rawScript: "echo first"}
  - name: second
    type: SHELL
    upstream: [first]
    params: {rawScript: "echo second"}
"""


def git_show(commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def test_migration_0001_is_the_first_release_s_schema() -> None:
    first, released = migrations()[0].sql, git_show(FIRST_RELEASE, "schema.sql")
    header, body = first[: -len(released)], first[-len(released) :]
    assert body == released
    assert all(line.startswith("--") or not line for line in header.splitlines())  # comments only


async def _rows(dsn: str, tables: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table (or of ``tables``), in primary-key order."""
    conn = await asyncpg.connect(dsn)
    try:
        names = tables or [
            r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ]
        out = {}
        for name in names:
            out[name] = [dict(r) for r in await conn.fetch(f"SELECT * FROM {name} ORDER BY 1, 2")]
        return out
    finally:
        await conn.close()


#: what migration 0002 changes on purpose: an ownerless project gets the first admin as its owner
CHANGED = {"project": {"user_id"}}
#: columns a migration drops on purpose (none yet: a column an older release writes is dropped a release later)
DROPPED: dict[str, set[str]] = {}


def _kept(before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]]) -> None:
    """Every row of ``before`` is in ``after`` with the same values (columns added since, CHANGED and DROPPED aside),
    and no other row (schema_version aside: a row per migration; schema_digest: dropped on purpose)."""
    for table, rows in before.items():
        if table in ("schema_digest", "schema_version"):
            continue
        skipped = CHANGED.get(table, set()) | DROPPED.get(table, set())
        columns = [k for k in (rows[0] if rows else {}) if k not in skipped]
        got = [{k: row[k] for k in columns} for row in after[table]]
        assert got == [{k: row[k] for k in columns} for row in rows], f"{table}: rows changed by the upgrade"


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first release's source tree (its nodes run from there: ``python -m engine.<role>``, cwd = it)."""
    tree = tmp_path_factory.mktemp("first-release")
    archive = subprocess.run(["git", "archive", FIRST_RELEASE], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    # its own package metadata, first on its processes' path (cwd): the plugin entry points of that release,
    # not those of the editable install of today's code (which names modules that release does not have)
    project = tomllib.loads((tree / "pyproject.toml").read_text())["project"]
    info = tree / f"porpoise_scheduler-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = project["entry-points"]
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for group, eps in groups.items()
        )
    )
    return tree


class OldRelease:
    """Nodes and commands of the first release, on one database (its schema applied by its own nodes, as
    that release did: one role for everything)."""

    def __init__(self, tree: Path, dsn: str, etcd: str, logs: Path) -> None:
        self.tree, self.dsn, self.logs = tree, dsn, logs
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PORPOISE_")}
        self.env.update(
            {
                "PORPOISE_REGISTRY_ENDPOINTS": etcd,
                "PORPOISE_REGISTRY_ROOT": f"/old-{uuid.uuid4().hex[:8]}",
                "PORPOISE_REGISTRY_LEASE_TTL": "3",
                "PORPOISE_RPC_SECRET": TEST_SECRET,
                "PORPOISE_DATABASE_DSN": dsn,
                "PYTHONUNBUFFERED": "1",
                **NO_LOAD_GUARD,
            }
        )
        self.procs: list[ManagedProcess] = []
        self.api = ""

    def python(self, code: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=self.tree, env=self.env, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip()

    def cli(self, token: str, *args: str) -> str:
        env = {**self.env, "PORPOISE_URL": self.api, "PORPOISE_TOKEN": token}
        done = subprocess.run(
            [sys.executable, "-m", "engine", *args], cwd=self.tree, env=env, capture_output=True, text=True,
            timeout=180, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done.stdout

    def start(self, role: str, *overrides: str) -> ManagedProcess:
        port = free_port()
        argv = [sys.executable, "-m", f"engine.{role}", "--set", f"{role}.listen_port={port}"]
        if role != "api":
            argv += ["--set", f"{role}.advertise_host=127.0.0.1"]
        for item in overrides:
            argv += ["--set", item]
        proc = ManagedProcess(f"old-{role}", argv, self.logs / f"old-{role}-{port}.log", env=self.env, cwd=self.tree)
        self.procs.append(proc)
        proc.start()

        def healthy() -> bool:
            if proc.exited() is not None:
                raise AssertionError(f"old {role} exited with {proc.exited()}:\n{proc.tail(40)}")
            try:
                return http_json(f"http://127.0.0.1:{port}/health")[0] == 200
            except OSError:
                return False

        wait_sync(healthy, 60, what=f"old {role} healthy")
        if role == "api":
            self.api = f"http://127.0.0.1:{port}"
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop(15)
        self.procs = []


_OLD_ADMIN = """
import asyncio, asyncpg
from engine.storage.schema import apply_schema
from engine.api.tokens import create_token, ensure_user

async def main():
    await apply_schema({dsn!r})
    conn = await asyncpg.connect({dsn!r})
    try:
        print((await create_token(conn, await ensure_user(conn), "old-cli"))[1])
    finally:
        await conn.close()

asyncio.run(main())
"""


@pytest.fixture
def old_release(old_tree: Path, empty_db: EmptyDb, workdir: Path) -> Iterator[OldRelease]:
    # The first release knows no TLS (neither for etcd nor between its nodes): whatever the suite's
    # PORPOISE_TEST_TLS says, its nodes run in plain HTTP on a plain etcd of their own. Today's nodes, later in
    # the test, run as the suite says (mutual TLS, the API over HTTPS, etcd with TLS and auth when it is on).
    name = f"old-etcd-{uuid.uuid4().hex[:6]}"
    etcd = EtcdServer(workdir / name, free_port(), free_port(), workdir / "logs" / f"{name}.log")
    etcd.start()
    old = OldRelease(old_tree, empty_db.owner, etcd.endpoint, workdir / "logs")
    try:
        yield old
    finally:
        old.stop()
        etcd.stop()


def test_first_release_database_upgrades_and_keeps_working(
    old_release: OldRelease, empty_db: EmptyDb, etcd_server: EtcdServer, etcd_root: str, workdir: Path, tmp_path: Path
) -> None:
    old = old_release
    # the first release: its admin and token, its nodes, a workflow run to its end, a schedule, a queued command
    token = old.python(_OLD_ADMIN.format(dsn=old.dsn)).splitlines()[-1]
    old.start("master")
    old.start("worker", f"worker.log_dir={tmp_path / 'old-logs'}", f"worker.exec_dir={tmp_path / 'old-exec'}")
    old.start("api")
    spec = tmp_path / "old_pipeline.yaml"
    spec.write_text(WORKFLOW)
    old.cli(token, "apply", str(spec))
    old.cli(token, "start", "old_pipeline", "--watch")
    client = ApiClient(Target(old.api, token, "old"))
    code = client.get("/api/v1/workflows")["items"][0]["code"]
    client.post("/api/v1/schedules", {"workflow_code": code, "crontab": "0 0 3 * * ?"})
    old.stop()
    queued = old.python(
        "import asyncio, asyncpg\n"
        "async def main():\n"
        f"    conn = await asyncpg.connect({old.dsn!r})\n"
        '    print(await conn.fetchval("INSERT INTO command (command_type, workflow_definition_code,'
        f' workflow_definition_version) VALUES (0, {code}, 1) RETURNING id"))\n'
        "    await conn.close()\n"
        "asyncio.run(main())"
    )
    before = asyncio.run(_rows(old.dsn))
    assert {t: len(r) for t, r in before.items() if t in ("workflow_instance", "task_instance", "schedule")} == {
        "workflow_instance": 1, "task_instance": 2, "schedule": 1,
    }  # fmt: skip
    assert [r["version"] for r in before["schema_version"]] == [1]

    # the upgrade, through the CLI, as the owner
    done = subprocess.run(
        [sys.executable, "-m", "engine", "db", "upgrade", "--dsn", empty_db.owner, "--runtime-role", RUNTIME_ROLE],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"schema upgraded from version 1 to {head()}; runtime role {RUNTIME_ROLE} granted" in done.stdout
    after = asyncio.run(_rows(empty_db.dsn, list(before)))
    _kept(before, after)
    assert [r["version"] for r in after["schema_version"]] == list(range(1, head() + 1))

    # today's nodes, as the runtime role: the old token is the admin's, with every right
    api_tls = tls.api_env() if tls.ENABLED else {}
    env = node_env(etcd_server.endpoint, etcd_root, 3, PORPOISE_DATABASE_DSN=empty_db.dsn, **api_tls, **NO_LOAD_GUARD)
    nodes = [
        NodeProc("master", env, workdir / "logs", "new-master", []),
        NodeProc("worker", env, workdir / "logs", "new-worker",
                 [f"worker.log_dir={tmp_path / 'logs'}", f"worker.exec_dir={tmp_path / 'exec'}"]),
        NodeProc("api", env, workdir / "logs", "new-api", ["api.token_cache_seconds=0"]),
    ]  # fmt: skip
    try:
        for node in nodes:
            node.start()
        ca_file = tls.node_files().ca if tls.ENABLED else ""
        api = ApiClient(Target(nodes[2].url, token, "test", ca_file))
        me = api.get("/api/v1/me")
        assert me["name"] == "admin" and me["admin"] is True, me
        (workflow,) = api.get("/api/v1/workflows")["items"]
        assert workflow["code"] == code and workflow["project"] == "default"
        assert api.get("/api/v1/projects/default")["workflows"] == 1
        (owner,) = asyncio.run(_rows(empty_db.dsn, ["project"]))["project"]
        assert owner["user_id"] == me["id"]  # the project got the first admin as its owner
        (schedule,) = api.get("/api/v1/schedules")["items"]
        assert schedule["workflow_code"] == code
        # the command the first release queued runs now, on today's master and worker
        wait_sync(_instance_of(api, int(queued)), 90, what="the queued command's instance succeeded")
        instances = api.get("/api/v1/instances")["items"]
        assert sorted(i["state"] for i in instances) == ["SUCCESS", "SUCCESS"]
    finally:
        for node in reversed(nodes):
            node.stop()


def _instance_of(api: ApiClient, command_id: int) -> Any:
    def done() -> bool:
        status = api.get(f"/api/v1/commands/{command_id}")
        if status["workflow_instance_id"] is None:
            return False
        return bool(api.get(f"/api/v1/instances/{status['workflow_instance_id']}")["state"] == "SUCCESS")

    return done


def test_migrating_from_0001_gives_the_schema_db_init_gives(empty_db: EmptyDb, pg_server: PostgresServer) -> None:
    """Fresh (schema.sql, generated from the tables) and migrated (0001, then every migration) databases
    have the same tables, columns, constraints, indexes, sequences, functions and triggers."""

    async def run() -> list[str]:
        conn = await asyncpg.connect(empty_db.owner)
        try:
            await conn.execute(migrations()[0].sql)
        finally:
            await conn.close()
        result = await upgrade(empty_db.owner, RUNTIME_ROLE)
        assert (result.before, result.after) == (1, head())
        fresh = await databases.create_empty(pg_server, "fresh")
        try:
            assert (await upgrade(fresh.owner, RUNTIME_ROLE)).before is None  # schema.sql, as db init does
            return differences(await snapshot(empty_db.owner), await snapshot(fresh.owner))
        finally:
            await databases.drop(pg_server, fresh.name)

    assert asyncio.run(run()) == []


@pytest.mark.parametrize("commit", LEGACY)
def test_a_database_made_before_versioned_migrations_upgrades(empty_db: EmptyDb, fresh_db: str, commit: str) -> None:
    """The code between the first release and versioned migrations applied its whole schema.sql at every
    node start (schema_version 1, later a schema_digest table too): upgrade brings it to this version's
    catalog exactly, keeps its rows, its admin an admin with its token's full rights, its projects owned."""
    from engine.accounts.tokens import token_hash
    from engine.api.tokens import token_user

    legacy_sql = git_show(commit, "schema.sql")

    async def run() -> tuple[list[str], Any, Any, Any]:
        conn = await asyncpg.connect(empty_db.owner)
        try:
            await conn.execute(legacy_sql)
            if "schema_digest" in legacy_sql:
                await conn.execute("INSERT INTO schema_digest (digest) VALUES ('abc')")
            admin = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('admin', 0) RETURNING id")
            await conn.execute(
                "INSERT INTO access_token (user_id, name, token_hash) VALUES ($1, 'old', $2)", admin, token_hash("t0")
            )
            await conn.execute("INSERT INTO project (code, name) VALUES (1, 'default')")
            await conn.execute("INSERT INTO workflow_definition (code, name, project_code) VALUES (10, 'wf', 1)")
        finally:
            await conn.close()
        before = await _rows(empty_db.owner)
        result = await upgrade(empty_db.owner, RUNTIME_ROLE)
        assert (result.before, result.after) == (1, head())
        _kept(before, await _rows(empty_db.owner, [t for t in before if t != "schema_digest"]))
        conn = await asyncpg.connect(empty_db.dsn)  # as the runtime role
        try:
            principal = await token_user(conn, token_hash("t0"))
            owner = await conn.fetchval("SELECT user_id FROM project WHERE code = 1")
        finally:
            await conn.close()
        return differences(await snapshot(empty_db.owner), await snapshot(fresh_db)), admin, principal, owner

    diff, admin, principal, owner = asyncio.run(run())
    assert diff == []
    assert principal is not None and principal.user_id == admin and principal.is_admin and principal.perm_cap is None
    assert owner == admin


def test_db_commands_and_the_first_admin(empty_db: EmptyDb) -> None:
    """``porpoise db version|init|upgrade`` and ``porpoise user create --admin --dsn`` on a fresh install."""

    def porpoise(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "engine", *args], cwd=ROOT, input=stdin, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip

    assert "none (empty database): run porpoise db init" in porpoise("db", "version", "--dsn", empty_db.owner).stdout
    early = porpoise(
        "user", "create", "root", "--admin", "--dsn", empty_db.dsn, "--password-stdin", stdin="pw-long-1\n"
    )
    assert early.returncode == 1 and "run `porpoise db init`" in early.stderr and "Traceback" not in early.stderr
    init = porpoise("db", "init", "--dsn", empty_db.owner, "--runtime-role", RUNTIME_ROLE)
    assert init.returncode == 0 and f"schema created at version {head()}" in init.stdout, init.stderr
    again = porpoise("db", "upgrade", "--dsn", empty_db.owner, "--runtime-role", RUNTIME_ROLE)
    assert f"schema at version {head()}, up to date" in again.stdout
    assert "up to date" in porpoise("db", "version", "--dsn", empty_db.dsn).stdout
    created = porpoise("user", "create", "root", "--admin", "--dsn", empty_db.dsn, "--password-stdin",
                       "--print-token", stdin="pw-long-1\n")  # fmt: skip
    assert created.returncode == 0 and created.stdout.startswith("created admin root"), created.stderr
    missing = porpoise("db", "upgrade", "--dsn", empty_db.owner, "--runtime-role", "nobody_here")
    assert missing.returncode == 1 and "'nobody_here' (the runtime role) does not exist" in missing.stderr


def test_a_database_of_the_launcher_before_roles_is_handed_to_the_owner(pg_server: PostgresServer) -> None:
    """The private PostgreSQL of ``make run`` / ``make cluster`` before database roles: the superuser owned
    the database and every object (and its nodes applied schema.sql). Started again by today's launcher,
    it belongs to the owner role, upgrades as it, and the runtime role works on it."""
    name = f"old_launcher_{uuid.uuid4().hex[:8]}"
    legacy_sql = git_show(LEGACY[0], "schema.sql")

    async def run() -> tuple[int, list[str], int]:
        admin = await asyncpg.connect(pg_server.admin_dsn())
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')  # owned by the superuser, as the old launcher did
        finally:
            await admin.close()
        try:
            superuser = await asyncpg.connect(pg_server.dsn_for("porpoise", name))
            try:
                await superuser.execute(legacy_sql)
                await superuser.execute("INSERT INTO project (code, name) VALUES (7, 'kept')")
            finally:
                await superuser.close()
            runtime = await pg_server.create_database(name)  # what the launcher does at every start
            result = await upgrade(pg_server.dsn_for(OWNER_ROLE, name), RUNTIME_ROLE)
            conn = await asyncpg.connect(runtime)
            try:
                owners = await conn.fetch(
                    "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'"
                    " UNION SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()"
                )
                kept = int(await conn.fetchval("SELECT count(*) FROM project WHERE name = 'kept'"))
            finally:
                await conn.close()
            return result.after, [r[0] for r in owners], kept
        finally:
            await databases.drop(pg_server, name)

    version, owners, kept = asyncio.run(run())
    assert (version, owners, kept) == (head(), [OWNER_ROLE], 1)
