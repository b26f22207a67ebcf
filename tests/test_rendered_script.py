"""The rendered script at the head of a task's log (engine/worker/rendered.py): placeholders resolved with
the attempt's values, secrets (sealed project parameters, data source passwords) masked; an in-process
Executor reporting to a real RPC sink."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.secretbox import PROJECT_PARAM_SECRETS, Keyring, new_key_line, seal_params
from engine.tasks import registry
from engine.worker.executor import Executor
from engine.worker.rendered import code_fields, rendered_block
from engine.worker.reporter import Reporter
from engine.worker.taskenv import TaskPolicy
from tests.helpers import rpc_client
from tests.worker_harness import ReportSink, log_text, task

SECRET = "s3cr3t-token-value"


@pytest.fixture
async def keyed(tmp_path: Path) -> AsyncIterator[tuple[Executor, Keyring]]:
    keyring = Keyring.from_config(type("Cfg", (), {"key_file": "", "keys": new_key_line("k1")})())
    rpc = rpc_client(timeout=10)
    reporter = Reporter(rpc, retry_initial=0.05)
    reporter.start()
    ex = Executor(
        slots=2,
        log_dir=tmp_path / "logs",
        exec_dir=tmp_path / "exec",
        address="127.0.0.1:1",
        reporter=reporter,
        policy=TaskPolicy(allow_root_tenant=True),
        keyring=keyring,
    )
    yield ex, keyring
    await ex.kill_all()
    await reporter.close()
    await rpc.close()


async def test_the_log_begins_with_the_rendered_script_placeholders_resolved_and_secrets_masked(
    keyed: tuple[Executor, Keyring], sink: ReportSink
) -> None:
    executor, keyring = keyed
    script = 'echo "day ${day} in ${region} with ${token}"\necho $[yyyyMMdd]\necho ${unknown}'
    sealed = seal_params(
        keyring, {"prop": "token", "value": SECRET, "secret": True}, PROJECT_PARAM_SECRETS, "project_parameter"
    )
    d = task(
        "SHELL",
        {
            "rawScript": script,
            "localParams": [{"prop": "day", "direct": "IN", "type": "VARCHAR", "value": "$[yyyy-MM-dd]"}],
        },
        sink.address,
        global_params=[{"prop": "region", "value": "eu-west"}],
        project_params=[sealed],
        schedule_time="2026-03-04T05:06:07",
    )
    assert executor.dispatch(d).accepted
    result = await sink.result(d.task_instance_id)
    assert result["state"] == "SUCCESS", result
    text = await log_text(result["log_path"])
    lines = text.splitlines()
    assert lines[1:6] == [
        "[porpoise] rendered rawScript (3 lines):",
        'echo "day 2026-03-04 in eu-west with ***"',
        "echo 20260304",
        "echo ${unknown}",
        "[porpoise] end of rendered rawScript",
    ]
    # the task itself got the secret (it ran), its value is nowhere in the log
    assert "day 2026-03-04 in eu-west with ***" in text
    assert SECRET not in text


def test_every_code_field_is_rendered_and_a_data_source_password_masked() -> None:
    sql = registry.plugin("SQL")
    assert code_fields(sql.params_schema) == ["sql"]
    block = rendered_block(
        {"sql": "select '${a}', 'pw-123456' from t where d = '$[yyyyMMdd-1]'", "datasource": "db"},
        code_fields(sql.params_schema),
        {"a": "x"},
        dt.datetime(2026, 1, 1),
        ["pw-123456"],
    )
    assert block == (
        "[porpoise] rendered sql (1 lines):\n"
        "select 'x', '***' from t where d = '20251231'\n"
        "[porpoise] end of rendered sql\n"
    )
    # a type without code fields (HTTP) writes no block
    assert (
        rendered_block(
            {"url": "http://x"}, code_fields(registry.plugin("HTTP").params_schema), {}, dt.datetime(2026, 1, 1), []
        )
        == ""
    )
