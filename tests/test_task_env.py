"""What a task runs as and what it sees (engine/worker/taskenv.py), on a real worker process.

- a task's environment is an allow-list: the node's secrets (RPC secret, database DSN, a password of its
  configuration file, any other variable of its environment) never reach a SHELL or PYTHON task;
- PYTHON tasks run with worker.python_interpreter, not the worker's own virtualenv;
- without worker.allow_root_tenant the worker refuses root, its own user and the default tenant, and an
  unknown tenant, each a FAILURE with the reason in the task's log (the worker goes on serving).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

from engine.infra.etcd import EtcdServer
from engine.worker.taskenv import PASSWD_CHECK, TaskPolicy, Users, passed_through, resolve_tenant
from rpc.client import RpcClient
from tests.helpers import TEST_SECRET, NodeProc, start_worker
from tests.worker_harness import ReportSink, dispatch, log_text, task


def _worker(node_factory: Callable[..., NodeProc], etcd: EtcdServer, root: str, base: Path, *extra: str, **env: str):
    # a machine shared with other suites is often loaded: the worker must not refuse these dispatches
    unguarded = ("worker.max_cpu_load_avg=100000", "worker.reserved_memory_gb=0")
    return start_worker(node_factory, etcd.endpoint, root, base, *unguarded, *extra, **env)


async def test_a_task_sees_none_of_the_node_s_secrets(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    sink: ReportSink,
    client: RpcClient,
) -> None:
    env_secret = f"env-secret-{uuid.uuid4().hex}"
    file_secret = f"file-secret-{uuid.uuid4().hex}"
    config = tmp_path / "worker.yaml"
    config.write_text(f"database:\n  password: {file_secret}\n")
    w = await asyncio.to_thread(
        _worker, node_factory, etcd_server, etcd_root, tmp_path,
        "worker.task_env=[GROUP_SETTING=from-the-group]",
        CLOUD_API_TOKEN=env_secret, PORPOISE_CONFIG=str(config),
    )  # fmt: skip
    node_env_values = {"rpc secret": TEST_SECRET, "env secret": env_secret, "config secret": file_secret}
    shell = task("SHELL", {"rawScript": "env; echo group=$GROUP_SETTING"}, sink.address)
    python = task(
        "PYTHON",
        {
            "rawScript": "import os, sys\n"
            "print(*(f'{k}={v}' for k, v in os.environ.items()), sep='\\n')\nprint('exe', sys.executable)"
        },
        sink.address,
    )
    texts = {}
    for msg in (shell, python):
        assert (await dispatch(client, w.address, msg)).accepted
        result = await sink.result(msg.task_instance_id)
        texts[msg.task_type] = await log_text(result["log_path"])
        assert result["state"] == "SUCCESS", texts[msg.task_type]
    for kind, text in texts.items():
        for what, value in node_env_values.items():
            assert value not in text, f"{kind} task saw the node's {what}"
        assert "PORPOISE_DATABASE" not in text and "PORPOISE_RPC" not in text and "CLOUD_API_TOKEN" not in text
        assert "PATH=" in text and "PORPOISE_TASK_INSTANCE_ID=" in text and "GROUP_SETTING=from-the-group" in text
    assert "group=from-the-group" in texts["SHELL"]
    # the database DSN the worker was given (it holds the cluster's password) is not there either
    dsn = w.proc.env["PORPOISE_DATABASE_DSN"]
    assert dsn and all(dsn not in text for text in texts.values())
    # PYTHON tasks: python3 from the task's PATH, which leaves out the worker's own virtualenv
    exe_line = next(line for line in texts["PYTHON"].splitlines() if line.startswith("exe "))
    assert not exe_line.split(" ", 1)[1].startswith(sys.prefix), exe_line


async def test_without_allow_root_tenant_root_its_own_user_and_unknown_tenants_fail_with_the_reason(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    workdir: Path,
    sink: ReportSink,
    client: RpcClient,
) -> None:
    base = workdir / f"tenants-{uuid.uuid4().hex[:6]}"  # world-traversable: the tenant works in its exec dir
    w = await asyncio.to_thread(_worker, node_factory, etcd_server, etcd_root, base, "worker.allow_root_tenant=false")
    cases = {
        "": "the default tenant runs tasks as this worker's own OS user",
        "root": "is root (uid 0): refused",
        "no-such-user-xyz": "OS user 'no-such-user-xyz' does not exist on this worker",
    }
    for tenant, reason in cases.items():
        msg = task("SHELL", {"rawScript": "echo ran-it"}, sink.address, tenant=tenant)
        assert (await dispatch(client, w.address, msg)).accepted
        result = await sink.result(msg.task_instance_id)
        text = await log_text(result["log_path"])
        assert result["state"] == "FAILURE" and reason in result["message"], result
        assert reason in text and "ran-it" not in text and "Traceback" not in text
    ok = task("SHELL", {"rawScript": "id -un"}, sink.address, tenant="nobody")
    assert (await dispatch(client, w.address, ok)).accepted
    result = await sink.result(ok.task_instance_id)
    text = await log_text(result["log_path"])
    assert result["state"] == "SUCCESS" and "\nnobody\n" in text, text
    assert w.healthy()


def test_the_worker_s_own_user_is_refused_unless_allowed() -> None:
    import os
    import pwd

    me = pwd.getpwuid(os.geteuid()).pw_name
    with pytest.raises(ValueError, match="tenant"):
        resolve_tenant(me, allow_root=False)
    with pytest.raises(ValueError, match="tenant"):
        resolve_tenant("default", allow_root=False)
    assert resolve_tenant(me, allow_root=True) is None
    assert resolve_tenant("", allow_root=True) is None


def test_the_default_tenant_runs_as_the_configured_user_and_root_stays_refused() -> None:
    """worker.default_tenant_user (the launchers' porpoise-tenant): "default" means that user, whatever
    allow_root_tenant says; naming root or the worker's own user there is refused like naming it directly."""
    import os
    import pwd

    assert os.geteuid() == 0  # switching to another user needs a root worker (the suite runs as root)
    nobody = pwd.getpwnam("nobody")
    for name in ("", "default"):
        for allow in (False, True):
            user = resolve_tenant(name, allow_root=allow, default_user="nobody")
            assert user is not None and user.pw_uid == nobody.pw_uid
    with pytest.raises(ValueError, match="is root"):
        resolve_tenant("default", allow_root=False, default_user="root")
    with pytest.raises(ValueError, match="does not exist"):
        resolve_tenant("", allow_root=False, default_user="no-such-user-x")
    # another tenant is resolved as before: the default user changes only what "default" means
    assert resolve_tenant("nobody", allow_root=False, default_user="root") is not None


def test_a_looked_up_user_is_used_again_until_the_user_database_changes(tmp_path: Path) -> None:
    """The worker's cache of tenants' OS users (Users): one lookup per name while the user database keeps
    its identity, size and modification time and the entry is younger than its time to live; a changed
    database (noticed within PASSWD_CHECK seconds) or an expired entry is looked up again, an unknown name
    every time."""
    import os
    import pwd

    source = tmp_path / "passwd"
    source.write_text("one\n")
    looked: list[str] = []
    now = [0.0]

    def lookup(name: str) -> pwd.struct_passwd:
        looked.append(name)
        return pwd.getpwnam(name)

    users = Users(lookup, source, ttl=10.0, clock=lambda: now[0])
    assert users.get("nobody").pw_uid == pwd.getpwnam("nobody").pw_uid
    assert users.get("nobody") == users.get("nobody") and looked == ["nobody"]
    assert resolve_tenant("", allow_root=False, default_user="nobody", users=users) is not None
    assert looked == ["nobody"]
    source.write_text("one\ntwo\n")  # a user added, changed or removed
    now[0] = PASSWD_CHECK / 2  # not looked at again yet
    users.get("nobody")
    assert looked == ["nobody"]
    now[0] = PASSWD_CHECK
    users.get("nobody")
    assert looked == ["nobody", "nobody"]
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # rewritten in place, same size
    now[0] = 2 * PASSWD_CHECK
    users.get("nobody")
    assert looked == ["nobody"] * 3
    now[0] = 2 * PASSWD_CHECK + 10.0  # older than its time to live (a directory service's user changes elsewhere)
    users.get("nobody")
    assert looked == ["nobody"] * 4
    for _ in range(2):
        with pytest.raises(ValueError, match="does not exist"):
            resolve_tenant("no-such-user-x", allow_root=False, users=users)
    assert looked == ["nobody"] * 4 + ["no-such-user-x"] * 2
    source.unlink()  # no database to watch: looked up every time
    now[0] += PASSWD_CHECK
    users.get("nobody")
    users.get("nobody")
    assert looked == ["nobody"] * 4 + ["no-such-user-x"] * 2 + ["nobody"] * 2


def test_only_listed_variables_pass_and_never_a_porpoise_one() -> None:
    venv_bin = str(Path(sys.prefix) / "bin")
    environ = {
        "PATH": f"{venv_bin}:/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "UTC", "HOME": "/root",
        "PORPOISE_RPC_SECRET": "s", "PORPOISE_DATABASE_DSN": "d", "AWS_SECRET_ACCESS_KEY": "k", "PYTHONPATH": "/x",
    }  # fmt: skip
    got = passed_through(environ, (*TaskPolicy().passthrough, "PORPOISE_*"))
    assert set(got) == {"PATH", "LANG", "LC_ALL", "TZ"}
    assert got["PATH"] == ("/usr/bin" if sys.prefix != sys.base_prefix else f"{venv_bin}:/usr/bin")


def test_load_files_only_from_allowed_directories(tmp_path: Path) -> None:
    from engine.tasks.sql_runner import allowed_files

    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "a.csv").write_text("1\n")
    (outside / "secret.csv").write_text("s\n")
    (allowed / "link.csv").symlink_to(outside / "secret.csv")
    assert allowed_files(f"{allowed}/a.csv", [str(allowed)]) == [f"{allowed}/a.csv"]
    for pattern in (f"{allowed}/../outside/secret.csv", f"{allowed}/link.csv", f"{allowed}/*.csv", "a.csv"):
        with pytest.raises((PermissionError, FileNotFoundError), match="loadFiles"):
            allowed_files(pattern, [str(allowed)])
    with pytest.raises(PermissionError, match="outside"):
        allowed_files(f"{allowed}/a.csv", [])


