"""Step marks (core/marks.py): off, nothing is kept; on, bounded, written once for the node's user alone, never
through a symbolic link; a directory that cannot be made is a one-line error of the node, not a traceback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from core import marks
from core.errors import ConfigError


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    """Each test starts with marks off and nothing recorded (the module's state is the process's)."""
    saved = marks._into[:], marks._marks[:], marks._dropped[:]
    marks._into.clear(), marks._marks.clear()
    marks._dropped[0] = 0
    yield
    marks._into[:], marks._marks[:], marks._dropped[:] = saved


def test_off_nothing_is_kept_or_written(tmp_path: Path) -> None:
    marks.mark("worker run")
    assert marks.now() == 0
    assert marks._marks == []
    marks.flush()
    assert list(tmp_path.iterdir()) == []


def test_on_the_marks_are_written_once_in_order_for_the_node_s_user_alone(tmp_path: Path) -> None:
    where = tmp_path / "marks"
    marks.start(str(where))
    at = marks.now()
    marks.mark("master write")
    marks.mark("master poll", at)  # a mark decided later carries the time noted before
    marks.flush()
    marks.flush()  # nothing new: nothing appended
    path = where / f"{os.getpid()}.marks"
    lines = [line.split(" ", 1) for line in path.read_text().splitlines()]
    assert [name for _, name in lines] == ["master write", "master poll"]
    assert int(lines[1][0]) == at <= int(lines[0][0])
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_past_the_limit_marks_are_dropped_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(marks, "LIMIT", 3)
    marks.start(str(tmp_path))
    for _ in range(5):
        marks.mark("worker exited")
    assert len(marks._marks) == 3
    assert marks._dropped == [2]


def test_the_marks_file_is_never_written_through_a_symbolic_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("kept\n")
    where = tmp_path / "marks"
    marks.start(str(where))
    (where / f"{os.getpid()}.marks").symlink_to(victim)
    marks.mark("worker run")
    marks.flush()  # refused (O_NOFOLLOW) and logged, not raised
    assert victim.read_text() == "kept\n"


def test_a_directory_that_cannot_be_made_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"debug\.step_marks: cannot make"):
        marks.start(str(tmp_path / "file" / "marks"))
    assert marks._into == []


@pytest.mark.parametrize("role", ["master", "api"])
def test_a_node_given_such_a_directory_exits_with_one_line(tmp_path: Path, role: str) -> None:
    (tmp_path / "file").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", f"engine.{role}", "--set", f"debug.step_marks={tmp_path / 'file' / 'marks'}"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("PORPOISE_")},
    )
    assert done.returncode == 1
    assert f"porpoise {role}: debug.step_marks: cannot make" in done.stderr
    assert "Traceback" not in done.stderr
