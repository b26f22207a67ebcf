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


async def test_a_short_secret_is_masked_in_the_rendered_script_wherever_its_value_lands(
    keyed: tuple[Executor, Keyring], sink: ReportSink
) -> None:
    """A secret project parameter under 4 characters is not masked in the task's own output (it would hide
    common text), but the block is the worker's own writing: it places the value itself, so it shows ***
    wherever the value lands (directly, or through a local parameter that copies it)."""
    executor, keyring = keyed
    sealed = seal_params(
        keyring, {"prop": "pin", "value": "q7x", "secret": True}, PROJECT_PARAM_SECRETS, "project_parameter"
    )
    d = task(
        "SHELL",
        {
            "rawScript": ': "${pin}" "${copy}" "${other}"',
            "localParams": [
                {"prop": "copy", "direct": "IN", "type": "VARCHAR", "value": "${pin}"},
                {"prop": "other", "direct": "IN", "type": "VARCHAR", "value": "q7xq"},
            ],
        },
        sink.address,
        project_params=[sealed],
    )
    assert executor.dispatch(d).accepted
    result = await sink.result(d.task_instance_id)
    assert result["state"] == "SUCCESS", result
    lines = (await log_text(result["log_path"])).splitlines()
    assert lines[1:4] == [
        "[porpoise] rendered rawScript (1 lines):",
        ': "***" "***" "q7xq"',  # a value that only holds the short secret is not masked (as in the output)
        "[porpoise] end of rendered rawScript",
    ]


async def test_a_secret_holding_placeholders_is_masked_as_the_task_gets_it(
    keyed: tuple[Executor, Keyring], sink: ReportSink
) -> None:
    """A secret project parameter's own ``$[...]`` and ``${...}`` are rendered like any parameter's: the
    task gets ``hunter22026tail`` for ``hunter2$[yyyy]tail``, and that value (not only the stored one) is
    masked, in the rendered script and in the task's output."""
    executor, keyring = keyed
    sealed = [
        seal_params(keyring, {"prop": p, "value": v, "secret": True}, PROJECT_PARAM_SECRETS, "project_parameter")
        for p, v in (("pw", "hunter2$[yyyy]tail"), ("pw3", "ab${pw}cd"))
    ]
    script = """[ "${pw}" = "$(printf 'hunter2%stail' 2026)" ] && echo "${pw3}" """
    d = task("SHELL", {"rawScript": script}, sink.address, project_params=sealed, schedule_time="2026-03-04T05:06:07")
    assert executor.dispatch(d).accepted
    result = await sink.result(d.task_instance_id)
    assert result["state"] == "SUCCESS", result  # the task got the rendered value
    text = await log_text(result["log_path"])
    lines = text.splitlines()
    assert lines[2] == """[ "***" = "$(printf 'hunter2%stail' 2026)" ] && echo "***" """, text
    assert "***" in lines[4:], text  # the output: ab, the secret, cd, masked whole
    assert "hunter22026tail" not in text and "abhunter" not in text, text


async def test_a_secret_with_a_bad_time_placeholder_refuses_the_task_without_showing_it(
    keyed: tuple[Executor, Keyring], sink: ReportSink
) -> None:
    """Every project parameter is rendered for every task: a secret holding a bad ``$[...]`` refuses the
    task, naming the parameter, never the fragment of the secret the placeholder error would quote."""
    executor, keyring = keyed
    sealed = seal_params(
        keyring, {"prop": "pw", "value": "xq$[nope]yz", "secret": True}, PROJECT_PARAM_SECRETS, "project_parameter"
    )
    d = task("SHELL", {"rawScript": "echo hi"}, sink.address, project_params=[sealed])
    assert executor.dispatch(d).accepted
    result = await sink.result(d.task_instance_id)
    assert result["state"] == "FAILURE", result
    text = await log_text(result["log_path"])
    assert "secret project parameter 'pw'" in text and "secret project parameter 'pw'" in result["message"], text
    for shown in (text, result["message"], result.get("log_tail", "")):
        assert "nope" not in shown, shown
