"""Exec dirs are recycled but every attempt still sees a fresh, private directory holding only its
own files."""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from engine.worker.execdirs import SPARE, ExecDirs


def _listing(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in path.iterdir()}


def test_a_recycled_dir_holds_only_the_new_attempt_s_files(tmp_path: Path) -> None:
    dirs = ExecDirs(tmp_path, spares=4)
    dirs.reset()
    first = tmp_path / "1" / "10-1"
    dirs.prepare(first, {"script.sh": "echo one; echo a long first line\n"}, None)
    assert _listing(first) == {"script.sh": "echo one; echo a long first line\n"}
    inode = first.stat().st_ino
    # what the task left behind: files, a sub-directory, a symlink
    (first / "out.csv").write_text("x")
    (first / "sub" / "deeper").mkdir(parents=True)
    (first / "sub" / "deeper" / "f").write_text("y")
    (first / "link").symlink_to("/etc/hostname")
    dirs.release(first, frozenset({"script.sh"}))
    assert not first.exists()

    second = tmp_path / "2" / "20-1"  # another instance: its directory does not exist yet
    dirs.prepare(second, {"script.py": "print(2)\n"}, None)
    assert second.stat().st_ino == inode  # the same directory, renamed into place ...
    assert _listing(second) == {"script.py": "print(2)\n"}  # ... with nothing of the first attempt

    dirs.release(second, frozenset({"script.py"}))
    third = tmp_path / "2" / "21-1"
    dirs.prepare(third, {"script.py": "ok\n"}, None)
    assert third.stat().st_ino == inode
    assert _listing(third) == {"script.py": "ok\n"}  # rewritten, not appended to
    assert stat.S_IMODE((third / "script.py").stat().st_mode) == 0o600


def test_dirs_or_files_a_task_changed_are_not_kept(tmp_path: Path) -> None:
    dirs = ExecDirs(tmp_path, spares=4)
    dirs.reset()
    a = tmp_path / "1" / "1-1"
    dirs.prepare(a, {"script.sh": "true\n"}, None)
    (a / "script.sh").chmod(0o755)  # a file whose mode changed is not kept ...
    dirs.release(a, frozenset({"script.sh"}))
    b = tmp_path / "1" / "2-1"
    dirs.prepare(b, {"script.sh": "false\n"}, None)
    assert stat.S_IMODE((b / "script.sh").stat().st_mode) == 0o600  # ... the new attempt gets a fresh one
    b.chmod(0o777)  # a directory whose mode changed is removed, not recycled
    dirs.release(b, frozenset({"script.sh"}))
    assert not b.exists() and list((tmp_path / SPARE).iterdir()) == []
    c = tmp_path / "1" / "3-1"
    dirs.prepare(c, {}, None)
    assert stat.S_IMODE(c.stat().st_mode) != 0o777


def test_spares_are_bounded_and_reset_drops_them(tmp_path: Path) -> None:
    dirs = ExecDirs(tmp_path, spares=2)
    dirs.reset()
    paths = [tmp_path / "1" / f"{i}-1" for i in range(4)]
    for p in paths:
        dirs.prepare(p, {"script.sh": "true\n"}, None)
    for p in paths:
        dirs.release(p, frozenset({"script.sh"}))
        assert not p.exists()
    assert len(list((tmp_path / SPARE).iterdir())) == 2
    again = ExecDirs(tmp_path, spares=2)  # a restarted worker
    again.reset()
    assert list((tmp_path / SPARE).iterdir()) == []


def test_an_existing_attempt_dir_is_used_and_a_tenant_gets_a_fresh_one(tmp_path: Path) -> None:
    dirs = ExecDirs(tmp_path, spares=4)
    dirs.reset()
    a = tmp_path / "1" / "1-1"
    dirs.prepare(a, {"script.sh": "true\n"}, None)
    dirs.release(a, frozenset({"script.sh"}))
    existing = tmp_path / "1" / "2-1"
    existing.mkdir()
    (existing / "left").write_text("by a retried dispatch")
    dirs.prepare(existing, {"script.sh": "x\n"}, None)  # not renamed over: the directory is used
    assert _listing(existing) == {"left": "by a retried dispatch", "script.sh": "x\n"}

    dirs.prepare(a, {}, None)
    dirs.release(a, frozenset())
    (spare,) = (tmp_path / SPARE).iterdir()
    me = pwd.getpwuid(os.geteuid())
    tenant_dir = tmp_path / "1" / "3-1"
    dirs.prepare(tenant_dir, {"script.sh": "t\n"}, me)  # tenant attempts never take a spare
    assert spare.exists()
    assert _listing(tenant_dir) == {"script.sh": "t\n"}
