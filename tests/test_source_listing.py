"""Discovery over a listed source (parsers.sources.listing, parsers.discover) without an object store or git: a
ListedSource over a folder in the test, whose stamps are the sha256 of each file's bytes and which counts its reads,
so each rule a folder's walk applies is checked on a listing, and what was read of an object is checked to be read
once."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from citekeeper.scope import AGGREGATE_MARK
from citekeeper.sharding import Shard
from citekeeper.store import CorpusStore
from parsers.discover import Discovery, discover
from parsers.ingest import ingest
from parsers.records import ParseConfig, SourceFile
from parsers.source_tree import Quarantined
from parsers.sources.base import ListedObject, ListedSource, UnlistableKey
from parsers.sources.listing import ReadObjects, listing_fingerprint
from tests.conftest import require_eval
from tests.eval_data import REAL_CORPORA

HUGO = REAL_CORPORA / "hugo-docs" / "v0.141.0"
SIDECAR = ".citekeeper.json"
# What a document is, as discovery gives it, apart from where the parser reads it (a spool path, for a listing).
DOCUMENT_FIELDS = ("source_path", "doc_id", "content_hash", "size_bytes", "access_scope", "title", "front_matter")


class FolderListing(ListedSource):
    """The files under a folder as a listing (hidden ones included: discovery passes them over), stamped with the
    sha256 of their bytes; `extra` adds keys no folder can hold, `unlistable` entries that are no document, and
    `failing` keys whose read fails as a vanished or forbidden object would."""

    def __init__(
        self,
        root: Path,
        extra: dict[str, bytes] | None = None,
        unlistable: dict[str, Quarantined] | None = None,
        failing: dict[str, Quarantined] | None = None,
        reverse: bool = False,
    ):
        self.root = root
        self.extra = extra or {}
        self.unlistable = unlistable or {}
        self.failing = failing or {}
        self.reverse = reverse  # list in reverse order: a listing's order is the store's, not discovery's
        self.reads: Counter[str] = Counter()

    @property
    def uri(self) -> str:
        return f"test-listing:{self.root}"

    @property
    def cache_key(self) -> str:
        return self.uri

    def list_objects(self) -> Iterator[ListedObject | UnlistableKey]:
        on_disk = {path.relative_to(self.root).as_posix(): path for path in self.root.rglob("*") if path.is_file()}
        objects = {key: path.read_bytes() for key, path in on_disk.items()} | self.extra
        entries: list[ListedObject | UnlistableKey] = [
            ListedObject(key, len(data), hashlib.sha256(data).hexdigest()) for key, data in objects.items()
        ]
        entries += [UnlistableKey(key, why) for key, why in self.unlistable.items()]
        yield from sorted(entries, key=lambda entry: entry.key, reverse=self.reverse)

    def read(self, key: str, max_bytes: int) -> bytes:
        self.reads[key] += 1
        if key in self.failing:
            raise self.failing[key]
        data = self.extra[key] if key in self.extra else (self.root / key).read_bytes()
        return data[: max_bytes + 1]


def write(root: Path, files: Mapping[str, str | dict]) -> Path:
    """Files under root: text, or a dict written as a JSON sidecar."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content) if isinstance(content, dict) else content)
    return root


def page(title: str) -> str:
    return f"---\ntitle: {title}\n---\n\n# {title}\n\nThe page about {title} says one thing about it.\n"


def documents_row(source: SourceFile) -> tuple:
    return tuple(getattr(source, name) for name in DOCUMENT_FIELDS)


def documents(found: Discovery) -> dict[str, tuple]:
    return {source.source_path: documents_row(source) for source in found.sources}


def errors(found: Discovery) -> dict[str, tuple[str, str, str | None]]:
    return {e.source_path: (e.stage, e.error_type, e.access_scope) for e in found.errors}


def paths(found: Discovery) -> list[str]:
    return [source.source_path for source in found.sources]


# ---------------------------------------------------------------------- the rules of a folder's walk


def test_hidden_names_anywhere_on_the_path_are_passed_over(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "a.md": page("a"),
            ".hidden.md": page("hidden"),
            ".git/notes.md": page("git"),
            "docs/b.md": page("b"),
            "docs/.drafts/c.md": page("c"),
            "docs/.d.md": page("d"),
            ".orphan.md" + SIDECAR: {"title": "never read"},
        },
    )
    source = FolderListing(root)
    found = discover(source, ParseConfig())
    assert paths(found) == ["a.md", "docs/b.md"]
    assert found.errors == [] and found.n_skipped == 0  # passed over: neither skipped nor quarantined
    assert source.reads == Counter({"a.md": 1, "docs/b.md": 1})