async def test_a_sql_task_loading_from_outside_the_allowed_directories_fails_naming_the_file(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    sink: ReportSink,
    client: RpcClient,
    fresh_db: str,
) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "ok.csv").write_text("n\n7\n")
    (outside / "passwd.csv").write_text("n\n424242\n")
    w = await asyncio.to_thread(
        _worker, node_factory, etcd_server, etcd_root, tmp_path, f"worker.sql_load_dirs=[{allowed}]"
    )
    source = {"wh": {"dsn": fresh_db}}

    def load(path: str) -> object:
        return task(
            "SQL",
            {"datasource": "wh", "preStatements": ["CREATE TEMP TABLE t (n int)"], "sql": "SELECT sum(n) AS s FROM t",
             "loadFiles": [{"file": path, "table": "t"}]},
            sink.address, datasources=source,
        )  # fmt: skip

    ok = load(f"{allowed}/ok.csv")
    assert (await dispatch(client, w.address, ok)).accepted
    result = await sink.result(ok.task_instance_id)
    assert result["state"] == "SUCCESS", await log_text(result["log_path"])
    for path in (f"{allowed}/../outside/passwd.csv", str(outside / "passwd.csv")):
        bad = load(path)
        assert (await dispatch(client, w.address, bad)).accepted
        result = await sink.result(bad.task_instance_id)
        text = await log_text(result["log_path"])
        assert result["state"] == "FAILURE" and "outside the directories this worker loads from" in text, text
        assert "424242" not in text and "query returned" not in text


