"""Tasks die with their worker's lease (invariant 3): a worker killed with SIGKILL, or paused long
enough for its lease to expire, leaves no task running beside the replacement attempt."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from engine.infra.etcd import EtcdServer
from engine.worker import reaper as reaper_mod
from engine.worker.reaper import Reaper
from registry import EtcdClient
from rpc import RpcClient
from tests.helpers import ROOT, NodeProc, eventually, wait_sync
from tests.worker_harness import ReportSink, dispatch, task

pytestmark = pytest.mark.slow

TTL = 3.0


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _start(node_factory: Callable[..., NodeProc], etcd: EtcdServer, root: str, tmp: Path) -> NodeProc:
    return node_factory(
        "worker", etcd.endpoint, root, TTL,
        overrides=[f"worker.log_dir={tmp / 'logs'}", f"worker.exec_dir={tmp / 'exec'}"],
    )  # fmt: skip


async def _running_tree(client: RpcClient, worker: NodeProc, sink: ReportSink) -> list[int]:
    msg = task("SHELL", {"rawScript": "sleep 1000 & sleep 1000 & echo started; wait"}, sink.address)
    await dispatch(client, worker.address, msg)
    running = await sink.running(msg.task_instance_id)
    root = psutil.Process(running["pid"])
    children = await eventually(lambda: len(root.children()) >= 2 and root.children(), 10, "task children")
    return [root.pid, *(c.pid for c in children)]


async def _tree_gone_while_the_lease_lives(etcd: EtcdClient, key: str, pids: list[int]) -> None:
    """The task tree is seen gone, and only then the worker's key (bound to its lease) is read back and
    still there: the tree died before the lease expired, so before any replacement attempt could start."""
    await eventually(lambda: not any(_alive(p) for p in pids), TTL + 5, "the task tree killed by the reaper")
    assert await etcd.get(key) is not None, "the lease expired before the old task tree was gone"


async def test_a_killed_worker_s_tasks_die_with_it_before_its_lease_expires(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path,
    sink: ReportSink, client: RpcClient, etcd: EtcdClient,
) -> None:  # fmt: skip
    worker = await asyncio.to_thread(_start, node_factory, etcd_server, etcd_root, tmp_path)
    pids = await _running_tree(client, worker, sink)
    key = f"{etcd_root}/nodes/worker/default/{worker.address}"
    assert await etcd.get(key) is not None
    assert worker.proc.record is not None
    worker.proc.record.signal(signal.SIGKILL)
    await _tree_gone_while_the_lease_lives(etcd, key, pids)


async def test_a_paused_worker_s_tasks_die_before_its_lease_expires(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path,
    sink: ReportSink, client: RpcClient, etcd: EtcdClient,
) -> None:  # fmt: skip
    worker = await asyncio.to_thread(_start, node_factory, etcd_server, etcd_root, tmp_path)
    pids = await _running_tree(client, worker, sink)
    key = f"{etcd_root}/nodes/worker/default/{worker.address}"
    assert await etcd.get(key) is not None
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        await _tree_gone_while_the_lease_lives(etcd, key, pids)
    finally:
        os.kill(worker.pid, signal.SIGCONT)


async def test_closing_the_reaper_kills_what_it_knows(tmp_path: Path) -> None:
    reaper = Reaper(lease_ttl=60)
    await reaper.start()
    sleeper = await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True)
    other = await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True)
    try:
        reaper.add(sleeper.pid)
        reaper.add(other.pid)
        reaper.remove(other.pid)
        await reaper.close()
        assert await asyncio.wait_for(sleeper.wait(), 5) == -signal.SIGKILL
        assert other.returncode is None  # removed: not the reaper's business any more
    finally:
        for p in (sleeper, other):
            if p.returncode is None:
                p.kill()
                await p.wait()


def _started_us(pid: int) -> int:
    """When ``pid`` started, in microseconds on the boot-time clock (/proc/PID/stat, field 22)."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    return ticks * 1_000_000 // os.sysconf("SC_CLK_TCK")


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text()


def _next_pid_after(pid: int) -> None:
    Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid))  # /proc: never blocks


