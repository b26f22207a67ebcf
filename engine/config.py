"""Configuration: documented YAML defaults, overridden by a user file, environment and CLI flags.

Precedence, lowest first:

1. ``configs/<section>.yaml`` (the repository root's, shipped in the wheel): the documented defaults, the one source of
   default values (a test checks every key here is a field below and vice versa);
2. a user YAML file (``--config FILE`` or ``PORPOISE_CONFIG``) with top-level section keys;
3. environment variables ``PORPOISE_<SECTION>_<KEY>`` (``PORPOISE_MASTER_LISTEN_PORT=5679``), or
   ``PORPOISE_<SECTION>_<KEY>_FILE`` naming a file (mode 0600 or stricter) that holds the value: a secret
   (``PORPOISE_DATABASE_DSN_FILE``, ``PORPOISE_RPC_SECRET_FILE``) then never sits in the process's
   environment, which its tasks or other processes of its user could read;
4. command-line ``--set section.key=value`` pairs.

Every value is converted to the field's type and checked against its bounds; a bad one raises
:class:`ConfigError` naming the key, the value and where it came from.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import os
import types
import typing
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.errors import ConfigError
from engine.datafiles import data_path

ENV_PREFIX = "PORPOISE_"


def is_loopback(host: str) -> bool:
    """Whether a listen host is a loopback address or name (an empty host or 0.0.0.0 is every interface)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: the shortest shared secret a node accepts (``secrets.token_urlsafe(32)`` makes 43 characters)
MIN_SECRET_LENGTH = 32
#: words of a value copied from an example rather than generated (compared without case and punctuation)
PLACEHOLDER_WORDS = ("changeme", "example", "placeholder", "replaceme", "yoursecret", "secrethere", "xxxxxxxx")


def weak_secret_reason(name: str, secret: str) -> str:
    """Why ``secret`` (a shared secret such as rpc.secret) is too weak to start a node with, or "" when it is
    long, random-looking and no placeholder. The value itself is never part of the reason."""
    folded = "".join(c for c in secret.lower() if c.isalnum())
    hint = "generate one: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
    if any(word in folded for word in PLACEHOLDER_WORDS):
        return f"{name}: a placeholder value is refused (copied from an example, not generated); {hint}"
    if len(secret) < MIN_SECRET_LENGTH:
        return f"{name}: {len(secret)} characters, at least {MIN_SECRET_LENGTH} required; {hint}"
    if len(set(secret)) < 10:
        return f"{name}: too few distinct characters to be random; {hint}"
    return ""


def _bounded(lo: float | None = None, hi: float | None = None) -> dict[str, Any]:
    return {"min": lo, "max": hi}


def _choice(*choices: str) -> dict[str, Any]:
    return {"choices": choices}


@dataclass(frozen=True)
class RegistryConfig:
    endpoints: list[str]
    root: str
    lease_ttl: float = field(metadata=_bounded(1, 300))
    keepalive_interval: float = field(metadata=_bounded(0.1, 100))
    heartbeat_interval: float = field(metadata=_bounded(0.1, 600))
    request_timeout: float = field(metadata=_bounded(0.1, 120))
    loop_stall_limit: float = field(metadata=_bounded(0, 300))
    on_lost: str = field(metadata=_choice("exit", "reregister"))
    tls_ca: str
    tls_cert: str
    tls_key: str
    user: str
    password: str

    def stall_limit(self) -> float:
        """Seconds the event loop may go without ticking before the lease is no longer renewed."""
        return self.loop_stall_limit or self.lease_ttl / 3

    def check(self) -> None:
        if self.keepalive_interval >= self.lease_ttl:
            raise ConfigError(
                f"registry.keepalive_interval: {self.keepalive_interval} must be below "
                f"registry.lease_ttl ({self.lease_ttl})"
            )
        if not self.endpoints:
            raise ConfigError("registry.endpoints: at least one etcd URL is required")
        for url in self.endpoints:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"registry.endpoints: {url!r} is not an http(s):// URL")
        if bool(self.tls_ca) != bool(self.tls_cert) or bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("registry.tls_ca, registry.tls_cert and registry.tls_key: set all three, or none")
        if self.tls_cert and not all(url.startswith("https://") for url in self.endpoints):
            raise ConfigError("registry.endpoints: with registry.tls_* set, every endpoint must be an https:// URL")
        if bool(self.user) != bool(self.password):
            raise ConfigError("registry.user and registry.password: set both (etcd auth), or neither")
        if not self.root.startswith("/") or (self.root.endswith("/") and self.root != "/"):
            raise ConfigError(f"registry.root: {self.root!r} must start with '/' and not end with '/'")


