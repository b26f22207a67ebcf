"""Several hosts on this one machine, with real processes: network namespaces joined by a bridge.

``Network`` builds N+1 namespaces (``ip netns``), each with one veth into a bridge in the root
namespace and its own address in a private /24 (``10.77.<tag>.0/24``, made here and used only between
these namespaces; the root namespace holds ``.1`` on the bridge so the test driver reaches every
host). With ``link="switch"`` (``HostCluster(link_delay_ms=N)``) the link layer is instead
tests/delay_switch.py, a user-space switch holding every frame N ms: each host's ``eth0`` is one of its
TAPs, and one more in the root namespace holds ``.1`` (for kernels without ``sch_netem``).
``HostCluster`` starts on it:

- host ``db`` (``.10``): PostgreSQL (and, when asked, the API);
- hosts ``h1..hN`` (``.11``..): one member of a single N-member etcd cluster (peer URLs across the
  hosts), a master and a worker listening on, and advertising, that host's address. Each node's
  registry endpoints are its own host's member first, then the others'. Nothing uses loopback to
  reach another host.

Each host also holds an address on a network no other host reaches (``10.78.<tag>.x``, on its loopback
device, like a management network): a program that picks "this machine's address" by itself instead of
its host's configured one (Spark does when the machine's name resolves to loopback: it scans the
interfaces) picks that one, which its peers cannot reach.

With ``spark``: a Spark standalone cluster from the pyspark wheel (engine/infra/spark.py) across the
hosts: its master on host ``spark`` of its own (``spark://<address>:7077``, JSON status on ``:8080``),
one Spark worker on each of the last two of ``h1..hN``, every daemon bound to and advertising its host's
address. A SPARK task's driver runs on the Porpoise worker that runs the task (its child, in its host)
and advertises that worker's address (engine/tasks/spark.py), which the executors on the other hosts
call back.

Faults: ``kill_host`` (SIGKILL every process of a host), ``cut`` / ``restore`` (the host's link down /
up while its processes live on), ``block`` / ``unblock`` (drop traffic between a host and some
addresses: partitions), ``delay`` (``tc netem`` on every host's link, or the switch's delay).

Cleanup survives a failed or killed run: every namespace, link and process record of a cluster is
written to ``/run/porpoise-hosts/<tag>.json`` before it exists; ``down`` kills every process in the
namespaces (pid and start time checked for recorded ones, ``ip netns pids`` for the rest), deletes
the namespaces and the bridge (the switch's TAPs go with its process), and removes the file. A new
cluster first tears down those whose owner process is gone. By hand::

    python -m tests.hosts up --hosts 3     # make hosts N=3; prints addresses, DSN, API URL; Ctrl-C or:
    python -m tests.hosts up --spark       # make hosts SPARK=cluster: and the Spark cluster
    python -m tests.hosts up --link-delay-ms 20   # the same through the delay switch
    python -m tests.hosts down --all       # make hosts-down
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from core.errors import InfraError
from engine.infra.etcd import EtcdServer
from engine.infra.postgres import PostgresServer
from engine.infra.process import ProcessRecord, in_netns
from engine.infra.spark import Place, SparkCluster
from rpc.tls import TlsFiles
from tests import databases, tls
from tests.delay_switch import SwitchProcess
from tests.helpers import ROOT, NodeProc, node_env, wait_sync

STATE_DIR = Path("/run/porpoise-hosts")
PREFIX = "10.77"
#: each host's address on a network of its own (no route to it from any other host)
OTHER_PREFIX = "10.78"
ETCD_CLIENT_PORT, ETCD_PEER_PORT, PG_PORT = 2379, 2380, 5432
#: the Spark master's host (with ``spark``) and its ports (Spark's defaults: RPC, web UI and JSON status)
SPARK_HOST, SPARK_MASTER_PORT, SPARK_UI_PORT = "spark", 7077, 8080


class NetemUnavailable(RuntimeError):
    """This kernel has no ``sch_netem`` (tc answers "Specified qdisc kind is unknown")."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


