"""Apache Airflow in a virtual environment of its own under .bench-cache/ (made once, reused after)."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

#: the release compared with (pinned: a new one is a deliberate change, and re-measured)
VERSION = "3.3.2"
#: the extras installed with it: the PostgreSQL driver its metadata database needs
EXTRAS = "postgres"
CACHE = Path(__file__).resolve().parents[3] / ".bench-cache"
CONSTRAINTS = "https://raw.githubusercontent.com/apache/airflow/constraints-{version}/constraints-{python}.txt"


def venv_dir() -> Path:
    return CACHE / f"airflow-{VERSION}"


def airflow_bin() -> Path:
    return venv_dir() / "bin" / "airflow"


def _installed() -> bool:
    python = venv_dir() / "bin" / "python"
    if not python.is_file() or not airflow_bin().is_file():
        return False
    probe = subprocess.run(
        [str(python), "-c", "import airflow, psycopg2; print(airflow.__version__)"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return probe.returncode == 0 and probe.stdout.strip() == VERSION


def _constraints(python: str) -> Path | None:
    """Airflow's constraints file for this release and Python, when its URL answers (else None)."""
    target = CACHE / f"airflow-constraints-{VERSION}-{python}.txt"
    if target.is_file():
        return target
    try:
        with urllib.request.urlopen(CONSTRAINTS.format(version=VERSION, python=python), timeout=15) as resp:
            target.write_bytes(resp.read())
    except OSError as exc:
        print(f"Airflow's constraints file is unreachable ({exc}): installing without it", file=sys.stderr)
        return None
    return target


def ensure_airflow() -> Path:
    """The ``airflow`` executable of a venv holding Airflow VERSION, installed with pip when missing."""
    if _installed():
        return airflow_bin()
    CACHE.mkdir(parents=True, exist_ok=True)
    venv = venv_dir()
    print(f"installing Apache Airflow {VERSION} into {venv} (a few minutes, once)", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    argv = [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", "-q"]
    argv.append(f"apache-airflow[{EXTRAS}]=={VERSION}")
    constraints = _constraints(python)
    if constraints is not None:
        argv += ["--constraint", str(constraints)]
    subprocess.run(argv, check=True, timeout=3600)
    if not _installed():
        raise RuntimeError(f"pip installed Airflow into {venv}, but `import airflow` does not report {VERSION}")
    return airflow_bin()
