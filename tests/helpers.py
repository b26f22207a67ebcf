"""Test helpers: waiting for conditions with deadlines (never bare sleeps), node processes."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from engine.infra.ports import free_port
from engine.infra.process import ManagedProcess, in_netns
from engine.secretbox import new_key_line

ROOT = Path(__file__).resolve().parent.parent
TEST_SECRET = "test-secret-0123456789-abcdefghijklmnopqrstuv"
#: the keyring sealing stored credentials in tests (one random key per test session)
TEST_KEYS = new_key_line("test")


async def eventually(predicate: Callable[[], Any], timeout: float, what: str = "condition", interval: float = 0.02):
    """Await until ``predicate()`` (sync or async) is truthy; return its value; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie, not reaped yet, counts as gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_sync(predicate: Callable[[], Any], timeout: float, what: str = "condition", interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def scrape(target: str, timeout: float = 5.0) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """A node's /metrics (``target``: its base URL, or host:port for plain HTTP), parsed by prometheus_client:
    (sample name, labels) -> value."""
    base = target if "://" in target else f"http://{target}"
    text = http_text(f"{base}/metrics", timeout)
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metric(target: str, name: str, **labels: str) -> float | None:
    """One sample of a node's /metrics (None: not exposed)."""
    return scrape(target).get((name, frozenset(labels.items())))


def rpc_client(timeout: float = 5.0) -> Any:
    """An RPC client for a test playing a node: signed with the test secret, over mutual TLS when the suite runs
    with TLS."""
    from rpc import RpcClient
    from tests import tls

    return RpcClient(TEST_SECRET, timeout, ssl=tls.client_ssl())


def http_text(url: str, timeout: float = 5.0) -> str:
    """GET a text answer (an https:// URL checked against the test CA)."""
    context = None
    if url.startswith("https://"):
        from tests import tls

        context = tls.trusting()
    with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
        return str(resp.read().decode())


def http_json(url: str, timeout: float = 2.0, ca_file: str | None = None) -> tuple[int, Any]:
    """GET a JSON answer; an https:// URL's certificate is checked against ``ca_file`` (default: the test CA)."""
    context = None
    if url.startswith("https://"):
        from tests import tls

        context = tls.trusting(ca_file)
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


class NodeProc:
    """A real ``python -m engine.<role>`` process for tests; on loopback, or listening on ``host``
    inside the network namespace ``netns`` (tests/hosts.py), advertising that address."""

    def __init__(
        self,
        role: str,
        env: dict[str, str],
        log_dir: Path,
        name: str,
        overrides: list[str],
        port: int = 0,
        host: str = "127.0.0.1",
        netns: str = "",
        python: str = sys.executable,
        cwd: Path = ROOT,
    ) -> None:
        self.role = role
        self.port = port or free_port()
        argv = [python, "-m", f"engine.{role}", "--set", f"{role}.listen_port={self.port}"]
        if host != "127.0.0.1":
            argv += ["--set", f"{role}.listen_host={host}"]  # advertised as is (advertise_host empty)
        elif role in ("master", "worker"):
            argv += ["--set", f"{role}.advertise_host=127.0.0.1"]
        for item in overrides:
            argv += ["--set", item]
        argv = in_netns(netns, argv)
        self.proc = ManagedProcess(name, argv, log_dir / f"{name}.log", env=env, cwd=cwd)
        self.address = f"{host}:{self.port}"
        #: how this node's listener is reached: the API's by its own TLS keys, the others' by the RPC's
        tls_key = "PORPOISE_API_TLS_CERT" if role == "api" else "PORPOISE_RPC_TLS_CERT"
        self.scheme = "https" if env.get(tls_key) else "http"
        self.url = f"{self.scheme}://{self.address}"

    def start(self, timeout: float = 30) -> NodeProc:
        self.proc.start()
        wait_sync(self.healthy, timeout, what=f"{self.role} {self.address} healthy")
        return self

    def health(self) -> tuple[int, Any]:
        if self.proc.exited() is not None:
            raise AssertionError(f"{self.role} exited with {self.proc.exited()}:\n{self.proc.tail(40)}")
        try:
            return http_json(f"{self.url}/ready")
        except OSError:
            return 0, None

    def healthy(self) -> bool:
        return self.health()[0] == 200

    @property
    def pid(self) -> int:
        assert self.proc.popen is not None
        return self.proc.popen.pid

    def stop(self, timeout: float = 15) -> None:
        self.proc.stop(timeout)


def node_env(endpoint: str, root: str, ttl: float = 2, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PORPOISE_")}
    env.update(
        {
            "PORPOISE_REGISTRY_ENDPOINTS": endpoint,
            "PORPOISE_REGISTRY_ROOT": root,
            "PORPOISE_REGISTRY_LEASE_TTL": str(ttl),
            "PORPOISE_REGISTRY_KEEPALIVE_INTERVAL": str(ttl / 4),
            "PORPOISE_REGISTRY_HEARTBEAT_INTERVAL": str(ttl / 4),
            "PORPOISE_REGISTRY_REQUEST_TIMEOUT": str(ttl / 2),
            # a whole TTL, not the default third: on a test machine shared by many suites one loop step
            # can take a second of wall time; a wedged node (debug.wedge_hook) still goes within 2 TTLs
            "PORPOISE_REGISTRY_LOOP_STALL_LIMIT": str(ttl),
            "PORPOISE_LOGGING_LEVEL": "debug",
            "PORPOISE_RPC_SECRET": TEST_SECRET,
            # tests run as root: the default tenant is the worker's own user, refused unless allowed
            # (tests/test_tenants_e2e.py starts workers without it)
            "PORPOISE_WORKER_ALLOW_ROOT_TENANT": "true",
            "PORPOISE_SECRETS_KEYS": TEST_KEYS,
            # every workflow actor checks its core's invariants after each batch (WorkflowRun.validate)
            "PORPOISE_DEBUG_VALIDATE_CORE": "true",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if os.environ.get("PORPOISE_TEST_IGNORE_LOAD"):
        # a machine shared with other suites: the overload guard (tested on its own) must not hold the nodes
        env.update({"PORPOISE_MASTER_MAX_CPU_LOAD_AVG": "1000", "PORPOISE_WORKER_MAX_CPU_LOAD_AVG": "1000"})
    from tests import tls

    if tls.ENABLED:
        env.update(tls.rpc_env())
        env.update(tls.registry_env())
    env.update(extra)
    return env


def start_workflow(client: Any, code: int, body: dict[str, Any] | None = None, finished: bool = True) -> dict[str, Any]:
    """Start workflow ``code`` through the API; its instance once it exists, or once it finished."""
    command = client.post(f"/api/v1/workflows/{code}/start", body or {})
    found: dict[str, Any] = {}

    def ready() -> bool:
        status = client.get(f"/api/v1/commands/{command['command_id']}")
        if status["workflow_instance_id"] is None:
            return False
        found.update(client.get(f"/api/v1/instances/{status['workflow_instance_id']}"))
        return bool(found["finished"]) or not finished

    wait_sync(ready, 60, what="the instance " + ("finished" if finished else "exists"))
    return found


def start_worker(
    node_factory: Callable[..., NodeProc], endpoint: str, root: str, base: Path, *extra: str, **env: str
) -> NodeProc:
    """A real worker (``node_factory``) registered under ``root`` with a 3 s lease, its task logs and exec
    dirs under ``base``; ``extra``: more config overrides; ``env``: more environment (blocking: call it
    in a thread from a test)."""
    dirs = [f"worker.log_dir={base / 'logs'}", f"worker.exec_dir={base / 'exec'}"]
    return node_factory("worker", endpoint, root, 3, [*dirs, *extra], **env)