@dataclass
class Host:
    """One namespace: ``name`` (also the netns name), its address and its link's root-side name (the
    veth's end on the bridge, or the switch's TAP before it moves into the namespace as ``eth0``)."""

    name: str
    netns: str
    address: str
    veth: str

    @property
    def unreachable_address(self) -> str:
        """Its address on a network no other host reaches (on its loopback device)."""
        return OTHER_PREFIX + self.address.removeprefix(PREFIX)


#: the link layers: the kernel's bridge with a veth per host, or tests/delay_switch.py with a TAP per host
LINKS = ("bridge", "switch")
#: the switch's TAPs: large frames, as a veth's offloads give the bridge, so the switch (Python) handles
#: a few big frames, not 43 times as many 1500-byte ones
SWITCH_MTU = 65000


@dataclass
class Network:
    """The namespaces and links of one cluster (``tag`` = the third octet of its /24). ``link``: the
    kernel's bridge (delays through ``tc netem``, when the kernel has it) or the delay switch (its
    one-way ``delay_ms`` on every frame between any two ports: host to host and driver to host alike)."""

    tag: int
    hosts: list[Host] = field(default_factory=list)
    link: str = "bridge"
    delay_ms: float = 0.0
    switch: SwitchProcess | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.link not in LINKS:
            raise ValueError(f"link: {self.link!r} is not one of {', '.join(LINKS)}")
        if self.delay_ms < 0:
            raise ValueError(f"delay_ms: {self.delay_ms} is negative")

    @property
    def bridge(self) -> str:
        return f"pp{self.tag}br"

    @property
    def gateway_port(self) -> str:
        """The switch's TAP that stays in the root namespace and holds the gateway address."""
        return f"pp{self.tag}gw"

    @property
    def gateway(self) -> str:
        return f"{PREFIX}.{self.tag}.1"

    @property
    def cidr(self) -> str:
        return f"{PREFIX}.{self.tag}.0/24"

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    @classmethod
    def plan(cls, tag: int, names: list[str], link: str = "bridge", delay_ms: float = 0.0) -> Network:
        net = cls(tag, link=link, delay_ms=delay_ms)
        end = "v" if link == "bridge" else "t"
        for i, name in enumerate(names):
            net.hosts.append(Host(name, f"pp{tag}{name}", f"{PREFIX}.{tag}.{10 + i}", f"pp{tag}{name}{end}"))
        return net

    def create(self, log: Path | None = None) -> ProcessRecord | None:
        """Make the namespaces and links; the switch's process record when ``link`` is the switch."""
        record = None
        if self.link == "bridge":
            ip("link", "add", self.bridge, "type", "bridge")
            root_side = self.bridge
        else:
            self.switch = SwitchProcess([self.gateway_port, *(h.veth for h in self.hosts)], self.delay_ms, log)
            record = self.switch.start()
            root_side = self.gateway_port
            ip("link", "set", root_side, "mtu", str(SWITCH_MTU))
        ip("addr", "add", f"{self.gateway}/24", "dev", root_side)
        ip("link", "set", root_side, "up")
        for h in self.hosts:
            ip("netns", "add", h.netns)
            if self.link == "bridge":
                ip("link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.netns)
                ip("link", "set", h.veth, "master", self.bridge, "up")
            else:  # the switch's fd stays attached to its TAP in the host's namespace
                ip("link", "set", h.veth, "netns", h.netns)
                ip("-n", h.netns, "link", "set", h.veth, "name", "eth0", "mtu", str(SWITCH_MTU))
            ip("-n", h.netns, "addr", "add", f"{h.address}/24", "dev", "eth0")
            ip("-n", h.netns, "link", "set", "eth0", "up")
            ip("-n", h.netns, "link", "set", "lo", "up")
            ip("-n", h.netns, "addr", "add", f"{h.unreachable_address}/32", "dev", "lo")
        return record

    def destroy(self) -> None:
        for h in self.hosts:
            kill_namespace_processes(h.netns)
        if self.switch is not None:
            self.switch.stop()  # its TAPs go with it
        for h in self.hosts:
            ip("netns", "del", h.netns, check=False)
            ip("link", "del", h.veth, check=False)  # gone with the namespace's peer (or the switch), normally
        ip("link", "del", self.bridge if self.link == "bridge" else self.gateway_port, check=False)

    # -- faults ---------------------------------------------------------------------------------

    def cut(self, name: str) -> None:
        """Host ``name``'s link down: it sends nothing, and what the bridge or switch gives it is dropped."""
        ip("-n", self.host(name).netns, "link", "set", "eth0", "down")

    def restore(self, name: str) -> None:
        ip("-n", self.host(name).netns, "link", "set", "eth0", "up")

    def block(self, name: str, others: list[str]) -> None:
        """Drop traffic both ways between host ``name`` and hosts ``others`` (blackhole routes)."""
        me = self.host(name)
        for o in map(self.host, others):
            ip("-n", me.netns, "route", "add", "blackhole", f"{o.address}/32")
            ip("-n", o.netns, "route", "add", "blackhole", f"{me.address}/32")

    def unblock(self, name: str, others: list[str]) -> None:
        me = self.host(name)
        for o in map(self.host, others):
            ip("-n", me.netns, "route", "del", "blackhole", f"{o.address}/32", check=False)
            ip("-n", o.netns, "route", "del", "blackhole", f"{me.address}/32", check=False)

    def delay(self, ms: float) -> None:
        """Every packet between hosts waits ``ms`` each way; 0 removes it. On the bridge through ``tc
        netem`` on every host's link (NetemUnavailable without sch_netem), on the switch by the switch."""
        if ms < 0:
            raise ValueError(f"delay: {ms} ms is negative")
        if self.switch is not None:
            self.switch.set_delay(ms)
            self.delay_ms = ms
            return
        for h in self.hosts:
            base = ["ip", "netns", "exec", h.netns, "tc", "qdisc"]
            subprocess.run([*base, "del", "dev", "eth0", "root"], capture_output=True, timeout=10, check=False)
            if ms:
                done = subprocess.run(
                    [*base, "add", "dev", "eth0", "root", "netem", "delay", f"{ms}ms"],
                    capture_output=True, text=True, timeout=10, check=False,
                )  # fmt: skip
                if done.returncode != 0:
                    raise NetemUnavailable(f"tc netem delay on {h.netns}: {done.stderr.strip()}")
        self.delay_ms = ms

    def probe(self, name: str, *args: str, timeout: float = 30) -> dict[str, Any]:
        """``python -m tests.netprobe ARGS`` run on host ``name``: its JSON answer."""
        argv = in_netns(self.host(name).netns, [sys.executable, "-m", "tests.netprobe", *args])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)
        try:
            result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        except (IndexError, ValueError):
            raise RuntimeError(f"netprobe {args} on {name}: {done.stderr.strip()}") from None
        return result