@dataclass(frozen=True)
class DatabaseConfig:
    dsn: str
    host: str
    port: int = field(metadata=_bounded(1, 65535))
    user: str
    password: str
    name: str
    pool_min: int = field(metadata=_bounded(0, 1000))
    pool_max: int = field(metadata=_bounded(1, 1000))
    connect_timeout: float = field(metadata=_bounded(0.1, 600))
    command_timeout: float = field(metadata=_bounded(0.1, 86400))
    sslmode: str = field(metadata=_choice("", "disable", "allow", "prefer", "require", "verify-ca", "verify-full"))
    sslrootcert: str
    #: the schema owner's DSN, used only by ``porpoise db init|upgrade`` ("": the runtime DSN above)
    owner_dsn: str = ""

    def owner_url(self) -> str:
        return self.owner_dsn or self.url()

    def check(self) -> None:
        if self.pool_min > self.pool_max:
            raise ConfigError(f"database.pool_min: {self.pool_min} is above database.pool_max ({self.pool_max})")
        if self.sslmode in ("verify-ca", "verify-full") and not self.sslrootcert:
            raise ConfigError(f"database.sslrootcert: required with database.sslmode {self.sslmode}")

    def url(self) -> str:
        """The DSN asyncpg accepts (``postgresql://user:pw@host:port/db``), with ``sslmode`` / ``sslrootcert``
        as query parameters when configured (a DSN's own take precedence)."""
        if self.dsn:
            base = self.dsn
        else:
            auth = self.user if not self.password else f"{self.user}:{self.password}"
            base = f"postgresql://{auth}@{self.host}:{self.port}/{self.name}"
        query = {k: v for k, v in (("sslmode", self.sslmode), ("sslrootcert", self.sslrootcert)) if v}
        present = urllib.parse.parse_qs(urllib.parse.urlsplit(base).query)
        extra = {k: v for k, v in query.items() if k not in present}
        if not extra:
            return base
        return base + ("&" if "?" in base else "?") + urllib.parse.urlencode(extra)


@dataclass(frozen=True)
class MasterConfig:
    listen_host: str
    listen_port: int = field(metadata=_bounded(0, 65535))
    advertise_host: str
    fetch_command_num: int = field(metadata=_bounded(1, 100_000))
    command_poll_interval: float = field(metadata=_bounded(0.01, 3600))
    max_cpu_load_avg: float = field(metadata=_bounded(-1, None))
    reserved_memory_gb: float = field(metadata=_bounded(0, None))
    host_selector: str = field(metadata=_choice("lower_weight", "random", "round_robin"))
    shutdown_grace: float = field(metadata=_bounded(0, 3600))
    failover_sweep_interval: float = field(metadata=_bounded(0.5, 3600))
    run_context_ttl: float = field(metadata=_bounded(0, 3600))
    schedule_poll_interval: float = field(metadata=_bounded(0.05, 3600))
    misfire_threshold: float = field(metadata=_bounded(0, 86400 * 366))
    misfire_max_fires: int = field(metadata=_bounded(1, 1_000_000))
    logic_check_interval: float = field(metadata=_bounded(0.05, 3600))
    max_clock_skew: float = field(metadata=_bounded(0, 3600))
    max_sub_workflow_depth: int = field(metadata=_bounded(1, 1000))
    #: seconds between two reads of the worker groups admins manage (engine/master/worker_groups.py)
    worker_group_refresh_interval: float = field(metadata=_bounded(0.1, 3600))


