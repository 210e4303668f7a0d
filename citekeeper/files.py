"""The one atomic write: a temp file beside the target, flushed and fsynced, renamed into place, and the directory
fsynced, so after a crash the target is the old file or the whole new one, never a prefix of it.

Its writer holds an exclusive flock(2) on the temp file until the rename, and the kernel drops it when the writer
dies (kill -9 included): a temp file nobody holds is a dead writer's. The next write of the same target removes
those of that target, and `citekeeper gc` every one in the store (abandoned_temp_files)."""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

TEMP_NAME = re.compile(r"\.(?P<target>.+)\.\d+\.tmp")  # temp_path's names: .<target name>.<pid>.tmp


def temp_path(path: Path) -> Path:
    """Where `path` is written before it is renamed into place: hidden, beside it, one per process."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def abandoned_temp_files(folder: Path, target: str | None = None) -> list[Path]:
    """The temp files directly in `folder` (those of the file named `target` only, when given) whose writer is
    gone."""
    found = []
    for entry in os.scandir(folder):
        match = TEMP_NAME.fullmatch(entry.name)
        if match and (target is None or match["target"] == target) and _abandoned(Path(entry.path)):
            found.append(Path(entry.path))
    return sorted(found)


def _abandoned(tmp: Path, remove: bool = False) -> bool:
    """Whether no writer holds `tmp` (removing it then, when `remove`): its lock is free and it is still the file
    at that name. Opened for writing without truncating it: NFS grants an exclusive lock only on such a handle."""
    try:
        handle = os.open(tmp, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:  # gone meanwhile, or not ours to open
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a live writer holds it
        os.close(handle)
        return False
    try:
        if not _is_at(handle, tmp):
            return False
        if remove:
            tmp.unlink()
        return True
    finally:
        os.close(handle)


def remove_abandoned(tmp: Path) -> bool:
    """Remove `tmp` if its writer is gone (checked again now, holding its lock); whether it went."""
    return _abandoned(tmp, remove=True)


def _is_at(handle: int, path: Path) -> bool:
    """Whether the open file `handle` is the file named `path` (not one removed and created anew meanwhile)."""
    try:
        named, held = os.stat(path, follow_symlinks=False), os.fstat(handle)
    except FileNotFoundError:
        return False
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _held_temp_file(path: Path) -> int:
    """A handle on the temp file of `path`, created if need be, holding its writer's lock; the dead writers' temp
    files of `path` are removed first. Tried again when a sweep removed the file between its open and the lock."""
    for tmp in abandoned_temp_files(path.parent, path.name):
        remove_abandoned(tmp)
    tmp = temp_path(path)
    while True:
        handle = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o666)
        fcntl.flock(handle, fcntl.LOCK_EX)
        if _is_at(handle, tmp):
            return handle
        os.close(handle)


def fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable (a no-op where directories cannot be opened, as on Windows)."""
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def replace_durably(written: Path, path: Path) -> None:
    """Move a finished temp file onto `path`: its bytes on disk first, then the rename."""
    fsync_file(written)
    os.replace(written, path)
    fsync_directory(path.parent)


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """The temp file of `path`, held for this writer, to write `path`'s new content to and close; `path` appears,
    durably, when the block ends without an error, and the temp file is removed when it raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    lock = _held_temp_file(path)
    try:
        yield tmp
        replace_durably(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(lock)  # after the rename or removal: no sweep can take the file while its writer still needs it


@contextmanager
def atomic_open(path: Path | str, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """A handle on the temp file of `path`; `path` appears, durably, when the block ends without an error, and the
    temp file is removed when it raises."""
    with atomic_path(path) as tmp, open(tmp, mode, encoding=None if "b" in mode else encoding) as handle:
        yield handle


def atomic_write_text(path: Path | str, text: str) -> Path:
    with atomic_open(path) as handle:
        handle.write(text)
    return Path(path)
