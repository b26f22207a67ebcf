"""A user-space Ethernet switch that holds every frame for a one-way delay: the multi-host harness's
link layer where the kernel has no ``sch_netem`` (tests/hosts.py, ``link="switch"``).

The program (``python -m tests.delay_switch --delay-ms 20 TAP...``) creates one TAP device per name
(``/dev/net/tun``, ``IFF_TAP | IFF_NO_PI``, not persistent: a TAP vanishes when this process's fd
closes, so a killed switch leaves no device), says ``ready`` on stdout, and forwards frames between its
ports: it learns source MACs, floods broadcast and unknown destinations, and puts each frame on its
out-port's FIFO, due ``delay`` after it arrived; a timer per port writes the frames that are due, in
order (a frame is never due before the one ahead of it, even when the delay is lowered). Delay 0 takes
the same path and writes at once. The harness moves the TAPs into the hosts' namespaces afterwards
(an open fd stays attached across ``ip link set ... netns``).

Control on stdin, one line each, answered on stdout: ``delay <ms>`` -> ``ok``, ``stats`` -> JSON counts.
End of stdin (the harness closed it, or died) or SIGTERM stops the switch.

A frame that cannot be written (its TAP is down: a cut host) is dropped, as a link would; a port whose
TAP is gone (its namespace was deleted) is closed. ``SwitchProcess`` is the harness's side.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import errno
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import psutil

from engine.infra.process import ProcessRecord

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
#: frames read from one port per wake-up before the others get a turn
BATCH = 64
#: the largest frame a TAP hands over (its MTU can be up to 65535 minus the Ethernet header)
FRAME_MAX = 65536


def open_tap(name: str) -> int:
    """A non-blocking fd on a new (non-persistent) TAP device ``name`` in this namespace."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), IFF_TAP | IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


class Port:
    """One TAP: its fd and the frames waiting to leave through it, each with the time it is due."""

    def __init__(self, name: str, fd: int) -> None:
        self.name = name
        self.fd = fd
        #: (due, frame) in the order they arrived; dues never decrease
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None
        self.open = True


