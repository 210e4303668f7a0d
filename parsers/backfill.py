"""Backfill: a corpus version per release tag of a git repository, named after the tag and made in commit order,
so that today's answers can be judged against any past release of the docs. Each tag is an ordinary ingest of
the tag's tree (parsers.sources.git), so a document a release did not change is reused, not parsed again, and
the blob cache shared by a repository's refs spares reading it. Resumable: a tag whose version exists is skipped."""

from __future__ import annotations

import fnmatch
import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import SortMode

from citekeeper.store import DEFAULT_LOCK_TIMEOUT, CorpusStore, StoreError, VersionManifest, validate_version_name
from parsers.ingest import IngestResult, ingest
from parsers.parse_pool import Progress
from parsers.records import ParseConfig
from parsers.sources.git import GitSource, GitSourceError, open_repository

TAGS = "refs/tags/"


@dataclass(frozen=True)
class Tag:
    name: str  # without refs/tags/
    commit: str  # hex id of the commit it names (an annotated tag peeled)


@dataclass(frozen=True)
class BackfilledTag:
    """What backfill did for one tag: created its version, found it existing (skipped), or found the tag's tree
    equal to an earlier version (ingest creates no copy of a version)."""

    tag: Tag
    # the ingest, or None when the version existed; result.created is False when the tree equals result.equals
    result: IngestResult | None
    existing: VersionManifest | None = None  # the version that existed already

    @property
    def skipped(self) -> bool:
        return self.result is None


def backfill(
    repository: Path | str,
    store: CorpusStore,
    refs: str,
    config: ParseConfig = ParseConfig(),
    progress: Progress | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> list[BackfilledTag]:
    """A corpus version per tag of `repository` matching the glob `refs` (e.g. 'v*'), oldest first."""
    return list(iter_backfill(repository, store, refs, config, progress, lock_timeout))


def iter_backfill(
    repository: Path | str,
    store: CorpusStore,
    refs: str,
    config: ParseConfig = ParseConfig(),
    progress: Progress | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> Iterator[BackfilledTag]:
    """backfill, a tag at a time as each is done. The tags are all checked before the first is ingested: none may
    be an invalid version name. A tag's quarantined documents are its version's errors, as in any ingest."""
    tags = matching_tags(repository, refs)
    for tag in tags:
        if store.has_version(tag.name):
            yield BackfilledTag(tag, None, existing=store.manifest(tag.name))
            continue
        source = GitSource(repository, TAGS + tag.name)
        result = ingest(source, store, version=tag.name, config=config, progress=progress, lock_timeout=lock_timeout)
        yield BackfilledTag(tag, result)


def matching_tags(repository: Path | str, refs: str) -> list[Tag]:
    """The tags matching the glob `refs`, in commit order (matching_tags_in_order); a GitSourceError when none
    matches or one names no commit, a StoreError when one is no valid version name."""
    repo = open_repository(repository)
    tags = [_tag(repo, name, repository) for name in _tag_names(repo) if fnmatch.fnmatchcase(name, refs)]
    if not tags:
        raise GitSourceError(f"no tag of {repository} matches {refs!r}")
    invalid = [tag.name for tag in tags if not _valid_version_name(tag.name)]
    if invalid:
        raise StoreError(
            f"tags that cannot name a corpus version (letters, digits, '.', '-', '_'; at most 128): "
            f"{', '.join(map(repr, invalid))}; narrow --refs to leave them out. Nothing was ingested."
        )
    return in_commit_order(repo, tags)


def in_commit_order(repo: pygit2.Repository, tags: list[Tag]) -> list[Tag]:
    """`tags` with every tag after the tags of its commit's ancestors; among commits neither descends from, the
    older (commit time) first, then by tag name. Tags of one commit come together, by name."""
    by_commit: dict[str, list[Tag]] = {}
    for tag in sorted(tags, key=lambda tag: tag.name):
        by_commit.setdefault(tag.commit, []).append(tag)
    before = _tagged_ancestors(repo, set(by_commit))
    waiting = {commit: len(ancestors) for commit, ancestors in before.items()}
    after: dict[str, list[str]] = {commit: [] for commit in by_commit}
    for commit, ancestors in before.items():
        for ancestor in ancestors:
            after[ancestor].append(commit)

    def key(commit: str) -> tuple[int, str]:
        return repo[commit].peel(pygit2.Commit).commit_time, by_commit[commit][0].name

    ready = [(key(commit), commit) for commit, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    ordered: list[Tag] = []
    while ready:
        _, commit = heapq.heappop(ready)
        ordered += by_commit[commit]
        for descendant in after[commit]:
            waiting[descendant] -= 1
            if waiting[descendant] == 0:
                heapq.heappush(ready, (key(descendant), descendant))
    return ordered


def _tagged_ancestors(repo: pygit2.Repository, tagged: set[str]) -> dict[str, frozenset[str]]:
    """For each tagged commit, its nearest tagged ancestors: one walk of the history behind them, parents first,
    carrying each commit's nearest tagged ancestors to its children (shared, not copied, along a line)."""
    walk = repo.walk(None, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    for tagged_commit in tagged:
        walk.push(tagged_commit)
    nearest: dict[str, frozenset[str]] = {}
    none: frozenset[str] = frozenset()
    for commit in walk:
        inherited = [
            frozenset([parent]) if parent in tagged else nearest.get(parent, none)  # a shallow clone's edge: none
            for parent in map(str, commit.parent_ids)
        ]
        nearest[str(commit.id)] = inherited[0] if len(inherited) == 1 else none.union(*inherited)
    return {commit: nearest[commit] for commit in tagged}


def _tag_names(repo: pygit2.Repository) -> list[str]:
    return [name.removeprefix(TAGS) for name in repo.listall_references() if name.startswith(TAGS)]


def _tag(repo: pygit2.Repository, name: str, repository: Path | str) -> Tag:
    target = repo.revparse_single(TAGS + name)
    try:
        return Tag(name, str(target.peel(pygit2.Commit).id))
    except (ValueError, pygit2.GitError):
        raise GitSourceError(f"tag {name!r} of {repository} names a {target.type_str}, not a commit") from None


def _valid_version_name(name: str) -> bool:
    try:
        validate_version_name(name)
    except StoreError:
        return False
    return True
