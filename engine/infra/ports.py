"""Loopback port helpers."""

from __future__ import annotations

import socket

from engine.errors import PortInUse


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free on ``host`` a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
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
