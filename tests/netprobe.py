"""Round trips between the multi-host harness's namespaces (tests/hosts.py), run inside one of them
(``Network.probe`` enters it): a TCP echo server, a TCP client timing round trips through it, and an
ICMP echo (``ping``, which this machine lacks) timing round trips to an address. Each prints one JSON
line; a round trip that gets no answer within its timeout counts as lost, never hangs.

    python -m tests.netprobe echo 10.77.5.10 7000        # prints {"ready": true}, serves until killed
    python -m tests.netprobe tcp 10.77.5.10 7000 --count 3 --timeout 2
    python -m tests.netprobe ping 10.77.5.11 --count 5 --timeout 1
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time
from typing import Any

#: what the TCP client sends, one line per round trip
LINE = b"porpoise\n"


def echo(host: str, port: int) -> None:
    with socket.create_server((host, port)) as server:
        print(json.dumps({"ready": True}), flush=True)
        while True:
            conn, _ = server.accept()
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)


def tcp(host: str, port: int, count: int, timeout: float) -> dict[str, Any]:
    """Seconds to connect (one round trip: SYN, SYN-ACK) and for each line to come back."""
    start = time.perf_counter()
    try:
        conn = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        return {"error": f"connect: {exc}"}
    result: dict[str, Any] = {"connect_s": time.perf_counter() - start, "rtt_s": []}
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            start, got = time.perf_counter(), b""
            try:
                conn.sendall(LINE)
                while not got.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        return result | {"error": "closed by the server"}
                    got += chunk
            except OSError as exc:
                return result | {"error": f"round trip: {exc}"}
            result["rtt_s"].append(time.perf_counter() - start)
    return result


def _checksum(data: bytes) -> int:
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF


def ping(host: str, count: int, timeout: float) -> dict[str, Any]:
    """ICMP echo round trips in milliseconds (a raw socket: needs root); unanswered ones are lost."""
    ident, rtts = os.getpid() & 0xFFFF, []
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
        for seq in range(count):
            header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
            payload = b"porpoise" * 7
            sock.sendto(struct.pack("!BBHHH", 8, 0, _checksum(header + payload), ident, seq) + payload, (host, 0))
            start = time.perf_counter()
            deadline = start + timeout
            while (left := deadline - time.perf_counter()) > 0:
                sock.settimeout(left)
                try:
                    packet, (src, _) = sock.recvfrom(2048)
                except TimeoutError:
                    break
                icmp = packet[(packet[0] & 0x0F) * 4 :]
                kind, _, _, got_id, got_seq = struct.unpack("!BBHHH", icmp[:8])
                if src == host and kind == 0 and (got_id, got_seq) == (ident, seq):
                    rtts.append((time.perf_counter() - start) * 1000)
                    break
    return {"rtt_ms": rtts, "lost": count - len(rtts)}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.netprobe", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("echo", "tcp", "ping"):
        cmd = sub.add_parser(name)
        cmd.add_argument("host")
        if name != "ping":
            cmd.add_argument("port", type=int)
        if name != "echo":
            cmd.add_argument("--count", type=int, default=3)
            cmd.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args()
    if args.cmd == "echo":
        echo(args.host, args.port)
        return 0
    if args.cmd == "tcp":
        result = tcp(args.host, args.port, args.count, args.timeout)
    else:
        result = ping(args.host, args.count, args.timeout)
    print(json.dumps(result), flush=True)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
