"""A git repository at a ref as a source, `git:PATH@REF`: the ref's commit's tree is listed and its blobs are
read from the object database, with no checkout (a bare repository works as well as a clone). A blob id is a
content address, so it is the stamp: a document unchanged between two refs is never read twice, and the refs of
one repository share one cache."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, ObjectType, RepositoryOpenFlag

from citekeeper.text import lone_surrogate
from parsers.source_tree import Quarantined
from parsers.sources.base import ListedObject, ListedSource, SourceError, UnlistableKey

SCHEME = "git:"
DEFAULT_REF = "HEAD"


class GitSourceError(SourceError):
    """A git spec that names no repository, or a ref that resolves to no commit in it."""


def handles(spec: str) -> bool:
    return spec.startswith(SCHEME)


def open_source(spec: str, storage_options: Mapping[str, str] | None = None) -> GitSource:
    """The source `git:PATH@REF` names; storage options do not apply to a local repository."""
    path, ref = parse_spec(spec)
    return GitSource(path, ref)


def parse_spec(spec: str) -> tuple[str, str]:
    """(PATH, REF) of `git:PATH@REF`, split at the last "@" that does not start a reflog selector ("@{1}"); no
    "@": REF is HEAD. A PATH holding an "@" therefore needs an explicit ref."""
    if not handles(spec):
        raise GitSourceError(f"not a git source spec (git:PATH@REF): {spec!r}")
    body = spec.removeprefix(SCHEME)
    at = _ref_separator(body)
    path, ref = (body, DEFAULT_REF) if at < 0 else (body[:at], body[at + 1 :])
    if not path:
        raise GitSourceError(f"git source {spec!r} names no repository path (git:PATH@REF)")
    if not ref:
        raise GitSourceError(f"git source {spec!r} has an empty ref after '@' (leave '@' out for {DEFAULT_REF})")
    return path, ref


def _ref_separator(body: str) -> int:
    at = body.rfind("@")
    while at >= 0 and body[at + 1 : at + 2] == "{":
        at = body.rfind("@", 0, at)
    return at


class GitSource(ListedSource):
    """The tree of one commit of a local repository; the ref is resolved once, when the source is made, so
    the listing and every read see the same commit even if the ref moves meanwhile."""

    def __init__(self, repository: Path | str, ref: str = DEFAULT_REF):
        self._root = Path(repository).resolve()
        self._ref = ref
        self._repo: pygit2.Repository | None = None
        self._opened_in = 0  # the process the handle was opened in: a forked worker opens its own
        self._commit = _commit_of(self._repository(), ref, self._root, self.uri)
        self._blob_ids: dict[str, str] | None = None  # key -> blob hex id, from a listing

    @property
    def uri(self) -> str:
        return f"{SCHEME}{self._root}@{self._ref}"

    @property
    def cache_key(self) -> str:
        return f"{SCHEME}{self._root}"

    @property
    def revision(self) -> str:
        return self._commit

    def listing_fingerprint(self) -> str:
        return self._commit

    def list_objects(self) -> Iterator[ListedObject | UnlistableKey]:
        repo = self._repository()
        header = repo.odb.read_header
        blob_ids: dict[str, str] = {}
        for entry in _walk(repo, repo[self._commit].peel(pygit2.Tree)):
            if isinstance(entry, tuple):
                key, blob_id = entry
                blob_ids[key] = blob_id
                yield ListedObject(key, header(blob_id)[1], blob_id)
            else:
                yield entry
        self._blob_ids = blob_ids

    def read(self, key: str, max_bytes: int) -> bytes:
        blob_id = self._listed_blob_ids().get(key)
        if blob_id is None:
            raise Quarantined("read", "NotFound", f"{key} is no file of {self.uri} at commit {self._commit}")
        try:
            _, data = self._repository().odb.read(blob_id)
        except (KeyError, pygit2.GitError) as exc:  # a damaged or incomplete object database: this blob alone
            raise Quarantined("read", "UnreadableObject", f"blob {blob_id} of {key}: {exc}") from None
        return data[: max_bytes + 1]

    def _listed_blob_ids(self) -> dict[str, str]:
        """The listing's blob ids by key; a process that reads without having listed (a parse worker) walks the
        tree once for them."""
        if self._blob_ids is None:
            repo = self._repository()
            entries = _walk(repo, repo[self._commit].peel(pygit2.Tree))
            self._blob_ids = dict(entry for entry in entries if isinstance(entry, tuple))
        return self._blob_ids

    def _repository(self) -> pygit2.Repository:
        if self._repo is None or self._opened_in != os.getpid():
            self._repo, self._opened_in = open_repository(self._root, self.uri), os.getpid()
        return self._repo

    def __getstate__(self) -> dict:
        """Picklable for the parse workers: the repository handle is opened again where it is used."""
        return {**self.__dict__, "_repo": None, "_opened_in": 0}

    def __repr__(self) -> str:
        return f"GitSource({self.uri!r}, commit={self._commit})"


def open_repository(path: Path | str, spec: str | None = None) -> pygit2.Repository:
    """The repository at `path` itself (not one above it); `spec`: the source naming it, for the error."""
    try:
        return pygit2.Repository(str(path), RepositoryOpenFlag.NO_SEARCH)
    except pygit2.GitError:
        named = f"git source {spec!r}: " if spec else ""
        raise GitSourceError(
            f"{named}{path} is not a git repository (give the top of a local clone, or a bare repository)"
        ) from None


def _commit_of(repo: pygit2.Repository, ref: str, root: Path, spec: str) -> str:
    """The hex id of the commit `ref` names (a tag is peeled to its commit)."""
    try:
        target = repo.revparse_single(ref)
    except (KeyError, ValueError, pygit2.GitError) as exc:
        why = f": {exc}" if isinstance(exc, ValueError) else ""  # a malformed rev says how; a missing one is just that
        raise GitSourceError(f"git source {spec!r}: ref {ref!r} does not resolve in {root}{why}") from None
    try:
        return str(target.peel(pygit2.Commit).id)
    except (ValueError, pygit2.GitError):
        raise GitSourceError(f"git source {spec!r}: ref {ref!r} names a {target.type_str}, not a commit") from None


Listed = tuple[str, str] | UnlistableKey  # (key, blob hex id) of a regular file, or why an entry is none


def _walk(repo: pygit2.Repository, tree: pygit2.Tree, prefix: bytes = b"") -> Iterator[Listed]:
    """Every entry under `tree`, depth first. Keys are NFC, as a walk of a checkout names its files; a name that
    is not UTF-8 is quarantined (a directory with it, whole), since no table can store its path."""
    for entry in tree:
        raw = prefix + (entry.raw_name or b"")  # None only for an object that is no tree entry
        key = unicodedata.normalize("NFC", raw.decode("utf-8", "surrogateescape"))
        mode = entry.filemode
        if lone_surrogate(key) is not None:
            shown = raw.decode("utf-8", "backslashreplace")
            reason = f"file name is not valid UTF-8: {shown}"
            yield UnlistableKey(shown, Quarantined("discover", "InvalidFileName", reason))
        elif mode == FileMode.TREE:
            yield from _walk(repo, repo[entry.id].peel(pygit2.Tree), raw + b"/")
        elif mode == FileMode.LINK:
            reason = "a symbolic link (git mode 120000): a git source reads regular files only"
            yield UnlistableKey(key, Quarantined("discover", "NotARegularFile", reason))
        elif mode == FileMode.COMMIT:
            reason = f"a submodule (git mode 160000, commit {entry.id}): its files are in another repository"
            yield UnlistableKey(key, Quarantined("discover", "NotARegularFile", reason))
        elif entry.type == ObjectType.BLOB:  # 100644, 100755 (and the legacy 100664)
            yield key, str(entry.id)
        else:
            reason = f"an entry of git mode {mode:o}: a git source reads regular files only"
            yield UnlistableKey(key, Quarantined("discover", "NotARegularFile", reason))
