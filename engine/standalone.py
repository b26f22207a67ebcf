"""All-in-one launcher (``make run``): private etcd + PostgreSQL + master + worker in one run dir.

Foreground; Ctrl-C (or SIGTERM) stops the nodes, then PostgreSQL, then etcd. Data stays in the run
directory, so the next start continues with the same history. A node process that dies is restarted.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from engine import logs
from engine.config import Config
from engine.errors import PorpoiseError
from engine.infra.process import ManagedProcess
from engine.infra.stack import Stack

log = logs.get(__name__)

NODES = (("master", "master"), ("worker", "worker"))


def run(cfg: Config, run_dir: Path, ready: threading.Event | None = None) -> int:
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("stopping", signal=signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    stack = Stack(run_dir, cfg)
    code = 0
    try:
        stack.start_infra()
        procs: dict[str, ManagedProcess] = {}
        for role, name in NODES:
            if stop.is_set():
                break
            procs[name] = stack.start_node(role, name)
        if not stop.is_set():
            _banner(stack)
            if ready is not None:
                ready.set()
        while not stop.wait(0.5):
            for role, name in NODES:
                proc = procs[name]
                if proc.exited() is not None:
                    log.error("node exited; restarting", name=name, code=proc.exited(), log=str(proc.log_path))
                    procs[name] = stack.start_node(role, name)
    except PorpoiseError as exc:
        log.error("standalone failed", error=str(exc))
        code = 1
    finally:
        stopped = stack.stop_started()
        log.info("stopped", processes=stopped)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code


def _banner(stack: Stack) -> None:
    assert stack.etcd is not None and stack.postgres is not None
    print(
        "\nPorpoise standalone is up\n"
        f"  etcd        {stack.etcd.endpoint}\n"
        f"  PostgreSQL  127.0.0.1:{stack.postgres.port} (data {stack.postgres.data_dir})\n"
        + "".join(f"  {p.name:<11} pid {p.record.pid if p.record else '?'}, log {p.log_path}\n" for p in stack.nodes)
        + f"  state       {stack.state_path}\n"
        "Press Ctrl-C to stop everything.\n",
        flush=True,
    )
