"""What the instance detail and list say about a run, as pure functions: which tasks a SWITCH or CONDITIONS
branch skipped (engine/api/skipped.py) and the run type a command gives (engine/api/rows.py). The same, end to
end on a real cluster: tests/test_instance_view.py."""

from __future__ import annotations

from engine.api.rows import run_type
from engine.api.skipped import Edge, skipped_tasks
from engine.states import CommandType

# a(1) -> switch(2) -> left(3) -> below_left(5) -> join(7)
#                   -> right(4) -> below_right(6) -> join(7)
#      a(1) -------------------------------------------> join(7)
EDGES = [Edge(0, 1), Edge(1, 2), Edge(2, 3), Edge(2, 4), Edge(3, 5), Edge(4, 6), Edge(5, 7), Edge(6, 7), Edge(1, 7)]
TYPES = {1: "SHELL", 2: "SWITCH", 3: "SHELL", 4: "SHELL", 5: "SHELL", 6: "SHELL", 7: "SHELL"}


def test_the_branch_not_taken_and_what_only_it_leads_to_are_skipped() -> None:
    states = {1: "SUCCESS", 2: "SUCCESS", 3: "SUCCESS", 5: "SUCCESS", 7: "SUCCESS"}
    assert skipped_tasks(EDGES, TYPES, states, finished=True) == {4, 6}
    # while it runs: the branch taken has an attempt, so the other is skipped already; join waits (not skipped:
    # below_left and a lead to it too)
    assert skipped_tasks(EDGES, TYPES, {1: "SUCCESS", 2: "SUCCESS", 3: "RUNNING_EXECUTION"}, finished=False) == {4, 6}


def test_tasks_not_run_yet_are_not_skipped() -> None:
    # the switch just succeeded, no branch has an attempt yet: nothing is known to be skipped
    assert skipped_tasks(EDGES, TYPES, {1: "SUCCESS", 2: "SUCCESS"}, finished=False) == set()
    # the switch failed or has not run: its branches are not skipped, they did not run
    assert skipped_tasks(EDGES, TYPES, {1: "SUCCESS", 2: "FAILURE"}, finished=True) == set()
    assert skipped_tasks(EDGES, TYPES, {1: "FAILURE"}, finished=True) == set()


def test_a_task_below_only_skipped_tasks_is_skipped_and_one_with_a_live_upstream_is_not() -> None:
    edges = [Edge(0, 1), Edge(1, 2), Edge(2, 3), Edge(2, 4), Edge(4, 5), Edge(5, 6), Edge(3, 6)]
    types = {1: "SHELL", 2: "CONDITIONS", 3: "SHELL", 4: "SHELL", 5: "SHELL", 6: "SHELL"}
    # both branches skipped (a condition with an empty branch list chose nothing): all below skipped
    assert skipped_tasks(edges, types, {1: "SUCCESS", 2: "SUCCESS"}, finished=True) == {3, 4, 5, 6}
    states = {1: "SUCCESS", 2: "SUCCESS", 3: "SUCCESS", 6: "SUCCESS"}
    assert skipped_tasks(edges, types, states, finished=True) == {4, 5}


def test_run_types() -> None:
    assert run_type(CommandType.START_PROCESS, "START_PROCESS") == "manual"
    assert run_type(CommandType.START_CURRENT_TASK_PROCESS, None) == "manual"
    assert run_type(CommandType.SCHEDULER, "SCHEDULER") == "scheduled"
    assert run_type(CommandType.COMPLEMENT_DATA, "COMPLEMENT_DATA") == "backfill"
    assert run_type(CommandType.REPEAT_RUNNING, "START_PROCESS,REPEAT_RUNNING") == "rerun"
    assert run_type(CommandType.START_FAILURE_TASK_PROCESS, "START_PROCESS,START_FAILURE_TASK_PROCESS") == "recovery"
    assert run_type(CommandType.RECOVER_TOLERANCE_FAULT_PROCESS, None) == "recovery"
    # a run woken from a serial wait keeps the type of the command that made it
    assert run_type(CommandType.RECOVER_SERIAL_WAIT, "COMPLEMENT_DATA,RECOVER_SERIAL_WAIT") == "backfill"
    assert run_type(CommandType.RECOVER_SERIAL_WAIT, "SCHEDULER") == "scheduled"
