"""Attempts' working directories: fresh and private to each attempt, and recycled.

Every attempt runs in ``<exec root>/<workflow instance>-<task instance>-<attempt>`` holding only the files its
plugin wrote (the SHELL script, ...); the directory goes when the attempt ends, as in DolphinScheduler. One
level: an instance's first attempt makes no directory for the instance, and the root holds only the attempts
running and the spares. Creating a directory and a file costs the kernel an inode each: 250-700 us apiece on
this project's VM disk (ext4), against 40 us to rename a directory and 12 us to open an existing file — at
hundreds of tasks a second that was a third of the worker's CPU. So an ended attempt's directory is emptied
and kept as a spare (its plugin files kept, everything else removed) and the next attempt renames a spare into
place and overwrites the files it needs; names it does not need are unlinked first, so an attempt never sees
another's files.

A spare goes only to an attempt of the OS user it ran as (the worker's own, or a tenant's): a tenant's
attempt gets a directory only that tenant's attempts had, never one another user could have left something
in. A directory whose mode, owner or group a task changed is removed, not kept, and a kept file is reused only
while it is a plain file of that user with one link and mode 0600 (opened without following a symlink: the
worker, root when it has tenants, never writes through a name a tenant's process could have replaced). A spare
that holds anything else when it is taken (a process of the task that outlived it wrote there) is removed and
a fresh directory made. All methods do file system calls: run them in a thread.
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

#: where spares wait, under the exec root (attempt directories are numbers and dashes: no clash)
SPARE = ".spare"


class ExecDirs:
    def __init__(self, root: Path, spares: int) -> None:
        self.root = root
        self.max_spares = spares
        self._spare_root = root / SPARE
        #: OS user id -> (spare path, names of the plugin files it keeps); deques: atomic across threads
        self._spares: collections.defaultdict[int, collections.deque[tuple[Path, frozenset[str]]]] = (
            collections.defaultdict(collections.deque)
        )
        #: attempt directory -> (uid, gid) it was prepared for (popped by release)
        self._owners: dict[Path, tuple[int, int]] = {}
        self._counter = itertools.count(1)  # next() is atomic across threads
        self._mode: int | None = None  # the mode of a fresh directory (mkdir under our umask)
        self._gid: int | None = None  # the group of a fresh directory (ours, or a set-group-id parent's)

    def reset(self) -> None:
        """Drop spares left by an earlier run of the worker (their state is unknown)."""
        shutil.rmtree(self._spare_root, ignore_errors=True)
        self._spare_root.mkdir(parents=True, exist_ok=True)

    def prepare(self, path: Path, files: dict[str, str], user: pwd.struct_passwd | None) -> None:
        """Make ``path`` a directory holding exactly ``files``, owned by ``user`` (None: us)."""
        owner = self._owner(user)
        spare = self._take(owner[0])
        kept: frozenset[str] = frozenset()
        if spare is not None and self._place(spare[0], path) and self._clean(path, owner, spare[1]):
            kept = spare[1]
            for name in kept - files.keys():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path / name)
        else:
            self._make(path)
            owner = self._owner(user)
            if user is not None:
                os.chown(path, *owner)
        self._owners[path] = owner
        for name, content in files.items():
            _write_file(path / name, content, name in kept, owner, user is not None)

    def release(self, path: Path, files: frozenset[str] | set[str]) -> None:
        """The attempt in ``path`` ended: keep the directory as a spare, or remove it."""
        owner = self._owners.pop(path, None)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if (
            owner is None
            or sum(len(spares) for spares in list(self._spares.values())) >= self.max_spares
            or not stat.S_ISDIR(st.st_mode)
            or (st.st_uid, st.st_gid) != owner
            or stat.S_IMODE(st.st_mode) != self._mode
        ):
            remove_dir(path)
            return
        kept = set()
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.name in files and _plain_file(entry, owner):
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
        self._spares[owner[0]].append((spare, frozenset(kept)))

    def _clean(self, path: Path, owner: tuple[int, int], kept: frozenset[str]) -> bool:
        """A spare just placed at ``path`` is as it was released (a process of its last attempt may have
        outlived it); else it is removed and False returned."""
        try:
            st = os.lstat(path)
            if (
                stat.S_ISDIR(st.st_mode)
                and (st.st_uid, st.st_gid) == owner
                and stat.S_IMODE(st.st_mode) == self._mode
                and kept.issuperset(os.listdir(path))
            ):
                return True
        except OSError:
            pass
        remove_dir(path)
        return False

    @staticmethod
    def _place(spare: Path, path: Path) -> bool:
        try:
            os.rename(spare, path)
            return True
        except FileNotFoundError:  # the exec root went (or the spare did)
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

    def _owner(self, user: pwd.struct_passwd | None) -> tuple[int, int]:
        """(uid, gid) an attempt's directory and files have: ``user``'s, or ours."""
        if user is not None:
            return user.pw_uid, user.pw_gid
        return os.geteuid(), os.getegid() if self._gid is None else self._gid

    def _take(self, uid: int) -> tuple[Path, frozenset[str]] | None:
        try:
            return self._spares[uid].pop()
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
            st = os.stat(path)
            self._mode, self._gid = stat.S_IMODE(st.st_mode), st.st_gid


def _plain_file(entry: os.DirEntry[str], owner: tuple[int, int]) -> bool:
    """A regular file of ``owner`` with the mode we create files with (a task may have changed it)."""
    st = entry.stat(follow_symlinks=False)
    return stat.S_ISREG(st.st_mode) and (st.st_uid, st.st_gid) == owner and stat.S_IMODE(st.st_mode) == 0o600


def _write_file(path: Path, content: str, kept: bool, owner: tuple[int, int], chown: bool) -> None:
    """Write a plugin file. A kept one is overwritten and cut to length, not truncated first: freeing
    and reallocating its block is what costs (with the ``discard`` mount option, a TRIM each time); it is
    written only while it is still a plain file of ``owner`` with one link and mode 0600, else made anew.
    A new file is given to ``owner`` when ``chown``."""
    data = content.encode()
    if kept:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                st = os.fstat(fd)
                if (
                    stat.S_ISREG(st.st_mode)
                    and st.st_nlink == 1
                    and (st.st_uid, st.st_gid) == owner
                    and stat.S_IMODE(st.st_mode) == 0o600
                ):
                    os.pwrite(fd, data, 0)
                    os.ftruncate(fd, len(data))
                    return
            finally:
                os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        if chown:
            os.fchown(fd, *owner)
        os.pwrite(fd, data, 0)
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