@dataclass(frozen=True)
class WorkerConfig:
    listen_host: str
    listen_port: int = field(metadata=_bounded(0, 65535))
    advertise_host: str
    advertise_port: int = field(metadata=_bounded(0, 65535))
    group: str
    exec_slots: int = field(metadata=_bounded(1, 100_000))
    host_weight: int = field(metadata=_bounded(0, 10_000))
    max_cpu_load_avg: float = field(metadata=_bounded(-1, None))
    reserved_memory_gb: float = field(metadata=_bounded(0, None))
    log_dir: str
    exec_dir: str
    spool_dir: str
    drain_timeout: float = field(metadata=_bounded(0, 86400))
    report_flush_timeout: float = field(metadata=_bounded(0, 3600))
    test_hold_results: bool
    allow_root_tenant: bool
    default_tenant_user: str
    python_interpreter: str
    task_env_passthrough: list[str]
    task_env: list[str]
    sql_load_dirs: list[str]
    spark_connect_url: str
    spark_connect_prefork: bool
    tenant_spawner: bool
    log_keep_days: float = field(metadata=_bounded(0, 36_500))
    max_log_bytes: int = field(metadata=_bounded(0, 1 << 50))
    min_free_disk_bytes: int = field(metadata=_bounded(0, 1 << 60))
    min_free_disk_percent: float = field(metadata=_bounded(0, 100))

    def check(self) -> None:
        if not self.group or "/" in self.group:
            raise ConfigError(f"worker.group: {self.group!r} must be a non-empty name without '/'")
        if not self.python_interpreter.strip() or "\n" in self.python_interpreter:
            raise ConfigError(f"worker.python_interpreter: {self.python_interpreter!r} must be one command or path")
        for name in self.task_env_passthrough:
            if name.upper().startswith("PORPOISE_") or not name:
                raise ConfigError(f"worker.task_env_passthrough: {name!r}: PORPOISE_* variables are the node's own")
        for item in self.task_env:
            key, eq, _ = item.partition("=")
            if not eq or not key or key.upper().startswith("PORPOISE_"):
                raise ConfigError(f"worker.task_env: {item!r}: expected NAME=VALUE (not a PORPOISE_* name)")
        for d in self.sql_load_dirs:
            if not d.startswith("/"):
                raise ConfigError(f"worker.sql_load_dirs: {d!r} must be an absolute path")
        if self.spark_connect_url and not self.spark_connect_url.startswith("sc://"):
            raise ConfigError(f"worker.spark_connect_url: {self.spark_connect_url!r} must be an sc://HOST:PORT URL")


#: days before a run's business date that a DEPENDENT task may look at (``lastMonth`` from the last day of a
#: month reaches back to the first day of the month before: 61 days, plus a day for time zones);
#: retention must keep at least that much history or a dependent task would wait for a run it deleted
DEPENDENT_LOOKBACK_DAYS = 62


def check_keep_days(name: str, days: int) -> str:
    """Why ``days`` is not a valid history retention, or "" (0 keeps history for ever)."""
    if days != 0 and days < DEPENDENT_LOOKBACK_DAYS:
        return (
            f"{name}: {days} is below {DEPENDENT_LOOKBACK_DAYS} days, the longest look-back of a DEPENDENT task"
            " (lastMonth); use 0 to keep history for ever"
        )
    return ""


@dataclass(frozen=True)
class HistoryConfig:
    """Retention of finished runs (engine/master/retention.py), run by one master at a time."""

    keep_days: int = field(metadata=_bounded(0, 36_500))
    audit_keep_days: int = field(metadata=_bounded(0, 36_500))
    interval_seconds: float = field(metadata=_bounded(0.1, 86_400 * 7))
    batch_size: int = field(metadata=_bounded(1, 100_000))

    def check(self) -> None:
        reason = check_keep_days("history.keep_days", self.keep_days)
        if reason:
            raise ConfigError(reason)


