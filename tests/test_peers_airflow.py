"""bench/peers/airflow without Airflow: the DAG files it writes and the figures and checks it computes from
the rows Airflow's metadata database holds (the comparison itself installs Airflow, which no test does)."""

from __future__ import annotations

import datetime as dt
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import BENCHMARKS, PEERS
from bench.peers import airflow as peers_airflow
from bench.peers.airflow import results
from bench.peers.airflow.cluster import AirflowCluster
from bench.peers.airflow.dags import workload_dags
from bench.peers.airflow.results import Incorrect, RunRow, TaskRow

T0 = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)


def at(ms: float) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=ms)


class _Recorder:
    """Airflow's DAG-authoring names as the generated files use them, recording what a file declares."""

    def __init__(self) -> None:
        self.dags: list[dict[str, Any]] = []
        self.tasks: list[dict[str, Any]] = []
        self.chains: list[list[str]] = []

    def modules(self) -> dict[str, types.ModuleType]:
        recorder = self

        class DAG:
            def __init__(self, **kwargs: Any) -> None:
                recorder.dags.append(kwargs)

            def __enter__(self) -> DAG:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

        def bash_operator(**kwargs: Any) -> str:
            recorder.tasks.append(kwargs)
            return str(kwargs["task_id"])

        sdk = types.ModuleType("airflow.sdk")
        sdk.DAG = DAG  # type: ignore[attr-defined]
        sdk.chain = lambda *tasks: recorder.chains.append(list(tasks))  # type: ignore[attr-defined]
        bash = types.ModuleType("airflow.providers.standard.operators.bash")
        bash.BashOperator = bash_operator  # type: ignore[attr-defined]
        return {"airflow.sdk": sdk, "airflow.providers.standard.operators.bash": bash}


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Recorder]:
    rec = _Recorder()
    for name in ("airflow", "airflow.providers", "airflow.providers.standard", "airflow.providers.standard.operators"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    for name, module in rec.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    yield rec


def test_dag_files_declare_each_workload(recorder: _Recorder) -> None:
    dags = workload_dags(fanout=200, chain=20, runs=50)
    for dag in dags.values():
        exec(compile(dag.source(), f"{dag.dag_id}.py", "exec"), {})
    declared = {d["dag_id"]: d for d in recorder.dags}
    assert sorted(declared) == sorted(d.dag_id for d in dags.values())
    for d in declared.values():
        assert d["schedule"] is None and d["is_paused_upon_creation"] is False and d["catchup"] is False
    assert declared[dags["many"].dag_id]["max_active_runs"] == 50, "the 50 runs could not all be active"
    assert len(recorder.tasks) == 200 + 20 + 1 + 3
    assert all(t["bash_command"] == "true" and t["retries"] == 0 for t in recorder.tasks)
    assert recorder.chains == [[f"t{i}" for i in range(20)], ["t0", "t1", "t2"]], "only the chains are chained"


def _tasks(run_id: str, n: int, **change: Any) -> list[TaskRow]:
    return [
        TaskRow(
            run_id, f"t{i}", change.get("state", "success"), change.get("try_number", 1), at(10 * i), at(10 * i + 4)
        )
        for i in range(n)
    ]


def test_check_accepts_every_task_once_and_successful() -> None:
    runs = [RunRow("a", "success", at(100)), RunRow("b", "success", at(90))]
    results.check("many", runs, _tasks("a", 3) + _tasks("b", 3), 2, ["t0", "t1", "t2"], history=0)


@pytest.mark.parametrize(
    ("runs", "tasks", "history", "says"),
    [
        ([RunRow("a", "failed", None)], _tasks("a", 3), 0, "runs not successful"),
        ([RunRow("a", "success", None)], _tasks("a", 3, state="upstream_failed"), 0, "tasks not successful"),
        ([RunRow("a", "success", None)], _tasks("a", 3, try_number=2), 0, "ran again"),
        ([RunRow("a", "success", None)], _tasks("a", 3), 1, "ran again"),
        ([RunRow("a", "success", None)], _tasks("a", 2), 0, "2 task instances, expected 3"),
        ([RunRow("a", "success", None)], _tasks("a", 3) + _tasks("a", 1), 0, "4 task instances, expected 3"),
        ([], [], 0, "0 runs, expected 1"),
    ],
)
def test_check_refuses_a_wrong_run(runs: list[RunRow], tasks: list[TaskRow], history: int, says: str) -> None:
    with pytest.raises(Incorrect, match=says):
        results.check("many", runs, tasks, 1, ["t0", "t1", "t2"], history)


def test_figures_from_the_rows() -> None:
    tasks = _tasks("a", 3)  # starts 0, 10, 20 ms; each ends 4 ms after its start
    assert results.fanout(tasks)["fanout_tasks_per_s"] == pytest.approx(3 / 0.024)
    gaps = results.chain_gaps(list(reversed(tasks)))  # order comes from the task ids
    assert gaps == {"chain_gap_p50_ms": pytest.approx(6), "chain_gap_max_ms": pytest.approx(6)}
    assert results.first_start_ms(tasks, at(-250).timestamp()) == pytest.approx(250)
    many = results.many_runs([RunRow("a", "success", at(30_000)), RunRow("b", "success", at(60_000))], T0.timestamp())
    assert many == {"many_runs_per_min": pytest.approx(2.0), "many_runs_seconds": pytest.approx(60)}
    with pytest.raises(Incorrect, match="no start or end"):
        results.fanout([TaskRow("a", "t0", "success", 1, None, at(1))])


def test_table_gives_porpoises_advantage_both_ways() -> None:
    porpoise = {"fanout_tasks_per_s": 300.0, "chain_gap_p50_ms": 5.0, "trigger_p50_ms": 10.0}
    porpoise |= {"many_runs_per_min": 1500.0, "many_runs_seconds": 2.0}
    airflow = {"fanout_tasks_per_s": 10.0, "chain_gap_p50_ms": 1000.0, "trigger_p50_ms": 700.0}
    airflow |= {"many_runs_per_min": 150.0, "many_runs_seconds": 20.0}
    text = results.table(porpoise, airflow, peers_airflow.SIZES, "3.3.2")
    assert "| fan-out (200 tasks `true` at once) | tasks/s | 300 | 10.0 | 30.0x |" in text
    assert "| chain of 20: gap between tasks, p50 | ms | 5.00 | 1,000 | 200x |" in text
    assert "| many runs (50 x 3-task chain at once) | runs/min | 1,500 | 150 | 10.0x |" in text
    assert results.medians([{"x": 1.0}, {"x": 5.0}, {"x": 2.0}]) == {"x": 2.0}


def test_section_replaces_its_own_block_only() -> None:
    first = "<!-- bench:peers-airflow -->\nold\n<!-- /bench:peers-airflow -->"
    text = f"# Benchmarks\n\n<!-- bench:engine -->\nengine\n<!-- /bench:engine -->\n\n{first}\n"
    new = "<!-- bench:peers-airflow -->\nnew\n<!-- /bench:peers-airflow -->"
    assert peers_airflow.write_section(text, new) == text.replace(first, new)
    assert peers_airflow.write_section("# Benchmarks\n", new) == f"# Benchmarks\n\n{new}\n"


def test_the_comparison_is_not_in_make_bench() -> None:
    """It installs Airflow: only ``python -m bench peers airflow`` runs it, never ``make bench`` or the smoke round."""
    assert not any(b.startswith("peers") for b in BENCHMARKS)
    assert PEERS == ("airflow",)


def test_airflow_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What Airflow is started with: LocalExecutor at parallelism 16 on its own database, its tasks calling
    back the API server it starts, and nothing of the launcher's environment that would change Airflow."""
    monkeypatch.setenv("PORPOISE_CONFIG", "/elsewhere.yaml")
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "CeleryExecutor")
    monkeypatch.setenv("VIRTUAL_ENV", "/work/.venv")
    cluster = AirflowCluster(tmp_path / "venv" / "bin" / "airflow", tmp_path, [])
    env = cluster.env("postgresql+psycopg2://u:p@127.0.0.1:5/airflow")
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__CORE__PARALLELISM"] == "16"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == "postgresql+psycopg2://u:p@127.0.0.1:5/airflow"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == f"http://127.0.0.1:{cluster.port}/execution/"
    assert env["AIRFLOW__API__PORT"] == str(cluster.port)
    assert env["AIRFLOW_HOME"] == str(tmp_path / "home")
    assert env["PATH"].startswith(f"{tmp_path / 'venv' / 'bin'}:")
    assert "PORPOISE_CONFIG" not in env and "VIRTUAL_ENV" not in env


