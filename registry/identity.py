"""Who a node is: the address it advertises, and the incarnation facts its heartbeat carries.

A node's registry key is its advertised ``host:port``, and ownership in the database is ``host = me``,
so two nodes must never share an address. Two guards:

- the advertised host: ``advertise_host`` empty means the listen host when that is a specific
  address, or this machine's resolvable name when listening on every interface (``0.0.0.0``/``::``);
  a loopback address is refused when etcd is not on loopback (peers on other machines could not
  reach the node, and two machines with default settings would become one node);
- registration (``registry.heartbeat.Registration``): the key is created only if absent. If it is
  held, the holder's heartbeat says who holds it: a previous incarnation of this node on this same
  machine and pid namespace whose process is gone (kill -9, then a restart at the same address) is
  replaced at once; a live process here fails the start at once; anything else (another machine, a
  value we cannot read) is given until its lease runs out: a dead node's key expires and we register,
  a live node keeps it and we fail with one line naming the key and its holder.
"""

from __future__ import annotations

import enum
import ipaddress
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

import psutil

from core.errors import ConfigError

WILDCARDS = ("", "0.0.0.0", "::")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP literal or a name) reaches only this machine. Resolves names (blocking)."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False  # unresolvable here: not known to be loopback
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def machine_name() -> str:
    """This machine's name as peers should reach it: the FQDN if it resolves, else the host name."""
    for name in (socket.getfqdn(), socket.gethostname()):
        try:
            socket.getaddrinfo(name, None)
        except OSError:
            continue
        return name
    raise ConfigError(f"cannot resolve this machine's name ({socket.gethostname()!r}): set advertise_host")


def advertise_host(role: str, listen_host: str, advertise: str, endpoints: Sequence[str]) -> str:
    """The host this node advertises (blocking: may resolve names; call it in a thread)."""
    host = advertise or (machine_name() if listen_host in WILDCARDS else listen_host)
    if is_loopback(host):
        remote = [e for e in endpoints if not is_loopback(urlparse(e).hostname or "")]
        if remote:
            raise ConfigError(
                f"{role}.advertise_host: {host} is a loopback address but etcd ({remote[0]}) is not on this "
                f"machine: peers could not reach this node and nodes on other machines would share its "
                f"identity; set {role}.listen_host (e.g. 0.0.0.0) and/or {role}.advertise_host to this "
                f"machine's address"
            )
    return host


def _machine_id() -> str:
    """Boot id + pid namespace: two processes with equal ids see each other's pids (Linux)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot}/{namespace}"


@dataclass(frozen=True)
class Incarnation:
    """This process as its heartbeat describes it."""

    node_id: str
    host_name: str
    machine: str
    pid: int
    process_start: float

    @classmethod
    def current(cls) -> Incarnation:
        return cls(
            node_id=uuid.uuid4().hex,
            host_name=socket.gethostname(),
            machine=_machine_id(),
            pid=os.getpid(),
            process_start=started_at(os.getpid()),
        )


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def started_at(pid: int) -> float:
    """When process ``pid`` started, in seconds since the machine booted: the kernel's count (field 22 of
    /proc/PID/stat, in clock ticks), which no step of the wall clock moves. An epoch time (psutil's
    ``create_time``) adds the boot time the kernel derives from the wall clock: after a step, a live
    holder's start would differ from the one it published and it would look dead. Raises OSError when
    there is no such process."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rindex(b")") + 2 :].split()  # the name, in parentheses, may hold anything
    return int(fields[19]) / _CLOCK_TICKS


def process_alive(pid: int, start: float) -> bool:
    """Whether ``pid`` runs here and is the process that started at ``start`` (seconds since boot:
    ``started_at``; not a recycled pid, not a killed process its parent has not reaped yet)."""
    try:
        return abs(started_at(pid) - start) < 0.001 and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (FileNotFoundError, ProcessLookupError, psutil.NoSuchProcess):  # includes ZombieProcess
        return False
    except (PermissionError, psutil.AccessDenied):
        return True


class Verdict(enum.Enum):
    REPLACE = "REPLACE"  # a previous incarnation of this node (or this process) that is gone
    LIVE_HERE = "LIVE_HERE"  # a live process on this machine: fail now
    UNKNOWN = "UNKNOWN"  # another machine or an unreadable value: wait for its lease


def judge_holder(
    holder: Incarnation | None, me: Incarnation, alive: Callable[[int, float], bool] = process_alive
) -> Verdict:
    """What to do about the node holding our key."""
    if holder is None or not holder.machine or holder.machine != me.machine:
        return Verdict.UNKNOWN
    if (holder.pid, holder.process_start) == (me.pid, me.process_start):
        return Verdict.REPLACE  # an earlier session of this very process (re-registration after LOST)
    return Verdict.LIVE_HERE if alive(holder.pid, holder.process_start) else Verdict.REPLACE