@dataclass(frozen=True)
class ApiConfig:
    listen_host: str
    listen_port: int = field(metadata=_bounded(0, 65535))
    max_body_bytes: int = field(metadata=_bounded(1024, 1 << 30))
    token_cache_seconds: float = field(metadata=_bounded(0, 3600))
    alerts_enabled: bool
    alert_poll_interval: float = field(metadata=_bounded(0.05, 3600))
    alert_max_attempts: int = field(metadata=_bounded(1, 100))
    alert_retry_seconds: float = field(metadata=_bounded(0, 86400))
    alert_timeout: float = field(metadata=_bounded(0.1, 600))
    session_hours: float = field(metadata=_bounded(0.1, 24 * 30))
    session_cookie_secure: bool
    metrics_token: str
    login_window_seconds: float = field(metadata=_bounded(1, 86400))
    login_max_failures: int = field(metadata=_bounded(1, 1000))
    login_max_failures_per_address: int = field(metadata=_bounded(1, 100000))
    ui_dir: str
    events_batch_seconds: float = field(metadata=_bounded(0.01, 10))
    events_heartbeat_seconds: float = field(metadata=_bounded(0.1, 600))
    events_history: int = field(metadata=_bounded(1, 100000))
    alert_webhook_allow: list[str]
    alert_webhook_deny: list[str]
    alert_script_dir: str
    public_url: str
    rate_limit_per_second: float = field(metadata=_bounded(0, 1_000_000))
    rate_limit_burst: int = field(metadata=_bounded(1, 10_000_000))
    anonymous_rate_limit_per_second: float = field(metadata=_bounded(0, 1_000_000))
    anonymous_rate_limit_burst: int = field(metadata=_bounded(1, 10_000_000))
    tls_cert: str
    tls_key: str
    allow_plain_http: bool
    log_archive_enabled: bool
    log_archive_interval: float = field(metadata=_bounded(0.05, 3600))
    log_archive_max_bytes: int = field(metadata=_bounded(0, 1 << 50))
    log_archive_retry_seconds: float = field(metadata=_bounded(0.1, 86400))
    log_archive_max_tries: int = field(metadata=_bounded(1, 1000))
    log_cache_dir: str
    log_cache_bytes: int = field(metadata=_bounded(1 << 20, 1 << 50))

    def check(self) -> None:
        from engine.alerts.netguard import networks

        for key in ("alert_webhook_allow", "alert_webhook_deny"):
            try:
                networks(getattr(self, key))
            except ValueError as exc:
                raise ConfigError(f"api.{key}: {exc}") from None
        if self.alert_script_dir and not self.alert_script_dir.startswith("/"):
            raise ConfigError(f"api.alert_script_dir: {self.alert_script_dir!r} is not an absolute path")
        if self.log_cache_dir and not self.log_cache_dir.startswith("/"):
            raise ConfigError(f"api.log_cache_dir: {self.log_cache_dir!r} is not an absolute path")
        if self.public_url and not self.public_url.startswith(("http://", "https://")):
            raise ConfigError(f"api.public_url: {self.public_url!r} is not an http:// or https:// URL")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("api.tls_cert and api.tls_key: set both (HTTPS) or neither (plain HTTP)")
        if not self.tls_cert and not self.allow_plain_http and not is_loopback(self.listen_host):
            raise ConfigError(
                f"api.listen_host: {self.listen_host!r} is not a loopback address; serve HTTPS there (api.tls_cert,"
                " api.tls_key) or set api.allow_plain_http: true (behind a TLS proxy)"
            )


@dataclass(frozen=True)
class StandaloneConfig:
    run_dir: str
    etcd_client_port: int = field(metadata=_bounded(0, 65535))
    etcd_peer_port: int = field(metadata=_bounded(0, 65535))
    postgres_port: int = field(metadata=_bounded(0, 65535))
    api_port: int = field(metadata=_bounded(0, 65535))
    start_timeout: float = field(metadata=_bounded(1, 3600))
    stop_timeout: float = field(metadata=_bounded(0.1, 3600))
    secure_etcd: bool


@dataclass(frozen=True)
class LoggingConfig:
    format: str = field(metadata=_choice("json", "console"))
    level: str = field(metadata=_choice("debug", "info", "warning", "error"))