def test_a_sidecar_goes_with_its_document_and_an_orphan_is_quarantined_when_selected(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "guide.md": page("Guide"),
            "guide.md" + SIDECAR: {"doc_id": "the-guide", "access_scope": "internal_only", "title": "Sidecar title"},
            "orphan.md" + SIDECAR: {"title": "no document"},
        },
    )
    found = discover(FolderListing(root), ParseConfig())
    [guide] = found.sources
    assert (guide.source_path, guide.doc_id, guide.access_scope, guide.title) == (
        "guide.md",
        "the-guide",
        "internal_only",
        "Sidecar title",
    )
    assert errors(found) == {"orphan.md" + SIDECAR: ("discover", "OrphanSidecar", None)}

    only_markdown = discover(FolderListing(root), ParseConfig(include=("*.md",)))
    assert paths(only_markdown) == ["guide.md"] and only_markdown.errors == []
    assert only_markdown.n_skipped == 1  # the orphan, left out by the include: skipped, never an error


SELECTION_TREE: dict[str, str | dict] = {
    "index.md": page("index"),
    "docs/a.md": page("a"),
    "docs/drafts/b.md": page("b"),
    "docs/drafts/b.md" + SIDECAR: {"access_scope": "internal_only"},
    "api/c.html": "<html><body><h1>c</h1><p>The c endpoint.</p></body></html>",
    "api/notes.txt": "Notes on the API.",
    "stray.md" + SIDECAR: {"title": "orphan"},
    "image.xyz": "not a supported format",
}


@pytest.mark.parametrize(
    "include, exclude",
    [
        ((), ()),
        (("**/*.md",), ()),
        (("*.md",), ()),
        ((), ("docs/drafts/**",)),
        (("docs/**", "api/*.html"), ("**/b.md",)),
        ((), ("*.xyz", "*.json")),
    ],
)
def test_include_and_exclude_select_as_for_a_folder(tmp_path: Path, include: tuple, exclude: tuple) -> None:
    root = write(tmp_path, SELECTION_TREE)
    config = ParseConfig(include=include, exclude=exclude)
    source = FolderListing(root)
    listed, on_disk = discover(source, config), discover(root, config)
    assert documents(listed) == documents(on_disk)
    assert errors(listed) == errors(on_disk)
    assert listed.n_skipped == on_disk.n_skipped
    # What is left out is never read; a sidecar is read with its document.
    sidecars = {path + SIDECAR for path in paths(listed) if (root / (path + SIDECAR)).exists()}
    assert set(source.reads) == set(paths(listed)) | sidecars


def test_shards_partition_the_documents_and_read_only_their_own(tmp_path: Path) -> None:
    root = write(tmp_path, {f"section{i % 3}/page{i}.md": page(f"page {i}") for i in range(24)})
    everything = paths(discover(FolderListing(root), ParseConfig()))
    shares = []
    for index in range(3):
        shard, source = Shard(index, 3), FolderListing(root)
        share = paths(discover(source, ParseConfig(), owns=shard.owns))
        assert share and all(shard.owns(path) for path in share)
        assert set(source.reads) == set(share)
        shares.append(share)
    assert sorted(path for share in shares for path in share) == everything
    assert sum(map(len, shares)) == len(everything) == 24  # disjoint


# One name written four ways that are equal once NFC-normalised: e, dot below, acute.
NFC_EQUAL = ["e\u0323\u0301.md", "e\u0301\u0323.md", "\u00e9\u0323.md", "\u1eb9\u0301.md"]


