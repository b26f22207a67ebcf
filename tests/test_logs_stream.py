"""Logging writes to the process's current stderr, so a swapped-out stderr (a harness's closed capture) never
turns every later log line into a "--- Logging error ---" traceback."""

from __future__ import annotations

import io
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
