"""A git repository at a ref as a source (parsers.sources.git) and the backfill of its tags (parsers.backfill,
`citekeeper backfill`, the citekeeper_backfill job). The repository is built here with the git CLI from two real
releases of mkdocs-material's docs (two commits, two tags; a bare clone too), never checked out; the oracles are
the release folders on disk: their files, git's blob ids of their bytes (sha1 of "blob <size>\\0" + bytes), and
the same trees ingested from disk."""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import dagster as dg
import polars as pl
import pygit2
import pytest
from click.testing import CliRunner

from assets.backfill import backfill_job
from assets.corpus import CHUNKS, DOCUMENTS
from assets.partitions import CORPUS_VERSIONS
from assets.resources import IngestResource, StoreResource
from changes.diff import diff_versions
from citekeeper.store import CorpusStore, StoreError, VersionManifest
from parsers.backfill import BackfilledTag, Tag, backfill, matching_tags
from parsers.ingest import ingest
from parsers.records import ParseConfig
from parsers.source_tree import Quarantined
from parsers.sources.base import ListedObject, UnlistableKey
from parsers.sources.git import GitSource, GitSourceError, handles, open_source
from pipelines.cli import main
from pipelines.cli_backfill import backfilled_line
from tests.conftest import REAL_CORPORA, require_eval

MKDOCS = REAL_CORPORA / "mkdocs-material"
RELEASES = {"v9.5.0": "9.5.0", "v9.7.6": "9.7.6"}  # tag -> release folder, oldest first
NOT_A_RELEASE = "docs-draft"  # a tag 'v*' leaves out


def git(*args: str, cwd: Path | None = None, date: str = "2024-01-01T00:00:00Z") -> str:
    """The git CLI with no user or system configuration, as a fixed author at `date`."""
    who = {"NAME": "Docs Team", "EMAIL": "docs@example.com", "DATE": date}
    env = {
        "PATH": os.defpath,
        "HOME": str(cwd or "/"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        **{f"GIT_{role}_{key}": value for role in ("AUTHOR", "COMMITTER") for key, value in who.items()},
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@dataclass(frozen=True)
class Releases:
    clone: Path  # a repository with a working tree in which nothing is checked out
    bare: Path  # its bare clone
    commits: dict[str, str]  # tag -> the commit it names


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> Releases:
    """A commit per release, each tree added as the release folder holds it (the folder as the work tree: no
    file is copied); v9.5.0 an annotated tag, v9.7.6 a lightweight one."""
    root = tmp_path_factory.mktemp("git")
    clone = root / "docs"
    git("init", "-q", "-b", "main", str(clone))
    git_dir = f"--git-dir={clone / '.git'}"
    for day, (tag, release) in enumerate(RELEASES.items(), 1):
        tree = require_eval(MKDOCS / release)
        date = f"2024-0{day}-01T00:00:00Z"
        git(git_dir, f"--work-tree={tree}", "add", "--all", cwd=tree, date=date)
        git(git_dir, "commit", "-q", "-m", f"mkdocs-material {release}", cwd=tree, date=date)
        git(git_dir, "tag", *(["-a", "-m", f"release {release}"] if day == 1 else []), tag, cwd=tree, date=date)
    git(git_dir, "tag", NOT_A_RELEASE, "v9.5.0^{commit}", cwd=root)
    git("clone", "-q", "--bare", str(clone), str(root / "docs.git"), cwd=root)
    commits = {tag: git(git_dir, "rev-parse", f"{tag}^{{commit}}", cwd=root) for tag in RELEASES}
    return Releases(clone, root / "docs.git", commits)


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def release_files(tag: str) -> dict[str, bytes]:
    root = MKDOCS / RELEASES[tag]
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def listed(source: GitSource) -> dict[str, ListedObject]:
    objects = list(source.list_objects())
    assert all(isinstance(o, ListedObject) for o in objects)
    return {o.key: o for o in objects}  # type: ignore[union-attr]


# ---------------------------------------------------------------------- the source


@pytest.mark.parametrize("tag", RELEASES)
def test_listing_is_the_tags_tree_with_blob_ids(releases: Releases, tag: str) -> None:
    files = release_files(tag)
    objects = listed(GitSource(releases.clone, tag))
    assert {key: (o.size, o.stamp) for key, o in objects.items()} == {
        key: (len(data), blob_id(data)) for key, data in files.items()
    }
    assert len(objects) == {"v9.5.0": 87, "v9.7.6": 96}[tag]


def test_reads_are_the_blobs_bounded(releases: Releases) -> None:
    files = release_files("v9.7.6")
    source = open_source(f"git:{releases.bare}@v9.7.6", {})
    assert all(source.read(key, len(data)) == data for key, data in files.items())
    key = "reference/admonitions.md"
    assert source.read(key, 9) == files[key][:10]  # max_bytes + 1: enough to see it is over the limit
    with pytest.raises(Quarantined) as missing:
        source.read("no/such/page.md", 100)
    assert (missing.value.stage, missing.value.error_type) == ("read", "NotFound")
    again = pickle.loads(pickle.dumps(source))  # as a parse worker gets it: opens the repository itself
    assert again.read(key, 10**6) == files[key] and again.revision == source.revision


def test_spec_names_the_commit_and_one_cache_per_repository(releases: Releases, monkeypatch) -> None:
    monkeypatch.chdir(releases.clone.parent)
    old, new = open_source("git:docs@v9.5.0", {}), open_source("git:docs", {})
    assert old.uri == f"git:{releases.clone}@v9.5.0" and new.uri == f"git:{releases.clone}@HEAD"
    assert (old.revision, new.revision) == (releases.commits["v9.5.0"], releases.commits["v9.7.6"])
    assert old.listing_fingerprint() == releases.commits["v9.5.0"]
    assert old.cache_key == new.cache_key == f"git:{releases.clone}"  # blob ids mean the same in every ref
    by_sha = open_source(f"git:docs@{releases.commits['v9.5.0'][:10]}", {})
    assert by_sha.revision == old.revision
    assert handles("git:docs") and not handles("s3://bucket/docs") and not handles("docs")


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("git:{root}/nowhere@v9.5.0", "is not a git repository"),
        ("git:{root}@v9.5.0", "is not a git repository"),  # a folder holding repositories
        ("git:{clone}/.git/refs@v9.5.0", "is not a git repository"),  # inside one: not searched upwards
        ("git:{clone}@v10.0.0", "ref 'v10.0.0' does not resolve"),
        ("git:{clone}@v9.5.0^{{tree}}", "names a tree, not a commit"),
        ("git:{clone}@..", "ref '..' does not resolve"),
        ("git:{clone}@", "empty ref"),
        ("git:@v9.5.0", "names no repository path"),
    ],
)
def test_a_bad_spec_says_what_is_wrong_and_names_it(releases: Releases, spec: str, says: str) -> None:
    given = spec.format(root=releases.clone.parent, clone=releases.clone)
    with pytest.raises(GitSourceError, match="(?s)" + _literal(says)) as raised:
        open_source(given, {})
    assert isinstance(raised.value, ValueError)  # what the CLI turns into a usage error
    assert repr(given) in str(raised.value)


