"""The chaos ledger's concurrency checks (tests/chaos_concurrency.py) fed synthetic rows: a task group
over its size and each serial mode's rule broken must be flagged, and an attempt killed with its worker
must count for as long as its process really lived (watched), not until its replacement started."""

from __future__ import annotations

import datetime as dt

from tests.chaos_concurrency import (
    PARALLEL,
    SERIAL_DISCARD,
    SERIAL_PRIORITY,
    SERIAL_WAIT,
    STOP,
    SUCCESS,
    check_groups,
    check_runs,
    spans,
)
from tests.task_watch import Life

T0 = 1_800_000_000.0
KILLED_MID_RUN = 8  # NEED_FAULT_TOLERANCE


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(T0 + seconds, dt.UTC)


def _row(tid: int, start: float, end: float | None, *, wi: int = 1, code: int | None = None, group: str | None = "g1",
         state: int = SUCCESS, wf: int = 100, instance_end: float = 100.0) -> dict[str, object]:  # fmt: skip
    return {"workflow_instance_id": wi, "task_code": code if code is not None else tid, "task_instance_id": tid,
            "pid": 1000 + tid, "start_time": _at(start), "end_time": None if end is None else _at(end),
            "state": state, "host": "w", "instance_end": _at(instance_end), "code": wf,
            "task_group": group}  # fmt: skip


def _life(tid: int, started: float, died: float) -> tuple[tuple[str, int], Life]:
    return (str(tid), 1000 + tid), Life(str(tid), 1000 + tid, T0 + started, T0 + died)


def _killed_then_other_then_rerun(death: float) -> tuple[list[dict[str, object]], dict[tuple[str, int], Life]]:
    """Size-1 group: attempt 1 of task A started at 0 s and was killed with its worker (no end row,
    watched dead at ``death``); task B ran 3..5 s; A's attempt 2 ran 6..7 s."""
    ledger = [
        _row(1, 0, None, code=10, state=KILLED_MID_RUN),
        _row(2, 3, 5, code=20),
        _row(3, 6, 7, code=10),
    ]
    lives = dict([_life(1, 0, death), _life(2, 3, 5), _life(3, 6, 7)])
    return ledger, lives


def test_a_killed_attempt_counts_until_its_process_was_watched_dead() -> None:
    ledger, lives = _killed_then_other_then_rerun(death=2)
    found = check_groups(ledger, spans(ledger, lives), {"g1": 1})
    assert found.violations == [] and found.peaks == {"g1": 1}


def test_a_slot_given_away_while_the_killed_attempt_still_ran_is_an_overlap() -> None:
    ledger, lives = _killed_then_other_then_rerun(death=4)  # still alive when B started at 3 s
    found = check_groups(ledger, spans(ledger, lives), {"g1": 1})
    assert found.peaks == {"g1": 2}
    assert len(found.violations) == 1 and "attempt 1 " in found.violations[0] and "attempt 2 " in found.violations[0]


def test_without_a_watcher_a_killed_attempt_counts_until_its_replacement_started() -> None:
    ledger, _ = _killed_then_other_then_rerun(death=2)
    found = check_groups(ledger, spans(ledger, None), {"g1": 1})  # the estimate can only over-count
    assert found.peaks == {"g1": 2} and found.violations


def test_a_group_at_its_size_passes_and_one_over_fails() -> None:
    ledger = [_row(1, 0, 4, code=1), _row(2, 1, 5, code=2), _row(3, 4, 6, code=3)]  # an end meets a start
    lives = dict([_life(1, 0, 4), _life(2, 1, 5), _life(3, 4, 6)])
    assert check_groups(ledger, spans(ledger, lives), {"g1": 2}).violations == []
    assert check_groups(ledger, spans(ledger, lives), {"g1": 1}).peaks == {"g1": 2}
    ungrouped = [{**r, "task_group": None} for r in ledger]
    assert check_groups(ungrouped, spans(ungrouped, lives), {"g1": 1}).peaks == {}