def test_keys_equal_after_nfc_are_one_document_and_the_others_duplicates(tmp_path: Path) -> None:
    assert len({unicodedata.normalize("NFC", key) for key in NFC_EQUAL}) == 1
    # Three such groups, so that a choice left to the set's (per-process) order rarely passes by chance.
    extra = {f"{folder}/{key}": page(folder).encode() for folder in ("a", "b", "c") for key in NFC_EQUAL}
    source = FolderListing(write(tmp_path, {"plain.md": page("plain")}), extra=extra)
    found = discover(source, ParseConfig())
    name = unicodedata.normalize("NFC", NFC_EQUAL[0])
    assert paths(found) == [f"a/{name}", f"b/{name}", f"c/{name}", "plain.md"]
    assert {path: e.error_type for path, e in ((e.source_path, e) for e in found.errors)} == {
        f"{folder}/{name}": "DuplicateSourcePath" for folder in ("a", "b", "c")
    }
    assert len(found.errors) == 9  # three duplicates of each
    # The document is the key first in code-point order, whatever order the listing or a set gives.
    first = min(NFC_EQUAL)
    assert set(source.reads) == {"plain.md"} | {f"{folder}/{first}" for folder in ("a", "b", "c")}


@pytest.mark.parametrize("key", ["a//b.md", "a/../b.md", "/c.md", "./d.md", "e/./f.md", "g/"])
def test_a_key_that_is_no_relative_path_is_an_invalid_file_name(tmp_path: Path, key: str) -> None:
    source = FolderListing(write(tmp_path, {"b.md": page("b")}), extra={key: page("x").encode()})
    found = discover(source, ParseConfig())
    assert paths(found) == ["b.md"]
    assert errors(found) == {key: ("discover", "InvalidFileName", None)}
    assert set(source.reads) == {"b.md"}


def test_an_unlistable_key_is_quarantined_only_when_selected(tmp_path: Path) -> None:
    link = Quarantined("discover", "NotARegularFile", "a symbolic link")
    root = write(tmp_path, {"a.md": page("a")})
    found = discover(FolderListing(root, unlistable={"docs/link.md": link}), ParseConfig())
    assert paths(found) == ["a.md"] and errors(found) == {"docs/link.md": ("discover", "NotARegularFile", None)}

    left_out = discover(FolderListing(root, unlistable={"docs/link.md": link}), ParseConfig(exclude=("docs/**",)))
    assert paths(left_out) == ["a.md"] and left_out.errors == [] and left_out.n_skipped == 1


def test_file_too_large_is_decided_from_the_listed_size_without_a_read(tmp_path: Path) -> None:
    root = write(tmp_path, {"small.md": "# s\n\nsmall\n", "big.md": "# b\n\n" + "big text " * 20})
    source = FolderListing(root)
    found = discover(source, ParseConfig(max_file_bytes=100))
    assert paths(found) == ["small.md"]
    assert errors(found) == {"big.md": ("discover", "FileTooLarge", None)}
    assert source.reads == Counter({"small.md": 1})


def test_a_failed_read_is_quarantined_with_the_strictest_scope_known(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "secret.md": page("secret"),
            "secret.md" + SIDECAR: {"access_scope": "aggregate_only"},
            "internal.md": page("internal"),
            "internal.md" + SIDECAR: {"access_scope": "internal_only"},
            "plain.md": page("plain"),
            "fine.md": page("fine"),
        },
    )
    failing = {
        "secret.md": Quarantined("read", "PermissionDenied", "access denied reading object 'secret.md'"),
        "internal.md": Quarantined("read", "ObjectVanished", "object 'internal.md' vanished since the listing"),
        "plain.md": Quarantined("read", "Throttled", "object 'plain.md' still throttled"),
    }
    # The override says less than the sidecar for secret.md, more than nothing for plain.md.
    config = ParseConfig(access_scope_overrides=(("secret.md", "internal_only"), ("plain.md", "redacted")))
    found = discover(FolderListing(root, failing=failing), config)
    assert paths(found) == ["fine.md"]
    assert errors(found) == {
        "secret.md": ("read", "PermissionDenied", "aggregate_only"),
        "internal.md": ("read", "ObjectVanished", "internal_only"),
        "plain.md": ("read", "Throttled", "redacted"),
    }
    shared = {e.source_path: e for e in (error.shared() for error in found.errors)}
    assert AGGREGATE_MARK in shared and "secret.md" not in shared  # its path withheld where shared
    assert "secret" not in shared[AGGREGATE_MARK].reason


# ---------------------------------------------------------------------- what was read, by stamp


def rediscover(source: ListedSource, cache: Path, config: ParseConfig = ParseConfig()) -> Discovery:
    """One run's discovery with the read-object cache kept in `cache`, as stage keeps it."""
    read_objects = ReadObjects(cache)
    found = discover(source, config, read_objects=read_objects)
    read_objects.save("shard")
    return found


