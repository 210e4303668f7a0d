"""The one atomic write: a temp file beside the target, flushed and fsynced, renamed into place, and the directory
fsynced, so after a crash the target is the old file or the whole new one, never a prefix of it."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def temp_path(path: Path) -> Path:
    """Where `path` is written before it is renamed into place: hidden, beside it, one per process."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


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
def atomic_open(path: Path | str, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """A handle on the temp file of `path`; `path` appears, durably, when the block ends without an error, and the
    temp file is removed when it raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with open(tmp, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
        replace_durably(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: Path | str, text: str) -> Path:
    with atomic_open(path) as handle:
        handle.write(text)
    return Path(path)
