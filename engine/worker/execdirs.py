"""Attempts' working directories: fresh and private to each attempt, and recycled.

Every attempt runs in ``<exec root>/<workflow instance>/<task instance>-<attempt>`` holding only the
files its plugin wrote (the SHELL script, ...); the directory goes when the attempt ends, as in
DolphinScheduler. Creating a directory and a file costs the kernel an inode each: 250-700 us apiece on
this project's VM disk (ext4), against 40 us to rename a directory and 12 us to open an existing file — at
hundreds of tasks a second that was a third of the worker's CPU. So an ended attempt's directory is
emptied and kept as a spare (its plugin files kept, everything else removed) and the next attempt
renames a spare into place and overwrites the files it needs; names it does not need are unlinked
first, so an attempt never sees another's files.

Only directories of the worker's own user are recycled: one that ran as a tenant (or whose mode a task
changed) is removed as before. All methods do file system calls: run them in a thread.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import pwd
import shutil
import stat
from pathlib import Path

#: where spares wait, under the exec root (instance directories are numbers: no clash)
SPARE = ".spare"


class ExecDirs:
    def __init__(self, root: Path, spares: int) -> None:
        self.root = root
        self.max_spares = spares
        self._spare_root = root / SPARE
        #: (spare path, names of the plugin files it keeps); deque: atomic across threads
        self._spares: collections.deque[tuple[Path, frozenset[str]]] = collections.deque()
        self._counter = itertools.count(1)  # next() is atomic across threads
        self._mode: int | None = None  # the mode of a fresh directory (mkdir under our umask)

    def reset(self) -> None:
        """Drop spares left by an earlier run of the worker (their state is unknown)."""
        shutil.rmtree(self._spare_root, ignore_errors=True)
        self._spare_root.mkdir(parents=True, exist_ok=True)

    def prepare(self, path: Path, files: dict[str, str], user: pwd.struct_passwd | None) -> None:
        """Make ``path`` a directory holding exactly ``files``, owned by ``user`` (None: us)."""
        spare = self._take() if user is None else None
        kept: frozenset[str] = frozenset()
        if spare is not None and self._place(spare[0], path):
            kept = spare[1]
            for name in kept - files.keys():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path / name)
        else:
            self._make(path)
        for name, content in files.items():
            _write_file(path / name, content, name in kept)
        if user is not None:
            for item in [path, *path.iterdir()]:
                os.chown(item, user.pw_uid, user.pw_gid)

    def release(self, path: Path, files: frozenset[str] | set[str]) -> None:
        """The attempt in ``path`` ended: keep the directory as a spare, or remove it."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if (
            len(self._spares) >= self.max_spares
            or not stat.S_ISDIR(st.st_mode)
            or st.st_uid != os.geteuid()
            or stat.S_IMODE(st.st_mode) != self._mode
        ):
            remove_dir(path)
            return
        kept = set()
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.name in files and _plain_file(entry):
                        kept.add(entry.name)  # rewritten in place by the next attempt that needs it
                    elif entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path)
                    else:
                        os.unlink(entry.path)
            spare = self._spare_root / f"{os.getpid()}-{next(self._counter)}"
            os.rename(path, spare)
        except OSError:
            remove_dir(path)
            return
        self._spares.append((spare, frozenset(kept)))

    @staticmethod
    def _place(spare: Path, path: Path) -> bool:
        try:
            os.rename(spare, path)
            return True
        except FileNotFoundError:  # the instance directory does not exist yet (or the spare went)
            pass
        except OSError:  # the attempt's directory exists already and is not empty: use it
            remove_dir(spare)
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.rename(spare, path)
            return True
        except OSError:
            remove_dir(spare)
            return False

    def _take(self) -> tuple[Path, frozenset[str]] | None:
        try:
            return self._spares.pop()
        except IndexError:
            return None

    def _make(self, path: Path) -> None:
        try:
            os.mkdir(path)
        except FileNotFoundError:
            path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            pass
        if self._mode is None:
            self._mode = stat.S_IMODE(os.stat(path).st_mode)


def _plain_file(entry: os.DirEntry[str]) -> bool:
    """A regular file of ours with the mode we create files with (a task may have changed it)."""
    st = entry.stat(follow_symlinks=False)
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o600


def _write_file(path: Path, content: str, kept: bool) -> None:
    """Write a plugin file. A kept one is overwritten and cut to length, not truncated first: freeing
    and reallocating its block is what costs (with the ``discard`` mount option, a TRIM each time)."""
    data = content.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (0 if kept else os.O_TRUNC), 0o600)
    try:
        os.pwrite(fd, data, 0)
        if kept:
            os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def remove_dir(path: Path) -> None:
    """Remove a directory: the common case (only files) without shutil.rmtree's per-entry safety
    dance; anything else (sub-directories a task made) through rmtree."""
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(path, ignore_errors=True)
                    return
                os.unlink(entry.path)
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
