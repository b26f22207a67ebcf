"""Serial execution and concurrency caps: the pure decisions (engine/concurrency/serial.py), table-tested."""

from __future__ import annotations

import pytest

from engine.concurrency.serial import Mode, Rule, Verdict, admit, to_wake
from engine.scheduling.downstream import downstream_order, references
from engine.workflows.document import parse
from engine.workflows.model import DefinitionError

P, W, D, PR = Mode.PARALLEL, Mode.SERIAL_WAIT, Mode.SERIAL_DISCARD, Mode.SERIAL_PRIORITY


@pytest.mark.parametrize(
    ("execution_type", "max_active_runs", "rule"),
    [
        (0, 0, Rule(P, 0)),  # PARALLEL: no limit
        (0, 3, Rule(P, 3)),  # PARALLEL with a cap
        (1, 0, Rule(W, 1)),  # the serial types default to one run
        (2, 0, Rule(D, 1)),
        (3, 0, Rule(PR, 1)),
        (1, 4, Rule(W, 4)),  # a serial type with a cap of 4
        (9, 0, Rule(P, 0)),  # an unknown type (a newer writer) counts as PARALLEL
    ],
)
def test_a_rule_comes_from_the_definition_columns(execution_type: int, max_active_runs: int, rule: Rule) -> None:
    assert Rule.of(execution_type, max_active_runs) == rule


@pytest.mark.parametrize(
    ("rule", "active", "waiting", "verdict", "stop", "supersede"),
    [
        # no limit: always runs
        (Rule(P, 0), [1, 2, 3], [], Verdict.RUN, (), ()),
        # room and nobody waiting: runs
        (Rule(W, 1), [], [], Verdict.RUN, (), ()),
        (Rule(P, 3), [1, 2], [], Verdict.RUN, (), ()),
        (Rule(D, 2), [1], [], Verdict.RUN, (), ()),
        (Rule(PR, 1), [], [], Verdict.RUN, (), ()),
        # full: wait (PARALLEL with a cap waits too)
        (Rule(W, 1), [1], [], Verdict.WAIT, (), ()),
        (Rule(P, 2), [1, 2], [], Verdict.WAIT, (), ()),
        # room, but earlier runs wait (one of them woken, not yet claimed): wait behind them, in order
        (Rule(W, 1), [], [5], Verdict.WAIT, (), ()),
        (Rule(P, 2), [1], [5], Verdict.WAIT, (), ()),
        # discard when full, or when runs wait (a mode switched from SERIAL_WAIT)
        (Rule(D, 1), [1], [], Verdict.DISCARD, (), ()),
        (Rule(D, 1), [], [4], Verdict.DISCARD, (), ()),
        # priority: stop enough of the oldest active runs to make room, supersede whatever waits, and wait
        (Rule(PR, 1), [1], [], Verdict.WAIT, (1,), ()),
        (Rule(PR, 1), [3, 1], [], Verdict.WAIT, (1, 3), ()),
        (Rule(PR, 2), [1, 2, 3], [], Verdict.WAIT, (1, 2), ()),
        (Rule(PR, 2), [1, 2], [], Verdict.WAIT, (1,), ()),
        (Rule(PR, 1), [1], [4, 5], Verdict.WAIT, (1,), (4, 5)),
        # an earlier preemptor waits for a stop that is under way: it is superseded, nothing more to stop
        (Rule(PR, 1), [], [4], Verdict.WAIT, (), (4,)),
    ],
)
def test_admission(
    rule: Rule,
    active: list[int],
    waiting: list[int],
    verdict: Verdict,
    stop: tuple[int, ...],
    supersede: tuple[int, ...],
) -> None:
    decision = admit(rule, active, waiting, "wf")
    assert (decision.verdict, decision.stop, decision.supersede) == (verdict, stop, supersede)
    assert bool(decision.reason) == (verdict is not Verdict.RUN)
    if verdict is not Verdict.RUN:
        assert "wf" in decision.reason