@dataclass(frozen=True)
class RpcConfig:
    secret: str
    timeout: float = field(metadata=_bounded(0.05, 3600))
    max_body_bytes: int = field(metadata=_bounded(1024, 1 << 30))
    max_clock_skew: float = field(metadata=_bounded(1, 86400))
    #: JSON calls as frames on a WebSocket per pair of nodes (rpc/stream.py); served and used
    stream: bool
    tls_ca: str
    tls_cert: str
    tls_key: str

    def check(self) -> None:
        from rpc.tls import TlsFiles

        reason = weak_secret_reason("rpc.secret", self.secret) if self.secret else ""
        if reason:  # empty: commands that call no node (the CLI) need none; a node refuses to start without
            raise ConfigError(reason)
        TlsFiles.of(self)


@dataclass(frozen=True)
class StorageConfig:
    """Where resource files and archived task logs live (engine/storage/blobs.py, docs/RESOURCES.md)."""

    type: str = field(metadata=_choice("database", "s3"))
    max_file_bytes: int = field(metadata=_bounded(1, 1 << 50))
    max_project_bytes: int = field(metadata=_bounded(1, 1 << 60))
    upload_idle_timeout: float = field(metadata=_bounded(1, 3600))
    max_concurrent_uploads: int = field(metadata=_bounded(1, 1000))
    s3_bucket: str
    s3_endpoint: str
    s3_region: str
    s3_prefix: str
    s3_access_key_id: str
    #: plain, or sealed (``pps1:...``, context ``storage.s3_secret_access_key``) under the secrets keyring
    s3_secret_access_key: str = field(repr=False)
    s3_timeout: float = field(metadata=_bounded(0.1, 3600))
    cache_dir: str
    cache_max_bytes: int = field(metadata=_bounded(0, 1 << 60))

    def check(self) -> None:
        if self.type == "s3" and not self.s3_bucket:
            raise ConfigError("storage.s3_bucket: required when storage.type is s3")
        if self.s3_endpoint and not self.s3_endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"storage.s3_endpoint: {self.s3_endpoint!r} must be an http:// or https:// URL")
        if self.s3_prefix.startswith("/"):
            raise ConfigError(f"storage.s3_prefix: {self.s3_prefix!r} must not start with '/'")
        if self.max_file_bytes > self.max_project_bytes:
            raise ConfigError("storage.max_file_bytes: larger than storage.max_project_bytes")


@dataclass(frozen=True)
class SecretsConfig:
    """The keyring credential fields are sealed with at rest (engine/secretbox.py)."""

    key_file: str
    keys: str


@dataclass(frozen=True)
class LdapConfig:
    """Sign-in against a directory (engine/api/directory.py); local users keep their passwords."""

    enabled: bool
    urls: list[str]
    start_tls: bool
    ca_file: str
    bind_dn: str
    bind_password: str
    bind_password_file: str
    base_dn: str
    user_filter: str
    user_dn_template: str
    email_attribute: str
    group_base_dn: str
    group_filter: str
    group_name_attribute: str
    admin_groups: list[str]
    project_grants: list[str]
    not_exist_action: str = field(metadata=_choice("CREATE", "DENY"))
    timeout: float = field(metadata=_bounded(0.1, 120))

    def check(self) -> None:
        if not self.enabled:
            return
        if not self.urls or not all(u.startswith(("ldap://", "ldaps://")) for u in self.urls):
            raise ConfigError("ldap.urls: give ldap:// or ldaps:// URLs")
        if not self.user_dn_template and not self.base_dn:
            raise ConfigError("ldap: set ldap.user_dn_template (bind as the user) or ldap.base_dn (search, then bind)")
        if self.user_dn_template and "{user}" not in self.user_dn_template:
            raise ConfigError("ldap.user_dn_template: must contain {user}")
        if "{user}" not in self.user_filter:
            raise ConfigError("ldap.user_filter: must contain {user}")
        if self.bind_password and self.bind_password_file:
            raise ConfigError("ldap.bind_password and ldap.bind_password_file: set one of them")
        for item in self.project_grants:
            group, _, grant = item.partition("=")
            project, _, perms = grant.partition(":")
            if not group or not project or not perms or not set(perms.split("+")) <= {"READ", "EXECUTE", "WRITE"}:
                raise ConfigError(
                    f"ldap.project_grants: {item!r} is not GROUP=PROJECT:PERMS"
                    " (PERMS: READ, EXECUTE, WRITE joined by +)"
                )


