"""A task module for the fork server's tests (tests/test_forkserver.py), light to preload.

As a forked task (``main``): ``info CODE`` prints what the process is (ids, session, descriptors,
environment, the environment block it started with) and exits with CODE; ``say WORDS`` prints them;
``sleep`` says so and sleeps; ``raise`` raises; ``exit TEXT`` is ``sys.exit(TEXT)``; ``threads`` leaves a
thread pool and a late thread.

As a script, ``python -m tests.forkserver_probe worker MODE`` plays a worker: it starts a fork server, has it
fork a ``sleep`` task, prints ``{"server": PID, "task": PID}`` and waits to be killed. MODE ``paused``: it
also starts the task reaper with itself as ``children_of`` and never renews its lease, the task not added
(the test stops it: the reaper's deadline must end the task all the same). MODEs ``spawner-killed`` and
``spawner-paused``: the same with a tenant spawner's task (run as ``nobody``) instead of a forked one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import pwd
import sys
import threading
import time
from pathlib import Path

_pools: list[concurrent.futures.ThreadPoolExecutor] = []


def main(argv: list[str]) -> int:
    what = argv[1]
    if what == "info":
        with open("/proc/self/environ", "rb") as fh:
            initial = fh.read().decode(errors="replace")
        info = {
            "argv": argv, "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "egid": os.getegid(),
            "groups": os.getgroups(), "pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0),
            "sid": os.getsid(0), "cwd": os.getcwd(), "env": dict(os.environ), "initial_environ": initial,
            "stdin": os.readlink("/proc/self/fd/0"), "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
            "path0": sys.path[0], "tz": time.strftime("%Z"),
        }  # fmt: skip
        print(json.dumps(info), flush=True)
        return int(argv[2])
    if what == "say":
        print(*argv[2:], flush=True)
        return 0
    if what == "sleep":
        print("sleeping", flush=True)
        time.sleep(600)
        return 0
    if what == "threads":  # a pool's idle worker and a late non-daemon thread: the exit waits as Python's
        _pools.append(concurrent.futures.ThreadPoolExecutor(1))  # kept: its idle worker waits for work
        _pools[0].submit(print, "from the pool", flush=True).result()
        threading.Thread(target=lambda: (time.sleep(0.2), print("late thread", flush=True))).start()
        return 0
    if what == "raise":
        raise RuntimeError("raised by the probe")
    if what == "exit":
        sys.exit(argv[2])
    return 2


async def _worker(mode: str) -> None:
    from core import logs
    from engine.worker.forkclient import ForkServer, TenantSpawners
    from engine.worker.reaper import Reaper

    logs.configure("console", "warning")  # our output is the pids' line
    if mode.startswith("spawner-"):  # a tenant spawner's task (no parent-death signal) instead
        server = TenantSpawners({"PATH": os.environ.get("PATH", "")})
        task = await server.start(pwd.getpwnam("nobody"), ["bash", "-c", "echo sleeping; exec sleep 600"],
                                  Path("/"), {"PATH": os.environ.get("PATH", "")})  # fmt: skip
        server = next(iter(server.spawners.values()))
    else:
        server = ForkServer(["tests.forkserver_probe"], {"PATH": os.environ.get("PATH", "")})
        task = await server.spawn("tests.forkserver_probe", ["sleep"], Path("/"), {}, None)
    assert task is not None
    await task.stdout.readline()  # "sleeping": it runs
    if mode.endswith("paused"):
        reaper = Reaper(1.5, children_of=os.getpid())  # deadline 1 s from now; no renewal, no "add"
        await reaper.start()
    print(json.dumps({"server": server.pid, "task": task.pid}), flush=True)
    await asyncio.sleep(600)


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        asyncio.run(_worker(sys.argv[2]))
    else:
        sys.exit(main(sys.argv))
