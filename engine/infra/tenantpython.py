"""A Python with the launcher's packages that the launchers' tenant user can run.

A root-started stack runs its tasks as ``porpoise-tenant`` (engine/infra/stack.py). PYTHON tasks run the
launcher's interpreter (the example imports pyarrow) and Spark starts its Python workers with the worker's
own (``PYSPARK_PYTHON``), as that user. A virtualenv made from an interpreter in a private directory (pyenv
in ``/root``, a checkout in a 0700 home) cannot be run by it. Then a small virtualenv of the same Python
version from a system interpreter is made in the run directory, whose site-packages adds the launcher's
(its ``.pth`` files included: the editable install of Porpoise), and the worker runs with it.
"""

from __future__ import annotations

import pwd
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from core import logs
from core.errors import InfraError

log = logs.get(__name__)

#: what a task's interpreter must import: Porpoise's own runners (SQL, HTTP, Spark)
PROBE = "import engine.tasks"
#: where the virtualenv goes, under the run directory
SHIM_DIR = "task-python"


def runs_as(user: pwd.struct_passwd, interpreter: str) -> bool:
    """Whether ``user`` can start ``interpreter`` (through a shell: looked up with the user's own rights) and
    import what tasks need, from a directory that holds no package."""
    argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--",
            "/bin/sh", "-c", 'exec "$0" -c "$1"', interpreter, PROBE]  # fmt: skip
    try:
        env = {"PATH": "/usr/bin:/bin"}
        done = subprocess.run(argv, cwd="/", env=env, capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _system_pythons() -> list[str]:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found = [shutil.which(version, path=d) for d in ("/usr/local/bin", "/usr/bin", "/bin")]
    return list(dict.fromkeys(p for p in found if p))


def reachable_python(run_dir: Path, user: pwd.struct_passwd) -> str:
    """The launcher's interpreter when ``user`` can run it, else the run directory's virtualenv over a system
    interpreter of the same version (made once); InfraError when there is none."""
    if runs_as(user, sys.executable):
        return sys.executable
    shim = run_dir / SHIM_DIR
    python = shim / "bin" / "python"
    site_dirs = list(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))
    for base in _system_pythons():
        if not python.exists():
            made = subprocess.run([base, "-m", "venv", "--without-pip", str(shim)], capture_output=True, text=True,
                                  timeout=120, check=False)  # fmt: skip
            if made.returncode != 0:
                log.warning("cannot make a virtualenv", interpreter=base, error=made.stderr.strip()[-300:])
                shutil.rmtree(shim, ignore_errors=True)
                continue
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in site_dirs)
        (shim / "lib" / version / "site-packages" / "porpoise-launcher.pth").write_text(lines)
        if runs_as(user, str(python)):
            log.info("tasks use a virtualenv of the run dir", python=str(python), over=base, reason=sys.executable)
            return str(python)
        shutil.rmtree(shim, ignore_errors=True)
    raise InfraError(
        f"the tenant user {user.pw_name} cannot run {sys.executable} with this virtualenv's packages (a directory "
        f"on its path is private), and no system python{sys.version_info.major}.{sys.version_info.minor} can: "
        "make the checkout and its virtualenv readable by other users"
    )
