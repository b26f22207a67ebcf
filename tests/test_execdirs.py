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


def test_an_existing_attempt_dir_is_used_and_a_tenant_gets_its_own(tmp_path: Path) -> None:
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
    tenant = pwd.getpwnam("nobody")  # the suite runs as root: tasks may run as another OS user
    tenant_dir = tmp_path / "1" / "3-1"
    dirs.prepare(tenant_dir, {"script.sh": "t\n"}, tenant)  # a tenant's attempt never takes our spare
    assert spare.exists()
    assert _listing(tenant_dir) == {"script.sh": "t\n"}
    assert _owner(tenant_dir) == _owner(tenant_dir / "script.sh") == (tenant.pw_uid, tenant.pw_gid)


def _owner(path: Path) -> tuple[int, int]:
    st = path.lstat()
    return st.st_uid, st.st_gid


def test_a_tenant_s_dir_is_recycled_for_that_tenant_only(tmp_path: Path) -> None:
    """A tenant's attempt gets a directory only attempts of the same OS user had: the worker's own
    attempts and another tenant's get fresh ones, and no leftover of the first attempt shows."""
    dirs = ExecDirs(tmp_path, spares=4)
    dirs.reset()
    tenant, other = pwd.getpwnam("nobody"), pwd.getpwnam("daemon")
    first = tmp_path / "1" / "1-1"
    dirs.prepare(first, {"script.sh": "echo first, a longer script\n"}, tenant)
    inode = first.stat().st_ino
    (first / "out.csv").write_text("left by the task")
    os.chown(first / "out.csv", tenant.pw_uid, tenant.pw_gid)
    dirs.release(first, frozenset({"script.sh"}))
    assert not first.exists()

    mine, theirs = tmp_path / "1" / "2-1", tmp_path / "1" / "3-1"
    dirs.prepare(mine, {"script.sh": "mine\n"}, None)
    dirs.prepare(theirs, {"script.sh": "theirs\n"}, other)
    assert inode not in {mine.stat().st_ino, theirs.stat().st_ino}
    assert _owner(theirs / "script.sh") == (other.pw_uid, other.pw_gid)

    again = tmp_path / "2" / "4-1"
    dirs.prepare(again, {"script.sh": "again\n"}, tenant)
    assert again.stat().st_ino == inode  # the tenant's own directory, renamed into place
    assert _listing(again) == {"script.sh": "again\n"}  # rewritten to length, nothing else left
    assert _owner(again) == _owner(again / "script.sh") == (tenant.pw_uid, tenant.pw_gid)
    assert stat.S_IMODE((again / "script.sh").stat().st_mode) == 0o600


def test_a_spare_changed_after_its_release_is_not_written_through(tmp_path: Path) -> None:
    """A process of an attempt that outlived it may change its spare: a kept file replaced by a symlink is
    not written through (the worker runs as root), and a spare holding anything new is not used."""
    dirs = ExecDirs(tmp_path, spares=4)
    dirs.reset()
    tenant = pwd.getpwnam("nobody")
    target = tmp_path / "precious"
    target.write_text("not the task's")
    a = tmp_path / "1" / "1-1"
    dirs.prepare(a, {"script.sh": "one\n"}, tenant)
    dirs.release(a, frozenset({"script.sh"}))
    (spare,) = (tmp_path / SPARE).iterdir()
    (spare / "script.sh").unlink()
    (spare / "script.sh").symlink_to(target)  # what a lingering process of the tenant could do
    b = tmp_path / "1" / "2-1"
    dirs.prepare(b, {"script.sh": "two\n"}, tenant)
    assert target.read_text() == "not the task's"
    assert not (b / "script.sh").is_symlink() and (b / "script.sh").read_text() == "two\n"

    dirs.release(b, frozenset({"script.sh"}))
    (spare,) = (tmp_path / SPARE).iterdir()
    (spare / "planted").write_text("x")
    c = tmp_path / "1" / "3-1"
    dirs.prepare(c, {"script.sh": "three\n"}, tenant)
    assert _listing(c) == {"script.sh": "three\n"}
    assert _owner(c) == (tenant.pw_uid, tenant.pw_gid)
