"""The declared layers hold: ``lint-imports`` checks the import-linter contracts of pyproject.toml (core below
registry and rpc, both below the engine; the SDK and the launchers apart from the CLI and the API; storage
below the workflow model, the model using only the task plugins' interface). ``make lint`` runs the
same command; this test is how ``make test`` (CI) enforces it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_import_linter_contract_is_kept() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "lint-imports is missing: install the dev extra (pip install -e '.[dev]')"
    done = subprocess.run(
        [lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout, done.stdout[-3000:]
