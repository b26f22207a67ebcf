"""Who a task runs as and what environment it gets (docs/SECURITY.md, "Tenants" and "Task environment").

A task runs as the OS user its workflow's tenant names; ``default`` (sent as "") is the OS user named by
``worker.default_tenant_user`` (the launchers' unprivileged ``porpoise-tenant``), else the worker's own user.
Unless ``worker.allow_root_tenant`` is set, the worker refuses root, its own user and any user sharing its
uid, whichever tenant names them: such a task could read the worker's configuration, secrets and spool, or
signal the worker.

The environment is built from an allow-list, never copied from the worker's: the passed-through names of
``worker.task_env_passthrough`` (PATH without the worker's own virtualenv, LANG, LC_*, TZ ...), the worker
group's ``worker.task_env``, what the plugin asks for (its runner's variables and secrets: a SQL task's own
DSN, an HTTP task's headers), the PORPOISE_* task variables below, and HOME / USER / LOGNAME of the user the
task runs as. No PORPOISE_* variable of the worker (the RPC secret, the database DSN) ever reaches a task.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import os
import pwd
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.tasks.base import ParamError

#: the workflow tenant that means "the worker's own OS user"
DEFAULT_TENANT = "default"
#: the local user database: a cached OS user is looked up again once this file changed
PASSWD = Path("/etc/passwd")
#: seconds between two looks at PASSWD's identity (a stat per task cost the worker's loop 2 % of its time)
PASSWD_CHECK = 1.0
#: seconds a cached OS user is used at most (one from a directory service, LDAP or sssd, changes elsewhere)
USER_TTL = 10.0


@dataclass(frozen=True)
class TaskPolicy:
    """The worker's rules for its tasks (worker.* configuration)."""

    allow_root_tenant: bool = False
    #: the OS user the ``default`` tenant runs as ("": the worker's own user)
    default_user: str = ""
    python_interpreter: str = "python3"
    passthrough: tuple[str, ...] = ("PATH", "LANG", "LC_*", "TZ", "TERM", "JAVA_HOME", "TMPDIR")
    #: the worker group's environment (worker.task_env), NAME -> value
    group_env: Mapping[str, str] = field(default_factory=dict)
    #: directories SQL loadFiles may read from
    load_dirs: tuple[str, ...] = ()

    @classmethod
    def of(cls, w: object) -> TaskPolicy:
        """From a WorkerConfig."""
        return cls(
            allow_root_tenant=bool(w.allow_root_tenant),
            default_user=str(w.default_tenant_user),
            python_interpreter=str(w.python_interpreter),
            passthrough=tuple(w.task_env_passthrough),
            group_env=dict(item.partition("=")[::2] for item in w.task_env),
            load_dirs=tuple(w.sql_load_dirs),
        )


class Users:
    """``pwd.getpwnam`` remembered per worker (a lookup reads and parses the user database): an entry is
    used again while PASSWD keeps its inode, size and modification time (looked at every PASSWD_CHECK
    seconds at most) and for at most USER_TTL seconds; an unknown name is not remembered."""

    def __init__(
        self,
        lookup: Callable[[str], pwd.struct_passwd] = pwd.getpwnam,
        source: Path = PASSWD,
        ttl: float = USER_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup, self._source, self._ttl, self._clock = lookup, source, ttl, clock
        self._stamp: tuple[int, int, int] | None = None
        self._checked = -math.inf  # when PASSWD's stamp was last read
        self._known: dict[str, tuple[float, pwd.struct_passwd]] = {}

    def get(self, name: str) -> pwd.struct_passwd:
        """The user named ``name``; KeyError when there is none."""
        now = self._clock()
        if self._stamp is None or now - self._checked >= PASSWD_CHECK:
            try:
                st = os.stat(self._source)
                stamp: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                stamp = None
            self._checked = now
            if stamp is None or stamp != self._stamp:
                self._known.clear()
                self._stamp = stamp
        known = self._known.get(name)
        if self._stamp is not None and known is not None and now - known[0] < self._ttl:
            return known[1]
        user = self._lookup(name)
        self._known[name] = (now, user)
        return user


def resolve_tenant(
    name: str, allow_root: bool, default_user: str = "", users: Users | None = None
) -> pwd.struct_passwd | None:
    """The OS user to run as (None: the worker's own), or ParamError("tenant", why) when refused.
    ``default_user``: the OS user the ``default`` tenant means ("": the worker's own); ``users``: the
    worker's cache of looked-up users (none: looked up now)."""
    me = os.geteuid()
    if (not name or name == DEFAULT_TENANT) and default_user:
        name = default_user
    elif not name or name == DEFAULT_TENANT:
        if not allow_root:
            who = _name_of(me)
            raise ParamError(
                "tenant",
                f"the default tenant runs tasks as this worker's own OS user ({who}), which this worker refuses "
                "(worker.allow_root_tenant is off): give the workflow a tenant an admin created and granted",
            )
        return None
    try:
        user = users.get(name) if users is not None else pwd.getpwnam(name)
    except KeyError:
        raise ParamError("tenant", f"tenant {name!r}: OS user {name!r} does not exist on this worker") from None
    if user.pw_uid == 0 and not allow_root:
        raise ParamError("tenant", f"tenant {name!r} is root (uid 0): refused (worker.allow_root_tenant is off)")
    if user.pw_uid == me:
        if not allow_root:
            raise ParamError(
                "tenant", f"tenant {name!r} is this worker's own OS user: refused (worker.allow_root_tenant is off)"
            )
        return None
    if me != 0:
        raise ParamError("tenant", f"running as {name!r} needs a worker running as root")
    return user


def _name_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _own_venv_bin() -> str:
    """The bin directory of the virtualenv the worker runs in ("" outside one)."""
    return str(Path(sys.prefix) / "bin") if sys.prefix != sys.base_prefix else ""


def passed_through(environ: Mapping[str, str], names: Sequence[str]) -> dict[str, str]:
    """The worker's variables a task inherits: those matching ``names``, never a PORPOISE_* one; PATH
    without the worker's own virtualenv (a task's python3 is not the worker's)."""
    out = {
        k: v
        for k, v in environ.items()
        if not k.upper().startswith("PORPOISE_") and any(fnmatch.fnmatchcase(k, pat) for pat in names)
    }
    venv = _own_venv_bin()
    if "PATH" in out and venv:
        out["PATH"] = os.pathsep.join(p for p in out["PATH"].split(os.pathsep) if p and p.rstrip("/") != venv)
    return out


@functools.cache
def _worker_passed_through(names: tuple[str, ...]) -> dict[str, str]:
    """:func:`passed_through` of the worker's own environment, computed once per worker process (the
    worker never changes its environment; matching every variable against the patterns took ~0.5 ms per
    task). Callers copy it."""
    return passed_through(os.environ, names)


def task_environment(
    policy: TaskPolicy,
    plugin_env: Mapping[str, str],
    task_vars: Mapping[str, str],
    user: pwd.struct_passwd | None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of a task process (see the module docstring), lowest precedence first."""
    env = (
        dict(_worker_passed_through(tuple(policy.passthrough)))
        if environ is None
        else passed_through(environ, policy.passthrough)
    )
    env.update(policy.group_env)
    env.update(plugin_env)
    env.update(task_vars)
    account = user
    if account is None:
        try:
            account = pwd.getpwuid(os.geteuid())
        except KeyError:
            account = None
    if account is not None:
        env |= {"HOME": account.pw_dir, "USER": account.pw_name, "LOGNAME": account.pw_name}
    return env