def kill_namespace_processes(netns: str) -> None:
    """SIGKILL every process in ``netns`` and wait (briefly) until they are gone."""
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, timeout=10, check=False)
    procs = []
    for pid in out.stdout.split():
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(int(pid))
            proc.kill()
            procs.append(proc)
    psutil.wait_procs(procs, timeout=5)


# -- state files: cleanup after anything ------------------------------------------------------------


def _state_path(tag: int) -> Path:
    return STATE_DIR / f"{tag}.json"


def _write_state(net: Network, records: list[ProcessRecord]) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    data = {
        "owner": os.getpid(),
        "owner_start": psutil.Process().create_time(),
        "tag": net.tag,
        "hosts": [h.__dict__ for h in net.hosts],
        "link": net.link,
        "records": [r.to_json() for r in records],
    }
    tmp = _state_path(net.tag).with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(_state_path(net.tag))


def down(tag: int) -> None:
    """Tear down cluster ``tag``: its recorded processes, anything else in its namespaces, the links."""
    path = _state_path(tag)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    procs = [p for rec in map(ProcessRecord.from_json, data["records"]) if (p := rec.process()) is not None]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)  # throwaway clusters: nothing to shut down gracefully
    psutil.wait_procs(procs, timeout=5)  # the delay switch's TAPs, for one, go only once it is gone
    Network(data["tag"], [Host(**h) for h in data["hosts"]], data.get("link", "bridge")).destroy()
    path.unlink(missing_ok=True)