def _literal(text: str) -> str:
    return "".join("\\" + c if c in ".^{}()[]*+?|$\\" else c for c in text)


@pytest.fixture(scope="module")
def odd_entries(tmp_path_factory) -> Path:
    """A repository whose one commit holds a page, a symbolic link, a submodule and a name that is not UTF-8."""
    path = tmp_path_factory.mktemp("odd") / "odd"
    repo = pygit2.init_repository(str(path))
    tree = repo.TreeBuilder()
    tree.insert("page.md", repo.create_blob(b"# Page\n\nSome text to cite.\n"), pygit2.enums.FileMode.BLOB)
    tree.insert("link.md", repo.create_blob(b"page.md"), pygit2.enums.FileMode.LINK)
    tree.insert("theme", pygit2.Oid(hex="1" * 40), pygit2.enums.FileMode.COMMIT)
    folder = repo.TreeBuilder()
    folder.insert("notes.md", repo.create_blob(b"# Notes\n"), pygit2.enums.FileMode.BLOB)
    tree.insert("caf\xe9", folder.write(), pygit2.enums.FileMode.TREE)  # made Latin-1 below
    raw = _latin1_folder(repo, tree.write())
    who = pygit2.Signature("Docs Team", "docs@example.com", 1_700_000_000, 0)
    repo.create_commit("refs/heads/main", who, who, "odd entries", raw, [])
    repo.set_head("refs/heads/main")
    return path


def _latin1_folder(repo: pygit2.Repository, tree_id: pygit2.Oid) -> pygit2.Oid:
    """The tree with its UTF-8 'café' entry renamed to the Latin-1 bytes b'caf\\xe9' (TreeBuilder takes str
    names only): rewritten as a raw tree object, whose entries are `<mode> <name>\\0<20-byte id>`."""
    _, data = repo.odb.read(tree_id)
    renamed = data.replace("café".encode() + b"\0", b"caf\xe9\0")
    assert renamed != data
    return repo.odb.write(pygit2.enums.ObjectType.TREE, renamed)


