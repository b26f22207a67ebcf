"""A task whose output carries NUL characters (a binary file printed, /proc/self/environ): PostgreSQL's text
and jsonb refuse them, so its report must be stored with each replaced, not refused for ever (the run would
hang in RUNNING, its worker retrying the report)."""

from __future__ import annotations

import uuid

import pytest

from core.text import NUL_STANDS_FOR, storable, storable_json
from tests.conftest import ApiCluster
from tests.test_api import start, wait_final

pytestmark = pytest.mark.slow

SETS = r"""printf 'bin\0ary\n'
printf '${setValue(v=a\0b)}\n'"""
FAILS = r"""printf 'tail\0end\n'
exit 4"""


def test_text_and_json_lose_only_their_nul_characters() -> None:
    assert storable("a\x00b\x00") == f"a{NUL_STANDS_FOR}b{NUL_STANDS_FOR}" and storable("plain") == "plain"
    assert storable_json([{"k\x00": ["x\x00", 1, None, {"n": 2.5}]}]) == [
        {f"k{NUL_STANDS_FOR}": [f"x{NUL_STANDS_FOR}", 1, None, {"n": 2.5}]}
    ]


def test_a_task_printing_nul_characters_ends_with_its_report_stored(api_cluster: ApiCluster) -> None:
    c = api_cluster
    name = f"nul_{uuid.uuid4().hex[:6]}"
    tasks = [
        {
            "name": "sets",
            "type": "SHELL",
            "params": {
                "rawScript": SETS,
                "localParams": [{"prop": "v", "direct": "OUT", "type": "VARCHAR", "value": ""}],
            },
        },
        {"name": "fails", "type": "SHELL", "params": {"rawScript": FAILS}, "upstream": ["sets"]},
    ]
    code = c.client().post("/api/v1/workflows", {"name": name, "project": "nul-tests", "tasks": tasks},
                           release="true")["code"]  # fmt: skip
    detail = wait_final(c, start(c, code), timeout=60)
    assert detail["state"] == "FAILURE", detail
    sets, row = c.query(
        "SELECT state, log_tail, var_pool FROM task_instance WHERE workflow_instance_id = $1 ORDER BY id",
        detail["id"],
    )
    assert "v" in str(sets["var_pool"]) and f"a{NUL_STANDS_FOR}b" in str(sets["var_pool"]), sets
    assert f"tail{NUL_STANDS_FOR}end" in row["log_tail"] and "\x00" not in row["log_tail"], row
    assert "finished: FAILURE (exit code 4)" in row["log_tail"], row
