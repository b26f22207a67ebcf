"""Configuration: YAML defaults, user file, environment and --set precedence, and clear errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from core.errors import ConfigError
from engine import config as config_mod


def test_defaults_come_from_the_documented_yaml_files() -> None:
    cfg = config_mod.load(environ={})
    for section, cls in config_mod.SECTIONS.items():
        documented = yaml.safe_load((config_mod.config_dir() / f"{section}.yaml").read_text())
        fields = {f.name for f in dataclasses.fields(cls)}
        assert set(documented) == fields, f"configs/{section}.yaml and {cls.__name__} disagree"
        for key, value in documented.items():
            got = getattr(getattr(cfg, section), key)
            assert got == value or (isinstance(value, int | float) and float(got) == float(value)), key


def test_precedence_file_then_env_then_flags(tmp_path: Path) -> None:
    user = tmp_path / "porpoise.yaml"
    user.write_text("master:\n  listen_port: 7000\n  fetch_command_num: 5\nregistry:\n  lease_ttl: 9\n")
    cfg = config_mod.load(
        user,
        overrides=["master.listen_port=9000"],
        environ={"PORPOISE_MASTER_LISTEN_PORT": "8000", "PORPOISE_REGISTRY_LEASE_TTL": "12"},
    )
    assert cfg.master.listen_port == 9000  # --set beats env beats file
    assert cfg.registry.lease_ttl == 12.0  # env beats file
    assert cfg.master.fetch_command_num == 5  # file beats defaults


def test_env_lists_and_booleans() -> None:
    cfg = config_mod.load(environ={"PORPOISE_REGISTRY_ENDPOINTS": "http://a:1, http://b:2"})
    assert cfg.registry.endpoints == ["http://a:1", "http://b:2"]
    cfg = config_mod.load(environ={"PORPOISE_REGISTRY_ENDPOINTS": '["http://c:3"]'})
    assert cfg.registry.endpoints == ["http://c:3"]


def test_unrelated_porpoise_variables_are_ignored() -> None:
    cfg = config_mod.load(environ={"PORPOISE_TOKEN": "x", "PORPOISE_PG_BINDIR": "/nowhere"})
    assert cfg.master.listen_port == 5678


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"overrides": ["master.listen_port=abc"]},
            "master.listen_port: expected an integer, got 'abc' (from --set",
        ),
        (
            {"overrides": ["master.listen_port=70000"]},
            "master.listen_port: expected a value between 0 and 65535",
        ),
        (
            {"environ": {"PORPOISE_MASTER_HOST_SELECTOR": "fastest"}},
            "one of lower_weight, random, round_robin",
        ),
        (
            {"environ": {"PORPOISE_MASTER_HOST_SELECTOR": "fastest"}},
            "environment variable PORPOISE_MASTER_HOST_SELECTOR",
        ),
        ({"environ": {"PORPOISE_MASTER_NO_SUCH_KEY": "1"}}, "unknown key master.no_such_key"),
        ({"overrides": ["nosection.key=1"]}, "unknown section 'nosection'"),
        ({"overrides": ["master.listen_port"]}, "expected section.key=value"),
        ({"overrides": ["registry.keepalive_interval=20"]}, "must be below registry.lease_ttl"),
        ({"overrides": ["registry.endpoints=etcd:2379"]}, "is not an http(s):// URL"),
        ({"overrides": ["database.pool_min=20", "database.pool_max=5"]}, "database.pool_min: 20 is above"),
        ({"overrides": ["worker.group=a/b"]}, "worker.group"),
        ({"overrides": ["registry.lease_ttl=true"]}, "registry.lease_ttl: expected a number"),
    ],
)
def test_bad_values_name_the_key_the_value_and_the_origin(kwargs: dict, message: str) -> None:
    kwargs.setdefault("environ", {})
    with pytest.raises(ConfigError) as err:
        config_mod.load(**kwargs)
    assert message in str(err.value)


def test_bad_user_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("master: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        config_mod.load(bad, environ={})
    bad.write_text("masters:\n  listen_port: 1\n")
    with pytest.raises(ConfigError, match="unknown section 'masters'"):
        config_mod.load(bad, environ={})
    with pytest.raises(ConfigError, match="does not exist"):
        config_mod.load(tmp_path / "missing.yaml", environ={})


def test_replace_converts_and_checks() -> None:
    cfg = config_mod.load(environ={})
    assert cfg.replace(master={"listen_port": "1234"}).master.listen_port == 1234
    with pytest.raises(ConfigError):
        cfg.replace(master={"listen_port": -1})


def test_database_url() -> None:
    cfg = config_mod.load(environ={"PORPOISE_DATABASE_PASSWORD": "pw", "PORPOISE_DATABASE_PORT": "6543"})
    assert cfg.database.url() == "postgresql://porpoise:pw@127.0.0.1:6543/porpoise"
    cfg = config_mod.load(environ={"PORPOISE_DATABASE_DSN": "postgresql://x@h/db"})
    assert cfg.database.url() == "postgresql://x@h/db"


def test_database_sslmode_goes_into_the_dsn() -> None:
    cfg = config_mod.load(
        environ={"PORPOISE_DATABASE_SSLMODE": "verify-full", "PORPOISE_DATABASE_SSLROOTCERT": "/etc/ca.pem"}
    )
    assert cfg.database.url().endswith("/porpoise?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem")
    cfg = config_mod.load(
        environ={"PORPOISE_DATABASE_DSN": "postgresql://x@h/db?sslmode=disable", "PORPOISE_DATABASE_SSLMODE": "require"}
    )
    assert cfg.database.url() == "postgresql://x@h/db?sslmode=disable"  # the DSN's own wins
    with pytest.raises(ConfigError, match=r"database\.sslrootcert"):
        config_mod.load(environ={"PORPOISE_DATABASE_SSLMODE": "verify-ca"})


@pytest.mark.parametrize(
    ("secret", "reason"),
    [
        ("CHANGE-ME", "a placeholder value is refused"),
        ("change_me-0123456789-abcdefghijklmnopqrstuvwxyz", "a placeholder value"),
        ("an-example-secret-0123456789abcdefghijklmnop", "a placeholder value"),
        ("short-but-random-9f2k", "21 characters, at least 32 required"),
        ("a" * 40, "too few distinct characters"),
    ],
)
def test_a_placeholder_or_short_rpc_secret_is_refused_in_one_line(secret: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_mod.load(overrides=[f"rpc.secret={secret}"], environ={})
    message = str(err.value)
    assert message.startswith("rpc.secret: ") and reason in message and "\n" not in message
    assert secret not in message  # the value is never echoed


def test_a_generated_rpc_secret_and_an_empty_one_load() -> None:
    import secrets

    generated = secrets.token_urlsafe(32)
    assert config_mod.load(overrides=[f"rpc.secret={generated}"], environ={}).rpc.secret == generated
    assert config_mod.load(environ={}).rpc.secret == ""  # the CLI needs none; a node refuses to start without


def test_a_secret_comes_from_a_private_file_named_by_a_file_variable(tmp_path: Path) -> None:
    """PORPOISE_<SECTION>_<KEY>_FILE: the value is read from the file, so it is never in the node's environment."""
    import os
    import secrets

    value = secrets.token_urlsafe(32)
    path = tmp_path / "rpc-secret"
    path.write_text(value + "\n")
    os.chmod(path, 0o600)
    dsn = tmp_path / "dsn"
    dsn.write_text("postgresql://app:pw@db:5432/porpoise")
    os.chmod(dsn, 0o400)
    cfg = config_mod.load(environ={"PORPOISE_RPC_SECRET_FILE": str(path), "PORPOISE_DATABASE_DSN_FILE": str(dsn)})
    assert cfg.rpc.secret == value and cfg.database.dsn == "postgresql://app:pw@db:5432/porpoise"
    # secrets.key_file is a key of its own: its value is the path, not the file's content
    assert config_mod.load(environ={"PORPOISE_SECRETS_KEY_FILE": str(path)}).secrets.key_file == str(path)
    os.chmod(path, 0o640)
    with pytest.raises(ConfigError, match=r"PORPOISE_RPC_SECRET_FILE: .* is readable by others .*chmod 600"):
        config_mod.load(environ={"PORPOISE_RPC_SECRET_FILE": str(path)})
    with pytest.raises(ConfigError, match=r"PORPOISE_RPC_SECRET_FILE: cannot read .*No such file"):
        config_mod.load(environ={"PORPOISE_RPC_SECRET_FILE": str(tmp_path / "missing")})