def test_an_unchanged_object_is_never_read_again_and_a_changed_one_alone_is(tmp_path: Path) -> None:
    root = write(tmp_path / "src", {f"page{i}.md": page(f"page {i}") for i in range(5)} | {"notes.txt": "Notes."})
    cache = tmp_path / "cache"
    first_source = FolderListing(root)
    first = rediscover(first_source, cache)
    assert sum(first_source.reads.values()) == 6 and first.unread == set()

    again_source = FolderListing(root)
    again = rediscover(again_source, cache)
    assert again_source.reads == Counter()
    assert documents(again) == documents(first)  # titles from the front matter kept, not read again
    assert again.unread == set(paths(first))

    (root / "page3.md").write_text(page("page three, renamed"))
    changed_source = FolderListing(root)
    changed = rediscover(changed_source, cache)
    assert changed_source.reads == Counter({"page3.md": 1})
    assert {s.source_path: s.title for s in changed.sources}["page3.md"] == "page three, renamed"
    assert changed.unread == set(paths(first)) - {"page3.md"}


def test_a_changed_sidecar_is_read_again_alone_and_its_scope_applies(tmp_path: Path) -> None:
    root = write(tmp_path / "src", {"guide.md": page("Guide"), "guide.md" + SIDECAR: {"access_scope": "user_visible"}})
    cache = tmp_path / "cache"
    rediscover(FolderListing(root), cache)
    write(root, {"guide.md" + SIDECAR: {"access_scope": "internal_only"}})
    source = FolderListing(root)
    [guide] = rediscover(source, cache).sources
    assert source.reads == Counter({"guide.md" + SIDECAR: 1})
    assert guide.access_scope == "internal_only" and guide.title == "Guide"


def test_a_listing_discovers_what_the_folder_does_on_a_real_site() -> None:
    root = require_eval(HUGO)
    config = ParseConfig(source_url_template="https://gohugo.io/{path_without_ext}/")
    source = FolderListing(root)
    listed, on_disk = discover(source, config), discover(root, config)
    assert len(listed.sources) > 500

    def described(found: Discovery) -> dict[str, tuple]:
        return {s.source_path: (*documents_row(s), s.source_fields) for s in found.sources}

    assert described(listed) == described(on_disk)
    assert [(e.source_path, e.error_type, e.access_scope) for e in listed.errors] == [
        (e.source_path, e.error_type, e.access_scope) for e in on_disk.errors
    ]
    assert listed.n_skipped == on_disk.n_skipped
    assert sum(source.reads.values()) == len(listed.sources)  # each document read once; there are no sidecars


def test_the_listing_fingerprint_changes_with_a_stamp_or_a_setting_only(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {"a.md": page("a"), "b.md": page("b"), "b.md" + SIDECAR: {"access_scope": "internal_only"}},
    )
    config = ParseConfig()
    source = FolderListing(root)
    before = listing_fingerprint(source, config)
    assert source.reads == Counter()  # from the listing alone

    # Not a change: the same listing in another order, a hidden file, an excluded one.
    assert listing_fingerprint(FolderListing(root, reverse=True), config) == before
    write(root, {".cache/x.md": page("x")})
    assert listing_fingerprint(FolderListing(root), config) == before
    excluding = ParseConfig(exclude=("drafts/**",))
    without_drafts = listing_fingerprint(FolderListing(root), excluding)
    write(root, {"drafts/c.md": page("c")})
    assert listing_fingerprint(FolderListing(root), excluding) == without_drafts

    (root / "drafts" / "c.md").unlink()
    assert listing_fingerprint(FolderListing(root), config) == before
    write(root, {"a.md": page("a, edited")})
    edited = listing_fingerprint(FolderListing(root), config)
    assert edited != before
    write(root, {"a.md": page("a")})  # the same bytes again: the same stamp
    assert listing_fingerprint(FolderListing(root), config) == before
    write(root, {"b.md" + SIDECAR: {"access_scope": "user_visible"}})
    assert listing_fingerprint(FolderListing(root), config) not in (before, edited)
    write(root, {"b.md" + SIDECAR: {"access_scope": "internal_only"}})
    assert listing_fingerprint(FolderListing(root), config) == before
    overridden = ParseConfig(access_scope_overrides=(("a.md", "internal_only"),))
    assert listing_fingerprint(FolderListing(root), overridden) != before


