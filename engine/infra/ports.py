"""Loopback port helpers."""

from __future__ import annotations

import random
import socket

from core.errors import PortInUse

_rng = random.Random()


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            low, high = (int(x) for x in fh.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free on ``host`` a moment ago, chosen BELOW the kernel's ephemeral range:
    a server restarted on the same port must not find it taken by some client's outgoing
    connection (those get ephemeral source ports)."""
    low, _ = _ephemeral_range()
    top = max(low - 1, 2000)
    for _ in range(200):
        port = _rng.randint(max(1025, top - 20000), top)
        if port_is_free(port, host):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # fall back to the kernel's choice
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def choose_port(what: str, explicit: int, remembered: int | None, taken: set[int]) -> int:
    """Pick a port: an explicit one must be free; a remembered one is reused when still free."""
    if explicit:
        if not port_is_free(explicit):
            raise PortInUse(f"{what}: port {explicit} on 127.0.0.1 is already in use; choose another or free it")
        return explicit
    if remembered and remembered not in taken and port_is_free(remembered):
        return remembered
    while True:
        port = free_port()
        if port not in taken:
            return port