async def _sleeper_with_pid(pid: int, after_us: int) -> asyncio.subprocess.Process:
    """A new session leader holding ``pid``, started after ``after_us`` (boot-time clock): the pid reused, as
    when the pid space wraps. The kernel hands out the pid after ns_last_pid; other processes of the machine
    may take it first, so it tries again until it holds it."""
    deadline = time.monotonic() + 20
    while True:
        assert time.monotonic() < deadline, f"pid {pid} not obtained again"
        _next_pid_after(pid - 1)
        proc = await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True)
        if proc.pid == pid and _started_us(pid) > after_us:
            return proc
        proc.kill()
        await proc.wait()


async def test_a_group_whose_pid_was_reused_after_the_add_is_left_alone() -> None:
    """A task ended while its worker could not say ``del`` (paused, or killed right after seeing the exit): its
    pid may be another process's by the time the reaper kills. That process is spared; a group whose
    leader is gone but whose other process lives on still dies, and so does a live task."""
    reaper = Reaper(lease_ttl=60)
    await reaper.start()
    ended = await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True)
    live = await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True)
    orphaned = await asyncio.create_subprocess_exec(
        "bash", "-c", "sleep 1000 >/dev/null & echo $!", start_new_session=True, stdout=asyncio.subprocess.PIPE
    )
    procs = [ended, live, orphaned]
    try:
        assert orphaned.stdout is not None
        member = int((await orphaned.stdout.readline()).decode())
        for p in procs:
            reaper.add(p.pid)
        reaper.flush()  # the line goes now, stamped now
        added = int(time.clock_gettime(time.CLOCK_BOOTTIME) * 1_000_000)
        await orphaned.wait()  # its leader exits; the background sleep keeps the group
        ended.kill()
        await ended.wait()  # reaped: the pid is free, still in the reaper's table
        reused = await _sleeper_with_pid(ended.pid, added)
        procs.append(reused)
        await reaper.close()
        assert await asyncio.wait_for(live.wait(), 5) == -signal.SIGKILL
        await eventually(lambda: not _alive(member), 5, "the orphaned group's process killed")
        assert reused.returncode is None and _alive(reused.pid), "the reaper killed a reused pid's process"
    finally:
        for p in procs:
            if p.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                await p.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)


async def test_a_task_s_hostile_process_name_is_data_to_the_reaper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task names its own process (comm, printed unescaped in /proc/PID/stat: a newline, ") " and glob
    characters included). Reading a group leader's start time must not expand that name: here a name that
    would glob files whose names hold a command substitution, evaluated by bash arithmetic if it did. The
    task still dies at the reaper's end."""
    monkeypatch.chdir(tmp_path)  # the reaper's working directory: where the name's glob would look
    (tmp_path / "tmp").mkdir()
    for i in range(40):
        (tmp_path / "tmp" / f"A{i}[$(touch owned)]").touch()  # run in the reaper's directory if ever
    names_itself = (
        "import ctypes, sys, time\n"
        "ctypes.CDLL(None).prctl(15, b') tmp/*\\n', 0, 0, 0)  # PR_SET_NAME\n"
        "print('named', flush=True)\n"
        "time.sleep(1000)\n"
    )
    reaper = Reaper(lease_ttl=60)
    await reaper.start()
    task = await asyncio.create_subprocess_exec(
        sys.executable, "-c", names_itself, start_new_session=True, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert task.stdout is not None and await task.stdout.readline() == b"named\n"
        assert _comm(task.pid) == ") tmp/*\n\n"  # as the reaper reads it
        reaper.add(task.pid)
        await reaper.close()
        assert await asyncio.wait_for(task.wait(), 5) == -signal.SIGKILL
        assert not (tmp_path / "owned").exists(), "the reaper ran a command a task's name smuggled in"
    finally:
        if task.returncode is None:
            task.kill()
            await task.wait()


async def test_what_one_turn_of_the_loop_tells_arrives_in_order(tmp_path: Path) -> None:
    """Adds and removals told in one turn go together, in the order told, over several lines when many:
    a group removed and added again is the reaper's; every one added and not removed dies at the end."""
    reaper = Reaper(lease_ttl=60)
    await reaper.start()
    sleepers = [await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True) for _ in range(3)]
    kept, dropped, again = sleepers
    try:
        beyond = [5_000_000 + n for n in range(2 * reaper_mod.GROUPS_PER_LINE + 50)]  # above any pid_max here
        for pgid in [*beyond[:300], kept.pid, dropped.pid, again.pid, *beyond[300:]]:
            reaper.add(pgid)
        reaper.remove(dropped.pid)
        reaper.remove(again.pid)
        reaper.add(again.pid)
        await reaper.close()
        assert await asyncio.wait_for(kept.wait(), 5) == -signal.SIGKILL
        assert await asyncio.wait_for(again.wait(), 5) == -signal.SIGKILL
        assert dropped.returncode is None
    finally:
        for p in sleepers:
            if p.returncode is None:
                p.kill()
                await p.wait()