async def test_a_sql_task_s_connection_string_is_not_in_its_environment(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    sink: ReportSink,
    client: RpcClient,
    fresh_db: str,
) -> None:
    """Every process of the tenant's user can read /proc/<pid>/environ of the SQL runner while it runs: the
    data source's DSN (its password) reaches the runner on a pipe it reads once instead."""
    w = await asyncio.to_thread(_worker, node_factory, etcd_server, etcd_root, tmp_path)
    password = urlsplit(fresh_db).password
    assert password
    key = uuid.uuid4().int % 2**31
    holder = await asyncpg.connect(fresh_db)
    try:
        await holder.execute("SELECT pg_advisory_lock($1)", key)  # the task waits for it: it runs until we let go
        msg = task("SQL", {"datasource": "wh", "sql": f"SELECT pg_advisory_lock({key}) IS NULL AS waited"},
                   sink.address, datasources={"wh": {"dsn": fresh_db}})  # fmt: skip
        assert (await dispatch(client, w.address, msg)).accepted
        pid = (await sink.running(msg.task_instance_id))["pid"]
        seen = await asyncio.to_thread(
            lambda: Path(f"/proc/{pid}/environ").read_bytes() + Path(f"/proc/{pid}/cmdline").read_bytes()
        )
        assert b"PYTHONPATH=" in seen  # the runner's own environment, read while it waits
        assert password.encode() not in seen and fresh_db.encode() not in seen
    finally:
        await holder.close()  # releases the lock
    result = await sink.result(msg.task_instance_id)
    assert result["state"] == "SUCCESS", await log_text(result["log_path"])
