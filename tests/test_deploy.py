"""deploy/: the systemd units and configuration examples docs/DEPLOY.md tells operators to install. Each unit runs
its node unprivileged and sandboxed, its configuration is valid for this version's keys, the worker never gets
the database's credentials, and systemd accepts the files."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine import config as config_mod
from tests.helpers import ROOT

DEPLOY = ROOT / "deploy"
ROLES = ("master", "worker", "api")
HARDENING = {
    "NoNewPrivileges": "yes",
    "CapabilityBoundingSet": "",
    "AmbientCapabilities": "",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "RestrictSUIDSGID": "yes",
    "SystemCallFilter": "@system-service",
}


def _unit(role: str) -> dict[str, list[tuple[str, str]]]:
    """The unit file of ``role`` as section -> [(key, value)] (keys may repeat, as Environment= does)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for raw in (DEPLOY / f"porpoise-{role}.service").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = line.strip("[]")
            sections[current] = []
            continue
        key, _, value = line.partition("=")
        sections[current].append((key, value))
    return sections


def _one(items: list[tuple[str, str]], key: str) -> str:
    values = [v for k, v in items if k == key]
    assert len(values) == 1, f"{key}: {values}"
    return values[0]


@pytest.mark.parametrize("role", ROLES)
def test_unit_runs_the_node_unprivileged_and_sandboxed(role: str) -> None:
    service = _unit(role)["Service"]
    assert _one(service, "User") == "porpoise" and _one(service, "Group") == "porpoise"
    for key, value in HARDENING.items():
        assert _one(service, key) == value, key
    argv = _one(service, "ExecStart").split()
    assert argv[1:] == ["-m", f"engine.{role}"] and importlib.util.find_spec(f"engine.{role}.__main__") is not None
    assert _one(service, "KillMode") == "mixed"  # SIGTERM to the node, not to a worker's tasks
    # the environment the unit sets is this version's configuration, and it loads
    env = dict(v.split("=", 1) for k, v in service if k == "Environment")
    assert env["PORPOISE_CONFIG"] == "/etc/porpoise/porpoise.yaml"
    env.pop("HOME", None)
    config_mod.load(config_file=DEPLOY / "porpoise.yaml.example", environ=env)


def test_only_master_and_api_read_the_database_credentials() -> None:
    files = {role: [v for k, v in _unit(role)["Service"] if k == "EnvironmentFile"] for role in ROLES}
    # a worker never uses the metadata database, and its tasks run as its user with its environment
    assert files == {"master": ["/etc/porpoise/database.env"], "worker": [], "api": ["/etc/porpoise/database.env"]}
    env = dict(
        line.split("=", 1)
        for line in (DEPLOY / "database.env.example").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert list(env) == ["PORPOISE_DATABASE_DSN"]
    cfg = config_mod.load(config_file=DEPLOY / "porpoise.yaml.example", environ=env)
    assert cfg.database.dsn.startswith("postgresql://porpoise_app:")
    # the file every node (the worker too) reads holds no database credentials
    assert config_mod.load(config_file=DEPLOY / "porpoise.yaml.example", environ={}).database.dsn == ""


def test_worker_stop_timeout_covers_its_drain() -> None:
    cfg = config_mod.load(config_file=DEPLOY / "porpoise.yaml.example", environ={})
    service = _unit("worker")["Service"]
    timeout = float(_one(service, "TimeoutStopSec"))
    assert timeout > cfg.worker.drain_timeout + cfg.worker.report_flush_timeout
    dirs = [v.split("=", 1)[1] for k, v in service if k == "Environment" and "_DIR=" in v]
    assert len(dirs) == 3 and all(d.startswith("/var/lib/" + _one(service, "StateDirectory") + "/") for d in dirs)


def test_systemd_accepts_the_units(tmp_path: Path) -> None:
    """systemd's own check (unknown keys, bad values); ExecStart pointed at an interpreter that exists here."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed to check deploy/*.service (apt-get install systemd)"
    for role in ROLES:
        text = (
            (DEPLOY / f"porpoise-{role}.service").read_text().replace("/opt/porpoise/venv/bin/python", sys.executable)
        )
        unit = tmp_path / f"porpoise-{role}.service"
        unit.write_text(text)
        out = subprocess.run(
            [analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60, check=False
        )
        assert out.returncode == 0 and not (out.stdout + out.stderr).strip(), out.stdout + out.stderr