async def test_lines_other_than_renewals_do_not_move_the_deadline(tmp_path: Path) -> None:
    # a task started just before a pause must not extend the time the reaper gives the worker: only a
    # renewal does. Here groups keep being added and removed; the one renewal allows 0.2 s (0.7 - margin).
    reaper = Reaper(lease_ttl=60)
    await reaper.start()
    sleeper = await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True)
    try:
        reaper.add(sleeper.pid)
        reaper.renewed(0.7)
        deadline = time.monotonic() + 10
        n = 10**6
        while sleeper.returncode is None:
            assert time.monotonic() < deadline, "other lines kept pushing the reaper's deadline out"
            n += 1
            reaper.add(n)
            reaper.remove(n)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sleeper.wait(), 0.05)
        assert sleeper.returncode == -signal.SIGKILL
        assert reaper.took(sleeper.pid) is not None
    finally:
        if sleeper.returncode is None:
            sleeper.kill()
            await sleeper.wait()
        await reaper.close()


async def test_the_reaper_kills_when_renewals_stop_and_says_whom(tmp_path: Path) -> None:
    reaper = Reaper(lease_ttl=0.3)  # no renewal ever comes: it kills 0.3 s after the last line
    await reaper.start()
    sleeper = await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True)
    try:
        added = time.time()
        reaper.add(sleeper.pid)
        assert await asyncio.wait_for(sleeper.wait(), 10) == -signal.SIGKILL
        seen = time.time()
        killed_at = reaper.took(sleeper.pid)
        assert killed_at is not None and added < killed_at <= seen  # when it killed, on the wall clock
        assert reaper.took(sleeper.pid) is None  # reported once
        assert reaper.took(123456789) is None
    finally:
        if sleeper.returncode is None:
            sleeper.kill()
            await sleeper.wait()
        await reaper.close()


# A stand-in worker: it has a task process it never announced (as when the worker is stopped between
# creating the process and saying `add`) and a reaper (its child, as in the worker), sends no renewal,
# and reports how the task ended, whether the reaper owned up to it, and how the reaper ended.
UNANNOUNCED = """
import asyncio, os, sys
from engine.worker import reaper as reaper_mod
from engine.worker.reaper import Reaper

async def main():
    task = await asyncio.create_subprocess_exec(
        "sleep", "1000", start_new_session=True, stdout=asyncio.subprocess.DEVNULL
    )
    # the lease (0.3 s, less the margin) is past at once: the reaper kills what runs when it looks
    reaper = Reaper(lease_ttl=0.3, children_of=os.getpid())
    await reaper.start()
    print("task", task.pid, flush=True)
    code = await task.wait()
    took = reaper.took(task.pid) is not None
    await reaper.close()  # end of file: a live reaper exits 0
    print("ended", code, took, reaper.proc.returncode, flush=True)

asyncio.run(main())
"""


