"""What a place documents come from gives discovery: a listing of its objects, each with a stamp that changes
whenever its bytes do, and the bytes of one object on request. A local folder is walked by parsers.source_tree
instead (links, stat); every other source (an object-store prefix, a git ref) is a listing of keys, and
discovery applies the same rules to it (hidden names, sidecars, include/exclude, quarantine). The sources:
docs/ingest.md ("Sources")."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

from parsers.source_tree import Quarantined


class SourceError(ValueError):
    """A source that cannot be opened (no such repository or ref, a URL whose filesystem is not installed, bad
    storage options); the message names the source."""


@dataclass(frozen=True)
class ListedObject:
    """One object of a listing."""

    key: str  # posix path relative to the source's root (a bucket prefix, a repository's top), no leading "/"
    size: int  # bytes
    # Changes whenever the bytes do, and is cheap to list: an object's ETag or generation with its size and
    # mtime, a git blob id. Discovery reuses what it read of an object whose stamp it has seen (no GET); ""
    # where the listing says nothing that changes with the bytes: such an object is read on every run.
    stamp: str


@dataclass(frozen=True)
class UnlistableKey:
    """A listing entry that cannot be a document (a git link or submodule, a key that is no path); quarantined
    as discovery quarantines a local path, when selected."""

    key: str
    why: Quarantined


class ListedSource(ABC):
    """A source discovery reads through a listing (parsers.discover)."""

    @property
    @abstractmethod
    def uri(self) -> str:
        """The source as the user names it; what a version records as its source_dir."""

    @property
    @abstractmethod
    def cache_key(self) -> str:
        """What the read-object cache is kept under: sources sharing it share stamps (a repository's refs)."""

    @property
    def revision(self) -> str | None:
        """The commit a version of this source is made from (git), None where a source has no revisions."""
        return None

    @abstractmethod
    def list_objects(self) -> Iterator[ListedObject | UnlistableKey]:
        """Every object under the source's root, in any order: one request per page for an object store."""

    @abstractmethod
    def read(self, key: str, max_bytes: int) -> bytes:
        """The object's bytes, at most max_bytes + 1 of them (so that a caller sees one grown past its limit).
        A failure of this object alone (vanished since the listing, access denied, throttled past the retries)
        raises Quarantined with stage "read"; anything else propagates."""

    def listing_fingerprint(self) -> str | None:
        """A fingerprint of the whole source cheaper than its listing (a ref's commit id), or None: the sensor
        then fingerprints the listing."""
        return None
