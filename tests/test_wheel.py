"""The package as an operator installs it: the wheel built from this checkout, installed into a fresh venv
outside the checkout, runs `porpoise`, initialises a real database, and starts master, worker and API nodes
that run a workflow; a worker installed without the `spark` extra fails a SPARK task saying why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.config import SECTIONS
from engine.infra.etcd import EtcdServer
from engine.infra.postgres import RUNTIME_ROLE
from tests import tls
from tests.databases import EmptyDb
from tests.helpers import ROOT, NodeProc, http_json, node_env, wait_sync

pytestmark = pytest.mark.slow

#: what tests/test_wheel.py asserts the wheel ships besides code
DATA_FILES = [f"engine/_data/configs/{name}.yaml" for name in SECTIONS] + ["engine/_data/schema.sql"]

#: the load guard off: on a test machine shared with other suites a master would otherwise hold the command back
UNGUARDED = {"PORPOISE_MASTER_MAX_CPU_LOAD_AVG": "10000", "PORPOISE_WORKER_MAX_CPU_LOAD_AVG": "10000"}

WORKFLOW = """\
name: wheel_check
project: wheel
tasks:
  - name: shell
    type: SHELL
    params: {rawScript: "echo hello from the installed worker"}
  - name: spark
    type: SPARK
    params: {programType: PYTHON, rawScript: "print(1)"}
"""


def _run(argv: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None, timeout: float = 240):
    return subprocess.run(
        argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what points at the checkout or the shared venv."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PORPOISE_")}
    return {**env, **extra}


def _checkout_copy(dest: Path) -> Path:
    """The project's files (tracked and new, not ignored; no UI) copied aside: building in place would leave
    build/ and *.egg-info in the checkout, and a stale build/ can slip removed modules into a wheel."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if rel.startswith("ui/") or not src.is_file():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(src.read_bytes())
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(venv, wheel): the wheel built from this checkout installed into a new venv without the shared one's
    packages (pip resolves the dependencies from its index and cache)."""
    base = tmp_path_factory.mktemp("wheel")
    started = time.monotonic()
    source = _checkout_copy(base / "checkout")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = _run([*pip, "wheel", "--no-deps", "-q", "-w", str(base / "dist"), str(source)], base, _clean_env())
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (base / "dist").glob("porpoise_scheduler-*.whl")
    built_at = time.monotonic()
    venv = base / "venv"
    # no pip inside: the running pip installs into it (--python), which saves ensurepip's copy
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    install = _run([*pip, "--python", str(venv / "bin" / "python"), "install", "-q", str(wheel)], base, _clean_env())
    assert install.returncode == 0, install.stdout + install.stderr
    print(f"\nwheel built in {built_at - started:.1f}s, installed in {time.monotonic() - built_at:.1f}s")
    yield venv, wheel


def test_wheel_ships_the_data_files_and_spark_is_an_extra(installed: tuple[Path, Path]) -> None:
    _, wheel = installed
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        requires = [line for line in zf.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    assert set(DATA_FILES) <= names, sorted(set(DATA_FILES) - names)
    with zipfile.ZipFile(wheel) as zf:  # built from the root's files, the one copy in the tree
        for name in DATA_FILES:
            assert zf.read(name) == (ROOT / name.removeprefix("engine/_data/")).read_bytes(), name
    assert not (ROOT / "engine" / "configs").exists() and not (ROOT / "engine" / "storage" / "schema.sql").exists()
    assert not [n for n in names if n.startswith(("tests/", "bench/", "examples/"))]
    for package in ("pyspark", "pyarrow"):
        lines = [line for line in requires if line.split()[1].lower().startswith(package)]
        assert lines and all("extra ==" in line for line in lines), lines  # never a requirement of the base


def test_installed_package_runs_nodes_outside_the_checkout(
    installed: tuple[Path, Path], empty_db: EmptyDb, etcd_server: EtcdServer, tmp_path: Path
) -> None:
    fresh_db = empty_db.dsn  # the runtime role's; the schema is made as its owner below
    venv, _ = installed
    python, porpoise = str(venv / "bin" / "python"), str(venv / "bin" / "porpoise")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = _clean_env()

    # the package is the venv's own, not this checkout, and it has no PySpark
    where = _run([python, "-c", "import engine, importlib.util as u; print(engine.__file__, u.find_spec('pyspark'))"],
                 cwd, env)  # fmt: skip
    assert where.returncode == 0 and where.stdout.startswith(str(venv)) and where.stdout.split()[1] == "None", where

    helped = _run([porpoise, "--help"], cwd, env)
    assert helped.returncode == 0 and "db" in helped.stdout, helped.stderr
    init = _run([porpoise, "db", "init", "--dsn", empty_db.owner, "--runtime-role", RUNTIME_ROLE], cwd, env)
    assert init.returncode == 0 and "schema created at version" in init.stdout, init.stdout + init.stderr
    admin = _run(
        [porpoise, "user", "create", "admin", "--admin", "--dsn", fresh_db, "--print-token", "--password-stdin"],
        cwd, env, stdin="a long enough password 123\n",
    )  # fmt: skip
    assert admin.returncode == 0, admin.stdout + admin.stderr
    token = admin.stdout.split()[-1]

    root = f"/wheel-{uuid.uuid4().hex[:8]}"
    environment = {
        k: v for k, v in node_env(etcd_server.endpoint, root, 3, PORPOISE_DATABASE_DSN=fresh_db, **UNGUARDED).items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }  # fmt: skip
    nodes: list[NodeProc] = []

    def start(role: str, *overrides: str) -> str:
        node = NodeProc(role, environment, tmp_path, role, list(overrides), python=python, cwd=cwd)
        nodes.append(node)
        return node.start(timeout=60).url

    try:
        master = start("master")
        work = tmp_path / "work"
        start("worker", f"worker.log_dir={work / 'logs'}", f"worker.exec_dir={work / 'exec'}",
              f"worker.spool_dir={work / 'spool'}")  # fmt: skip
        api = start("api")
        wait_sync(lambda: len(http_json(f"{master}/health")[1]["workers"]) == 1, 30, "the worker registered")

        cli_env = _clean_env(PORPOISE_URL=api, PORPOISE_TOKEN=token, **tls.cli_env())
        flow = cwd / "wheel_check.yaml"
        flow.write_text(WORKFLOW)
        applied = _run([porpoise, "apply", str(flow)], cwd, cli_env)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        run = _run([porpoise, "start", "wheel_check", "--failure-strategy", "CONTINUE", "--watch"], cwd, cli_env)
        assert run.returncode != 0 and "finished FAILURE" in run.stdout, run.stdout + run.stderr
        instance_id = run.stdout.split("started workflow instance ")[1].split()[0]
        detail = json.loads(_run([porpoise, "status", instance_id, "--json"], cwd, cli_env).stdout)
        states = {t["name"]: t["state"] for t in detail["tasks"]}
        assert states == {"shell": "SUCCESS", "spark": "FAILURE"}, states
        spark_id = str(next(t["id"] for t in detail["tasks"] if t["name"] == "spark"))
        log = _run([porpoise, "logs", spark_id], cwd, cli_env)
        assert "SPARK tasks need PySpark on the worker" in log.stdout and "[spark]" in log.stdout, log.stdout
        assert "Traceback" not in log.stdout
    finally:
        for node in reversed(nodes):
            node.stop()
