"""``python -m bench.hotpath``: the pure (no I/O) parts of a task's way through master and worker, in
microseconds per task, best of 5 repeats: decoding a batch of 50 dispatched tasks (worker) and of 50 result
reports (master), the task's environment and ``system.*`` built-ins (worker), and the workflow core driving
a 100-task fan-out and a 100-task chain to their end (master). No timing is asserted anywhere; compare two
trees in one run (``PYTHONPATH=<other tree> python -m bench.hotpath`` from outside this checkout)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import timeit
from collections.abc import Callable
from typing import Any

from bench.common import main
from engine.master.workflow import CONTINUE, WorkflowRun
from engine.master.workflow_messages import CreateAttempts, TaskDispatched, TaskResultEvent
from engine.params import builtins
from engine.states import TaskState
from engine.worker.taskenv import TaskPolicy, task_environment
from engine.workflows.definitions import TaskSpec, WorkflowSpec
from engine.workflows.model import Dag
from rpc import codec
from rpc.messages import TaskDispatch, TaskDispatchBatch, TaskReports, TaskResult

SIZES = {"tiny": {"number": 1, "repeat": 1}, "full": {"number": 20, "repeat": 5}}


def _best(fn: Callable[[], Any], number: int, repeat: int, per: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number / per * 1e6


def _spec(upstream: dict[int, list[int]]) -> WorkflowSpec:
    tasks = {
        code: TaskSpec(code=code, version=1, name=f"t{code}", task_type="SHELL", params={"rawScript": "true"},
                       priority=2, worker_group="default", delay_time=0, environment_code=-1, retries=0,
                       retry_interval=0, timeout_flag=0, timeout_strategy=None, timeout=0)
        for code in upstream
    }  # fmt: skip
    dag = Dag.build(list(upstream), [(u, c) for c, ups in upstream.items() for u in ups])
    return WorkflowSpec(1, 1, "wf", 1, [], 0, 1, "default", 0, tasks, dag)


def _drive(spec: WorkflowSpec) -> int:
    """Run the workflow core to its end as the actor does, every task dispatched then succeeding."""
    run, ids, done = WorkflowRun(1, spec, CONTINUE), itertools.count(1), 0

    def apply(actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, CreateAttempts):
                for a in action.attempts:
                    run.bind(a, next(ids))

    apply(run.start())
    while not run.finished:
        pending = run.active()
        for a in pending:
            apply(run.handle(TaskDispatched(a.id, a.attempt, "w:1")))
        for a in pending:
            apply(run.handle(TaskResultEvent(a.id, a.attempt, TaskState.SUCCESS, 0, 1, 2, "w:1", "/l", ())))
            done += 1
    return done


def run(size: str = "full") -> dict[str, Any]:
    n, repeat = SIZES[size]["number"], SIZES[size]["repeat"]
    task = TaskDispatch(task_instance_id=5, attempt=1, workflow_instance_id=3, workflow_definition_code=7,
                        task_code=9, task_name="t", task_type="SHELL",
                        task_params={"rawScript": "true", "localParams": [], "resourceList": []}, master="m:1",
                        global_params=[{"prop": "a", "value": "1", "direct": "IN", "type": "VARCHAR"}])  # fmt: skip
    dispatches = codec.dumps(TaskDispatchBatch([task] * 50))
    result = TaskResult(1, 1, 2, "h:1", "SUCCESS", 0, 1, 2, log_path="/x/y.log")
    reports = codec.dumps(TaskReports(running=[], results=[result] * 50))
    when = dt.datetime(2026, 3, 1, 10, 30, 45)
    fan = _spec({code: [] for code in range(1, 101)})
    chain = _spec({code: [code - 1] if code > 1 else [] for code in range(1, 101)})
    assert _drive(fan) == 100 and _drive(chain) == 100
    policy = TaskPolicy()

    def decode_dispatches() -> Any:
        return codec.decode(TaskDispatchBatch, json.loads(dispatches))

    def decode_reports() -> Any:
        return codec.decode(TaskReports, json.loads(reports))

    return {
        "benchmark": "hotpath",
        "size": size,
        "worker_decode_dispatch_us": _best(decode_dispatches, n, repeat, 50),
        "master_decode_report_us": _best(decode_reports, n, repeat, 50),
        "worker_task_environment_us": _best(lambda: task_environment(policy, {}, {"A": "1"}, None), n * 10, repeat, 1),
        "worker_builtins_us": _best(lambda: builtins(when, task_instance_id=1), n * 100, repeat, 1),
        "master_workflow_fan_out_100_us": _best(lambda: _drive(fan), max(1, n // 5), repeat, 100),
        "master_workflow_chain_100_us": _best(lambda: _drive(chain), max(1, n // 5), repeat, 100),
    }


if __name__ == "__main__":
    main(run)
