"""Which files a source root holds: the one walk of the tree, shared by discovery (which reads the files) and the
sensor's fingerprint (which only stats them), so both see the same files. The rules (hidden names, links, loops,
include/exclude): docs/ingest.md ("Choosing files")."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from wcmatch import glob

from citekeeper.text import lone_surrogate
from parsers.metadata import SIDECAR_SUFFIX
from parsers.records import ParseConfig

# Case-sensitive, posix paths on every OS, dotfiles matched like any name; no braces, extglob or negation.
GLOB_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.CASE | glob.FORCEUNIX


class Quarantined(Exception):
    def __init__(self, stage: str, error_type: str, reason: str):
        super().__init__(reason)
        self.stage, self.error_type, self.reason = stage, error_type, reason


@dataclass(frozen=True)
class TreeFile:
    """A selected file that is not a sidecar: a document to be, unless reading it fails."""

    path: Path  # as the walk reached it: a link's own path, or the real one under a linked directory
    source_path: str
    # Where it is reachable, (path, source_path): as the walk found it and, when that differs, where it really is.
    places: tuple[tuple[Path, str], ...]
    stat: os.stat_result  # links followed
    listed_sidecar: bool = False  # whether the walk's listing of its folder holds a sidecar for it (places[0])


@dataclass(frozen=True)
class Rejected:
    """A path that cannot be a document, or a directory that cannot be listed."""

    source_path: str
    why: Quarantined


@dataclass(frozen=True)
class Skipped:
    """A file that include/exclude leave out."""

    source_path: str


TreeEntry = TreeFile | Rejected | Skipped
File = TypeVar("File")  # a walk's file: a TreeFile, or a listing's (parsers.sources.listing)


def _every_path(source_path: str) -> bool:
    return True


def walk_source_tree(root: Path, config: ParseConfig, owns: Callable[[str], bool] = _every_path) -> Iterator[TreeEntry]:
    """Every path under root whose source_path `owns` accepts (a shard's share; all by default), depth first in
    name order. Hidden names are passed over; a link to a directory inside the root is walked like one; a link
    out of the root, a loop or a broken link is Rejected, never followed."""
    tree = _Tree(Path(root).resolve(), selector(config.include, config.exclude), owns)
    for entry in _walk_dir(tree, tree.root, "", "", frozenset({tree.root})):
        if owns(entry.source_path):  # every shard walks every directory; one of them reports each path
            yield entry


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def access_error(exc: OSError) -> Quarantined:
    """A file that vanished or cannot be accessed between listing and reading."""
    return Quarantined("read", "ReadError", f"cannot access file: {exc.strerror or exc}")


def source_fingerprint(root: Path, config: ParseConfig) -> str:
    """sha256 over what discovery would see, by stat alone (no file is read): each file's source_path, size and
    mtime and, at each place it is reachable from, that place's name and its sidecar's size and mtime; each
    rejected path and why; and the parse settings, so that new globs or scopes count as a change too."""

    def file_fields(file: TreeFile) -> list:
        fields = [file.source_path, file.stat.st_size, file.stat.st_mtime_ns]
        for place, place_path in file.places:
            fields += [place_path, _stamp(sidecar_path(place))]
        return fields

    return entries_digest(config, walk_source_tree(root, config), file_fields)


def entries_digest(
    config: ParseConfig, entries: Iterable[File | Rejected | Skipped], file_fields: Callable[[File], list]
) -> str:
    """sha256 over the settings and what a walk saw: each file's `file_fields`, each rejected path and why (what
    include/exclude skip does not count)."""
    digest = hashlib.sha256(repr(config).encode())
    for entry in entries:
        match entry:
            case Rejected(source_path=source_path, why=why):
                fields = [source_path, why.error_type, why.reason]
            case Skipped():
                continue
            case _:
                fields = file_fields(entry)
        digest.update(("\0".join(map(str, fields)) + "\n").encode())
    return digest.hexdigest()


def _stamp(path: Path) -> str:
    try:
        status = path.stat()
    except OSError as exc:  # mostly: no sidecar there
        return f"-{exc.errno}"
    return f"{status.st_size}:{status.st_mtime_ns}"


# ---------------------------------------------------------------------- include / exclude


def selector(include: Iterable[str], exclude: Iterable[str]) -> Callable[[str], bool]:
    """Whether a source_path is selected: it matches an include glob (when there are any) and no exclude glob.

    wcmatch globs (GLOB_FLAGS) on the whole posix path: `*`, `?` and character classes (`[abc]`, `[!abc]`,
    `[^abc]`, `[[:alpha:]]`) stay within one folder, a backslash escapes the next character, and a `**` segment
    spans any number of folders, none included.
    """
    included, excluded = ([unicodedata.normalize("NFC", p) for p in patterns] for patterns in (include, exclude))
    if not included and not excluded:
        return lambda source_path: True  # the default: every path, without matching each
    return glob.compile(included or "**", flags=GLOB_FLAGS, exclude=excluded).match


# ---------------------------------------------------------------------- the walk


@dataclass(frozen=True)
class _Tree:
    root: Path  # resolved
    selected: Callable[[str], bool]  # include/exclude
    owns: Callable[[str], bool]


def _walk_dir(
    tree: _Tree, directory: Path, prefix: str, real_prefix: str, ancestors: frozenset[Path]
) -> Iterator[TreeEntry]:
    """Walk one directory (a real path: links are resolved on the way down); `prefix` is its source_path and
    `real_prefix` where it really is under the root (they differ under a linked directory), each with a trailing
    slash; `ancestors` are the directories being walked above it."""
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as exc:
        reason = f"cannot list directory: {exc.strerror or exc}"
        yield Rejected(prefix.rstrip("/") or ".", Quarantined("discover", "UnreadableDirectory", reason))
        return
    names = {entry.name for entry in entries}
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if lone_surrogate(entry.name) is not None:  # no source_path can name it: every table stores UTF-8
            shown = os.fsencode(prefix + entry.name).decode("utf-8", "backslashreplace")
            yield Rejected(shown, Quarantined("discover", "InvalidFileName", f"file name is not valid UTF-8: {shown}"))
            continue
        source_path = unicodedata.normalize("NFC", prefix + entry.name)
        if not (_is_directory(entry) or tree.owns(source_path)):
            continue  # another shard's file: not even looked at
        try:
            yield from _visit(tree, entry, directory / entry.name, source_path, real_prefix, names, ancestors)
        except Quarantined as q:
            yield _rejected(tree, source_path, q)
        except OSError as exc:  # vanished or unreadable between listing and looking
            yield _rejected(tree, source_path, access_error(exc))


def _rejected(tree: _Tree, source_path: str, why: Quarantined) -> Rejected | Skipped:
    """A path that cannot be a document is reported only when selected; else it is one more skipped."""
    return Rejected(source_path, why) if tree.selected(source_path) else Skipped(source_path)


def _is_directory(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()  # follows links: a link to a directory is walked (or reported) like one
    except OSError:  # a link loop
        return False


def _visit(
    tree: _Tree,
    entry: os.DirEntry,
    path: Path,
    source_path: str,
    real_prefix: str,
    sibling_names: set[str],
    ancestors: frozenset[Path],
) -> Iterator[TreeEntry]:
    # The directory is real, so only a link's own name can differ from where it leads. The entry's own type and
    # stat serve: scandir knows whether it is a link without a call, and one stat (links followed) is kept.
    real, real_path = path, real_prefix + entry.name
    if entry.is_symlink():
        real = _symlink_target(tree, path)
        real_path = real.relative_to(tree.root).as_posix()
        if real.is_dir():
            # A link to a directory inside the root is followed (an alias, like a file link), unless it leads
            # back into a directory the walk is inside of: that would never end.
            if real in ancestors:
                raise Quarantined(
                    "discover", "SymlinkLoop", f"symlink loop: directory link points back to its own ancestor {real}"
                )
            yield from _walk_dir(tree, real, source_path + "/", real_path + "/", ancestors | {real})
            return
    status = entry.stat()
    is_sidecar = entry.name.endswith(SIDECAR_SUFFIX)
    if stat.S_ISDIR(status.st_mode):
        yield from _walk_dir(tree, path, source_path + "/", real_path + "/", ancestors | {path})
    elif is_sidecar and entry.name[: -len(SIDECAR_SUFFIX)] in sibling_names:
        return  # metadata, read with its document
    elif not tree.selected(source_path):
        yield Skipped(source_path)
    elif not stat.S_ISREG(status.st_mode):
        raise Quarantined("discover", "NotARegularFile", "not a regular file (device, socket or FIFO)")
    elif is_sidecar:
        raise Quarantined(
            "discover", "OrphanSidecar", f"sidecar without a document named {entry.name[: -len(SIDECAR_SUFFIX)]!r}"
        )
    else:
        places = _places(path, source_path, real, real_path)
        yield TreeFile(path, source_path, places, status, entry.name + SIDECAR_SUFFIX in sibling_names)


def _places(path: Path, source_path: str, real: Path, real_path: str) -> tuple[tuple[Path, str], ...]:
    """As the walk found it (a link's name, or a path through a linked directory) and, when that differs, where it
    really is (`real_path`: relative to the root, as the names are on disk). Its scope is the strictest of these
    places' scopes, so a link never makes an internal_only file visible."""
    real_path = unicodedata.normalize("NFC", real_path)
    return ((path, source_path),) + (((real, real_path),) if real_path != source_path or real is not path else ())


def _symlink_target(tree: _Tree, path: Path) -> Path:
    try:
        target = path.resolve(strict=True)
    except RuntimeError as exc:  # Python 3.11 reports a loop this way
        raise Quarantined("discover", "SymlinkLoop", f"symlink loop: {exc}") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Quarantined("discover", "SymlinkLoop", "symlink loop (too many levels of symbolic links)") from exc
        raise Quarantined("discover", "BrokenSymlink", f"symlink target does not exist: {os.readlink(path)}") from exc
    if not target.is_relative_to(tree.root):
        raise Quarantined("discover", "SymlinkOutsideRoot", f"symlink points outside the source root, to {target}")
    return target