def test_section_says_how_many_rounds_it_holds() -> None:
    porpoise = {"fanout_tasks_per_s": 300.0, "chain_gap_p50_ms": 5.0, "trigger_p50_ms": 10.0}
    porpoise |= {"many_runs_per_min": 1500.0, "many_runs_seconds": 2.0}
    airflow = {key: 2 * value for key, value in porpoise.items()}
    facts = {"commit": "abc1234", "cpus": 2, "memory_gib": 23.4, "platform": "Linux", "python": "3.11.7"}
    one = peers_airflow.summary({"porpoise": [porpoise], "airflow": [airflow]}, peers_airflow.SIZES, 3)
    text = peers_airflow.section(one, facts, "python -m bench peers airflow")
    assert "the first 1 of 3 interleaved rounds" in text
    assert "| 1 | 300 / 600 | 5.00 / 10.0 | 10.0 / 20.0 | 1,500 / 3,000 | 2.00 / 4.00 |" in text
    both = peers_airflow.summary({"porpoise": [porpoise] * 3, "airflow": [airflow] * 3}, peers_airflow.SIZES, 3)
    text = peers_airflow.section(both, facts, "python -m bench peers airflow")
    assert "Medians of 3 interleaved round(s)" in text and "| 3 | 300 / 600 |" in text
