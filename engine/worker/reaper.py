"""The task reaper: a tiny sidecar that kills this worker's task process groups when the worker can no
longer vouch for them.

Tasks run in sessions of their own, so a worker killed with SIGKILL would leave them running beside the
attempts a master starts elsewhere once the worker's lease expires (invariant 3). The reaper is a bash
loop in its own session reading a pipe from the worker:

- ``add STAMP PGID...`` / ``del PGID...``: tasks' process groups started / ended (the worker sends what one
  turn of its loop added and removed, in order, as few lines: the reaper's CPU per line, about 45 us, is
  mostly the line's, not the groups'). STAMP is the machine's boot-time clock in microseconds when the line
  was written, after the groups' leaders started: a leader's pid that a process started later holds is a
  reused pid (the task ended while its worker could not say ``del``: paused, or killed just after it saw
  the exit), and that process is another's — the reaper leaves it alone. A group whose leader is gone but
  whose other processes live on is still the task's (Linux reuses no pid a group still holds): it dies;
- ``alive MICROSECONDS``: sent from the registry keep-alive thread after each lease renewal, and by the
  worker when it registers (before it takes work): the time left before the lease may expire, less a
  margin. It sets a deadline on the machine's monotonic clock (``/proc/uptime``, read with a builtin:
  the session judges the lease on monotonic time too, so a step of the wall clock moves neither); if no
  renewal comes before it (the worker is paused, hung, or cut off from etcd), every group is killed —
  before any master can start a replacement attempt. Other lines never move the deadline: a task added
  just before a pause does not buy the worker time its lease does not have;
- end of file (the worker died, however): every group is killed and the reaper exits.

With ``children_of`` (the worker passes its own pid) the deadline also kills every other child of that
process, each with its group: a task whose process the spawn thread created while the worker was
stopped runs although the worker never got to say ``add`` (a SIGSTOP stops the worker, not a child it
is creating). The worker's fork server (engine/worker/forkserver.py) is such a child: killed here, it
takes the tasks it forked with it (their parent-death signal), those not added yet included. So are its
tenant spawners (engine/worker/spawnserver.py), whose tasks have no parent-death signal: each child of the
worker is stopped first (it starts nothing more), then the processes it started are killed, each with its
group, then the child.

It names each group on its output before killing it, with the time (``killed PGID EPOCHSECONDS``), so a
worker that wakes from a pause can tell a task the reaper killed (report it LOST: run it again elsewhere)
from one that failed on its own, and when it died (the worker's loop may see the exit much later).

A few kilobytes of bash, no Python start-up, no polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import select
import time

from core import logs

log = logs.get(__name__)

SCRIPT = r"""
trap '' PIPE  # the worker (reader of our output) may be dead: keep going and kill
[[ -n $EPOCHREALTIME ]] || { echo "porpoise-reaper needs bash 5 (EPOCHREALTIME)" >&2; exit 2; }
declare -A groups
clock=$3  # seconds on a monotonic clock, with two decimals: /proc/uptime
stop_wait=$4  # microseconds the deadline waits in all for the worker's children to stop
now_us() {  # sets $now: microseconds on that clock (no process started)
    local up rest
    read -r up rest < "$clock" || up=0.00
    now=$(( 10#${up/[.,]/} * 10000 ))
}
now_us
deadline=$(( now + $1 ))  # microseconds
parent=$2  # whose other children are tasks too (0: none)
hz=$5  # clock ticks per second of a process's start time in /proc/PID/stat (field 22, boot-time clock)
started_us() {  # sets $started: when process $1 started (boot-time clock, microseconds); fails if unknown
    # the task names itself (comm: any bytes but NUL, newlines and ") " included) and the kernel prints that
    # name unescaped: the whole file is read, cut after the last ") ", split without globbing, and the field
    # checked to be digits before any arithmetic sees it
    local s f
    { read -r -d '' s < /proc/"$1"/stat; } 2>/dev/null
    [[ $s == *") "* ]] || return 1
    read -r -a f <<< "${s##*) }"  # from field 3 on: the start time (field 22) is f[19]
    [[ ${f[19]} =~ ^[0-9]{1,18}$ ]] || return 1
    started=$(( 10#${f[19]} * 1000000 / hz ))
}
kill_all() {
    local started
    for g in "${!groups[@]}"; do
        # a leader started after the add holds a reused pid: another's process (unknown: killed, as before)
        started_us "$g" && (( started > groups[$g] )) && continue
        echo "killed $g $EPOCHREALTIME" 2>/dev/null; kill -KILL -- "-$g" 2>/dev/null
    done
    groups=()
    (( parent > 0 )) || return 0
    # a task started but not added yet (the worker was paused between the two; a new process runs even
    # while its parent is stopped): every child of the worker but us, its group and itself (no group yet)
    local f c g s until kids=()
    for f in /proc/"$parent"/task/*/children; do
        [[ -r $f ]] && kids+=($(< "$f"))
    done
    # stopped first, all at once: a tenant spawner among them starts nothing more; once one is stopped,
    # whatever it started is listed as its children (waited for at most stop_wait in all)
    for c in "${kids[@]}"; do (( c == $$ )) || kill -STOP "$c" 2>/dev/null; done
    until=$(( 10#${EPOCHREALTIME/[.,]/} + stop_wait ))
    for c in "${kids[@]}"; do
        (( c == $$ )) && continue
        while read -r s < /proc/"$c"/stat; do
            s=${s##*) }
            [[ ${s:0:1} == [TtZX] ]] && break
            (( 10#${EPOCHREALTIME/[.,]/} < until )) || break
        done 2>/dev/null
        for f in /proc/"$c"/task/*/children; do
            [[ -r $f ]] || continue
            for g in $(< "$f"); do
                echo "killed $g $EPOCHREALTIME" 2>/dev/null; kill -KILL -- "-$g" "$g" 2>/dev/null
            done
        done
        echo "killed $c $EPOCHREALTIME" 2>/dev/null; kill -KILL -- "-$c" "$c" 2>/dev/null
    done
}
while true; do
    now_us
    left=$(( deadline - now ))
    if (( left > 0 )); then
        printf -v wait '%d.%06d' $(( left / 1000000 )) $(( left % 1000000 ))
        read -r -t "$wait" cmd arg
    else
        kill_all  # past the deadline: whatever was added since dies too, until a renewal comes
        read -r cmd arg
    fi
    rc=$?
    if (( rc == 0 )); then
        case "$cmd" in
            add) stamp=${arg%% *}; for g in ${arg#* }; do groups[$g]=$stamp; done ;;
            del) for g in $arg; do unset "groups[$g]"; done ;;
            alive) now_us; deadline=$(( now + arg )) ;;
        esac
    else
        kill_all
        (( rc > 128 )) || exit 0  # end of file: the worker is gone
    fi
done
"""

#: groups named on one line (its length stays well under PIPE_BUF)
GROUPS_PER_LINE = 200
#: the reaper kills a little before the lease can expire
MARGIN = 0.5
#: seconds the deadline waits in all for the worker's children to stop before it kills what they started
#: (a child stuck in the kernel never shows stopped: its children are killed all the same)
STOP_WAIT = 0.1
#: seconds since boot (CLOCK_BOOTTIME: monotonic, counting a suspend too), to the hundredth
MONOTONIC = "/proc/uptime"


def _micros(seconds: float) -> int:
    return max(int(seconds * 1_000_000), 0)


class Reaper:
    def __init__(self, lease_ttl: float, children_of: int = 0, clock: str = MONOTONIC) -> None:
        self.lease_ttl = lease_ttl
        #: the file the reaper reads its monotonic clock from (tests give one they move themselves)
        self.clock = clock
        #: a pid whose children are all task processes (the worker's own): they die with the groups
        self.children_of = children_of
        self.proc: asyncio.subprocess.Process | None = None
        self._fd = -1
        self._out = -1
        #: group -> when the reaper killed it (epoch seconds), until took() reports it
        self._killed: dict[int, float] = {}
        self._partial = b""
        #: (op, group) told this turn of the loop, in order: written together at its end
        self._pending: list[tuple[str, int]] = []
        self._flush: asyncio.Handle | None = None

    async def start(self) -> None:
        read_end, self._fd = os.pipe()
        self._out, out_write = os.pipe()
        os.set_blocking(self._out, False)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                "bash", "-c", SCRIPT, "porpoise-reaper", str(_micros(self.lease_ttl - MARGIN)), str(self.children_of),
                self.clock, str(_micros(STOP_WAIT)), str(os.sysconf("SC_CLK_TCK")),
                stdin=read_end, stdout=out_write, start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(read_end)
            os.close(out_write)
        log.info("task reaper started", pid=self.proc.pid)

    def _send(self, lines: str) -> None:
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):  # the reaper is gone: nothing to tell it
            os.write(self._fd, lines.encode())  # <= PIPE_BUF: atomic, also from the keep-alive thread

    def add(self, pgid: int) -> None:
        self._queue("add", pgid)

    def remove(self, pgid: int) -> None:
        self._queue("del", pgid)

    def _queue(self, op: str, pgid: int) -> None:
        """Tell the reaper at the end of this turn of the loop (a task added a moment later is covered as
        one the worker never got to add: the deadline kills the worker's children too)."""
        if self._fd < 0:
            return
        self._pending.append((op, pgid))
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_soon(self._write_pending)

    def flush(self) -> None:
        """Tell the reaper now what this turn of the loop queued."""
        if self._flush is not None:
            self._flush.cancel()
            self._write_pending()

    def _write_pending(self) -> None:
        self._flush = None
        pending, self._pending = self._pending, []
        # after every leader named here started (each was spawned before it was queued)
        stamp = f"{_micros(time.clock_gettime(time.CLOCK_BOOTTIME))} "
        chunk = ""
        for op, told in itertools.groupby(pending, key=lambda item: item[0]):
            groups = [str(pgid) for _, pgid in told]
            for i in range(0, len(groups), GROUPS_PER_LINE):
                line = f"{op} {stamp if op == 'add' else ''}{' '.join(groups[i : i + GROUPS_PER_LINE])}\n"
                if len(chunk) + len(line) > select.PIPE_BUF:
                    self._send(chunk)
                    chunk = ""
                chunk += line
        if chunk:
            self._send(chunk)

    def took(self, pgid: int) -> float | None:
        """When the reaper killed this group (epoch seconds), None if it did not (it says so before it
        kills, so by the time the task's exit is seen the line is readable). Reported once."""
        with contextlib.suppress(BlockingIOError, OSError):
            while self._out >= 0:
                chunk = os.read(self._out, 65536)
                if not chunk:
                    break
                data = self._partial + chunk
                *lines, self._partial = data.split(b"\n")
                for line in lines:
                    word, *values = line.decode(errors="replace").split()
                    if word == "killed" and len(values) == 2 and values[0].isdigit():
                        with contextlib.suppress(ValueError):
                            self._killed[int(values[0])] = float(values[1].replace(",", "."))
        return self._killed.pop(pgid, None)

    def renewed(self, remaining: float) -> None:
        """Lease renewed with ``remaining`` seconds left (called from the keep-alive thread)."""
        self._send(f"alive {_micros(remaining - MARGIN)}\n")

    async def close(self) -> None:
        """Closing the pipe is the reaper's end of file: it kills what is left and exits."""
        self.flush()
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
        if self._out >= 0:
            out, self._out = self._out, -1
            os.close(out)
        if self.proc is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 5)
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
