"""One error tree (core/errors.py): every error class the code defines descends from PorpoiseError, so the CLI,
the nodes and the API show its message as one line; field errors are one class with a field and a reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.errors import FieldError, InvalidInput, PorpoiseError
from engine.scheduling.backfill import BackfillError
from engine.tasks.base import ParamError
from engine.workflows.model import DefinitionError

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = {"Exception", "BaseException", "ValueError", "RuntimeError", "TypeError", "KeyError", "OSError",
           "LookupError", "ConnectionError", "TimeoutError"}  # fmt: skip
#: errors outside the tree on purpose: the base itself, and a broken invariant (a bug, never the user's input)
OUTSIDE = {("core/errors.py", "PorpoiseError"), ("engine/states.py", "InvalidTransition")}


def _rooted_in_builtins() -> list[tuple[str, str]]:
    found = []
    for package in ("core", "engine", "registry", "rpc", "porpoise"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):  # private control flow
                    continue
                bases = {ast.unparse(b) for b in node.bases}
                if bases and bases <= BUILTIN:
                    found.append((str(path.relative_to(ROOT)), node.name))
    return found


def test_every_public_error_class_descends_from_porpoise_error() -> None:
    assert set(_rooted_in_builtins()) == OUTSIDE


@pytest.mark.parametrize("cls", [DefinitionError, ParamError, BackfillError])
def test_the_field_errors_are_one_class(cls: type[FieldError]) -> None:
    exc = cls("tasks[2].upstream", "names no task")
    assert isinstance(exc, FieldError) and isinstance(exc, InvalidInput) and isinstance(exc, PorpoiseError)
    assert isinstance(exc, ValueError)  # callers that validate input still catch it as one
    assert (exc.field, exc.reason, str(exc)) == (
        "tasks[2].upstream",
        "names no task",
        "tasks[2].upstream: names no task",
    )
    assert cls.__init__ is FieldError.__init__