async def test_at_the_deadline_the_workers_children_it_never_added_die_too(tmp_path: Path) -> None:
    bystander = await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True)  # not its child
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", UNANNOUNCED, stdout=asyncio.subprocess.PIPE, cwd=ROOT, start_new_session=True
    )
    assert worker.stdout is not None
    stdout = worker.stdout

    async def said(word: str) -> list[str]:  # its log lines come on stdout too
        while True:
            line = (await asyncio.wait_for(stdout.readline(), 15)).decode()
            assert line, f"the stand-in worker ended before saying {word!r}"
            if line.startswith(word + " "):
                return line.split()[1:]

    task_pid = 0
    try:
        task_pid = int((await said("task"))[0])
        ending = await said("ended")
        # killed, named as killed, and the reaper (a child of the worker too) spared itself
        assert ending == [str(-signal.SIGKILL), "True", "0"]
        assert bystander.returncode is None and _alive(bystander.pid)
    finally:
        if task_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(task_pid, signal.SIGKILL)
        for p in (worker, bystander):
            if p.returncode is None:
                p.kill()
                await p.wait()


async def test_a_re_registered_worker_s_first_task_is_not_reaped(
    etcd_factory: Callable[[], EtcdServer], etcd_root: str, node_factory: Callable[..., NodeProc],
    tmp_path: Path, sink: ReportSink, client: RpcClient,
) -> None:  # fmt: skip
    # The reaper's deadline is the old session's: long past once the worker re-registers. Its new session's
    # first renewal comes a keep-alive interval later (4 s here, of a 6 s lease); a task started before then
    # must not be killed: registration itself tells the reaper the new lease is alive.
    server = etcd_factory()
    worker = await asyncio.to_thread(
        node_factory, "worker", server.endpoint, etcd_root, 6,
        overrides=[f"worker.log_dir={tmp_path / 'logs'}", f"worker.exec_dir={tmp_path / 'exec'}"],
        PORPOISE_REGISTRY_ON_LOST="reregister", PORPOISE_REGISTRY_KEEPALIVE_INTERVAL="4",
        PORPOISE_WORKER_MAX_CPU_LOAD_AVG="100000",
    )  # fmt: skip
    assert server.proc and server.proc.record
    server.proc.record.signal(signal.SIGSTOP)
    try:
        await asyncio.to_thread(wait_sync, lambda: worker.health()[0] == 503, 6 + 5, "worker to lose its session")
    finally:
        server.proc.record.signal(signal.SIGCONT)
    await asyncio.to_thread(wait_sync, worker.healthy, 20, "worker registered again")
    msg = task("SHELL", {"rawScript": "sleep 2; echo done"}, sink.address)
    reply = await dispatch(client, worker.address, msg)
    assert reply.accepted, reply
    result = await sink.result(msg.task_instance_id)
    assert result["state"] == "SUCCESS", result["message"]


async def test_the_deadline_is_judged_on_the_monotonic_clock_it_is_given(tmp_path: Path) -> None:
    # the reaper's clock is /proc/uptime (monotonic, like the session's judgement of the lease): a step of the
    # wall clock moves neither. Here it reads a clock file the test moves: only that clock's time kills.
    clock = tmp_path / "uptime"

    def set_clock(seconds: str) -> None:
        (tmp_path / "next").write_text(f"{seconds} 0.00\n")
        os.replace(tmp_path / "next", clock)  # whole, never half-written

    set_clock("100.00")
    reaper = Reaper(lease_ttl=60, clock=str(clock))
    await reaper.start()
    sleeper = await asyncio.create_subprocess_exec("sleep", "1000", start_new_session=True)
    try:
        reaper.add(sleeper.pid)
        reaper.renewed(30.0)  # 29.5 s on that clock from when it reads the line: for ever here on any other
        deadline = time.monotonic() + 10
        now, n = 100, 10**6
        while sleeper.returncode is None:  # the clock moves 1000 s a step; any line makes it look again
            assert time.monotonic() < deadline, "the reaper did not judge its deadline on the clock it was given"
            now, n = now + 1000, n + 1
            set_clock(f"{now}.00")
            reaper.add(n)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sleeper.wait(), 0.05)
        assert sleeper.returncode == -signal.SIGKILL
    finally:
        if sleeper.returncode is None:
            sleeper.kill()
            await sleeper.wait()
        await reaper.close()