def _owner_alive(data: dict[str, Any]) -> bool:
    try:
        return abs(psutil.Process(data["owner"]).create_time() - data["owner_start"]) < 0.05
    except psutil.Error:
        return False


def down_all(only_orphans: bool = False) -> list[int]:
    done = []
    for path in sorted(STATE_DIR.glob("*.json")) if STATE_DIR.is_dir() else []:
        with contextlib.suppress(OSError, ValueError, KeyError):
            data = json.loads(path.read_text())
            if only_orphans and _owner_alive(data):
                continue
            down(int(data["tag"]))
            done.append(int(data["tag"]))
    return done


@contextlib.contextmanager
def network(names: list[str], link: str = "bridge", delay_ms: float = 0.0) -> Iterator[Network]:
    """Namespaces ``names`` on a network of their own (no cluster), recorded and torn down like one."""
    down_all(only_orphans=True)
    net = Network.plan(_free_tag(), names, link, delay_ms)
    _write_state(net, [])
    try:
        record = net.create()
        if record is not None:
            _write_state(net, [record])
        yield net
    finally:
        down(net.tag)
        if net.switch is not None:
            net.switch.stop()


def _free_tag() -> int:
    taken = {p.stem for p in STATE_DIR.glob("*.json")} if STATE_DIR.is_dir() else set()
    links = ip("-o", "link").stdout
    for tag in random.sample(range(2, 250), 247):
        if str(tag) not in taken and f"pp{tag}br" not in links and f"pp{tag}gw" not in links:
            return tag
    raise RuntimeError("no free 10.77.x.0/24 for a host network")


# -- the cluster ---------------------------------------------------------------------------------