@pytest.mark.parametrize(
    ("rule", "active", "pending", "waiting", "woken"),
    [
        (Rule(W, 1), 0, 0, [7, 5, 6], [5]),  # oldest first
        (Rule(W, 1), 1, 0, [5, 6], []),  # no room
        (Rule(W, 1), 0, 1, [6], []),  # the place is promised to a run woken already
        (Rule(P, 3), 1, 0, [5, 6, 7, 8], [5, 6]),
        (Rule(P, 3), 1, 1, [6, 7, 8], [6]),
        (Rule(P, 2), 3, 0, [5], []),  # over the cap (it was lowered): nobody
        (Rule(P, 0), 9, 0, [6, 5], [5, 6]),  # no limit any more (switched to PARALLEL): everyone
    ],
)
def test_waking(rule: Rule, active: int, pending: int, waiting: list[int], woken: list[int]) -> None:
    assert to_wake(rule, active, pending, waiting) == woken


def test_the_admission_never_lets_more_than_the_cap_run() -> None:
    """Replay: runs arrive and end in every order; active runs never exceed the cap, and runs start in the
    order they arrived (SERIAL_WAIT / a cap); DISCARD never queues; PRIORITY never runs two at once."""
    import random

    rng = random.Random(7)
    for mode in (P, W, D, PR):
        for cap in (1, 2, 3):
            rule = Rule(mode, cap)
            active: list[int] = []
            waiting: list[int] = []
            started: list[int] = []
            stopping: set[int] = set()
            for new in range(1, 200):
                if active and rng.random() < 0.5:
                    ended = rng.choice(active)
                    active.remove(ended)
                    stopping.discard(ended)
                    woken = to_wake(rule, len(active), 0, waiting)
                    for w in woken:
                        waiting.remove(w)
                        active.append(w)
                        started.append(w)
                d = admit(rule, sorted(active), sorted(waiting))
                stopping |= set(d.stop)
                waiting = [w for w in waiting if w not in d.supersede]
                if d.verdict is Verdict.RUN:
                    active.append(new)
                    started.append(new)
                elif d.verdict is Verdict.WAIT:
                    waiting.append(new)
                assert len(active) <= cap
                if mode is D:
                    assert not waiting
                if mode is PR:
                    assert len(waiting) <= 1
                    # the runs it waits for are being stopped: enough of them to make room
                    assert not waiting or len([a for a in active if a not in stopping]) < cap
            if mode in (P, W):
                assert started == sorted(started)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"execution_type": "SERIAL"}, "execution_type"),
        ({"max_active_runs": -1}, "max_active_runs"),
        ({"max_active_runs": 10_001}, "max_active_runs"),
        ({"max_active_runs": "2"}, "max_active_runs"),
    ],
)
def test_a_bad_rule_is_refused_naming_the_field(doc: dict[str, object], field: str) -> None:
    base = {"name": "w", "project": "p", "tasks": [{"name": "a", "type": "SHELL", "params": {"rawScript": "true"}}]}
    with pytest.raises(DefinitionError) as err:
        parse({**base, **doc})
    assert err.value.field == field


def test_the_rule_is_part_of_the_document() -> None:
    wf = parse(
        {
            "name": "w",
            "project": "p",
            "execution_type": "SERIAL_PRIORITY",
            "max_active_runs": 2,
            "tasks": [{"name": "a", "type": "SHELL", "params": {"rawScript": "true"}}],
        }
    )
    assert (wf.execution_type, wf.max_active_runs) == (3, 2)


@pytest.mark.parametrize(
    ("edges", "order"),
    [
        ({1: {2}, 2: {3}}, [2, 3]),  # a chain
        ({1: {3, 2}, 2: {4}, 3: {4}}, [2, 3, 4]),  # a diamond: 4 after both
        ({1: {2, 3}, 3: {2}}, [3, 2]),  # 2 depends on 1 and on 3: after 3
        ({1: {2}, 2: {3}, 3: {2}}, [2, 3]),  # a cycle below the root: found order
        ({1: {2}, 2: {1}}, [2]),  # a cycle through the root: the root is not backfilled twice
        ({1: set(), 5: {6}}, []),  # nothing downstream (5 -> 6 is unrelated)
    ],
)
def test_downstream_workflows_are_backfilled_upstream_first(edges: dict[int, set[int]], order: list[int]) -> None:
    assert downstream_order(1, edges) == order


def test_the_workflows_a_dependent_task_names() -> None:
    params = {
        "relation": "AND",
        "groups": [{"relation": "OR", "items": [{"workflow": "a", "project": "p"}, {"workflow_code": 7}]}],
        "items": [{"workflow": "b"}, "junk", {"workflow_code": True}],
    }
    assert list(references(params)) == [("a", None, "p"), (None, 7, None), ("b", None, None), (None, None, None)]
