"""Loading workflows from a Python file (``porpoise apply FILE.py``).

The file runs with ``__name__ == "porpoise_load"``, so code under ``if __name__ == "__main__":`` (such
as ``wf.apply()`` for running the file directly) does not run; every :class:`Workflow` the file
creates, at any depth, is collected in creation order.
"""

from __future__ import annotations

import contextvars
import runpy
import sys
from pathlib import Path

from porpoise.workflow import Workflow, WorkflowError, collecting

RUN_NAME = "porpoise_load"


def load_workflows(path: str | Path) -> list[Workflow]:
    """Every workflow ``path`` defines. Raises WorkflowError (field ``file``) when the file cannot run."""
    file = Path(path)
    if not file.is_file():
        raise WorkflowError("file", f"cannot read {file}: no such file")
    found: list[Workflow] = []
    directory = str(file.resolve().parent)
    added = directory not in sys.path
    if added:  # the file may import its neighbours, as `python FILE.py` would let it
        sys.path.insert(0, directory)
    try:
        with collecting(found):
            contextvars.copy_context().run(runpy.run_path, str(file), run_name=RUN_NAME)
    except WorkflowError:
        raise
    except Exception as exc:  # the user's file failed: say where, without our traceback
        raise WorkflowError("file", f"{file} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        if added:
            sys.path.remove(directory)
    if not found:
        raise WorkflowError("file", f"{file} defines no Workflow")
    return found
