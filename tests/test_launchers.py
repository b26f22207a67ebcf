"""`make cluster` / `make stop` / `make run` through the real `porpoise` CLI: distinct processes,
slots across masters, data kept across restarts, and nothing left running after a stop."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import psutil

from engine.client import ApiClient, discover
from engine.infra.process import ProcessRecord
from tests.helpers import ROOT, http_json, wait_sync

PORPOISE = [sys.executable, "-m", "engine"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PORPOISE_")}
    env["PORPOISE_REGISTRY_LEASE_TTL"] = "3"
    env["PORPOISE_REGISTRY_KEEPALIVE_INTERVAL"] = "1"
    env["PORPOISE_REGISTRY_HEARTBEAT_INTERVAL"] = "1"
    return env


def _cli(
    *args: str, timeout: float = 180, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PORPOISE, *args],
        cwd=cwd,
        env={**_env(), "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _records(run_dir: Path) -> list[ProcessRecord]:
    state = json.loads((run_dir / "state.json").read_text())
    return [ProcessRecord.from_json(p) for p in state["processes"]]


def _dsn(run_dir: Path) -> str:
    state = json.loads((run_dir / "state.json").read_text())
    return f"postgresql://porpoise:{state['postgres_password']}@127.0.0.1:{state['ports']['postgres']}/porpoise"


def _no_process_left(records: list[ProcessRecord]) -> bool:
    for r in records:
        try:
            p = psutil.Process(r.pid)
            if p.status() != psutil.STATUS_ZOMBIE and abs(p.create_time() - r.create_time) < 0.05:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


def test_cluster_start_status_stop(workdir: Path) -> None:
    """`make cluster` as a newcomer uses it: masters, workers and an API; the CLI drives it through the client
    file it wrote; `cluster status` lists every process; `make stop` stops all of them."""
    run_dir = workdir / f"run-{uuid.uuid4().hex[:6]}" / "cluster"  # make cluster's <RUN_DIR>/cluster
    # the nodes get the launcher's configuration file: the load guard off (this machine is shared with other
    # suites; a master above its load limit would hold the workflow's command back)
    config = run_dir.parent / "porpoise.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("master: {max_cpu_load_avg: 10000}\nworker: {max_cpu_load_avg: 10000}\n")
    started = _cli(
        "cluster",
        "start",
        "--run-dir",
        str(run_dir),
        "--masters",
        "3",
        "--workers",
        "2",
        env={"PORPOISE_CONFIG": str(config)},
    )
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        records = _records(run_dir)
        names = sorted(r.name for r in records)
        assert names == sorted(
            ["etcd", "postgres", "master-1", "master-2", "master-3", "worker-1", "worker-2", "api-1"]
        )
        assert len({r.pid for r in records}) == 8 and all(r.alive() for r in records)
        ports = [r.extra["port"] for r in records if r.name.startswith(("master", "worker", "api"))]
        assert len(set(ports)) == 6
        for r in records:
            assert Path(r.log).is_file(), f"{r.name} has no log under .run"
        client_file = run_dir.resolve() / "client.json"
        assert f"export PORPOISE_CLIENT_CONFIG={client_file}" in started.stdout

        masters = [r for r in records if r.name.startswith("master")]

        def slots_settled() -> bool:
            ca = str(run_dir / "tls" / "ca.pem")  # the launcher's own CA: the nodes speak mutual TLS
            bodies = [http_json(f"https://127.0.0.1:{m.extra['port']}/health", ca_file=ca)[1] for m in masters]
            return sorted((b["slot"]["index"], b["slot"]["count"]) for b in bodies) == [
                (0, 3),
                (1, 3),
                (2, 3),
            ] and all(len(b["workers"]) == 2 for b in bodies)

        wait_sync(slots_settled, 15, "3 masters with slots 0..2 seeing 2 workers")

        _drive_with_cli(client_file, workdir)
        _check_status(run_dir, records, client_file)

        again = _cli("cluster", "start", "--run-dir", str(run_dir))
        assert again.returncode == 1 and "already in use by running processes" in again.stderr
        assert "Traceback" not in again.stderr
    finally:
        stopped = _make_stop(run_dir)
    assert stopped.returncode == 0 and "stopped 8 process(es)" in stopped.stdout, stopped.stdout + stopped.stderr
    assert _no_process_left(records)
    down = json.loads(_cli("cluster", "status", "--run-dir", str(run_dir), "--json").stdout)
    assert down == []  # stopped processes are forgotten
    assert "no processes recorded in" in _cli("cluster", "status", "--run-dir", str(run_dir)).stdout
    assert _cli("cluster", "stop", "--run-dir", str(run_dir)).stdout.strip() == "stopped 0 process(es)"


def _drive_with_cli(client_file: Path, cwd: Path) -> None:
    """The CLI, from outside the checkout, finds the API and its token through the client file alone."""
    client = {"PORPOISE_CLIENT_CONFIG": str(client_file)}
    applied = _cli("apply", str(ROOT / "examples" / "hello" / "hello.yaml"), env=client, cwd=cwd)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    run = _cli("start", "hello", "--watch", env=client, cwd=cwd)
    assert run.returncode == 0 and "finished SUCCESS" in run.stdout, run.stdout + run.stderr
    live = json.loads(_cli("cluster", "--json", env=client, cwd=cwd).stdout)
    assert len(live["masters"]) == 3 and len(live["workers"]) == 2


def _check_status(run_dir: Path, records: list[ProcessRecord], client_file: Path) -> None:
    """`porpoise cluster status` lists every recorded process with its role, address and pid, all up."""
    status = _cli("cluster", "status", "--run-dir", str(run_dir), "--json")
    rows = {p["name"]: p for p in json.loads(status.stdout)}
    assert set(rows) == {r.name for r in records} and all(p["alive"] for p in rows.values())
    by_pid = {r.pid: r for r in records}
    for p in rows.values():
        record = by_pid[p["pid"]]
        assert p["name"] == record.name
        role = record.extra.get("role", record.name)  # etcd and postgres are their own roles
        port = record.extra.get("port", record.extra.get("client_port"))
        assert (p["role"], p["address"]) == (role, f"127.0.0.1:{port}")
    assert rows["api-1"]["address"] == json.loads(client_file.read_text())["api_url"].removeprefix("http://")
    assert rows["etcd"]["role"] == "etcd" and rows["postgres"]["address"].startswith("127.0.0.1:")
    table = _cli("cluster", "status", "--run-dir", str(run_dir)).stdout
    assert all(f"{p['address']}" in table for p in rows.values()) and " up" in table


def _make_stop(run_dir: Path) -> subprocess.CompletedProcess[str]:
    """`make stop` for the cluster in ``run_dir`` (= <RUN_DIR>/cluster), with this interpreter's venv."""
    return subprocess.run(
        ["make", "--no-print-directory", "stop", f"RUN_DIR={run_dir.parent}", f"BIN={Path(sys.executable).parent}"],
        cwd=ROOT, env={**_env(), "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def start_standalone_banner(run_dir: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """A standalone in ``run_dir``, once up, and the banner it printed (what it said on stderr, when it
    exits before that, in the failure)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    errors = run_dir / "standalone.stderr"
    with errors.open("wb") as err:
        proc = subprocess.Popen(
            [*PORPOISE, "standalone", "--run-dir", str(run_dir)],
            cwd=ROOT,
            env={**_env(), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert proc.stdout is not None
    banner: list[str] = []
    for line in proc.stdout:
        banner.append(line)
        if "Press Ctrl-C to stop everything." in line:
            return proc, "".join(banner)
    proc.stdout.close()
    code = proc.wait()
    said = errors.read_text(errors="replace")[-4000:]
    raise AssertionError(f"standalone exited early with {code}:\n{''.join(banner)[-2000:]}\nstderr:\n{said}")


def _start_standalone(run_dir: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return start_standalone_banner(run_dir, env)[0]


def banner_password(banner: str) -> str:
    """The first password of ``admin`` the standalone's banner prints."""
    (line,) = [x for x in banner.splitlines() if x.strip().startswith("Sign in")]
    assert "user admin, password " in line, line
    return line.split("password ", 1)[1].split()[0]


def stop_standalone(proc: subprocess.Popen[str]) -> int:
    return _stop_standalone(proc)


def _stop_standalone(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    proc.communicate(timeout=60)
    return proc.returncode


def _login(api_url: str, password: str) -> int:
    """The status POST /api/v1/login answers for ``admin`` with ``password``."""
    body = json.dumps({"user": "admin", "password": password}).encode()
    request = urllib.request.Request(f"{api_url}/api/v1/login", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_standalone_runs_stops_on_ctrl_c_and_keeps_data(workdir: Path) -> None:
    run_dir = workdir / f"standalone-{uuid.uuid4().hex[:6]}"
    proc, banner = start_standalone_banner(run_dir)
    records = _records(run_dir)
    try:
        assert sorted(r.name for r in records) == ["api", "etcd", "master", "postgres", "worker"]
        assert all(r.alive() for r in records)
        client_file = json.loads((run_dir / "client.json").read_text())
        api = ApiClient(discover(client_file["api_url"], client_file["token"]))
        # first sign-in: the banner prints admin's first password, which signs in (issue 28 item 1)
        first = banner_password(banner)
        assert _login(client_file["api_url"], first) == 200
        assert (run_dir / "admin-password").stat().st_mode & 0o077 == 0
        assert [w["group"] for w in api.get("/api/v1/cluster")["workers"]] == ["default"]
        assert [d["name"] for d in api.get("/api/v1/datasources")["items"]] == ["warehouse"]

        async def write() -> None:
            conn = await asyncpg.connect(_dsn(run_dir))
            await conn.execute("INSERT INTO project (code, name) VALUES (7, 'survives restarts')")
            await conn.close()

        asyncio.run(write())
    finally:
        code = _stop_standalone(proc)
    assert code == 0
    assert _no_process_left(records)

    proc, banner = start_standalone_banner(run_dir)
    records = _records(run_dir)
    try:

        async def read() -> list[str]:
            conn = await asyncpg.connect(_dsn(run_dir))
            rows = await conn.fetch("SELECT name FROM project")
            await conn.close()
            return [r["name"] for r in rows]

        assert asyncio.run(read()) == ["survives restarts"]
        again = json.loads((run_dir / "client.json").read_text())
        assert again == client_file  # same port, same token: the CLI keeps working across restarts
        assert [p["name"] for p in api.get("/api/v1/projects")["items"]] == ["survives restarts"]
        assert banner_password(banner) == first  # the same first password while it is unchanged
        api.put("/api/v1/users/admin", {"password": "chosen-by-me"})
    finally:
        assert _stop_standalone(proc) == 0
    assert _no_process_left(records)
    _after_password_change(run_dir, client_file["api_url"], first)


def _after_password_change(run_dir: Path, api_url: str, first: str) -> None:
    """Once admin changed it, the banner no longer shows a password, and the first one no longer signs in."""
    proc, banner = start_standalone_banner(run_dir)
    records = _records(run_dir)
    try:
        (line,) = [x for x in banner.splitlines() if x.strip().startswith("Sign in")]
        assert "the password you set" in line and first not in banner
        assert not (run_dir / "admin-password").exists()
        assert _login(api_url, first) == 401
        assert _login(api_url, "chosen-by-me") == 200
    finally:
        assert _stop_standalone(proc) == 0
    assert _no_process_left(records)


def test_cli_errors_are_one_line_not_a_traceback() -> None:
    bad = _cli("db", "init", "--set", "master.listen_port=oops")
    assert bad.returncode == 1
    assert bad.stderr.startswith("porpoise: master.listen_port: expected an integer, got 'oops'")
    assert "Traceback" not in bad.stderr
    unreachable = _cli("db", "init", "--dsn", "postgresql://porpoise@127.0.0.1:1/porpoise")
    assert unreachable.returncode == 1 and "cannot connect to the database" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr


#: what a hostile task prints: one line per attack (tests/test_launchers.py::test_a_user_s_task_cannot_reach_...)
_ATTACK = r"""
echo "uid=$(id -u)"
for pid in {pids}; do
  if tr '\0' '\n' < /proc/$pid/environ > environ.txt 2>/dev/null; then
    echo "environ-read=$pid"
    grep -E '^PORPOISE_(DATABASE|RPC_SECRET|REGISTRY_PASSWORD|SECRETS|RPC_TLS_KEY)' environ.txt \
      | sed 's/^/environ-secret: /'
  fi
done
for f in {files}; do
  if cat "$f" > /dev/null 2>&1; then echo "readable: $f"; else echo "refused: $f"; fi
done
python3 - <<'PY'
import base64, json, ssl, urllib.request
body = json.dumps({{"key": base64.b64encode(b"/").decode(), "range_end": base64.b64encode(b"\0").decode()}}).encode()
for scheme in ("http", "https"):
    context = ssl._create_unverified_context() if scheme == "https" else None
    try:
        with urllib.request.urlopen(f"{{scheme}}://127.0.0.1:{etcd_port}/v3/kv/range", body, timeout=5,
                                    context=context) as resp:
            print(f"etcd-answered {{scheme}}: {{resp.status}} keys={{len(json.load(resp).get('kvs', []))}}")
    except Exception as exc:
        print(f"etcd-refused {{scheme}}: {{type(exc).__name__}}")
for port in ({node_ports}):  # a node's RPC: mutual TLS, then a signature
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{{port}}/rpc/TaskKill", b"{{}}", timeout=5,
                                    context=ssl._create_unverified_context()) as resp:
            print(f"rpc-answered {{port}}: {{resp.status}}")
    except Exception as exc:
        print(f"rpc-refused {{port}}: {{type(exc).__name__}} {{getattr(exc, 'code', '')}}")
PY
true
"""


#: files of a standalone's run dir that no task may read
PRIVATE = ["state.json", "secrets.key", "node.yaml", "client.json", "admin-password", "tls/node-key.pem",
           "tls/ca-key.pem", "logs/worker.log", "logs/master.log"]  # fmt: skip


def _run_as_alice(run_dir: Path, script: str) -> list[str]:
    """``script`` as a SHELL task of general user alice's own project (user, token and project made through the
    API by the standalone's admin); the lines of its log, once it succeeded."""
    client = json.loads((run_dir / "client.json").read_text())
    admin = ApiClient(discover(client["api_url"], client["token"]))
    admin.post("/api/v1/users", {"name": "alice", "password": "correct horse", "admin": False})
    alice = ApiClient(
        discover(client["api_url"], admin.post("/api/v1/tokens", {"name": "t", "user": "alice"})["token"])
    )
    alice.post("/api/v1/projects", {"name": "alice-project"})
    doc = {"name": "probe", "project": "alice-project",
           "tasks": [{"name": "a", "type": "SHELL", "params": {"rawScript": script}}]}  # fmt: skip
    code = alice.post("/api/v1/workflows", doc, release=True)["code"]
    command = alice.post(f"/api/v1/workflows/{code}/start", {})["command_id"]
    detail: dict[str, Any] = {}

    def finished() -> bool:
        nonlocal detail
        status = admin.get(f"/api/v1/commands/{command}")
        if not status.get("workflow_instance_id"):
            return False
        detail = admin.get(f"/api/v1/instances/{status['workflow_instance_id']}")
        return bool(detail["finished"])

    wait_sync(finished, 120, "the probe workflow finished")
    task = next(t["id"] for t in detail["tasks"] if t["name"] == "a")
    lines = [line.rstrip("\n") for line in alice.get(f"/api/v1/tasks/{task}/log")["lines"]]
    assert detail["state"] == "SUCCESS", "\n".join(lines)
    return lines


def test_a_user_s_task_cannot_reach_the_nodes_secrets_or_the_registry(workdir: Path) -> None:
    """Issue 24 item 2 and 8, as the hostile review did it: a general user's SHELL task in their own project, on a
    standalone started as root, runs as the unprivileged tenant user (not root, not the worker's user); finds no
    secret in any node's environment and may not even read it; may not read the run dir's secrets (state, keyring,
    node configuration, API token, TLS keys, node logs); and neither etcd's client port nor a node's RPC port
    answers it without the nodes' credentials."""
    import pwd

    assert os.geteuid() == 0  # the launchers isolate tasks only when started as root (this machine's CI is)
    run_dir = workdir / f"standalone-{uuid.uuid4().hex[:6]}"
    # the launcher's configuration file reaches the nodes (merged into node.yaml): the load guard off (this
    # machine is shared with other suites; a master above its load limit would hold the command back)
    config = workdir / f"guard-off-{run_dir.name}.yaml"
    config.write_text("master: {max_cpu_load_avg: 10000}\nworker: {max_cpu_load_avg: 10000}\n")
    proc = _start_standalone(run_dir, {"PORPOISE_CONFIG": str(config)})
    try:
        state = json.loads((run_dir / "state.json").read_text())
        pids = {p["name"]: p["pid"] for p in state["processes"] if p["name"] in ("master", "worker", "api")}
        secrets = {"rpc secret": state["rpc_secret"], "database password": state["postgres_password"]}
        secrets |= {"etcd password": state["etcd_password"]} if "etcd_password" in state else {}
        # no node holds a secret in its environment at all (whoever could read it)
        environs = {n: Path(f"/proc/{pids[n]}/environ").read_bytes().decode(errors="replace") for n in pids}
        held = [f"{node} holds the {what}" for node, env in environs.items() for what, v in secrets.items() if v in env]
        held += [f"{node} holds a database DSN" for node, env in environs.items() if "postgresql://" in env]

        script = _ATTACK.format(
            pids=" ".join(str(pids[n]) for n in ("master", "worker", "api")),
            files=" ".join(str(run_dir / f) for f in PRIVATE),
            etcd_port=state["ports"]["etcd_client"],
            node_ports=", ".join(
                str(p["extra"]["port"]) for p in state["processes"] if p["name"] in ("master", "worker")
            ),
        )
        lines = _run_as_alice(run_dir, script)
        out = "\n".join(lines)
    finally:
        assert _stop_standalone(proc) == 0
    assert held == [], held
    tenant = pwd.getpwnam("porpoise-tenant")
    assert f"uid={tenant.pw_uid}" in lines and tenant.pw_uid not in (0, os.geteuid()), out
    assert not [line for line in lines if line.startswith(("environ-read=", "environ-secret:"))], out
    assert sorted(line for line in lines if line.startswith(("readable:", "refused:"))) == sorted(
        f"refused: {run_dir / f}" for f in PRIVATE
    ), out
    assert not [line for line in lines if line.startswith("etcd-answered")], out
    assert not [line for line in lines if line.startswith("rpc-answered")], out
    assert len([line for line in lines if line.startswith("rpc-refused")]) == 2, out
    assert sorted(line.split(":")[0] for line in lines if line.startswith("etcd-refused")) == [
        "etcd-refused http",
        "etcd-refused https",
    ], out
