"""The Airflow DAG files of the comparison: one per workload, SHELL ``true`` tasks as BashOperators.

Each DAG is unscheduled, unpaused on creation and allows every run of a workload at once (the many-runs
workload starts 50 together; Airflow's default is 16 active runs per DAG)."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "porpoise_bench_"


@dataclass(frozen=True)
class Dag:
    """``tasks`` BashOperators ``t0``..``t<n-1>`` running ``true``, each after the previous one when ``chained``."""

    name: str
    tasks: int
    chained: bool
    max_active_runs: int = 1

    @property
    def dag_id(self) -> str:
        return PREFIX + self.name

    @property
    def task_ids(self) -> list[str]:
        return [f"t{i}" for i in range(self.tasks)]

    def source(self) -> str:
        link = "\n    chain(*tasks)" if self.chained else ""
        return (
            f'"""{self.dag_id}: written by bench/peers/airflow (Porpoise\'s comparison)."""\n'
            "import datetime\n\n"
            "from airflow.providers.standard.operators.bash import BashOperator\n"
            "from airflow.sdk import DAG, chain\n\n"
            "with DAG(\n"
            f"    dag_id={self.dag_id!r},\n"
            "    schedule=None,\n"
            "    start_date=datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc),\n"
            "    catchup=False,\n"
            "    is_paused_upon_creation=False,\n"
            f"    max_active_runs={self.max_active_runs},\n"
            f"    max_active_tasks={self.tasks},\n"
            "):\n"
            "    tasks = [\n"
            f'        BashOperator(task_id=f"t{{i}}", bash_command="true", retries=0) for i in range({self.tasks})\n'
            "    ]"
            f"{link}\n"
        )


def workload_dags(fanout: int, chain: int, runs: int) -> dict[str, Dag]:
    """The four workloads' DAGs by workload: fan-out, chain, trigger (one task), many runs (3-task chain)."""
    return {
        "fanout": Dag("fanout", fanout, chained=False),
        "chain": Dag("chain", chain, chained=True),
        "trigger": Dag("single", 1, chained=False),
        "many": Dag("many", 3, chained=True, max_active_runs=runs),
    }
