"""Logging writes to the process's current stderr, so a swapped-out stderr (a harness's closed capture) never
turns every later log line into a "--- Logging error ---" traceback."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from core import logs


def test_logging_follows_stderr_after_the_one_it_was_configured_with_closed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configured_with = io.StringIO()
    monkeypatch.setattr(sys, "stderr", configured_with)
    try:
        logs.configure("console", "warning")
    finally:
        monkeypatch.undo()
    configured_with.close()
    errors: list[BaseException] = []
    monkeypatch.setattr(logging.Handler, "handleError", lambda _self, _record: errors.append(sys.exc_info()[1]))
    logging.getLogger("library").warning("a library line")
    logs.get("engine").warning("an engine line")
    assert errors == []
    err = capsys.readouterr().err
    assert "a library line" in err and "an engine line" in err
    logs.configure("console", "warning")


def test_bound_ids_reach_the_lines_inside_the_block_and_what_was_bound_before_comes_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("json", "info")
    try:
        log = logs.get("engine")
        with logs.bound(workflow_instance_id=1):
            with logs.bound(workflow_instance_id=2, task_instance_id=3):
                log.info("inner")
            log.info("outer")
            with pytest.raises(RuntimeError), logs.bound(task_instance_id=4):
                raise RuntimeError("the block failed: its ids are unbound all the same")
            log.info("after a failed block")
        log.info("unbound")
    finally:
        logs.configure("console", "warning")
    lines = {line["event"]: line for line in map(json.loads, capsys.readouterr().err.splitlines())}
    assert (lines["inner"]["workflow_instance_id"], lines["inner"]["task_instance_id"]) == (2, 3)
    assert lines["outer"]["workflow_instance_id"] == 1 and "task_instance_id" not in lines["outer"]
    assert "task_instance_id" not in lines["after a failed block"]
    assert "workflow_instance_id" not in lines["unbound"]


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_a_logged_traceback_shows_no_local_variables(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Locals may hold secrets (a page of commands with their start parameters, a DSN): in neither format."""
    logs.configure(fmt, "info")
    try:

        def failing(password: str) -> None:
            raise RuntimeError("failed")

        secret = "-".join(("hunter", "2"))  # a value only at run time: not in the traceback's source lines
        try:
            failing(secret)
        except RuntimeError:
            logs.get("engine").exception("it failed")
    finally:
        logs.configure("console", "warning")
    err = capsys.readouterr().err
    assert "it failed" in err and "RuntimeError" in err and "failing" in err
    assert "hunter-2" not in err