@dataclass(frozen=True)
class DebugConfig:
    """Test-only hooks (configs/debug.yaml): never enabled in production."""

    wedge_hook: bool
    clock_offset: float = field(metadata=_bounded(-86400 * 366, 86400 * 366))
    #: check each running workflow's core invariants after every batch of events (WorkflowRun.validate)
    validate_core: bool = False
    #: a directory: the node records step marks (core/marks.py, read by ``python -m bench.steps``); "": off
    step_marks: str = ""


@dataclass(frozen=True)
class Config:
    registry: RegistryConfig
    database: DatabaseConfig
    master: MasterConfig
    worker: WorkerConfig
    history: HistoryConfig
    api: ApiConfig
    standalone: StandaloneConfig
    logging: LoggingConfig
    rpc: RpcConfig
    secrets: SecretsConfig
    ldap: LdapConfig
    storage: StorageConfig
    debug: DebugConfig

    def replace(self, **sections: Mapping[str, Any]) -> Config:
        """A copy with some keys of some sections replaced (values converted and checked)."""
        raw = {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}
        for name, values in sections.items():
            if name not in SECTIONS:
                raise ConfigError(f"unknown configuration section {name!r}")
            for key, value in values.items():
                _set(raw, name, key, value, "override")
        return _build(raw, {name: {k: "override" for k in v} for name, v in sections.items()})


SECTIONS: dict[str, type] = {f.name: typing.get_type_hints(Config)[f.name] for f in dataclasses.fields(Config)}


def config_dir() -> Path:
    """Directory holding the documented default YAML files: ``PORPOISE_CONFIG_DIR``, else the package's own
    ``configs/`` (engine/datafiles.py: the checkout's, or the copy an installed wheel carries)."""
    override = os.environ.get("PORPOISE_CONFIG_DIR")
    if override:
        return Path(override)
    return data_path("configs")


