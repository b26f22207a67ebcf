"""The tenant spawner (engine/worker/spawnserver.py; the worker's side: TenantSpawners in forkclient.py), run
as root with ``nobody`` as the tenant: a task it starts is set up as the normal path (``setpriv`` + argv)
would start it, but after a single ``exec`` (its program is the process, its parent the spawner); the
spawner itself is the tenant, not dumpable (its tasks cannot read its /proc files), and holds none of the
worker's variables; exit codes and a kill; the spawner's death ends its tasks LOST and a new one serves the
next task; a task that stops its spawner ends LOST with the spawner's other tasks; a task it cannot start (a
directory the tenant cannot enter) starts the normal way while it goes on serving; particulars up to the
request limit travel in the request; many starts at once on a full socket all get their answer; closing
leaves no process (a spawner's task not yet added to the reaper dies with a killed or stopped worker:
tests/test_forkserver.py, modes ``spawner-*``). Last, an in-process Executor running a SHELL task as a
tenant through its spawner."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psutil
import pytest

from engine.worker import forkclient
from engine.worker.executor import Executor
from engine.worker.forkclient import ForkedTask, ForkServer, TenantSpawners
from engine.worker.reporter import Reporter
from engine.worker.spawnserver import REQUEST_LIMIT
from engine.worker.taskenv import TaskPolicy
from tests.helpers import eventually, process_alive, rpc_client
from tests.worker_harness import ReportSink, log_text, task

SECRET = "spawner-secret-8e21a7"
#: prints what the process is (bash: the tenant can run it), then exits with its first argument
PROBE = r"""
code=$1
read -r stat < /proc/$$/stat; set -- ${stat##*) }  # state ppid pgrp session ...
echo "ids $(id -u) $EUID $(id -g) $(id -G)"
echo "proc $$ $PPID $3 $4"
echo "cwd $PWD"
echo "exe $(readlink /proc/$$/exe)"
echo "stdin $(readlink /proc/$$/fd/0)"
echo "fds $(cd /proc/$$/fd && echo *)"
while read -r key value; do [[ $key == SigIgn: ]] && echo "sigign $value"; done < /proc/$$/status
cat /proc/$PPID/environ > /dev/null 2>&1 && echo "parent_environ read" || echo "parent_environ denied"
{ exec 3< /proc/$PPID/mem; } 2> /dev/null && echo "parent_mem read" || echo "parent_mem denied"
while IFS= read -r -d '' var; do echo "env $var"; done < /proc/$$/environ
exit "$code"
"""


#: the program a bash task runs as
BASH = os.path.realpath(shutil.which("bash") or "/bin/bash")


def _proc_files(pid: int) -> tuple[str, int, bytes]:
    """A process's /proc status, the owner of its /proc files (root: it is not dumpable), its environment."""
    environ = Path(f"/proc/{pid}/environ")
    return Path(f"/proc/{pid}/status").read_text(), environ.stat().st_uid, environ.read_bytes()


def _probed(output: bytes) -> dict[str, list[str]]:
    info: dict[str, list[str]] = {"env": []}
    for line in output.decode().splitlines():
        key, _, value = line.partition(" ")
        if key == "env":
            info["env"].append(value)
        else:
            info[key] = value.split()
    return info


@pytest.fixture
def tenant() -> pwd.struct_passwd:
    return pwd.getpwnam("nobody")


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A directory the tenant may enter (pytest's own temporary directories are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="porpoise-spawner-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def spawners(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TenantSpawners]:
    monkeypatch.setenv("PORPOISE_PROBE_SECRET", SECRET)  # the worker's: never in the spawner, nor in a task
    sp = TenantSpawners({"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}, retry_after=0)
    yield sp
    await sp.close()


def _only(sp: TenantSpawners) -> ForkServer:
    (spawner,) = sp.spawners.values()
    return spawner


async def _start(sp: TenantSpawners, user: pwd.struct_passwd, argv: list[str], cwd: Path,
                 env: dict[str, str] | None = None) -> ForkedTask:  # fmt: skip
    started = await sp.start(user, argv, cwd, env if env is not None else {"PATH": os.environ["PATH"]})
    assert started is not None, "the spawner did not start the task"
    return started


async def test_a_task_runs_as_its_tenant_after_one_exec(
    spawners: TenantSpawners, tenant: pwd.struct_passwd, reachable: Path
) -> None:
    env = {"ONLY": "this", "PATH": os.environ["PATH"]}
    started = await _start(spawners, tenant, ["bash", "-c", PROBE, "probe", "3"], reachable, env)
    info = _probed(await started.stdout.read())
    assert await started.wait() == 3 and started.lost == "" and not started.forked
    spawner = _only(spawners).pid
    uid, gid = str(tenant.pw_uid), str(tenant.pw_gid)
    assert info["ids"] == [uid, uid, gid, gid]  # the tenant's ids, no supplementary group
    assert info["proc"] == [str(started.pid), str(spawner), str(started.pid), str(started.pid)]  # own session
    # started by the spawner as its own program (no setpriv in between), in its exec dir
    assert info["exe"] == [BASH]
    assert info["cwd"] == [str(reachable)] and info["stdin"] == ["/dev/null"]
    assert info["fds"][:3] == ["0", "1", "2"] and len(info["fds"]) <= 4  # and the one listing them
    ignored = int(info["sigign"][0], 16)  # SIGPIPE and SIGXFSZ at their default, as subprocess leaves them
    assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)), f"ignored {ignored:#x}"
    assert sorted(info["env"]) == sorted(f"{k}={v}" for k, v in env.items())  # exactly what it was given
    # the spawner is the tenant, not dumpable: its own tasks cannot read its files or its memory
    assert info["parent_environ"] == info["parent_mem"] == ["denied"]
    status, owner, environ = _proc_files(spawner)
    assert f"Uid:\t{tenant.pw_uid}\t{tenant.pw_uid}\t{tenant.pw_uid}\t{tenant.pw_uid}\n" in status
    assert f"Gid:\t{tenant.pw_gid}\t{tenant.pw_gid}\t{tenant.pw_gid}\t{tenant.pw_gid}\n" in status
    assert [line.split() for line in status.splitlines() if line.startswith("Groups:")] == [["Groups:"]]
    assert owner == 0 and SECRET.encode() not in environ


async def test_a_kill_a_dead_spawner_and_a_new_one(
    spawners: TenantSpawners, tenant: pwd.struct_passwd, reachable: Path
) -> None:
    sleeping = ["bash", "-c", "echo sleeping; exec sleep 600"]
    killed = await _start(spawners, tenant, sleeping, reachable)
    assert await killed.stdout.readline() == b"sleeping\n"
    os.killpg(killed.pid, signal.SIGTERM)  # what the executor's kill does
    assert await killed.wait() == -signal.SIGTERM and killed.lost == ""

    orphan = await _start(spawners, tenant, sleeping, reachable)
    assert await orphan.stdout.readline() == b"sleeping\n"
    old = _only(spawners).pid
    os.kill(old, signal.SIGKILL)
    assert await asyncio.wait_for(orphan.wait(), 30) == -signal.SIGKILL
    assert "the tenant spawner died" in orphan.lost
    await eventually(lambda: not process_alive(orphan.pid), 10, "the orphan killed through its pidfd")
    again = await _start(spawners, tenant, ["bash", "-c", PROBE, "probe", "0"], reachable)
    assert _probed(await again.stdout.read())["proc"][1] == str(_only(spawners).pid) != str(old)
    assert await again.wait() == 0


async def test_a_task_that_stops_its_spawner_ends_lost(
    spawners: TenantSpawners, tenant: pwd.struct_passwd, reachable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task of the tenant may stop its spawner (same user): the exits it then cannot report are noticed
    through the tasks' pidfds, and the spawner is dropped (its other tasks killed, LOST), not left hanging."""
    monkeypatch.setattr(forkclient, "EXIT_REPORT_TIMEOUT", 0.5)
    bystander = await _start(spawners, tenant, ["bash", "-c", "echo sleeping; exec sleep 600"], reachable)
    assert await bystander.stdout.readline() == b"sleeping\n"
    stopped = _only(spawners).pid
    # it stops its spawner once its start was answered (stopped first, on a loaded machine, the spawner never
    # sent the answer: the start then went unanswered, which is not what this test is about)
    gate = reachable / "stop-now"
    script = f"while [ ! -e {gate} ]; do sleep 0.01; done; kill -STOP $PPID"
    stopper = await _start(spawners, tenant, ["bash", "-c", script], reachable)
    gate.touch()
    assert await asyncio.wait_for(stopper.wait(), 30) == -signal.SIGKILL
    assert "no exit reported" in stopper.lost
    assert await asyncio.wait_for(bystander.wait(), 30) == -signal.SIGKILL and "no exit reported" in bystander.lost
    await eventually(
        lambda: not process_alive(stopped) and not process_alive(bystander.pid), 10, "the spawner and its task gone"
    )
    after = await _start(spawners, tenant, ["true"], reachable)  # a new spawner
    assert await after.wait() == 0 and _only(spawners).pid != stopped


async def test_what_it_cannot_start_starts_the_normal_way(
    spawners: TenantSpawners, tenant: pwd.struct_passwd, reachable: Path, tmp_path: Path
) -> None:
    first = await _start(spawners, tenant, ["true"], reachable)
    assert await first.wait() == 0
    spawner = _only(spawners).pid
    # pytest's directory is root's alone: the tenant cannot enter it, so the spawner cannot start there
    assert await spawners.start(tenant, ["true"], tmp_path, {"PATH": os.environ["PATH"]}) is None
    assert await spawners.start(tenant, ["no-such-program-here"], reachable, {"PATH": "/nowhere"}) is None
    # a name that grows when quoted: the answer saying it failed stays small (not the spawner's end)
    assert await spawners.start(tenant, ["\\" * 40_000], reachable, {"PATH": "/nowhere"}) is None
    after = await _start(spawners, tenant, ["true"], reachable)
    assert await after.wait() == 0 and _only(spawners).pid == spawner  # it went on serving
    assert [c.pid for c in psutil.Process(spawner).children()] == []


async def test_particulars_up_to_the_request_limit_travel_in_the_request(
    spawners: TenantSpawners, tenant: pwd.struct_passwd, reachable: Path
) -> None:
    """A request carries its task's particulars: a large environment arrives whole; one over the limit is
    not sent (the task starts the normal way) and the spawner goes on serving."""
    big = "x" * (REQUEST_LIMIT - 2000)
    env = {"PATH": os.environ["PATH"], "BIG": big}
    started = await _start(spawners, tenant, ["bash", "-c", 'printf %s "$BIG" | wc -c'], reachable, env)
    assert (await started.stdout.read()).strip() == str(len(big)).encode()
    assert await started.wait() == 0
    spawner = _only(spawners).pid
    env["BIG"] = "x" * REQUEST_LIMIT
    assert await spawners.start(tenant, ["true"], reachable, env) is None
    after = await _start(spawners, tenant, ["true"], reachable)
    assert await after.wait() == 0 and _only(spawners).pid == spawner


async def test_many_starts_at_once_on_a_full_socket(
    spawners: TenantSpawners, tenant: pwd.struct_passwd, reachable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests waiting for room on the worker's socket each get through: one writer callback per socket
    at a time (a second waiter replaced the first's, which then timed out as if the spawner were dead)."""
    monkeypatch.setattr(forkclient, "REPLY_TIMEOUT", 10.0)
    first = await _start(spawners, tenant, ["true"], reachable)
    await first.wait()
    sock = _only(spawners)._sock
    assert sock is not None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1)  # the smallest: a few requests fill it

    async def one() -> int:
        started = await _start(spawners, tenant, ["true"], reachable)
        return await started.wait()

    assert await asyncio.gather(*(one() for _ in range(150))) == [0] * 150


async def test_closing_leaves_no_process(spawners: TenantSpawners, tenant: pwd.struct_passwd, reachable: Path) -> None:
    running = await _start(spawners, tenant, ["bash", "-c", "echo sleeping; exec sleep 600"], reachable)
    assert await running.stdout.readline() == b"sleeping\n"
    spawner = _only(spawners).pid
    await spawners.close()
    assert not process_alive(spawner) and not process_alive(running.pid)
    assert await running.wait() == -signal.SIGKILL
    assert await spawners.start(tenant, ["true"], reachable, {}) is None  # closed: none started again


async def test_the_executor_runs_a_tenant_s_task_through_its_spawner(
    tmp_path: Path, reachable: Path, tenant: pwd.struct_passwd, sink: ReportSink
) -> None:
    rpc = rpc_client(timeout=10)
    reporter = Reporter(rpc, retry_initial=0.05)
    reporter.start()
    spawners = TenantSpawners({"PATH": os.environ["PATH"]})
    ex = Executor(
        slots=4, log_dir=tmp_path / "logs", exec_dir=reachable / "exec", address="127.0.0.1:1", reporter=reporter,
        policy=TaskPolicy(default_user=tenant.pw_name), spawners=spawners,
    )  # fmt: skip
    try:
        shell = task("SHELL", {"rawScript": 'echo "uid=$(id -u) parent=$PPID"'}, sink.address)
        assert ex.dispatch(shell).accepted
        result = await sink.result(shell.task_instance_id)
        text = await log_text(result["log_path"])
        assert result["state"] == "SUCCESS", text
        assert f"uid={tenant.pw_uid} parent={_only(spawners).pid}" in text, text
        assert "forked by the worker's fork server" not in text
    finally:
        await ex.kill_all()
        await spawners.close()
        await reporter.close()
        await rpc.close()