def _wf(mode: int, cap: int = 0) -> dict[str, object]:
    return {"code": 100, "name": "dag", "execution_type": mode, "max_active_runs": cap}


def _inst(iid: int, state: int = SUCCESS, history: str = "") -> dict[str, object]:
    return {"id": iid, "code": 100, "state": state, "history": history}


def _runs(*spans_: tuple[int, float, float]) -> tuple[list[dict[str, object]], dict[tuple[str, int], Life]]:
    """One task per run: (instance id, start, end)."""
    ledger = [_row(wi * 10, s, e, wi=wi, group=None) for wi, s, e in spans_]
    return ledger, dict(_life(wi * 10, s, e) for wi, s, e in spans_)


def _check(mode: int, instances: list[dict[str, object]], *runs: tuple[int, float, float], cap: int = 0) -> list[str]:
    ledger, lives = _runs(*runs)
    return check_runs(ledger, spans(ledger, lives), [_wf(mode, cap)], instances).violations


def test_serial_wait_runs_one_at_a_time_in_the_order_they_were_made() -> None:
    ok = [_inst(1), _inst(2), _inst(3)]
    assert _check(SERIAL_WAIT, ok, (1, 0, 2), (2, 2, 4), (3, 5, 6)) == []
    overlap = _check(SERIAL_WAIT, ok, (1, 0, 2), (2, 1, 4), (3, 5, 6))
    assert any("ran 2 instances at once" in x for x in overlap)
    out_of_order = _check(SERIAL_WAIT, ok, (1, 0, 2), (3, 2, 4), (2, 5, 6))
    assert any("not as made" in x for x in out_of_order)
    assert any("ended in state 6" in x for x in _check(SERIAL_WAIT, [_inst(1), _inst(2, 6)], (1, 0, 2), (2, 3, 4)))


def test_a_capped_parallel_workflow_may_run_its_cap_at_once_and_no_more() -> None:
    ok = [_inst(1), _inst(2), _inst(3)]
    assert _check(PARALLEL, ok, (1, 0, 3), (2, 1, 4), (3, 3, 5), cap=2) == []
    assert any("ran 3 instances" in x for x in _check(PARALLEL, ok, (1, 0, 3), (2, 1, 4), (3, 2, 5), cap=2))


def test_serial_discard_runs_no_task_of_a_discarded_run() -> None:
    discarded = _inst(2, STOP, "the workflow is SERIAL_DISCARD and already runs 1 of at most 1 (instances 1)")
    ledger, lives = _runs((1, 0, 2), (3, 3, 4))
    found = check_runs(ledger, spans(ledger, lives), [_wf(SERIAL_DISCARD)], [_inst(1), discarded, _inst(3)])
    assert found.violations == [] and found.stopped_by_rule == {2}
    assert any(
        "discarded run 2 ran tasks" in x for x in _check(SERIAL_DISCARD, [_inst(1), discarded], (1, 0, 2), (2, 3, 4))
    )
    stopped = _inst(2, STOP, "stopped by a user")
    assert any("run 2 ended in state 5" in x for x in _check(SERIAL_DISCARD, [_inst(1), stopped], (1, 0, 2)))


def test_serial_priority_stops_older_runs_before_the_newer_one_starts() -> None:
    stopped = _inst(1, STOP, "woken")
    ledger, lives = _runs((1, 0, 2), (2, 3, 4))
    found = check_runs(ledger, spans(ledger, lives), [_wf(SERIAL_PRIORITY)], [stopped, _inst(2)])
    assert found.violations == [] and found.stopped_by_rule == {1}
    late = _check(SERIAL_PRIORITY, [stopped, _inst(2)], (1, 0, 3.5), (2, 3, 4))
    assert any("still ran" in x for x in late)
    newest_stopped = _check(SERIAL_PRIORITY, [_inst(1), _inst(2, STOP, "SERIAL_PRIORITY")], (1, 0, 2), (2, 3, 4))
    assert any("newest run 2" in x for x in newest_stopped)
