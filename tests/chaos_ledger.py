"""The chaos run's ledger checks, pure: database rows and watched process lives in, violations out.

Each task writes a start row (and, if it lives that long, an end row) to ``chaos_ledger`` from inside its
own process, and its process tree is watched from outside (``tests.task_watch``): the watcher saw when
it started and when it was really gone, which the ledger cannot say for a process killed with its worker
(no end row). The checks, per task of an instance, over its attempts in start order:

- no attempt ran twice (two ledger rows of one task instance id);
- a task ran again only after an attempt that failed on purpose (FAILURE) or lost its worker
  (NEED_FAULT_TOLERANCE); an attempt without an end row was failed over;
- no overlap: the next attempt's process started (watched) only after the previous attempt's process
  tree was gone (watched), and after the previous attempt's end row;
- every ledger row has a watched life, and every watched process is gone.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.task_watch import Life

SUCCESS, FAILURE, NEED_FAULT_TOLERANCE = 7, 6, 8

Row = Mapping[str, Any]


@dataclass
class LedgerFindings:
    violations: list[str] = field(default_factory=list)
    retries_after_failure: int = 0
    reruns_after_worker_loss: int = 0
    #: attempts with no end row (killed) whose successor was checked against the watched death
    unfinished_checked: int = 0


def _life(lives: Mapping[tuple[str, int], Life] | None, row: Row) -> Life | None:
    return None if lives is None else lives.get((str(row["task_instance_id"]), int(row["pid"])))


def check_ledger(
    attempts: Mapping[int, Row], ledger: Sequence[Row], lives: Mapping[tuple[str, int], Life] | None
) -> LedgerFindings:
    """``attempts``: task_instance rows by id; ``ledger``: chaos_ledger rows; ``lives``: the watcher's, or
    None when the processes were not watched (the multi-host runs fill a killed attempt's end row from its
    worker's reap log instead): then only the ledger's own times are compared."""
    out = LedgerFindings()
    v = out.violations
    runs_of_attempt = collections.Counter(r["task_instance_id"] for r in ledger)
    v += [f"attempt {t} ran {n} times" for t, n in runs_of_attempt.items() if n > 1]
    for r in ledger:
        if lives is not None and _life(lives, r) is None:
            v.append(f"attempt {r['task_instance_id']} pid {r['pid']} wrote a ledger row but was never watched")
    for life in (lives or {}).values():
        if life.died is None:
            v.append(f"task process {life.pid} of attempt {life.label} still running after the run")

    def order(r: Row) -> tuple[float, float]:
        life = _life(lives, r)
        return (life.started if life else r["start_time"].timestamp(), r["start_time"].timestamp())

    by_task: dict[tuple[int, int], list[Row]] = collections.defaultdict(list)
    for r in ledger:
        by_task[(r["workflow_instance_id"], r["task_code"])].append(r)
    for key, unordered in by_task.items():
        rows = sorted(unordered, key=order)
        for prev, nxt in itertools.pairwise(rows):
            before = attempts.get(prev["task_instance_id"])
            if before is None:
                v.append(f"ledger row of unknown attempt {prev['task_instance_id']}")
                continue
            if before["state"] == FAILURE:
                out.retries_after_failure += 1
            elif before["state"] == NEED_FAULT_TOLERANCE:
                out.reruns_after_worker_loss += 1
            else:
                history = [(a["id"], a["attempt"], a["state"], a["host"]) for a in attempts.values()
                           if (a["workflow_instance_id"], a["task_code"]) == key]  # fmt: skip
                runs = [(r["task_instance_id"], r["pid"], str(r["start_time"]), str(r["end_time"])) for r in rows]
                v.append(f"task {key} ran again although attempt {before['attempt']} ended in state {before['state']}:"
                         f" attempts {sorted(history)}; ledger {runs}")  # fmt: skip
            after = attempts.get(nxt["task_instance_id"])
            if prev["end_time"] is not None and nxt["start_time"] < prev["end_time"]:
                v.append(
                    f"task {key}: attempts overlapped: {dict(before)} ran {prev['start_time']}..{prev['end_time']}"
                    f" pid {prev['pid']}; {dict(after) if after else '?'} started {nxt['start_time']} pid {nxt['pid']}"
                )
            old, new = _life(lives, prev), _life(lives, nxt)
            if prev["end_time"] is None:
                if before["state"] != NEED_FAULT_TOLERANCE:
                    v.append(f"task {key}: attempt {prev['task_instance_id']} never finished but was not failed over")
                out.unfinished_checked += old is not None and new is not None
            if old is not None and new is not None and old.died is not None and new.started < old.died:
                v.append(
                    f"task {key}: attempt {nxt['task_instance_id']} (pid {new.pid}) started at {new.started:.3f} while"
                    f" attempt {prev['task_instance_id']} (pid {old.pid}, end row {prev['end_time']}) ran until"
                    f" {old.died:.3f} (watched): {round(old.died - new.started, 3)} s of overlap"
                )
    return out
