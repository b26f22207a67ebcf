"""The chaos run's checks and tools on their own: the ledger checker fed synthetic rows (it must flag a
real overlap, including one only the watched death of a killed attempt shows), the task watcher on real
processes, and the fault table."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import random
import signal
import time

import pytest

from tests.chaos_faults import FAULT_KINDS, FaultPlan, parse_weights, weights
from tests.chaos_ledger import FAILURE, NEED_FAULT_TOLERANCE, SUCCESS, check_ledger
from tests.helpers import eventually
from tests.task_watch import WATCH_PREAMBLE, Life, TaskWatcher

T0 = 1_800_000_000.0  # seconds since the epoch: the synthetic run's time origin


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(T0 + seconds, dt.UTC)


def _attempt(tid: int, attempt: int, state: int) -> dict[str, object]:
    return {"id": tid, "workflow_instance_id": 1, "task_code": 10, "attempt": attempt, "state": state, "host": "w"}


def _row(tid: int, pid: int, start: float, end: float | None) -> dict[str, object]:
    return {"workflow_instance_id": 1, "task_code": 10, "task_instance_id": tid, "pid": pid,
            "start_time": _at(start), "end_time": None if end is None else _at(end)}  # fmt: skip


def _killed_then_rerun(death: float) -> tuple[dict[int, dict[str, object]], list[dict[str, object]], dict]:  # type: ignore[type-arg]
    """Attempt 1 (pid 100) wrote its start at 0 s and no end (killed with its worker; observed dead at
    ``death``); attempt 2 (pid 200) started at 5 s and finished at 6 s."""
    attempts = {1: _attempt(1, 1, NEED_FAULT_TOLERANCE), 2: _attempt(2, 2, SUCCESS)}
    ledger = [_row(1, 100, 0.1, None), _row(2, 200, 5.1, 6.0)]
    lives = {("1", 100): Life("1", 100, T0, T0 + death), ("2", 200): Life("2", 200, T0 + 5.0, T0 + 6.1)}
    return attempts, ledger, lives


def test_a_killed_attempt_still_alive_when_its_replacement_started_is_an_overlap() -> None:
    found = check_ledger(*_killed_then_rerun(death=7.0))
    assert len(found.violations) == 1, found.violations
    assert "attempt 2 (pid 200) started" in found.violations[0] and "overlap" in found.violations[0]
    assert found.unfinished_checked == 1


def test_a_killed_attempt_gone_before_its_replacement_started_is_no_overlap() -> None:
    found = check_ledger(*_killed_then_rerun(death=4.9))
    assert found.violations == []
    assert (found.unfinished_checked, found.reruns_after_worker_loss) == (1, 1)


def test_an_end_row_after_the_next_start_is_an_overlap_and_a_rerun_after_success_is_flagged() -> None:
    attempts = {1: _attempt(1, 1, FAILURE), 2: _attempt(2, 2, SUCCESS), 3: _attempt(3, 3, SUCCESS)}
    ledger = [_row(1, 100, 0, 3.0), _row(2, 200, 2.0, 4.0), _row(3, 300, 5.0, 6.0)]
    lives = {("1", 100): Life("1", 100, T0, T0 + 3.1), ("2", 200): Life("2", 200, T0 + 1.9, T0 + 4.1),
             ("3", 300): Life("3", 300, T0 + 4.9, T0 + 6.1)}  # fmt: skip
    found = check_ledger(attempts, ledger, lives)
    text = "\n".join(found.violations)
    assert "attempts overlapped" in text  # the end row of 1 (3 s) after the start of 2 (2 s)
    assert "(watched)" in text  # and watched: 1 lived until 3.1 s, 2 started at 1.9 s
    assert "ran again although attempt 2 ended in state 7" in text
    assert found.retries_after_failure == 1


def test_unwatched_rows_twice_run_attempts_and_processes_left_running_are_flagged() -> None:
    attempts = {1: _attempt(1, 1, SUCCESS)}
    ledger = [_row(1, 100, 0, 1.0), _row(1, 101, 2.0, 3.0)]
    lives = {("1", 100): Life("1", 100, T0, None)}
    text = "\n".join(check_ledger(attempts, ledger, lives).violations)
    assert "attempt 1 ran 2 times" in text
    assert "pid 101 wrote a ledger row but was never watched" in text
    assert "task process 100 of attempt 1 still running" in text


async def test_the_watcher_sees_a_task_tree_die_when_its_last_process_exits() -> None:
    """A script's child inherits the watched connection: the task counts as gone only when the whole
    tree is, as when the reaper kills a process group."""
    watcher = TaskWatcher().start()
    procs = []
    try:
        for label in ("lone", "tree"):
            child = "sleep 1000 & wait" if label == "tree" else "sleep 1000"
            script = WATCH_PREAMBLE % {"port": watcher.port, "label": label} + child
            procs.append(await asyncio.create_subprocess_exec("bash", "-c", script, start_new_session=True))
        lives = await eventually(lambda: len(watcher.snapshot()) == 2 and watcher.snapshot(), 10, "both named")
        assert {(label, pid) for label, pid in lives} == {("lone", procs[0].pid), ("tree", procs[1].pid)}
        killed = time.time()
        procs[0].kill()  # the script alone: no child holds the connection
        procs[1].kill()  # its child `sleep` lives on, holding the connection
        await eventually(lambda: watcher.life("lone")[0].died is not None, 10, "the lone script seen dead")
        assert watcher.life("lone")[0].died >= killed  # type: ignore[operator]
        await procs[1].wait()
        assert watcher.life("tree")[0].died is None, "the tree's child still runs"
        os.killpg(procs[1].pid, signal.SIGKILL)  # what the reaper does
        await eventually(lambda: watcher.life("tree")[0].died is not None, 10, "the tree seen dead")
        assert watcher.alive() == []
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            await p.wait()
        watcher.close()


def test_every_enabled_fault_kind_comes_first_once_then_by_weight() -> None:
    table = weights({"poison": 1, "term-master": 1})
    assert set(table) == set(FAULT_KINDS) and all(w > 0 for w in table.values())
    plan = FaultPlan(random.Random(3), table)
    first = [plan.next() for _ in range(len(table))]
    assert sorted(first) == sorted(table)  # type: ignore[type-var]
    some = weights({"kill-master": 0, "kill-worker": 0, "term-master": 1})
    off = FaultPlan(random.Random(3), some)
    assert {off.next() for _ in range(200)} == {k for k, w in some.items() if w > 0}
    assert "kill-master" not in some or some["kill-master"] == 0


def test_a_kind_not_injected_before_it_ever_was_stays_owed() -> None:
    plan = FaultPlan(random.Random(5), weights({"poison": 1, "term-master": 1}))
    first = plan.next()
    assert first is not None
    plan.record(first, injected=False)  # e.g. no running worker this round
    rest = [plan.next() for _ in range(len(FAULT_KINDS))]
    assert sorted(rest) == sorted(FAULT_KINDS) and rest[-1] == first  # type: ignore[type-var]
    plan.record(first, injected=True)
    plan.record(first, injected=False)  # injected once already: owed no more
    assert plan.owed == []


def test_every_fault_kind_is_on_by_default_and_bad_weights_are_refused() -> None:
    assert all(w > 0 for w in weights().values())  # master SIGTERM restarts, clock steps and stop storms included
    assert parse_weights(["poison=2", "kill-master=0"]) == {**weights(), "poison": 2.0, "kill-master": 0.0}
    for bad, needle in (["nosuch=1"], "unknown fault kind 'nosuch'"), (["term-worker"], "expected NAME=NUMBER"), (
        ["pause-worker=x"], "expected NAME=NUMBER"), (["kill-worker=-1"], "weight must be >= 0"):  # fmt: skip
        with pytest.raises(ValueError, match=needle):
            parse_weights(bad)