def load(
    config_file: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load the configuration; see the module docstring for precedence."""
    environ = os.environ if environ is None else environ
    raw: dict[str, dict[str, Any]] = {}
    source: dict[str, dict[str, str]] = {}
    for name in SECTIONS:
        path = config_dir() / f"{name}.yaml"
        data = _read_yaml(path)
        raw[name] = dict(data)
        source[name] = dict.fromkeys(data, str(path))

    config_file = config_file or environ.get("PORPOISE_CONFIG") or None
    if config_file:
        user = _read_yaml(Path(config_file))
        for section, values in user.items():
            if section not in SECTIONS:
                raise ConfigError(f"{config_file}: unknown section {section!r} (known: {', '.join(SECTIONS)})")
            if not isinstance(values, Mapping):
                raise ConfigError(f"{config_file}: section {section!r} must be a mapping")
            for key, value in values.items():
                _set(raw, section, str(key), value, str(config_file))
                source[section][str(key)] = str(config_file)

    for env_key, value in environ.items():
        if not env_key.startswith(ENV_PREFIX) or env_key in ("PORPOISE_CONFIG", "PORPOISE_CONFIG_DIR"):
            continue
        rest = env_key[len(ENV_PREFIX) :].lower()
        section, _, key = rest.partition("_")
        if section not in SECTIONS:
            continue  # other PORPOISE_* variables (tokens, run dirs) are not configuration keys
        names = {f.name for f in dataclasses.fields(SECTIONS[section])}
        if key not in names and key.endswith("_file") and key.removesuffix("_file") in names:
            key, value = key.removesuffix("_file"), read_secret_file(env_key, value)  # noqa: PLW2901
        _set(raw, section, key, value, f"environment variable {env_key}")
        source[section][key] = f"environment variable {env_key}"

    for item in overrides:
        dotted, eq, value = item.partition("=")
        section, dot, key = dotted.partition(".")
        if not eq or not dot:
            raise ConfigError(f"--set {item!r}: expected section.key=value")
        _set(raw, section.strip(), key.strip(), value, f"--set {item}")
        source.setdefault(section.strip(), {})[key.strip()] = f"--set {item}"
    return _build(raw, source)


def read_secret_file(origin: str, path: str) -> str:
    """The value held in ``path`` (one trailing newline dropped): a file only its owner may read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise ConfigError(f"{origin}: cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if mode & 0o077:
            raise ConfigError(f"{origin}: {path} is readable by others (mode {mode & 0o777:o}): chmod 600 it")
        data = f.read(1 << 20)
    try:
        return data.decode().removesuffix("\n")
    except UnicodeDecodeError:
        raise ConfigError(f"{origin}: {path} is not UTF-8 text") from None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file {path} does not exist") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values")
    return data


def _set(raw: dict[str, dict[str, Any]], section: str, key: str, value: Any, origin: str) -> None:
    if section not in SECTIONS:
        raise ConfigError(f"{origin}: unknown section {section!r} (known: {', '.join(SECTIONS)})")
    names = {f.name for f in dataclasses.fields(SECTIONS[section])}
    if key not in names:
        raise ConfigError(f"{origin}: unknown key {section}.{key} (known: {', '.join(sorted(names))})")
    raw[section][key] = value


def _build(raw: Mapping[str, Mapping[str, Any]], source: Mapping[str, Mapping[str, str]]) -> Config:
    sections: dict[str, Any] = {}
    for name, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            where = source.get(name, {}).get(f.name, "defaults")
            if f.name not in raw[name]:
                raise ConfigError(f"{name}.{f.name}: missing (no default in {config_dir() / name}.yaml)")
            values[f.name] = _convert(f"{name}.{f.name}", raw[name][f.name], hints[f.name], f.metadata, where)
        unknown = set(raw[name]) - set(values)
        if unknown:
            raise ConfigError(f"{name}: unknown keys {sorted(unknown)} in {config_dir() / name}.yaml")
        section = cls(**values)
        check = getattr(section, "check", None)
        if check:
            check()
        sections[name] = section
    return Config(**sections)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _convert(name: str, value: Any, hint: Any, meta: Mapping[str, Any], where: str) -> Any:
    def bad(expected: str) -> ConfigError:
        return ConfigError(f"{name}: expected {expected}, got {value!r} (from {where})")

    origin = typing.get_origin(hint)
    if origin in (list, types.GenericAlias) or hint is list:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = yaml.safe_load(text)
                except yaml.YAMLError as exc:
                    raise bad("a list") from exc
            else:
                value = [part.strip() for part in text.split(",") if part.strip()]
        if not isinstance(value, list):
            raise bad("a list")
        return [str(v) for v in value]
    if hint is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise bad("true or false")
    if hint in (int, float):
        if isinstance(value, bool):
            raise bad("a number")
        try:
            number = hint(value) if hint is float else int(str(value).strip(), 10)
        except (TypeError, ValueError) as exc:
            raise bad("an integer" if hint is int else "a number") from exc
        lo, hi = meta.get("min"), meta.get("max")
        if (lo is not None and number < lo) or (hi is not None and number > hi):
            raise bad(f"a value between {lo if lo is not None else '-inf'} and {hi if hi is not None else 'inf'}")
        return number
    if hint is str:
        if value is None:
            value = ""
        if isinstance(value, list | dict):
            raise bad("a string")
        text = str(value)
        choices = meta.get("choices")
        if choices and text not in choices:
            raise bad(f"one of {', '.join(choices)}")
        return text
    raise ConfigError(f"{name}: unsupported field type {hint!r}")  # pragma: no cover - programming error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every ``porpoise`` / ``python -m engine.<role>`` command reads its configuration from."""
    parser.add_argument("--config", help="YAML file with configuration sections")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a key",
    )
