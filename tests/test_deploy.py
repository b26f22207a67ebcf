"""deploy/: the systemd units and configuration examples docs/DEPLOY.md tells operators to install. Masters and API
servers run unprivileged, the worker as root with only the capabilities it needs to run tasks as their tenants;
all sandboxed; no secret is in a unit's environment or in the configuration file (systemd credentials, read
through PORPOISE_*_FILE); the configuration is valid for this version's keys and TLS-first; the worker never gets
the database's credentials; and systemd accepts the files."""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine import config as config_mod
from tests.helpers import ROOT

DEPLOY = ROOT / "deploy"
ROLES = ("master", "worker", "api")
#: what the worker (root) may do: run a task as its tenant, hand it its directory, clean up after it, signal it
WORKER_CAPABILITIES = "CAP_SETUID CAP_SETGID CAP_CHOWN CAP_FOWNER CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_KILL"
HARDENING = {
    "NoNewPrivileges": "yes",
    "AmbientCapabilities": "",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "RestrictSUIDSGID": "yes",
    "SystemCallFilter": "@system-service",
    "ProtectProc": "invisible",
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


def _credentials(role: str, where: Path) -> dict[str, str]:
    """The unit's environment as systemd gives it: %d is the service's credentials directory, here ``where``
    with a generated value (mode 0400, as systemd makes them) for every LoadCredential= of the unit."""
    where.mkdir(exist_ok=True)
    for item in (v for k, v in _unit(role)["Service"] if k == "LoadCredential"):
        name, _, _source = item.partition(":")
        path = where / name
        if name == "database-dsn":
            path.write_text("postgresql://porpoise_app:pw@db.example.internal:5432/porpoise?sslmode=verify-full\n")
        elif name == "secrets.key":
            path.write_text("k1:" + "A" * 43 + "=\n")
        else:
            path.write_text(secrets.token_urlsafe(32) + "\n")
        os.chmod(path, 0o400)
    env = dict(v.split("=", 1) for k, v in _unit(role)["Service"] if k == "Environment")
    env.pop("HOME", None)
    return {k: v.replace("%d", str(where)) for k, v in env.items()}


@pytest.mark.parametrize("role", ROLES)
def test_unit_runs_the_node_with_least_privilege_and_sandboxed(role: str, tmp_path: Path) -> None:
    service = _unit(role)["Service"]
    if role == "worker":  # root, to run each task as its tenant's OS user; only the capabilities that needs
        assert not [v for k, v in service if k in ("User", "Group")]
        assert _one(service, "CapabilityBoundingSet") == WORKER_CAPABILITIES
    else:
        assert _one(service, "User") == "porpoise" and _one(service, "Group") == "porpoise"
        assert _one(service, "CapabilityBoundingSet") == ""
    for key, value in HARDENING.items():
        assert _one(service, key) == value, key
    argv = _one(service, "ExecStart").split()
    assert argv[1:] == ["-m", f"engine.{role}"] and importlib.util.find_spec(f"engine.{role}.__main__") is not None
    assert _one(service, "KillMode") == "mixed"  # SIGTERM to the node, not to a worker's tasks
    # the environment the unit sets is this version's configuration, and it loads
    env = _credentials(role, tmp_path / "credentials")
    assert env["PORPOISE_CONFIG"] == "/etc/porpoise/porpoise.yaml"
    cfg = config_mod.load(config_file=DEPLOY / "porpoise.yaml.example", environ=env)
    assert len(cfg.rpc.secret) >= 32 and cfg.registry.password and cfg.registry.user == "porpoise"
    assert cfg.rpc.tls_key == cfg.registry.tls_key == str(tmp_path / "credentials" / "node-key.pem")
    if role == "worker":
        assert cfg.worker.default_tenant_user == "porpoise-tenant" and not cfg.worker.allow_root_tenant


@pytest.mark.parametrize("role", ROLES)
def test_no_secret_is_in_a_unit_s_environment_or_the_configuration_file(role: str) -> None:
    """Every secret reaches the node as a systemd credential (a root-owned 0600 file copied for the service alone)
    read through a PORPOISE_*_FILE variable: nothing a process of the node's user, or a task, could read from
    the node's environment (/proc/<pid>/environ) or from a shared configuration file."""
    service = _unit(role)["Service"]
    assert not [v for k, v in service if k == "EnvironmentFile"]
    env = dict(v.split("=", 1) for k, v in service if k == "Environment")
    sources = {v.partition(":")[0]: v.partition(":")[2] for k, v in service if k == "LoadCredential"}
    assert all(path.startswith(("/etc/porpoise/secrets/", "/etc/porpoise/tls/")) for path in sources.values())
    for key in ("PORPOISE_RPC_SECRET", "PORPOISE_REGISTRY_PASSWORD", "PORPOISE_DATABASE_DSN"):
        assert key not in env
    assert env["PORPOISE_RPC_SECRET_FILE"] == "%d/rpc-secret" and "rpc-secret" in sources
    assert env["PORPOISE_REGISTRY_PASSWORD_FILE"] == "%d/etcd-password" and "etcd-password" in sources
    assert env["PORPOISE_RPC_TLS_KEY"] == env["PORPOISE_REGISTRY_TLS_KEY"] == "%d/node-key.pem"
    example = config_mod._read_yaml(DEPLOY / "porpoise.yaml.example")
    assert "secret" not in example["rpc"] and "password" not in example["registry"]
    assert "dsn" not in example.get("database", {})


def test_the_example_is_tls_first_and_a_placeholder_secret_is_refused(tmp_path: Path) -> None:
    """Every link of the example is TLS: etcd (https, client certificates, a user), the RPC (mutual TLS); and a
    secret file still holding a placeholder stops the node with one line."""
    env = _credentials("master", tmp_path / "credentials")
    cfg = config_mod.load(config_file=DEPLOY / "porpoise.yaml.example", environ=env)
    assert all(url.startswith("https://") for url in cfg.registry.endpoints)
    assert cfg.registry.tls_cert and cfg.registry.user and cfg.rpc.tls_cert and cfg.rpc.tls_ca
    assert cfg.api.session_cookie_secure
    placeholder = tmp_path / "rpc-secret"
    placeholder.write_text("CHANGE-ME\n")
    os.chmod(placeholder, 0o600)
    with pytest.raises(config_mod.ConfigError, match=r"^rpc\.secret: a placeholder value is refused"):
        config_mod.load(DEPLOY / "porpoise.yaml.example", environ={**env, "PORPOISE_RPC_SECRET_FILE": str(placeholder)})


def test_only_master_and_api_read_the_database_credentials() -> None:
    files = {r: [v for k, v in _unit(r)["Service"] if k == "LoadCredential" and "database" in v] for r in ROLES}
    # a worker never uses the metadata database
    expected = ["database-dsn:/etc/porpoise/secrets/database-dsn"]
    assert files == {"master": expected, "worker": [], "api": expected}
    dsn = (DEPLOY / "database-dsn.example").read_text().strip()
    assert dsn.startswith("postgresql://porpoise_app:") and "sslmode=verify-full" in dsn


def test_worker_stop_timeout_covers_its_drain(tmp_path: Path) -> None:
    cfg = config_mod.load(config_file=DEPLOY / "porpoise.yaml.example", environ=_credentials("worker", tmp_path))
    service = _unit("worker")["Service"]
    timeout = float(_one(service, "TimeoutStopSec"))
    assert timeout > cfg.worker.drain_timeout + cfg.worker.report_flush_timeout
    dirs = [v.split("=", 1)[1] for k, v in service if k == "Environment" and "_DIR=" in v]
    assert len(dirs) == 4 and all(d.startswith("/var/lib/" + _one(service, "StateDirectory") + "/") for d in dirs)


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


@pytest.mark.parametrize("role", ROLES)
def test_every_directory_a_node_writes_is_an_absolute_path_in_its_state_directory(role: str) -> None:
    # a unit runs with / as its working directory and ProtectSystem=strict: a relative default such as
    # storage.cache_dir's .run/resource-cache would be read-only there, and every task using a resource fail
    import dataclasses
    import re

    unit = (DEPLOY / f"porpoise-{role}.service").read_text()
    env = dict(re.findall(r"^Environment=(PORPOISE_[A-Z0-9_]+)=(\S+)$", unit, re.M))
    cfg = config_mod.load(environ={})
    sections = {"worker": ("worker", "storage"), "api": ("api",), "master": ("master",)}[role]
    for section in sections:
        for f in dataclasses.fields(getattr(cfg, section)):
            default = getattr(getattr(cfg, section), f.name)
            if not f.name.endswith("_dir") or not isinstance(default, str) or default.startswith("/"):
                continue
            key = f"PORPOISE_{section.upper()}_{f.name.upper()}"
            if default == "" and key not in env:
                continue  # empty: the node picks a private temporary directory
            assert key in env, f"{role}: {section}.{f.name} defaults to {default!r} and the unit does not set {key}"
            assert env[key].startswith(f"/var/lib/porpoise/{role}/"), (key, env[key])