def test_links_submodules_and_undecodable_names_are_unlistable(odd_entries: Path) -> None:
    entries = list(GitSource(odd_entries).list_objects())
    assert [e.key for e in entries if isinstance(e, ListedObject)] == ["page.md"]
    unlistable = {e.key: e.why for e in entries if isinstance(e, UnlistableKey)}
    assert {key: (why.stage, why.error_type) for key, why in unlistable.items()} == {
        "caf\\xe9": ("discover", "InvalidFileName"),  # the folder, whole: nothing under it can be named
        "link.md": ("discover", "NotARegularFile"),
        "theme": ("discover", "NotARegularFile"),
    }
    assert "symbolic link" in unlistable["link.md"].reason and "submodule" in unlistable["theme"].reason


def test_links_and_submodules_are_quarantined_when_selected(odd_entries: Path, tmp_path: Path) -> None:
    store = CorpusStore(tmp_path / "store")
    whole = ingest(f"git:{odd_entries}", store, version="all", config=ParseConfig(workers=1))
    assert {e.source_path: e.error_type for e in whole.errors} == {
        "caf\\xe9": "InvalidFileName",
        "link.md": "NotARegularFile",
        "theme": "NotARegularFile",
    }
    assert store.read_documents("all")["doc_id"].to_list() == ["page.md"]
    only_pages = ParseConfig(workers=1, include=("*.md",))
    selected = ingest(f"git:{odd_entries}", CorpusStore(tmp_path / "other"), version="pages", config=only_pages)
    assert {e.source_path for e in selected.errors} == {"link.md"}  # the submodule and the folder: not selected


# ---------------------------------------------------------------------- ingest and backfill, against disk


@pytest.fixture(scope="module")
def from_disk(tmp_path_factory) -> CorpusStore:
    """Both release folders ingested from disk, as versions named after their tags."""
    store = CorpusStore(tmp_path_factory.mktemp("disk") / "store")
    for tag, release in RELEASES.items():
        assert ingest(require_eval(MKDOCS / release), store, version=tag).created
    return store


def same_rows(store: CorpusStore, reference: CorpusStore, version: str) -> None:
    for read in ("read_documents", "read_chunks"):
        rows, expected = (getattr(s, read)(version).drop("ingested_at") for s in (store, reference))
        key = ["doc_id"] if read == "read_documents" else ["doc_id", "start_char"]
        assert rows.sort(key).equals(expected.sort(key)), (read, version)