class HostCluster:
    """PostgreSQL (+ API) on host ``db``; etcd member, master and worker on each of ``h1..hN``; with
    ``spark``, a Spark standalone cluster (master on host ``spark``, workers on the last two hosts).
    ``groups``: the worker group of a host's worker (host name -> group; default ``default``)."""

    def __init__(
        self,
        base: Path,
        hosts: int = 3,
        ttl: float = 3.0,
        api: bool = False,
        on_lost: str = "exit",
        spark: bool = False,
        groups: dict[str, str] | None = None,
        link_delay_ms: float | None = None,
        link: str = "bridge",
        **worker: str,
    ) -> None:
        """``link_delay_ms``: the hosts are joined by the delay switch with that one-way delay
        (tests/delay_switch.py; ``link="switch"`` alone: the switch with none), else by the bridge."""
        self.base = base
        self.link = "switch" if link_delay_ms is not None else link
        self.link_delay_ms = link_delay_ms or 0.0
        self.ttl = ttl
        self.on_lost = on_lost
        self.want_api = api
        self.want_spark = spark
        self.groups = dict(groups or {})
        self.worker_overrides = [f"worker.{k}={v}" for k, v in worker.items()]
        self.names = [f"h{i}" for i in range(1, hosts + 1)]
        self.net = Network.plan(0, self._host_names(), self.link, self.link_delay_ms)  # checks both
        self.root = f"/hosts-{uuid.uuid4().hex[:6]}"
        self.etcd: dict[str, EtcdServer] = {}
        self.masters: dict[str, NodeProc] = {}
        self.workers: dict[str, NodeProc] = {}
        self.api: NodeProc | None = None
        self.pg: PostgresServer | None = None
        self.spark: SparkCluster | None = None
        self.records: list[ProcessRecord] = []
        self.all_nodes: list[NodeProc] = []
        #: with PORPOISE_TEST_TLS: one certificate for every host's address (etcd clients, RPC, the API)
        self.tls: TlsFiles | None = None

    def _host_names(self) -> list[str]:
        return ["db", *self.names, *([SPARK_HOST] if self.want_spark else [])]

    @property
    def spark_worker_hosts(self) -> list[str]:
        """The hosts of the Spark workers (with ``spark``): the last two of ``h1..hN``."""
        return self.names[-2:]

    # -- bring up / down

    def up(self) -> HostCluster:
        down_all(only_orphans=True)
        self.net = Network.plan(_free_tag(), self._host_names(), self.link, self.link_delay_ms)
        _write_state(self.net, [])  # recorded before anything exists, so a crash leaves nothing behind
        if tls.ENABLED:
            addresses = tuple(h.address for h in self.net.hosts)
            self.tls = tls.issue(f"hosts-{self.net.tag}-{uuid.uuid4().hex[:6]}", hosts=(*addresses, *tls.HOSTS))
        try:
            self.record(self.net.create(self.base / "logs" / "delay-switch.log"))
            self._start_pg()
            self._start_etcd()
            for name in self.names:
                self.start_node("master", name)
                self.start_node("worker", name)
            if self.want_api:  # plain HTTP on the private test network unless the suite runs with TLS
                self.api = self._node("api", "db", [] if self.tls else ["api.allow_plain_http=true"])
            if self.want_spark:
                self._start_spark()
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        down(self.net.tag)
        if self.net.switch is not None:
            self.net.switch.stop()  # killed by down() through its record: reap it
        managed = [n.proc for n in self.all_nodes] + [s.proc for s in self.etcd.values()]
        managed += [d.proc for d in self.spark.daemons] if self.spark else []
        for proc in [*managed, self.pg.proc if self.pg else None]:
            if proc is not None and proc.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(5)  # reap our children

    def record(self, rec: ProcessRecord | None) -> None:
        if rec is not None:
            self.records.append(rec)
            _write_state(self.net, self.records)

    def _start_pg(self) -> None:
        db = self.net.host("db")
        self.pg = PostgresServer(
            self.base / "pg", PG_PORT, self.base / "logs" / "postgres.log", durable=False,
            host=db.address, netns=db.netns, clients=self.net.cidr,
        )  # fmt: skip
        self.record(self.pg.start())
        asyncio.run(databases.migrate(self.pg, "porpoise"))

    def _start_etcd(self) -> None:
        hosts = [self.net.host(n) for n in self.names]
        cluster = ",".join(f"e{h.name}=http://{h.address}:{ETCD_PEER_PORT}" for h in hosts)
        for h in hosts:
            log = self.base / "logs" / f"etcd-{h.name}.log"
            self.etcd[h.name] = EtcdServer(
                self.base / f"etcd-{h.name}", ETCD_CLIENT_PORT, ETCD_PEER_PORT, log,
                name=f"e{h.name}", host=h.address, initial_cluster=cluster, netns=h.netns, tls=self.tls,
            )  # fmt: skip
            self.record(self.etcd[h.name].start(wait=False))
        for server in self.etcd.values():
            server.wait_ready(60)
        if self.tls:  # auth is the cluster's: turned on through one member
            tls.secure_etcd(next(iter(self.etcd.values())))

    def _start_spark(self) -> None:
        """The Spark master on its own host, a Spark worker on each of ``spark_worker_hosts``; recorded once
        all are up (a failed start stops what it started; after a crash, ``down`` empties the namespaces)."""
        master = self.net.host(SPARK_HOST)
        places = [Place(h.address, h.netns) for h in map(self.net.host, self.spark_worker_hosts)]
        self.spark = SparkCluster(
            self.base / "spark", master.address, master_port=SPARK_MASTER_PORT, ui_port=SPARK_UI_PORT,
            netns=master.netns, worker_places=places,
        )  # fmt: skip
        for rec in self.spark.start():
            self.record(rec)

    def endpoints(self, name: str) -> str:
        """Etcd client URLs for a node on host ``name``: its own member first."""
        own = [self.etcd[name].endpoint] if name in self.etcd else []
        return ",".join(own + [e.endpoint for n, e in sorted(self.etcd.items()) if n != name])

    def _node(self, role: str, name: str, overrides: list[str], port: int = 0) -> NodeProc:
        assert self.pg is not None
        h = self.net.host(name)
        env = node_env(
            self.endpoints(name), self.root, self.ttl, PORPOISE_DATABASE_DSN=self.pg.dsn,
            PORPOISE_LOGGING_LEVEL="info", PORPOISE_MASTER_FAILOVER_SWEEP_INTERVAL="2",
            PORPOISE_REGISTRY_ON_LOST=self.on_lost,
            # the scenarios are about faults, not load: a machine shared with other suites must not
            # make the masters refuse commands (the overload guard has tests of its own)
            PORPOISE_MASTER_MAX_CPU_LOAD_AVG="1000", PORPOISE_WORKER_MAX_CPU_LOAD_AVG="1000",
        )  # fmt: skip
        if self.tls:  # the hosts' own certificate (the suite's names only loopback)
            t = self.tls
            for kind in ("RPC", "REGISTRY"):
                env.update({f"PORPOISE_{kind}_TLS_CA": t.ca, f"PORPOISE_{kind}_TLS_CERT": t.cert,
                            f"PORPOISE_{kind}_TLS_KEY": t.key})  # fmt: skip
            if role == "api":
                env.update({"PORPOISE_API_TLS_CERT": t.cert, "PORPOISE_API_TLS_KEY": t.key})
        label = f"{role}-{name}-{len(self.all_nodes)}"
        node = NodeProc(role, env, self.base / "logs", label, overrides, port=port, host=h.address, netns=h.netns)
        self.all_nodes.append(node)
        node.proc.start()
        self.record(node.proc.record)
        wait_sync(node.healthy, 60, what=f"{label} healthy at {node.address}")
        return node

    def start_node(self, role: str, name: str, *extra: str, port: int = 0) -> NodeProc:
        """Start host ``name``'s ``role`` node (again: ``port`` = its old one, the same address)."""
        overrides = list(extra)
        if role == "worker":
            work = self.base / name
            group = [f"worker.group={self.groups[name]}"] if name in self.groups else []
            overrides = [f"worker.log_dir={work / 'logs'}", f"worker.exec_dir={work / 'exec'}", *group,
                         *self.worker_overrides, *overrides]  # fmt: skip
        node = self._node(role, name, overrides, port)
        (self.masters if role == "master" else self.workers)[name] = node
        return node

    # -- faults

    def kill_host(self, name: str) -> None:
        """SIGKILL every process of host ``name`` (nodes, etcd member, task processes, reaper)."""
        kill_namespace_processes(self.net.host(name).netns)

    @property
    def _etcd_user(self) -> str:
        """etcdctl's ``--user`` for the nodes' etcd user when auth is on ("" when it is off)."""
        return f"{tls.ETCD_USER}:{tls.ETCD_PASSWORD}" if self.tls else ""

    def _etcd(self, server: EtcdServer, *args: str) -> Any:
        """etcdctl's JSON answer from one member (as the nodes' etcd user when auth is on)."""
        return json.loads(server.ctl(*args, "--write-out=json", "--command-timeout=2s", user=self._etcd_user))

    def etcd_leader(self, required: bool = True) -> str:
        """The host whose etcd member leads now (asked of the members that answer); "" when none does
        and not ``required`` (during an election)."""
        for name, server in self.etcd.items():
            with contextlib.suppress(InfraError, ValueError, KeyError, IndexError):
                status = self._etcd(server, "endpoint", "status")[0]["Status"]
                if status["leader"] == status["header"]["member_id"]:
                    return name
        if required:
            raise AssertionError("no etcd member says it leads")
        return ""

    def lead_etcd_elsewhere(self, away_from: str, timeout: float = 30) -> None:
        """When host ``away_from``'s etcd member leads, hand the leadership to another host's member
        (etcdctl move-leader: a transfer, no election) and return once that member leads. A test that cuts
        a host off about its nodes' fencing calls it first: with the leader cut off, the others' sessions
        would also live through an election, which a short lease TTL may not (the election's own test
        runs with a TTL long enough for one)."""
        if self.etcd_leader() != away_from:
            return
        target = next(n for n in self.names if n != away_from)
        member = int(self._etcd(self.etcd[target], "endpoint", "status")[0]["Status"]["header"]["member_id"])
        self.etcd[away_from].ctl("move-leader", f"{member:x}", "--command-timeout=5s", user=self._etcd_user)
        wait_sync(lambda: self.etcd_leader(required=False) == target, timeout, f"etcd's leader moved to {target}")

    def key_revision(self, role: str, name: str) -> int:
        """The create revision of the registry key of host ``name``'s ``role`` node (0 = no key)."""
        node = (self.masters if role == "master" else self.workers)[name]
        group = f"{self.groups.get(name, 'default')}/" if role == "worker" else ""
        path = f"{self.root}/nodes/{role}/{group}{node.address}"
        for server in self.etcd.values():
            with contextlib.suppress(InfraError, ValueError):
                kvs = self._etcd(server, "get", path).get("kvs", [])
                return int(kvs[0]["create_revision"]) if kvs else 0
        raise AssertionError("no etcd member answers")

    def describe(self) -> dict[str, Any]:
        assert self.pg is not None
        return {
            "network": self.net.cidr,
            "state_file": str(_state_path(self.net.tag)),
            "dsn": self.pg.dsn,
            "etcd": self.endpoints(""),
            "registry_root": self.root,
            "api": self.api.url if self.api else None,
            "hosts": {h.name: {"netns": h.netns, "address": h.address} for h in self.net.hosts},
            "masters": {n: m.address for n, m in self.masters.items()},
            "workers": {n: w.address for n, w in self.workers.items()},
            "logs": str(self.base / "logs"),
            **({"spark": {
                "master": self.spark.master_url, "status": f"{self.spark.ui_url}/json/",
                "workers": {n: self.net.host(n).address for n in self.spark_worker_hosts},
                "logs": str(self.base / "spark" / "logs"),
            }} if self.spark else {}),
        }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.hosts", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="build the hosts and start everything; runs until Ctrl-C, then tears down")
    up.add_argument("--hosts", type=int, default=3)
    up.add_argument("--ttl", type=float, default=15.0, help="registry lease TTL of the nodes (production: 15)")
    spark_help = "and a Spark standalone cluster: its master on host spark, workers on the last two hosts"
    up.add_argument("--spark", action="store_true", help=spark_help)
    up.add_argument("--link-delay-ms", type=float, help="join the hosts by the delay switch with this one-way delay")
    dn = sub.add_parser("down", help="tear down clusters left behind")
    dn.add_argument("--all", action="store_true", help="also those whose owner process still runs")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("python -m tests.hosts: needs root (ip netns)", file=sys.stderr)
        return 2
    if args.cmd == "down":
        print(json.dumps({"torn_down": down_all(only_orphans=not args.all)}))
        return 0
    base = Path(tempfile.mkdtemp(prefix="porpoise-hosts-"))
    os.chmod(base, 0o755)
    cluster = HostCluster(base, args.hosts, args.ttl, api=True, spark=args.spark, link_delay_ms=args.link_delay_ms)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        cluster.up()
        print(json.dumps(cluster.describe(), indent=2), flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
