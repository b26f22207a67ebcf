"""One vocabulary of codes: workflow, task, command, release and user states are named through engine/states.py's
IntEnums everywhere in the engine, its tests and benchmarks (SQL text included), never spelled as bare numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.states import TASK_ACTIVE, WORKFLOW_FAILOVER, WORKFLOW_FINISHED, sql_codes
from engine.storage import tables

ROOT = Path(__file__).resolve().parents[1]

#: a state column compared with a literal number, in SQL or in Python over a fetched row
LITERAL_CODE = re.compile(
    r"""(?ix)
      \b(?:release_|)state\s*(?:=|<>|!=)\s*\d           # SQL: state = 8, release_state = 1
    | \buser_type\s*(?:=|==|<>|!=)\s*\d               # users.user_type = 0
    | \bstate\s+(?:NOT\s+)?IN\s*\(\s*\d                # SQL: state IN (3, 5)
    | \[\s*["'](?:state|command_type)["']\s*\]\s*(?:==|!=|in|not\s+in)\s*[(\[{]?\s*\d   # row["state"] in (3, 5)
    | \bSELECT\s+\d+\s*,\s*\$                         # INSERT INTO command ... SELECT 5, $1
    | _STATES\s*=\s*\[\s*\d                            # _FAILOVER_STATES = [0, 1, 2, 4, 12]
    | ^\s*[A-Z_][A-Z0-9_]*\s*=\s*[\[(]\s*\d+\s*,\s*\d+\s*,\s*\d   # ACTIVE = [0, 1, 2, 4, 12], FINISHED = (3, 5, 6)
    """
)


def _sources() -> list[Path]:
    found = (
        p for d in ("core", "engine", "registry", "rpc", "porpoise", "tests", "bench") for p in (ROOT / d).rglob("*.py")
    )
    return sorted(p for p in found if p != Path(__file__).resolve())  # this file spells them to test the scan


def test_no_state_code_is_spelled_as_a_number() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _sources()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if LITERAL_CODE.search(line)
    ]
    assert not found, "state codes as numbers (use engine.states):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("line", "caught"),
    [
        ('"UPDATE task_instance SET state = 8, update_time = now()"', True),
        ('" WHERE release_state = 1 AND id = $1"', True),
        ('if earlier["state"] in (3, 5):', True),
        ('" worker_group) SELECT 0, $2, $3::jsonb"', True),
        ("_FAILOVER_STATES = [0, 1, 2, 4, 12]", True),
        ("ACTIVE = [0, 1, 2, 4, 12]", True),
        ("FINISHED = (3, 5, 6, 7, 16)  # PAUSE, STOP, FAILURE, SUCCESS, BLOCK", True),
        ("ACTIVE = code_list(WORKFLOW_FAILOVER)", False),
        ('f" WHERE state = {int(WorkflowState.SERIAL_WAIT)}"', False),
        ('"SELECT state FROM task_instance WHERE id = $1"', False),
    ],
)
def test_the_scan_catches_the_spellings_it_forbids(line: str, caught: bool) -> None:
    assert bool(LITERAL_CODE.search(line)) is caught


def test_the_partial_indexes_name_the_state_sets() -> None:
    conditions = {
        ix.name: str(ix.dialect_options["postgresql"]["where"])
        for table in tables.metadata.tables.values()
        for ix in table.indexes
        if ix.dialect_options["postgresql"]["where"] is not None
    }
    assert conditions["workflow_instance_unfinished_host_idx"] == f"state IN {sql_codes(WORKFLOW_FAILOVER)}"
    assert conditions["workflow_instance_retention_idx"] == f"state IN {sql_codes(WORKFLOW_FINISHED)}"
    assert conditions["task_instance_unfinished_host_idx"] == f"state IN {sql_codes(TASK_ACTIVE)}"