def in_order(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(frame.columns, nulls_last=True)


def same_versions(store: CorpusStore, reference: CorpusStore, releases: Releases, repository: Path) -> None:
    """The git store's versions are the disk store's: the same rows (but when they were ingested), the same
    manifests (but where the tree came from, when, and how much of it was read: blob ids carry over between
    tags, a folder's stats do not between two folders), the same diff."""
    assert [m.name for m in store.versions()] == list(RELEASES)
    for tag in RELEASES:
        same_rows(store, reference, tag)
        manifest, expected = store.manifest(tag), reference.manifest(tag)
        assert manifest.source_revision == releases.commits[tag] and expected.source_revision is None
        assert manifest.source_dir.startswith(f"git:{repository}@")
        unlike = {"source_dir", "source_revision", "created_at", "lance_versions", "n_hashed", "n_stamp_reused"}
        assert {k: v for k, v in asdict(manifest).items() if k not in unlike} == {
            k: v for k, v in asdict(expected).items() if k not in unlike
        }
    old, new = RELEASES
    diff, expected_diff = diff_versions(store, old, new), diff_versions(reference, old, new)
    for table in ("docs", "chunks"):
        assert in_order(getattr(diff, table)).equals(in_order(getattr(expected_diff, table))), table
    assert diff.doc_counts()["modified"] > 0  # a diff that would show a difference


def test_ingest_and_cli_backfill_match_disk(releases: Releases, from_disk: CorpusStore, tmp_path, monkeypatch) -> None:
    """v9.5.0 by `ingest git:PATH@TAG` (a relative path), then `citekeeper backfill` skips it and makes v9.7.6,
    reusing the documents 9.7.6 did not change; a backfill run again skips both."""
    store = CorpusStore(tmp_path / "store")
    monkeypatch.chdir(releases.clone.parent)
    assert ingest("git:docs@v9.5.0", store, version="v9.5.0").created
    printed = CliRunner().invoke(main, ["backfill", "docs", "--refs", "v*", "--store", str(store.root)])
    assert printed.exit_code == 0, printed.output
    old, new = (releases.commits[tag][:12] for tag in RELEASES)
    expected = from_disk.manifest("v9.7.6")
    assert printed.output.splitlines() == [
        f"v9.5.0 ({old}): corpus version exists already; skipped",
        f"v9.7.6 ({new}): created corpus version v9.7.6 (parent: v9.5.0): {expected.n_documents} documents, "
        f"{expected.n_chunks} chunks; parsed {expected.n_parsed}, reused {expected.n_reused}, quarantined 0",
    ]
    assert expected.n_reused == 20  # the pages 9.7.6 left as they were: reused, not parsed again
    same_versions(store, from_disk, releases, releases.clone)
    again = backfill(releases.clone, store, "v*")
    assert [(done.tag.name, done.skipped) for done in again] == [("v9.5.0", True), ("v9.7.6", True)]
    assert [m.name for m in store.versions()] == list(RELEASES)


def test_dagster_job_backfills_a_bare_repository(releases: Releases, from_disk: CorpusStore, tmp_path) -> None:
    store = StoreResource(store_dir=str(tmp_path / "store"))
    instance = dg.DagsterInstance.ephemeral()
    run = backfill_job.execute_in_process(
        run_config={"ops": {"backfill_tags": {"config": {"repository": str(releases.bare), "refs": "v*"}}}},
        resources={"store": store, "ingest": IngestResource()},
        instance=instance,
    )
    assert run.success
    same_versions(store.corpus_store(), from_disk, releases, releases.bare)
    assert instance.get_dynamic_partitions(CORPUS_VERSIONS) == list(RELEASES)
    for key in (DOCUMENTS, CHUNKS):
        assert instance.get_materialized_partitions(key) == set(RELEASES)
    documents = instance.get_latest_materialization_event(DOCUMENTS).asset_materialization
    assert documents.partition == "v9.7.6" and documents.metadata["n_reused"].value == 20


# ---------------------------------------------------------------------- which tags, in which order


def test_tags_in_commit_order_ancestors_first_then_older_then_by_name(tmp_path: Path) -> None:
    """main: A - B - E - F (F committed with a clock behind); maint from A: C - D. Ancestry first; between
    unrelated commits the older; tags of one commit by name."""
    path = tmp_path / "history"
    git("init", "-q", "-b", "main", str(path))

    def commit(name: str, date: str, *tags: str) -> None:
        git("commit", "-q", "--allow-empty", "-m", name, cwd=path, date=date)
        for tag in tags:
            git("tag", tag, cwd=path)

    commit("A", "2020-01-01T00:00:00Z", "r-a")
    commit("B", "2020-01-03T00:00:00Z", "r-b")
    git("checkout", "-q", "-b", "maint", "r-a", cwd=path)
    commit("C", "2020-01-02T00:00:00Z", "r-c")
    commit("D", "2020-01-05T00:00:00Z", "r-d")
    git("checkout", "-q", "main", cwd=path)
    commit("E", "2020-01-04T00:00:00Z", "r-e2", "r-e1")
    commit("F", "2019-06-01T00:00:00Z", "r-f")  # behind its parent's clock: still after it
    commit("G", "2020-01-06T00:00:00Z", "other")
    names = [tag.name for tag in matching_tags(path, "r-*")]
    assert names == ["r-a", "r-c", "r-b", "r-e1", "r-e2", "r-f", "r-d"]


def test_tags_that_cannot_name_a_version_stop_the_backfill_before_any_ingest(tmp_path: Path) -> None:
    path = tmp_path / "history"
    git("init", "-q", "-b", "main", str(path))
    git("commit", "-q", "--allow-empty", "-m", "one", cwd=path)
    for tag in ("v1", "v2/rc", "v2+build"):
        git("tag", tag, cwd=path)
    store = CorpusStore(tmp_path / "store")
    with pytest.raises(StoreError, match=r"'v2\+build', 'v2/rc'.*Nothing was ingested"):
        backfill(path, store, "v*")
    assert store.versions() == []
    with pytest.raises(GitSourceError, match=r"no tag of .* matches 'release-\*'"):
        backfill(path, store, "release-*")
    with pytest.raises(GitSourceError, match="is not a git repository"):
        backfill(tmp_path, store, "v*")


def test_a_skipped_tag_says_when_its_version_was_made_from_elsewhere() -> None:
    tag = Tag("v2.0", "a" * 40)

    def made_from(source_dir: str, revision: str | None) -> BackfilledTag:
        manifest = VersionManifest("v2.0", None, "", 1, 1, 0, "sha256:0", source_dir=source_dir)
        return BackfilledTag(tag, None, existing=replace(manifest, source_revision=revision))

    assert backfilled_line(made_from("git:/docs@refs/tags/v2.0", "a" * 40)) == (
        "v2.0 (aaaaaaaaaaaa): corpus version exists already; skipped"
    )
    assert backfilled_line(made_from("/srv/docs", None)) == (
        "v2.0 (aaaaaaaaaaaa): corpus version exists already, made from /srv/docs, not from this tag; skipped"
    )
    assert backfilled_line(made_from("git:/fork@v2.0", "b" * 40)) == (
        "v2.0 (aaaaaaaaaaaa): corpus version exists already, made from git:/fork@v2.0 at bbbbbbbbbbbb, not from "
        "this tag; skipped"
    )
