"""discover_sources: naming, hashing, explicit metadata, and quarantine of every kind of unusable file."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pickle
import tempfile
import traceback
from pathlib import Path, PurePosixPath

import pytest

from parsers.discover import _suffix, discover, discover_sources
from parsers.ingest import Shard
from parsers.records import ParseConfig, SourceFields
from parsers.source_tree import selector

from .conftest import SAMPLE_CORPUS

CONFIG = ParseConfig()


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def errors_by_path(errors) -> dict:
    return {error.source_path: error for error in errors}


def test_doc_ids_hashes_and_order(tmp_path):
    write(tmp_path / "b" / "Guide.md", "# Guide\n\nText.\n")
    write(tmp_path / "a.md", "# A\n\nText.\n")
    write(tmp_path / "a.html", "<h1>A</h1><p>Text.</p>")
    write(tmp_path / "notes.TXT", "Plain text.\n")
    sources, errors = discover_sources(tmp_path, CONFIG)
    assert errors == []
    assert [s.source_path for s in sources] == ["a.html", "a.md", "b/Guide.md", "notes.TXT"]
    # doc_id keeps case and extension, so a.md and a.html are two documents
    assert [s.doc_id for s in sources] == ["a.html", "a.md", "b/Guide.md", "notes.TXT"]
    assert [s.filetype for s in sources] == ["html", "md", "md", "txt"]
    guide = sources[2]
    raw = (tmp_path / "b" / "Guide.md").read_bytes()
    assert guide.content_hash == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert guide.size_bytes == len(raw)
    assert all(s.raw is None for s in sources)  # bytes are dropped once hashed: the parser reads them again
    assert guide.path == (tmp_path / "b" / "Guide.md").absolute()
    assert guide.access_scope == "user_visible" and guide.title is None


def test_hidden_skipped_unsupported_recorded(tmp_path):
    write(tmp_path / ".git" / "config.md", "# not a doc\n")
    write(tmp_path / ".draft.md", "# hidden\n")
    write(tmp_path / "logo.svg", "<svg/>")
    write(tmp_path / "Makefile", "all:\n")
    write(tmp_path / "ok.md", "# ok\n")
    sources, errors = discover_sources(tmp_path, CONFIG)
    assert [s.source_path for s in sources] == ["ok.md"]
    by_path = errors_by_path(errors)
    assert set(by_path) == {"Makefile", "logo.svg"}
    assert by_path["logo.svg"].error_type == "UnsupportedFileType"
    assert "'.svg'" in by_path["logo.svg"].reason and ".md" in by_path["logo.svg"].reason


def test_sidecar_overrides_front_matter(tmp_path):
    write(
        tmp_path / "fm.md",
        '---\ndoc_id: handbook/intro\ntitle: "Intro to Acme"\naccess_scope: internal_only\nauthor: x\n---\n'
        "# Heading\n\nBody.\n",
    )
    write(tmp_path / "both.md", "---\ndoc_id: from-front-matter\ntitle: FM title\n---\nBody.\n")
    write(tmp_path / "both.md.citekeeper.json", json.dumps({"doc_id": "from-sidecar", "access_scope": "internal_only"}))
    sources, errors = discover_sources(tmp_path, CONFIG)
    assert errors == []
    by_path = {s.source_path: s for s in sources}
    assert set(by_path) == {"both.md", "fm.md"}  # the sidecar is not a document
    assert (by_path["fm.md"].doc_id, by_path["fm.md"].title, by_path["fm.md"].access_scope) == (
        "handbook/intro",
        "Intro to Acme",
        "internal_only",
    )
    both = by_path["both.md"]
    assert (both.doc_id, both.title, both.access_scope) == ("from-sidecar", "FM title", "internal_only")


def test_front_matter_after_byte_order_mark(tmp_path):
    write(tmp_path / "bom.md", "\ufeff---\ndoc_id: with-bom\n---\n# T\n".encode("utf-8"))
    (source,), errors = discover_sources(tmp_path, CONFIG)
    assert errors == [] and source.doc_id == "with-bom"


@pytest.mark.parametrize(
    ("front_matter", "expected"),
    [
        ('title: "A \\"quoted\\" title"', {"title": 'A "quoted" title'}),
        ("title: 'It''s here'", {"title": "It's here"}),
        ("title: >\n  A folded\n  long title", {"title": "A folded long title"}),
        ("doc_id: 007\ntitle: No", {"doc_id": "007", "title": "No"}),  # kept as written, not 7 and False
        (
            "title: 运维手册\ndoc_id: 手册/简介\naccess_scope: internal_only",
            {"title": "运维手册", "doc_id": "手册/简介", "access_scope": "internal_only"},
        ),
        ("title: A\r\ndoc_id: crlf\r\nauthor: [x, y]", {"title": "A", "doc_id": "crlf"}),  # unknown keys ignored
        # a title that is empty or not plain text leaves the title to the parser's first heading
        ("title: ''\ndoc_id: t", {"doc_id": "t"}),
        ("title: [a, b]\ndoc_id: t", {"doc_id": "t"}),
    ],
)
def test_front_matter_is_yaml(tmp_path, front_matter, expected):
    newline = "\r\n" if "\r\n" in front_matter else "\n"
    write(tmp_path / "fm.md", newline.join(["---", front_matter, "---", "# Heading", ""]))
    (source,), errors = discover_sources(tmp_path, CONFIG)
    assert errors == []
    explicit = {"doc_id": source.doc_id, "title": source.title, "access_scope": source.access_scope}
    assert explicit == {"doc_id": "fm.md", "title": None, "access_scope": "user_visible"} | expected


@pytest.mark.parametrize(
    ("front_matter", "reason"),
    [
        # the keys that decide identity and access fail closed on anything but plain text
        ("doc_id: [a, b]", "front matter line 2: doc_id must be plain text, not a list"),
        (
            "title: T\naccess_scope:\n  level: internal_only",
            "front matter line 3: access_scope must be plain text, not a mapping",
        ),
        (
            "doc_id: ok\ntitle: 'unclosed",
            "front matter line 3, column 17: invalid YAML: while scanning a quoted scalar found unexpected end",
        ),
        ("title: a: b", "front matter line 2, column 9: invalid YAML: mapping values are not allowed here"),
        ("title: ok\ndoc_id: bell\x07", "front matter line 3: invalid YAML: character U+0007 is not allowed"),
        ("access_scope:internal_only", "front matter must be `key: value` lines (a space after each colon)"),
        ("access_scope: secret", "front matter: access_scope 'secret' is not one of"),
        ("doc_id: ''", "front matter: doc_id must be a non-empty string"),
        # YAML alone would keep the last one: an internal document must not turn user-visible by accident
        (
            "access_scope: internal\naccess_scope: user_visible",
            "front matter line 3, column 1: invalid YAML: key 'access_scope' is given twice",
        ),
    ],
)
def test_invalid_front_matter_quarantines_the_document(tmp_path, front_matter, reason):
    write(tmp_path / "doc.md", f"---\n{front_matter}\n---\n# D\n")
    sources, errors = discover_sources(tmp_path, CONFIG)
    assert sources == []
    (error,) = errors
    assert (error.source_path, error.stage, error.error_type) == ("doc.md", "discover", "InvalidMetadata")
    assert error.reason.startswith(reason), error.reason


def test_a_leading_rule_is_not_front_matter(tmp_path):
    write(tmp_path / "rule.md", "---\nJust a paragraph: between rules.\n---\n# T\n")
    (source,), errors = discover_sources(tmp_path, CONFIG)
    assert errors == [] and (source.doc_id, source.title) == ("rule.md", None)


def test_sample_corpus_internal_document():
    sources, errors = discover_sources(SAMPLE_CORPUS / "v1", CONFIG)
    assert errors == []
    scopes = {s.doc_id: s.access_scope for s in sources}
    assert scopes["internal/db-failover-runbook.md"] == "internal_only"
    assert [doc_id for doc_id, scope in scopes.items() if scope == "internal_only"] == [
        "internal/db-failover-runbook.md"
    ]
    assert {s.filetype for s in sources} == {"md", "html", "pdf", "docx", "txt"}


def test_access_scope_from_config_globs(tmp_path):
    write(tmp_path / "ops" / "runbook.md", "# R\n")
    write(tmp_path / "ops" / "public.md", "# P\n")
    write(tmp_path / "ops" / "public.md.citekeeper.json", '{"access_scope": "user_visible"}')
    write(tmp_path / "guide.md", "# G\n")
    config = ParseConfig(access_scope_overrides=(("ops/*", "internal_only"),))
    sources, _ = discover_sources(tmp_path, config)
    assert {s.source_path: s.access_scope for s in sources} == {
        "guide.md": "user_visible",
        "ops/public.md": "internal_only",  # a sidecar saying user_visible does not undo the glob
        "ops/runbook.md": "internal_only",
    }


SCOPE_SOURCES = ("front matter", "sidecar", "override")
# The four visibility levels as docs/ingest.md orders them, from the most visible to the least.
VISIBILITY = ("user_visible", "redacted", "internal_only", "aggregate_only")


@pytest.mark.parametrize(
    "scopes",
    list(itertools.product((None, *VISIBILITY), repeat=3)),
    ids=lambda scopes: "-".join(scope or "unset" for scope in scopes),
)
def test_sources_of_scope_that_disagree_give_the_strictest(tmp_path, scopes):
    """Every combination of front matter, sidecar and override (each unset or one of the four levels); the
    oracle: the least visible level any of them says, else the default."""
    front_matter, sidecar, override = scopes
    head = f"---\naccess_scope: {front_matter}\n---\n" if front_matter else ""
    write(tmp_path / "doc.md", head + "# Doc\n\nBody.\n")
    if sidecar:
        write(tmp_path / "doc.md.citekeeper.json", json.dumps({"access_scope": sidecar}))
    for default in ("user_visible", "internal_only"):
        config = ParseConfig(
            default_access_scope=default, access_scope_overrides=(("doc.*", override),) if override else ()
        )
        (source,), errors = discover_sources(tmp_path, config)
        said = [VISIBILITY.index(scope) for scope in scopes if scope]
        expected = VISIBILITY[max(said)] if said else default
        assert errors == [] and source.access_scope == expected, dict(zip(SCOPE_SOURCES, scopes))


@pytest.mark.parametrize(
    ("sidecar", "reason_part"),
    [
        ("{not json", "not valid UTF-8 JSON"),
        ('{"access_scope": "secret"}', "access_scope 'secret'"),
        ('{"acess_scope": "internal_only"}', "unknown keys"),
        ('["internal_only"]', "JSON object"),
        ('{"doc_id": ""}', "non-empty string"),
    ],
)
def test_invalid_sidecar_quarantines_the_document(tmp_path, sidecar, reason_part):
    write(tmp_path / "doc.md", "# D\n")
    write(tmp_path / "doc.md.citekeeper.json", sidecar)
    sources, errors = discover_sources(tmp_path, CONFIG)
    assert sources == []
    (error,) = errors
    assert (error.source_path, error.stage, error.error_type) == ("doc.md", "discover", "InvalidMetadata")
    assert reason_part in error.reason and "doc.md.citekeeper.json" in error.reason


def test_a_sidecar_that_is_no_file_quarantines_the_document(tmp_path):
    """Only a name with nothing there is no sidecar: a link to nowhere or a folder there fails closed."""
    write(tmp_path / "plain.md", "# P\n")
    write(tmp_path / "dangling.md", "# D\n")
    (tmp_path / "dangling.md.citekeeper.json").symlink_to(tmp_path / "missing.json")
    write(tmp_path / "folder.md", "# F\n")
    (tmp_path / "folder.md.citekeeper.json").mkdir()
    write(tmp_path / "linked" / "note.md", "# N\n")
    write(tmp_path / "linked" / "note.md.citekeeper.json", '{"access_scope": "internal_only"}')
    (tmp_path / "alias").symlink_to(tmp_path / "linked", target_is_directory=True)
    sources, errors = discover_sources(tmp_path, CONFIG)
    scopes = {s.source_path: s.access_scope for s in sources}
    assert scopes == {"alias/note.md": "internal_only", "linked/note.md": "internal_only", "plain.md": "user_visible"}
    reasons = {e.source_path: (e.error_type, e.reason) for e in errors}
    assert reasons.pop("dangling.md.citekeeper.json")[0] == "BrokenSymlink"  # the walk reports the link too
    assert reasons == {
        "dangling.md": (
            "InvalidMetadata",
            "sidecar dangling.md.citekeeper.json is a broken symlink; the document is not ingested until it is fixed",
        ),
        "folder.md": (
            "InvalidMetadata",
            "sidecar folder.md.citekeeper.json is not a regular file; the document is not ingested until it is fixed",
        ),
    }


@pytest.mark.parametrize(
    "front_matter",
    ["access_groups: null\nsource_url: ~\nsource: {url: null}", "- a\n- b", "author: x", "[]", "{}"],
)
def test_front_matter_without_metadata_gives_none(tmp_path, front_matter):
    write(tmp_path / "doc.md", f"---\n{front_matter}\n---\n# D\n")
    (source,), errors = discover_sources(tmp_path, CONFIG)
    assert errors == []
    assert (source.doc_id, source.title, source.access_scope) == ("doc.md", None, "user_visible")
    assert source.source_fields == SourceFields()


@pytest.mark.parametrize(
    "source_path", ["a.md", "d/a.MD", "a.tar.gz", ".md", "d/.md", "a.", "a..", "...", "..a", "a", "d.x/a", "é/ü.md"]
)
def test_format_suffix_is_the_path_suffix(source_path):
    assert _suffix(source_path) == PurePosixPath(source_path).suffix


def test_orphan_sidecar_and_duplicate_doc_id(tmp_path):
    write(tmp_path / "gone.md.citekeeper.json", '{"access_scope": "internal_only"}')
    write(tmp_path / "a.md", "# A\n")
    write(tmp_path / "b.md", "---\ndoc_id: a.md\n---\n# B\n")
    sources, errors = discover_sources(tmp_path, CONFIG)
    assert [s.source_path for s in sources] == ["a.md"]
    by_path = errors_by_path(errors)
    assert by_path["gone.md.citekeeper.json"].error_type == "OrphanSidecar"
    assert by_path["b.md"].error_type == "DuplicateDocId" and "a.md" in by_path["b.md"].reason


def test_empty_and_oversize_files(tmp_path):
    write(tmp_path / "empty.md", b"")
    write(tmp_path / "big.txt", b"word " * 300)
    write(tmp_path / "fits.txt", b"word " * 100)
    sources, errors = discover_sources(tmp_path, ParseConfig(max_file_bytes=1000))
    assert [s.source_path for s in sources] == ["fits.txt"]
    by_path = errors_by_path(errors)
    assert by_path["empty.md"].error_type == "EmptyFile" and "empty" in by_path["empty.md"].reason
    assert by_path["big.txt"].error_type == "FileTooLarge"
    assert "1500 bytes" in by_path["big.txt"].reason and "1000" in by_path["big.txt"].reason


NOBODY = 65534  # the unprivileged user root drops to below


def discover_unprivileged(root: Path) -> tuple[list, list]:
    """discover_sources(root) as a user who cannot read mode-000 files: this process when it is such a user, else
    (root reads any file, and CI runs as root) a forked child that drops to `nobody` first. The child imports and
    executes nothing anew, so the interpreter and the venv need not be readable by `nobody`; the tree must be."""
    if os.geteuid() != 0:
        return discover_sources(root, CONFIG)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(discover_sources(root, CONFIG), out)
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        found = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged discovery failed (its traceback is above)"
    return pickle.loads(found)


def test_unreadable_file_is_quarantined_and_the_others_ingest():
    with tempfile.TemporaryDirectory(prefix="citekeeper-mode000-") as tmp:
        root = Path(tmp)
        readable = [write(root / "ok.md", "# OK\n\nReadable.\n"), write(root / "docs" / "guide.md", "# Guide\n")]
        for path in (root, root / "docs", *readable):  # whatever the umask (mkdtemp makes 0700): `nobody` reads them
            path.chmod(0o755)
        write(root / "secret.md", "# S\n").chmod(0)
        sources, errors = discover_unprivileged(root)
    assert [source.source_path for source in sources] == ["docs/guide.md", "ok.md"]
    assert [(e.source_path, e.stage, e.error_type, e.reason) for e in errors] == [
        ("secret.md", "read", "PermissionDenied", "cannot read file: Permission denied")
    ]


def test_fifo_is_not_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.md")  # reading it would block forever
    write(tmp_path / "ok.md", "# ok\n")
    sources, errors = discover_sources(tmp_path, CONFIG)
    assert [s.source_path for s in sources] == ["ok.md"]
    assert [(e.source_path, e.error_type) for e in errors] == [("pipe.md", "NotARegularFile")]


def test_symlinks(tmp_path):
    root = tmp_path / "root"
    outside = write(tmp_path / "outside" / "leak.md", "# secret outside the root\n")
    write(root / "docs" / "real.md", "# Real\n\nText.\n")
    (root / "escape.md").symlink_to(outside)
    (root / "escape_dir").symlink_to(outside.parent, target_is_directory=True)
    (root / "self.md").symlink_to(root / "self.md")
    (root / "ping.md").symlink_to(root / "pong.md")
    (root / "pong.md").symlink_to(root / "ping.md")
    (root / "docs" / "up").symlink_to(root, target_is_directory=True)
    (root / "dangling.md").symlink_to(root / "missing.md")
    (root / "alias.md").symlink_to(root / "docs" / "real.md")  # inside the root: an ordinary document
    sources, errors = discover_sources(root, CONFIG)
    assert [s.source_path for s in sources] == ["alias.md", "docs/real.md"]
    assert sources[0].content_hash == sources[1].content_hash
    kinds = {e.source_path: (e.stage, e.error_type) for e in errors}
    assert kinds == {
        "dangling.md": ("discover", "BrokenSymlink"),
        "docs/up": ("discover", "SymlinkLoop"),
        "escape.md": ("discover", "SymlinkOutsideRoot"),
        "escape_dir": ("discover", "SymlinkOutsideRoot"),
        "ping.md": ("discover", "SymlinkLoop"),
        "pong.md": ("discover", "SymlinkLoop"),
        "self.md": ("discover", "SymlinkLoop"),
    }
    assert all(e.reason for e in errors)


def test_symlinked_directory_inside_root_is_followed(tmp_path):
    write(tmp_path / "shared" / "note.md", "# Note\n")
    (tmp_path / "linked").symlink_to(tmp_path / "shared", target_is_directory=True)
    sources, errors = discover_sources(tmp_path, CONFIG)
    assert errors == []
    assert [s.source_path for s in sources] == ["linked/note.md", "shared/note.md"]


def test_directory_links_into_each_other_terminate(tmp_path):
    write(tmp_path / "a" / "x.md", "# X\n")
    write(tmp_path / "b" / "y.md", "# Y\n")
    (tmp_path / "a" / "to_b").symlink_to(tmp_path / "b", target_is_directory=True)
    (tmp_path / "b" / "to_a").symlink_to(tmp_path / "a", target_is_directory=True)
    sources, errors = discover_sources(tmp_path, CONFIG)
    assert [s.source_path for s in sources] == ["a/to_b/y.md", "a/x.md", "b/to_a/x.md", "b/y.md"]
    assert [(e.source_path, e.error_type) for e in errors] == [
        ("a/to_b/to_a", "SymlinkLoop"),
        ("b/to_a/to_b", "SymlinkLoop"),
    ]


def test_missing_root_is_a_clear_error(tmp_path):
    with pytest.raises(NotADirectoryError, match="not a directory"):
        discover_sources(tmp_path / "nope", CONFIG)


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*.md", ["a.md", ".md"], ["d/a.md", "a.mdx"]),
        ("**/*.md", ["a.md", "d/a.md", "d/e/a.md"], ["a.pdf", "d/a.md/x"]),
        ("drafts/**", ["drafts/a.md", "drafts/x/y.pdf"], ["drafts", "old/drafts/a.md"]),
        ("a/**/b.md", ["a/b.md", "a/x/b.md", "a/x/y/b.md"], ["a/xb.md", "b.md"]),
        ("**", ["a", "a/b/c"], []),
        ("doc?.txt", ["doc1.txt"], ["doc12.txt", "doc/.txt"]),
        ("[ab]*.md", ["a1.md", "b.md"], ["c.md"]),
        ("[!ab]*.md", ["c.md"], ["a.md"]),
        ("d[!x]e.md", ["dye.md"], ["d/e.md"]),  # a class never matches the separator
        ("[a.md", ["[a.md"], ["a.md"]),  # an unclosed bracket is literal
        ("notes (v2)+.md", ["notes (v2)+.md"], ["notes v2.md"]),
    ],
)
def test_glob_flavour(pattern, matches, misses):
    selected = selector([pattern], [])
    assert [path for path in matches if selected(path)] == matches, pattern
    assert [path for path in misses if selected(path)] == [], pattern


def test_include_and_exclude_skip_files_instead_of_quarantining_them(tmp_path):
    write(tmp_path / "guide.md", "# Guide\n")
    write(tmp_path / "docs" / "api.md", "# API\n")
    write(tmp_path / "docs" / "api.md.citekeeper.json", '{"access_scope": "internal_only"}')
    write(tmp_path / "docs" / "logo.svg", "<svg/>")  # no parser: quarantined unless left out
    write(tmp_path / "drafts" / "wip.md", "# WIP\n")
    write(tmp_path / "drafts" / "broken.pdf", b"not a pdf")
    write(tmp_path / "drafts" / "orphan.md.citekeeper.json", "{}")
    (tmp_path / "drafts" / "dangling.md").symlink_to(tmp_path / "drafts" / "missing.md")

    everything = discover(tmp_path, CONFIG)
    assert {e.source_path for e in everything.errors} == {
        "docs/logo.svg",
        "drafts/orphan.md.citekeeper.json",
        "drafts/dangling.md",
    }
    assert everything.n_skipped == 0

    excluded = discover(tmp_path, ParseConfig(exclude=("drafts/**", "**/*.svg")))
    assert [s.source_path for s in excluded.sources] == ["docs/api.md", "guide.md"]
    assert excluded.errors == [] and excluded.n_skipped == 5
    assert excluded.sources[0].access_scope == "internal_only"  # its sidecar goes with it, not counted

    included = discover(tmp_path, ParseConfig(include=("**/*.md",), exclude=("drafts/**",)))
    assert [s.source_path for s in included.sources] == ["docs/api.md", "guide.md"]
    assert included.errors == [] and included.n_skipped == 5

    # a file the user included is still quarantined when it cannot be used
    unsupported = discover(tmp_path, ParseConfig(include=("docs/**",)))
    assert [(e.source_path, e.error_type) for e in unsupported.errors] == [("docs/logo.svg", "UnsupportedFileType")]
    assert [s.source_path for s in unsupported.sources] == ["docs/api.md"] and unsupported.n_skipped == 5


def test_a_shard_reads_only_the_files_it_owns(tmp_path, monkeypatch):
    for i in range(12):
        write(tmp_path / f"d{i % 3}" / f"doc-{i:02d}.md", f"# Doc {i}\n")
    write(tmp_path / "skip.tmp", "x")
    read = []
    real_open = Path.open

    def recording_open(path, *args, **kwargs):
        read.append(path.name)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(Path, "open", recording_open)
    whole = discover(tmp_path, ParseConfig(exclude=("*.tmp",)))
    read.clear()
    shards = [discover(tmp_path, ParseConfig(exclude=("*.tmp",)), owns=Shard(i, 3).owns) for i in range(3)]
    paths = [[s.source_path for s in shard.sources] for shard in shards]
    assert sorted(p for shard in paths for p in shard) == [s.source_path for s in whole.sources]
    owned = [p.rsplit("/", 1)[1] for shard in paths for p in shard]
    assert all(paths) and sorted(read) == sorted(owned)  # a missing sidecar is found by stat, never opened
    assert sum(shard.n_skipped for shard in shards) == whole.n_skipped == 1