class Switch:
    """The forwarding table and the ports' delay lines, run by callbacks on one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ports: list[Port], delay_s: float) -> None:
        self.loop = loop
        self.ports = ports
        self.delay = delay_s
        #: source MAC -> the port it was last seen on
        self.macs: dict[bytes, Port] = {}
        self.counts = {"received": 0, "sent": 0, "dropped": 0}
        for port in ports:
            loop.add_reader(port.fd, self._readable, port)

    def _readable(self, port: Port) -> None:
        due = self.loop.time() + self.delay
        touched: set[Port] = set()
        for _ in range(BATCH):
            try:
                frame = os.read(port.fd, FRAME_MAX)
            except BlockingIOError:
                break
            except OSError:  # EBADFD: the TAP went with its namespace
                self._close(port)
                break
            if len(frame) < 14:
                continue
            self.counts["received"] += 1
            dst, src = frame[:6], frame[6:12]
            if not src[0] & 1:
                self.macs[src] = port
            out = None if dst[0] & 1 else self.macs.get(dst)
            for target in [out] if out is not None else self.ports:
                if target is not port and target.open:
                    q = target.queue
                    q.append((max(due, q[-1][0]) if q else due, frame))
                    touched.add(target)
        for target in touched:
            if target.timer is None:  # else its head is due later than now, and the timer is set for it
                self._flush(target)

    def _flush(self, port: Port) -> None:
        """Write the frames that are due; set the port's one timer for the next. Called with no timer
        set, or by that timer."""
        port.timer = None
        now = self.loop.time()
        q = port.queue
        while q and q[0][0] <= now and port.open:
            frame = q.popleft()[1]
            try:
                os.write(port.fd, frame)
                self.counts["sent"] += 1
            except OSError as exc:  # down (cut) or full: lost, as on a wire
                self.counts["dropped"] += 1
                if exc.errno == errno.EBADFD:
                    self._close(port)
        if q and port.open:
            port.timer = self.loop.call_at(q[0][0], self._flush, port)

    def _close(self, port: Port) -> None:
        if not port.open:
            return
        port.open = False
        self.counts["dropped"] += len(port.queue)
        port.queue.clear()
        if port.timer is not None:
            port.timer.cancel()
        self.loop.remove_reader(port.fd)
        self.macs = {mac: p for mac, p in self.macs.items() if p is not port}

    def close(self) -> None:
        for port in self.ports:
            self._close(port)
            os.close(port.fd)


def _is_ms(text: str) -> bool:
    try:
        return float(text) >= 0
    except ValueError:
        return False


async def serve(names: list[str], delay_ms: float) -> None:
    loop = asyncio.get_running_loop()
    switch = Switch(loop, [Port(n, open_tap(n)) for n in names], delay_ms / 1000)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    print("ready", flush=True)

    async def control() -> None:
        while raw := await commands.readline():
            line = raw.decode().split()
            if not line:
                continue
            if line[0] == "delay" and len(line) == 2 and _is_ms(line[1]):
                switch.delay = float(line[1]) / 1000
                print("ok", flush=True)
            elif line[0] == "stats":
                print(json.dumps(switch.counts), flush=True)
            else:
                print(f"error: expected 'delay <ms>' (ms >= 0) or 'stats', got {' '.join(line)!r}", flush=True)
        stop.set()

    reader = asyncio.create_task(control())
    try:
        await stop.wait()
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        switch.close()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.delay_switch", description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay of every frame")
    parser.add_argument("taps", nargs="+", help="names of the TAP devices to create, one per port")
    args = parser.parse_args()
    asyncio.run(serve(args.taps, args.delay_ms))
    return 0


# -- the harness's side ----------------------------------------------------------------------------


class SwitchProcess:
    """The switch as a child process: started with its TAPs, controlled through its stdin."""

    def __init__(self, taps: list[str], delay_ms: float, log: Path | None = None) -> None:
        self.taps = taps
        self.delay_ms = delay_ms
        self.log = log
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20) -> ProcessRecord:
        argv = [sys.executable, "-m", "tests.delay_switch", "--delay-ms", str(self.delay_ms), *self.taps]
        if self.log:
            self.log.parent.mkdir(parents=True, exist_ok=True)
        err = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 (the child owns it)
        try:
            self.popen = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, bufsize=0,
                cwd=Path(__file__).resolve().parent.parent,
            )  # fmt: skip
        finally:
            if self.log:
                err.close()  # type: ignore[union-attr]
        record = ProcessRecord(
            "delay-switch", self.popen.pid, psutil.Process(self.popen.pid).create_time(), argv, str(self.log or "")
        )
        try:
            self._expect("ready", timeout)
        except BaseException:
            self.stop()
            raise
        return record

    def _expect(self, prefix: str, timeout: float) -> str:
        """The switch's next line of output (it must start with ``prefix``) within ``timeout``."""
        assert self.popen is not None and self.popen.stdout is not None
        fd, line, deadline = self.popen.stdout.fileno(), b"", time.monotonic() + timeout
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError(f"delay switch {self.taps}: no {prefix!r} within {timeout} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"delay switch {self.taps} exited (log: {self.log})")
            line += chunk
        text = line.decode().strip()
        if not text.startswith(prefix):
            raise RuntimeError(f"delay switch {self.taps}: expected {prefix!r}, got {text!r}")
        return text

    def _command(self, line: str, prefix: str) -> str:
        assert self.popen is not None and self.popen.stdin is not None
        self.popen.stdin.write(f"{line}\n".encode())
        return self._expect(prefix, 10)

    def set_delay(self, ms: float) -> None:
        self._command(f"delay {ms}", "ok")
        self.delay_ms = ms

    def stats(self) -> dict[str, int]:
        result: dict[str, int] = json.loads(self._command("stats", "{"))
        return result

    def stop(self, timeout: float = 5) -> None:
        """Close its stdin (it stops), wait, kill if need be; its TAPs go with it. Idempotent."""
        if self.popen is None:
            return
        if self.popen.stdin is not None:
            with contextlib.suppress(OSError):
                self.popen.stdin.close()
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout)
        if self.popen.stdout is not None:
            self.popen.stdout.close()


if __name__ == "__main__":
    sys.exit(main())