# ---------------------------------------------------------------------- ingest


def test_a_no_text_document_is_not_read_again_under_the_same_settings(tmp_path: Path) -> None:
    root = write(tmp_path / "src", {"section/_index.md": "---\ntitle: Section\n---\n", "page.md": page("page")})
    store = CorpusStore(tmp_path / "store")
    config = ParseConfig(workers=1)
    first_source = FolderListing(root)
    first = ingest(first_source, store, "v1", config=config)
    assert first.created and first.no_text == ["section/_index.md"] and first.n_parsed == 1
    assert first_source.reads == Counter({"section/_index.md": 1, "page.md": 1})
    assert first.manifest.source_dir == first_source.uri

    again_source = FolderListing(root)
    again = ingest(again_source, store, "v2", config=config)
    assert not again.created and again.equals == "v1" and again.no_text == ["section/_index.md"]
    assert again_source.reads == Counter()

    # Other parse settings: what parsed into no text before may not now, so it is read and parsed again.
    rechunked_source = FolderListing(root)
    rechunked = ingest(rechunked_source, store, "v3", config=ParseConfig(workers=1, max_chunk_chars=400))
    assert rechunked.no_text == ["section/_index.md"]
    assert rechunked_source.reads == Counter({"section/_index.md": 1, "page.md": 1})


def test_a_reused_document_parsed_again_is_read_again_and_its_version_equals_the_disk_ingest(tmp_path: Path) -> None:
    root = write(tmp_path / "src", {"a.md": page("a"), "docs/b.md": page("b"), "docs/c.txt": "Plain notes on c."})
    listed_store, disk_store = CorpusStore(tmp_path / "listed"), CorpusStore(tmp_path / "disk")
    plain = ParseConfig(workers=1)
    # A new override makes docs/b.md internal_only: its bytes are unchanged (its stamp known), but its rows must
    # carry the new scope, so it is parsed again from bytes read again.
    overridden = ParseConfig(workers=1, access_scope_overrides=(("docs/b.md", "internal_only"),))
    ingest(FolderListing(root), listed_store, "v1", config=plain)
    source = FolderListing(root)
    listed = ingest(source, listed_store, "v2", config=overridden)
    assert source.reads == Counter({"docs/b.md": 1})
    assert listed.created and (listed.n_parsed, listed.n_reused) == (1, 2)

    ingest(root, disk_store, "v1", config=plain)
    on_disk = ingest(root, disk_store, "v2", config=overridden)
    assert listed.manifest.corpus_hash == on_disk.manifest.corpus_hash
    document_columns = ["doc_id", "doc_content_hash", "access_scope", "title", "text"]
    chunk_columns = ["chunk_id", "doc_id", "text_hash", "start_char", "end_char", "access_scope"]
    for version in ("v1", "v2"):
        assert (
            listed_store.read_documents(version, columns=document_columns)
            .sort("doc_id")
            .equals(disk_store.read_documents(version, columns=document_columns).sort("doc_id"))
        )
        assert (
            listed_store.read_chunks(version, columns=chunk_columns)
            .sort("chunk_id")
            .equals(disk_store.read_chunks(version, columns=chunk_columns).sort("chunk_id"))
        )
    scopes = dict(listed_store.read_documents("v2", columns=["doc_id", "access_scope"]).iter_rows())
    assert scopes == {"a.md": "user_visible", "docs/b.md": "internal_only", "docs/c.txt": "user_visible"}


def test_an_unlistable_key_with_a_sidecar_is_scoped_by_it_as_on_disk(tmp_path: Path) -> None:
    # A git symlink beside its sidecar: the sidecar goes with it (no orphan), and its scope withholds the path.
    root = write(tmp_path, {"a.md": page("a"), "secret.md" + SIDECAR: {"access_scope": "aggregate_only"}})
    link = Quarantined("discover", "NotARegularFile", "a symbolic link")
    found = discover(FolderListing(root, unlistable={"secret.md": link}), ParseConfig())
    assert errors(found) == {"secret.md": ("discover", "NotARegularFile", "aggregate_only")}
    (root / "secret.md").symlink_to("missing.md")  # the same on disk: a broken link beside its sidecar
    assert errors(discover(root, ParseConfig())) == {"secret.md": ("discover", "BrokenSymlink", "aggregate_only")}
