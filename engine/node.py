"""What every node process (master, worker) shares: arguments, config, logging, the uvloop loop,
the HTTP listener (/health, /ready, /metrics; the RPC server mounts on it), the registry presence, signal handling
and self-fencing when the registry session is LOST (invariant 6)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Coroutine, Sequence
from typing import Any

import uvloop
from aiohttp import web

from core import logs, marks
from core.aio import bounded, cancel_and_wait
from core.errors import ConfigError, PorpoiseError, SchemaMismatch
from engine import clocks
from engine import config as config_mod
from engine.config import Config
from engine.metrics import CONTENT_TYPE, NodeMetrics
from registry import (
    DuplicateNode,
    HeartbeatSource,
    LoadLimits,
    NodeId,
    RegistryNode,
    RegistryUnavailable,
    TaskCounts,
)
from registry.identity import advertise_host
from registry.load import CpuMeter
from rpc import RpcClient, RpcServer
from rpc.tls import TlsFiles, client_context, server_context

log = logs.get(__name__)

#: seconds each step of a bounded shutdown may take (then it is cancelled, and abandoned if it ignores that)
SHUTDOWN_STEP = 2.0
#: seconds a bounded shutdown may take besides the role's own grace before the process exits regardless
SHUTDOWN_BOUND = 25.0

#: exit code of a node that stopped because its registry session was LOST
EXIT_LEASE_LOST = 75
#: exit code of a node whose registry key another live node holds (same advertised address): a
#: configuration error, restarting will not help (EX_CONFIG)
EXIT_DUPLICATE = 78
#: exit code of a node that found a database schema version it does not know (none, older: run `porpoise db
#: upgrade`, newer: the node is older than the database); restarting will not help (EX_DATAERR)
EXIT_SCHEMA = 65


def exit_code(exc: PorpoiseError) -> int:
    """The exit code of a node that failed with ``exc``."""
    if isinstance(exc, DuplicateNode):
        return EXIT_DUPLICATE
    return EXIT_SCHEMA if isinstance(exc, SchemaMismatch) else 1


class Node:
    """Base class of master and worker processes. Subclasses fill in the role specifics."""

    role = "node"

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        if not cfg.rpc.secret:
            raise ConfigError("rpc.secret: required (the shared secret nodes sign RPC calls with)")
        self.app = web.Application(client_max_size=cfg.rpc.max_body_bytes + 1024)
        self.metrics = NodeMetrics(self.role)
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/ready", self._ready_check)
        self.app.router.add_get("/metrics", self._metrics)
        tls = TlsFiles.of(cfg.rpc)
        #: the listener's TLS (mutual: callers' certificates are checked); None: plain HTTP
        self.ssl = server_context(tls) if tls else None
        self.rpc_server = RpcServer(
            self.app,
            cfg.rpc.secret,
            cfg.rpc.max_clock_skew,
            cfg.rpc.max_body_bytes,
            require_client_cert=bool(tls),
            stream=cfg.rpc.stream,
        )
        self.rpc = RpcClient(
            cfg.rpc.secret,
            cfg.rpc.timeout,
            ssl=client_context(tls) if tls else None,
            observe=self.metrics.rpc_latency,
            clock=clocks.SkewWatch(cfg.master.max_clock_skew, self.metrics).observe,
            use_streams=cfg.rpc.stream,
        )
        self.runner: web.AppRunner | None = None
        self.address = ""
        self.registry: RegistryNode | None = None
        self._stop = asyncio.Event()
        self._shut = False
        #: registered and role services started (health answers 200 only then)
        self._ready = False
        self.exit_code = 0
        #: how busy the CPUs are now: the overload guard and the heartbeat read it
        self.cpu = CpuMeter()

    # -- role hooks -------------------------------------------------------------------------------

    def listen(self) -> tuple[str, int, str]:
        """(listen host, listen port, advertised host)."""
        raise NotImplementedError

    def advertise_port(self) -> int:
        """The port peers are told to call, when it is not the one we listen on (0: that one)."""
        return 0

    def node_id(self) -> NodeId:
        raise NotImplementedError

    def heartbeat_source(self) -> HeartbeatSource:
        return HeartbeatSource(LoadLimits(), counts=TaskCounts, busy=lambda: self.cpu.busy)

    async def on_registered(self) -> None:
        """Called after each (re-)registration."""

    async def on_fenced(self) -> None:
        """Called the moment the session is LOST: stop claiming, dispatching, running."""

    async def on_started(self) -> None:
        """Called once, after the listener is up and before the first registration."""

    async def on_shutdown(self) -> None:
        """Called once at shutdown, before the node deregisters."""

    def health(self) -> dict[str, Any]:
        return {}

    async def readiness(self) -> dict[str, bool]:
        """What the role needs besides its registration to do its work (e.g. {"database": True})."""
        return {}

    # -- lifecycle --------------------------------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        session = self.registry.session if self.registry else None
        body = {
            "role": self.role,
            "address": self.address,
            "session": session.state.value if session else "NONE",
            **self.health(),
        }
        return {**body, "ready": self._ready and session is not None and session.alive}

    async def _health(self, _: web.Request) -> web.Response:
        """Liveness: the process answers (its event loop runs). Whether it works: /ready."""
        return web.json_response(self._state())

    async def _ready_check(self, _: web.Request) -> web.Response:
        """Readiness: registered with a live lease, and what the role depends on reachable."""
        body = self._state()
        needs = await self.readiness() if body["ready"] else {}
        ready = body["ready"] and all(needs.values())
        return web.json_response({**body, **needs, "ready": ready}, status=200 if ready else 503)

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    async def _start_http(self) -> None:
        host, port, advertise = self.listen()
        advertise = await asyncio.to_thread(advertise_host, self.role, host, advertise, self.cfg.registry.endpoints)
        self.runner = web.AppRunner(self.app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port, ssl_context=self.ssl)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.address = f"{advertise}:{self.advertise_port() or bound}"

    async def _register(self) -> None:
        delay = 0.2
        while not self._stop.is_set():
            self.registry = RegistryNode(self.cfg.registry, self.node_id(), self.heartbeat_source())
            try:
                # a stop request ends it too: registering may wait for another node's key to expire
                await self._unless_stopped(self.registry.start())
                return
            except RegistryUnavailable as exc:
                await self.registry.close(revoke=False)
                log.warning("registry unavailable, retrying", error=str(exc), retry_in=delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
                delay = min(delay * 2, 5.0)

    async def _unless_stopped(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` until it ends (its error propagates) or a stop is requested (it is cancelled)."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(stop)
            if not task.done():
                await cancel_and_wait(task)
        if not task.cancelled():
            task.result()

    def request_stop(self) -> None:
        self._stop.set()

    def _wedge(self) -> None:
        """Test-only (debug.wedge_hook, SIGUSR2): block the event loop for good, as a deadlock would."""
        log.error("debug.wedge_hook: wedging the event loop for good")
        threading.Event().wait()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        if self.cfg.debug.wedge_hook:
            loop.add_signal_handler(signal.SIGUSR2, self._wedge)
        await self._start_http()
        logs.configure(self.cfg.logging.format, self.cfg.logging.level, node=f"{self.role}@{self.address}")
        self.cpu.start()
        self.metrics.start_lag_probe()
        try:
            await self.on_started()
            while not self._stop.is_set():
                await self._register()
                if self.registry is None or self._stop.is_set():
                    break
                await self.on_registered()
                self._ready = True
                log.info("node started", role=self.role, address=self.address)
                lost = asyncio.ensure_future(self.registry.session.lost.wait())
                stop = asyncio.ensure_future(self._stop.wait())
                await asyncio.wait({lost, stop}, return_when=asyncio.FIRST_COMPLETED)
                lost.cancel()
                stop.cancel()
                if self._stop.is_set():
                    break
                # session LOST: fence ourselves before anything else
                self._ready = False
                await self.on_fenced()
                await self.registry.close(revoke=False)
                if self.cfg.registry.on_lost == "exit":
                    log.error("registry session lost: exiting", lease_ttl=self.cfg.registry.lease_ttl)
                    self.exit_code = EXIT_LEASE_LOST
                    break
                log.warning("registry session lost: re-registering as a new node")
        finally:
            await self.shutdown()
        return self.exit_code

    async def shutdown(self) -> None:
        """Phased and idempotent: role shutdown (drain), deregister, stop listening, close clients.

        With a ``shutdown_bound`` the node's own steps are bounded too (what overruns is abandoned), and a
        process still alive that long after the shutdown began (a task ignoring every cancellation, a
        thread that never returns: the interpreter's exit waits for both) exits anyway."""
        if self._shut:
            return
        self._shut = True
        limit = self.shutdown_bound()
        if limit > 0:
            self._arm_exit_watchdog(limit)
        step = SHUTDOWN_STEP if limit > 0 else None
        try:
            await self.on_shutdown()
        except Exception:
            log.exception("shutdown hook failed")
        if self.registry is not None:
            await self._step("deregister", self.registry.close(revoke=True), step)
        if self.runner is not None:
            runner, self.runner = self.runner, None
            # the call streams first, while the listener still reads (its cleanup drops whatever arrives)
            await self._step("call streams", self.rpc_server.close_streams(), step)
            await self._step("listener", runner.cleanup(), step)
        await self._step("rpc client", self.rpc.close(), step)
        await self.cpu.close()
        await self.metrics.close()
        log.info("node stopped", role=self.role, address=self.address)

    def shutdown_bound(self) -> float:
        """Seconds the whole shutdown may take before the process exits regardless (0: no bound)."""
        return 0.0

    async def _step(self, what: str, work: Coroutine[Any, Any, Any], timeout: float | None) -> None:
        if timeout is None:
            await work
        else:
            await bounded(what, work, timeout)

    def _arm_exit_watchdog(self, seconds: float) -> None:
        def overran() -> None:
            log.error("shutdown overran its bound; exiting now", seconds=seconds, exit_code=self.exit_code)
            os._exit(self.exit_code)

        timer = threading.Timer(seconds, overran)
        timer.daemon = True
        timer.start()


def parse_args(prog: str, argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog)
    config_mod.add_arguments(parser)
    return parser.parse_args(argv)


def main(node_cls: type[Node], argv: Sequence[str] | None = None) -> int:
    args = parse_args(f"python -m engine.{node_cls.role}", argv)
    try:
        cfg = config_mod.load(args.config, args.overrides)
    except PorpoiseError as exc:
        print(f"porpoise {node_cls.role}: {exc}", file=sys.stderr)
        return 2
    logs.configure(cfg.logging.format, cfg.logging.level, node=node_cls.role)
    clocks.offset_wall_clock(cfg.debug.clock_offset)  # test-only: 0 unless a test steps this node's clock

    async def run() -> int:
        return await node_cls(cfg).run()

    try:
        if cfg.debug.step_marks:
            marks.start(cfg.debug.step_marks)  # benchmark-only (bench/steps.py)
        return uvloop.run(run())
    except PorpoiseError as exc:
        log.error("node failed", error=str(exc))
        print(f"porpoise {node_cls.role}: {exc}", file=sys.stderr)
        return exit_code(exc)
    finally:
        marks.flush()
