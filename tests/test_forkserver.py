"""The fork server (engine/worker/forkserver.py, forkclient.py) with a light preloaded module
(tests/forkserver_probe.py): a forked task is set up as the normal path would start it (own session, the
tenant's ids and no supplementary group, its exec dir, exactly the environment it was given and nothing of
the worker's, no stray descriptor); exit codes as ``python -m`` reports them; a kill; the server's death
ends its tasks (LOST) and leaves new tasks to the normal path; the server and its tasks die with the worker
(SIGKILLed, or past the reaper's deadline before the task was added), and so does a tenant spawner's task;
a closed server leaves no process.
Last, an in-process Executor forking a task whose launch allows it: output and OUT parameter, a kill, the
server's death reported LOST, and the normal start when there is no server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from engine.tasks.base import Launch, TaskContext
from engine.tasks.spark import SparkTask
from engine.worker.executor import Executor
from engine.worker.forkclient import ForkedTask, ForkServer
from engine.worker.reporter import Reporter
from engine.worker.taskenv import TaskPolicy
from tests.helpers import ROOT, eventually, process_alive, rpc_client
from tests.worker_harness import ReportSink, log_text, task

#: this checkout (the tests package's parent)
CHECKOUT = str(Path(__file__).resolve().parents[1])
PROBE = "tests.forkserver_probe"
SECRET = "probe-secret-4f1d2c"


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ForkServer]:
    monkeypatch.setenv("PORPOISE_PROBE_SECRET", SECRET)  # the worker's: never in a task, nor in its memory
    fs = ForkServer([PROBE], {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
    yield fs
    await fs.close()


async def _spawn(fs: ForkServer, *args: str, cwd: Path = Path("/"), env: dict[str, str] | None = None,
                 user: pwd.struct_passwd | None = None) -> ForkedTask:  # fmt: skip
    task = await fs.spawn(PROBE, list(args), cwd, env or {}, user)
    assert task is not None, "the fork server did not start the task"
    return task


async def _output(task: ForkedTask) -> str:
    return (await task.stdout.read()).decode()


async def test_a_forked_task_is_set_up_as_a_started_one(server: ForkServer, tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    os.chmod(tmp_path, 0o755)
    env = {"PATH": "/usr/bin:/bin", "TASK_VAR": "given", "HOME": nobody.pw_dir, "TZ": "Asia/Tokyo"}
    saved = os.getgroups()
    os.setgroups([0, 100])  # the worker's supplementary groups (root's: none here), which the server inherits
    try:
        task = await _spawn(server, "info", "3", cwd=tmp_path, env=env, user=nobody)
    finally:
        os.setgroups(saved)
    text = await _output(task)
    assert await task.wait() == 3 and task.returncode == 3 and task.lost == ""
    info = json.loads(text)
    assert info["argv"][1:] == ["info", "3"] and info["argv"][0].endswith("forkserver_probe.py")
    assert (info["uid"], info["euid"], info["gid"], info["egid"]) == (nobody.pw_uid,) * 2 + (nobody.pw_gid,) * 2
    assert info["groups"] == []  # setpriv --clear-groups
    assert info["pid"] == task.pid == info["pgid"] == info["sid"]  # its own session and group
    assert info["ppid"] == server.pid
    assert info["cwd"] == str(tmp_path) == info["path0"]
    assert info["env"] == env and info["tz"] == "JST"  # replaced, not merged; its time zone applied
    assert SECRET not in text  # neither in its environment nor in the block it started with (the server's)
    assert "PORPOISE_" not in info["initial_environ"]
    assert info["stdin"] == "/dev/null"
    assert len(info["fds"]) == 4  # 0, 1, 2 and the one listing /proc/self/fd: nothing of the server's


async def test_exit_codes_as_python_reports_them(server: ForkServer) -> None:
    raised = await _spawn(server, "raise")
    assert "RuntimeError: raised by the probe" in await _output(raised) and await raised.wait() == 1
    exited = await _spawn(server, "exit", "a message")
    assert "a message" in await _output(exited) and await exited.wait() == 1
    threads = await _spawn(server, "threads")
    assert await asyncio.wait_for(_output(threads), 30) == "from the pool\nlate thread\n"
    assert await threads.wait() == 0
    assert await server.spawn("not.preloaded", [], Path("/"), {}, None) is None  # started the normal way


async def test_a_kill_and_a_dead_fork_server(server: ForkServer) -> None:
    task = await _spawn(server, "sleep")
    assert await task.stdout.readline() == b"sleeping\n"
    os.killpg(task.pid, signal.SIGTERM)  # what the executor's kill does
    assert await task.wait() == -signal.SIGTERM and task.lost == ""

    orphan = await _spawn(server, "sleep")
    assert await orphan.stdout.readline() == b"sleeping\n"
    os.kill(server.pid, signal.SIGKILL)
    assert await asyncio.wait_for(orphan.wait(), 30) == -signal.SIGKILL
    assert "the fork server died" in orphan.lost
    assert not process_alive(orphan.pid)
    # for a while new tasks start the normal way (no server)
    assert await server.spawn(PROBE, ["info", "0"], Path("/"), {}, None) is None


async def test_a_new_fork_server_after_one_died() -> None:
    fs = ForkServer([PROBE], {"PATH": os.environ["PATH"]}, retry_after=0)
    try:
        first = await _spawn(fs, "info", "0")
        await first.wait()
        old = fs.pid
        os.kill(old, signal.SIGKILL)
        await eventually(lambda: fs.pid == 0, 10, "the server's death noticed")
        again = await _spawn(fs, "info", "0")
        assert json.loads(await _output(again))["ppid"] == fs.pid != old
        assert await again.wait() == 0
    finally:
        await fs.close()


async def test_closing_leaves_no_process_and_a_cancelled_start_no_task(server: ForkServer) -> None:
    task = await _spawn(server, "sleep")
    assert await task.stdout.readline() == b"sleeping\n"
    spawning = asyncio.create_task(server.spawn(PROBE, ["sleep"], Path("/"), {}, None))
    await asyncio.sleep(0)  # one loop step: the request is sent, its answer awaited
    assert server._pending, "the request is not on its way"
    spawning.cancel()
    with pytest.raises(asyncio.CancelledError):
        await spawning
    pid = server.pid
    await eventually(lambda: [c.pid for c in psutil.Process(pid).children()] == [task.pid], 10, "only the first task")
    await server.close()
    assert not process_alive(pid) and not process_alive(task.pid)
    assert await task.wait() == -signal.SIGKILL


@pytest.mark.parametrize("mode", ["killed", "paused", "spawner-killed", "spawner-paused"])
async def test_the_fork_server_and_its_tasks_die_with_the_worker(mode: str) -> None:
    """``killed``: the worker is SIGKILLed (the server's parent-death signal, then its tasks'). ``paused``:
    the worker is SIGSTOPped, its lease not renewed, and the task was never added to the reaper: past its
    deadline the reaper kills the worker's children, the fork server among them, and the task dies with
    the server although the worker cannot act. ``spawner-*``: the same with a tenant spawner's task, which
    has no parent-death signal: the spawner's own (SIGTERM) ends its loop, which kills its tasks; the
    reaper's deadline stops the worker's children, kills what they started, then them."""
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", PROBE, "worker", mode, cwd=ROOT, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert worker.stdout is not None
        pids = json.loads(await asyncio.wait_for(worker.stdout.readline(), 60))
        assert process_alive(pids["server"]) and process_alive(pids["task"])
        assert psutil.Process(pids["task"]).ppid() == pids["server"]
        worker.send_signal(signal.SIGKILL if mode.endswith("killed") else signal.SIGSTOP)
        await eventually(
            lambda: not process_alive(pids["server"]) and not process_alive(pids["task"]), 20, "server and task gone"
        )
        if mode.endswith("paused"):
            assert worker.returncode is None  # the deadline did it, not the worker's end
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        await worker.wait()


# -- the executor with a fork server ---------------------------------------------------------------


@pytest.fixture
async def executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Executor]:
    """An in-process Executor whose SPARK launches run the probe (``rawScript``: its arguments), allowed
    to fork; PYTHONPATH passed through so that the normal start finds the probe too."""

    def launch(self: SparkTask, ctx: TaskContext) -> Launch:
        argv = [sys.executable, "-m", PROBE, *ctx.render(ctx.task_params["rawScript"]).split()]
        return Launch(argv=argv, inprocess=PROBE)

    monkeypatch.setattr(SparkTask, "launch", launch)
    # the probe lives in this checkout's tests package: a normal start (cwd = its exec dir) finds it only so
    monkeypatch.setenv("PYTHONPATH", CHECKOUT)
    rpc = rpc_client(timeout=10)
    reporter = Reporter(rpc, retry_initial=0.05)
    reporter.start()
    policy = TaskPolicy(allow_root_tenant=True, passthrough=("PATH", "PYTHONPATH"))
    ex = Executor(
        slots=8, log_dir=tmp_path / "logs", exec_dir=tmp_path / "exec", address="127.0.0.1:1", reporter=reporter,
        policy=policy, forkserver=ForkServer([PROBE], {"PATH": os.environ["PATH"]}),
    )  # fmt: skip
    yield ex
    await ex.kill_all()
    assert ex.forkserver is not None
    await ex.forkserver.close()
    await reporter.close()
    await rpc.close()


async def test_the_executor_forks_what_it_may_and_reports_a_dead_server_s_task_lost(
    executor: Executor, sink: ReportSink
) -> None:
    assert executor.forkserver is not None
    ok = task("SPARK", {"rawScript": "say ${setValue(n=7)}", "localParams": [{"prop": "n", "direct": "OUT"}]},
              sink.address)  # fmt: skip
    assert executor.dispatch(ok).accepted
    result = await sink.result(ok.task_instance_id)
    text = await log_text(result["log_path"])
    assert result["state"] == "SUCCESS" and "[porpoise] forked by the worker's fork server" in text, text
    assert result["var_pool"] == [{"prop": "n", "direct": "OUT", "type": "VARCHAR", "value": "7"}]

    killed = task("SPARK", {"rawScript": "sleep"}, sink.address)
    assert executor.dispatch(killed).accepted
    await eventually(lambda: killed.task_instance_id in executor.runs and executor.runs[killed.task_instance_id].proc,
                     10, "the task started")  # fmt: skip
    assert (await executor.kill(killed.task_instance_id, 1)).state == "KILL"
    assert (await sink.result(killed.task_instance_id))["state"] == "KILL"

    lost = task("SPARK", {"rawScript": "sleep"}, sink.address)
    assert executor.dispatch(lost).accepted
    running = await sink.running(lost.task_instance_id)
    os.kill(executor.forkserver.pid, signal.SIGKILL)
    result = await sink.result(lost.task_instance_id)
    assert result["state"] == "LOST" and "the fork server died" in result["message"], result
    assert not process_alive(running["pid"]) and executor.runs == {}

    normal = task("SPARK", {"rawScript": "say started the normal way"}, sink.address)
    assert executor.dispatch(normal).accepted
    result = await sink.result(normal.task_instance_id)
    text = await log_text(result["log_path"])
    assert result["state"] == "SUCCESS" and "started the normal way" in text and "forked" not in text, text
