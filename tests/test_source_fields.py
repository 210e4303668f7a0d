"""Source fields on every document (issue 31): read from real front matter (Hugo, MkDocs, dumi), from a sidecar and
from settings (a URL template, defaults by glob), stored on documents and chunks through `citekeeper ingest` and
the Dagster ingest asset; the precedence, the refusals, and a changed date as a metadata change (docs/ingest.md,
"Source fields")."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from click.testing import CliRunner, Result

from assets import corpus as ingest_assets
from assets.partitions import corpus_versions
from citekeeper.sources import parse_timestamp
from citekeeper.store import CorpusStore
from parsers.records import SOURCE_FIELD_NAMES, SourceFields
from pipelines.cli import main
from pipelines.definitions import settings_from_env
from tests.conftest import REAL_CORPORA, require_eval
from tests.dagster_settings import settings

TEMPLATE = "https://docs.example.com/{path_without_ext}/"
SOURCE_FIELDS = (
    "source_type",
    "source_url",
    "published_at",
    "updated_at",
    "authority",
    "source_version",
    "summary",
    "access_groups",
    "scope_labels",
)
RUNNERS = ("cli", "dagster")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def cli_options(
    include=(), source_url_template=None, source_defaults=(), authority_levels=None, source_fields_map=None
) -> list:
    """IngestResource fields as `citekeeper ingest` options."""
    options = [option for glob in include for option in ("--include", glob)]
    options += ["--source-url-template", source_url_template] if source_url_template else []
    options += [
        option for glob, name, value in source_defaults for option in ("--source-default", glob, f"{name}={value}")
    ]
    options += ["--authority-levels", ",".join(authority_levels)] if authority_levels else []
    options += [
        o for name, keys in (source_fields_map or {}).items() for o in ("--source-field", f"{name}={','.join(keys)}")
    ]
    return options


def ingest_with(runner: str, source: Path, store_dir: Path, version: str, **fields) -> pl.DataFrame:
    """Ingest `source` as `version` through the CLI or the Dagster asset, with IngestResource `fields`; the
    version's stored documents (the CLI's read back from `export documents`), one row per source_path."""
    if runner == "cli":
        result = run(
            "ingest", source, "--store", store_dir, "--version", version, "--workers", "1", *cli_options(**fields)
        )
        assert result.exit_code == 0 and f"created corpus version {version}" in result.output, result.output
        out = store_dir.parent / f"documents-{version}.parquet"
        assert run("export", "documents", "--version", version, "--out", out, "--store", store_dir).exit_code == 0
        return pl.read_parquet(out).sort("source_path")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(corpus_versions.name, [version])
    resources = settings(store_dir=str(store_dir), source_dir=str(source), parse_workers=1, **fields).resources()
    dg.materialize([ingest_assets.ingested_corpus], instance=instance, partition_key=version, resources=resources)
    return CorpusStore(store_dir).read_documents(version).sort("source_path")


def fields_of(documents: pl.DataFrame, source_path: str) -> dict:
    return documents.filter(pl.col("source_path") == source_path).select(SOURCE_FIELDS).row(0, named=True)


def assert_chunks_carry(store_dir: Path, version: str, documents: pl.DataFrame) -> None:
    """Every chunk row carries its document's source fields."""
    chunks = CorpusStore(store_dir).read_chunks(version).select("doc_id", *SOURCE_FIELDS).unique()
    assert chunks.sort("doc_id").equals(documents.select("doc_id", *SOURCE_FIELDS).sort("doc_id"))


# ---------------------------------------------------------------------- real front matter, read in place

NONE = dict.fromkeys(SOURCE_FIELDS)
# Real pages (include globs on the release, read where it lies) and what their front matter says.
REAL_PAGES = {
    "hugo-docs/v0.141.0": {
        "_index.md": NONE
        | {
            "published_at": utc("2017-03-02T12:00:00-05:00"),  # date: with an offset
            "source_url": "https://docs.example.com/_index/",
        },
        "showcase/letsencrypt/index.md": NONE
        | {
            "published_at": utc("2018-03-13T00:00:00+00:00"),  # date: 2018-03-13
            "source_url": "https://docs.example.com/showcase/letsencrypt/index/",
        },
        # url: /commands/hugo/, a site-relative URL resolved against the template
        "commands/hugo.md": NONE | {"source_url": "https://docs.example.com/commands/hugo/"},
    },
    "mkdocs-material/9.7.6": {  # the blog plugin's `date:`, a date or a map of created and updated
        "blog/posts/mkdocs-2.0.md": NONE
        | {
            "published_at": utc("2026-02-18T00:00:00+00:00"),
            "updated_at": utc("2026-03-10T00:00:00+00:00"),
            "source_url": "https://docs.example.com/blog/posts/mkdocs-2.0/",
        },
        "blog/posts/zensical.md": NONE
        | {
            "published_at": utc("2025-11-05T00:00:00+00:00"),
            "source_url": "https://docs.example.com/blog/posts/zensical/",
        },
    },
    "antd-docs-zh/6.6.1": {  # dumi: date: 2023-11-21 beside title, author and Chinese prose
        "blog/css-var-plan.zh-CN.md": NONE
        | {
            "published_at": utc("2023-11-21T00:00:00+00:00"),
            "source_url": "https://docs.example.com/blog/css-var-plan.zh-CN/",
        },
        "react/introduce.zh-CN.md": NONE | {"source_url": "https://docs.example.com/react/introduce.zh-CN/"},
    },
}


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("release", sorted(REAL_PAGES))
def test_real_front_matter_gives_dates_and_urls(runner: str, release: str, tmp_path: Path) -> None:
    source = require_eval(REAL_CORPORA / release)
    expected = REAL_PAGES[release]
    store_dir = tmp_path / "store"
    documents = ingest_with(runner, source, store_dir, "v1", include=list(expected), source_url_template=TEMPLATE)
    assert documents["source_path"].to_list() == sorted(expected)
    for source_path, fields in expected.items():
        assert fields_of(documents, source_path) == fields, source_path
    assert_chunks_carry(store_dir, "v1", documents)


# ---------------------------------------------------------------------- sidecar and settings


def sidecar(path: Path, values: dict) -> None:
    path.with_name(path.name + ".citekeeper.json").write_text(json.dumps(values, ensure_ascii=False))


def copy_page(release: str, source_path: str, to: Path) -> Path:
    """A real page copied into a tree of the test's own, where a sidecar can be put beside it."""
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(require_eval(REAL_CORPORA / release / source_path), to)
    return to


@pytest.mark.parametrize("runner", RUNNERS)
def test_sidecar_beats_front_matter_and_settings_fill_the_rest(runner: str, tmp_path: Path) -> None:
    root = tmp_path / "src"
    post = copy_page("mkdocs-material/9.7.6", "blog/posts/mkdocs-2.0.md", root / "blog" / "mkdocs-2.0.md")
    sidecar(
        post,
        {
            "updated_at": "2026-04-01 09:30:00 +0200",
            "source_type": "blog",
            "authority": "official_example",
            "version": "9.7.6",
            "scope": ["mkdocs", "博客"],
            "access_groups": ["staff"],
            "summary": "MkDocs 2.0 与 Material 的关系",
        },
    )
    hugo = copy_page("hugo-docs/v0.141.0", "commands/hugo.md", root / "commands" / "hugo.md")
    sidecar(hugo, {"source_url": "https://gohugo.io/commands/hugo/"})  # over its front matter's url: /commands/hugo/
    copy_page("antd-docs-zh/6.6.1", "blog/css-var-plan.zh-CN.md", root / "博客" / "css-var-plan.md")

    store_dir = tmp_path / "store"
    defaults = [["博客/*", "authority", "community"], ["*", "source_type", "docs"], ["*", "authority", "official_spec"]]
    documents = ingest_with(runner, root, store_dir, "v1", source_url_template=TEMPLATE, source_defaults=defaults)

    assert fields_of(documents, "blog/mkdocs-2.0.md") == {
        "source_type": "blog",
        "source_url": "https://docs.example.com/blog/mkdocs-2.0/",  # sidecar; template
        "published_at": utc("2026-02-18T00:00:00+00:00"),  # front matter date.created
        "updated_at": utc("2026-04-01T07:30:00+00:00"),  # the sidecar's, over the front matter's date.updated
        "authority": "official_example",
        "source_version": "9.7.6",
        "summary": "MkDocs 2.0 与 Material 的关系",
        "access_groups": ["staff"],
        "scope_labels": ["mkdocs", "博客"],
    }
    assert fields_of(documents, "commands/hugo.md") == NONE | {
        "source_url": "https://gohugo.io/commands/hugo/",
        "source_type": "docs",
        "authority": "official_spec",
    }
    assert fields_of(documents, "博客/css-var-plan.md") == NONE | {  # the first matching glob per field
        "source_url": "https://docs.example.com/%E5%8D%9A%E5%AE%A2/css-var-plan/",  # percent-encoded path
        "published_at": utc("2023-11-21T00:00:00+00:00"),
        "source_type": "docs",
        "authority": "community",
    }
    assert_chunks_carry(store_dir, "v1", documents)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_access_groups_of_front_matter_and_sidecar_narrow_to_the_shared_ones(tmp_path: Path) -> None:
    root = tmp_path / "src"
    sidecar(
        write(root / "shared.md", "---\naccess_groups: [staff, eng]\n---\n# Shared\n\nText.\n"),
        {"access_groups": ["eng", "ops"]},
    )
    sidecar(write(root / "none.md", "---\naccess_groups: staff\n---\n# None\n\nText.\n"), {"access_groups": ["ops"]})
    result = run("ingest", root, "--store", tmp_path / "store", "--version", "v1", "--workers", "1")
    assert (
        "quarantined none.md: discover: InvalidMetadata: access_groups ['staff'] and ['ops'] share no group"
        in result.output
    )
    documents = CorpusStore(tmp_path / "store").read_documents("v1")
    assert documents.select("source_path", "access_groups").rows() == [("shared.md", ["eng"])]


BAD_METADATA = {
    "sidecar-date.md": (
        "# A\n\nText.\n",
        {"published_at": "soon"},
        "sidecar sidecar-date.md.citekeeper.json: published_at 'soon' is not a date",
    ),
    "sidecar-authority.md": (
        "# A\n\nText.\n",
        {"authority": "official"},
        "sidecar sidecar-authority.md.citekeeper.json: authority 'official' is not one of the authority levels",
    ),
    "sidecar-groups.md": (
        "# A\n\nText.\n",
        {"access_groups": "staff"},
        "sidecar sidecar-groups.md.citekeeper.json: access_groups must be a list of strings",
    ),
    "sidecar-both.md": (
        "# A\n\nText.\n",
        {"scope": ["a"], "scope_labels": ["b"]},
        "sidecar sidecar-both.md.citekeeper.json: scope and scope_labels name one field",
    ),
    "fm-date.md": (
        "---\ntitle: A\nmodified: last tuesday\n---\nText.\n",
        None,
        "front matter line 3: modified (updated_at) 'last tuesday' is not a date",
    ),
    "fm-authority.md": (
        "---\nauthority: official_spec\n---\nText.\n",
        None,
        "front matter line 2: authority 'official_spec' is not one of the authority levels ['spec', 'blog']",
    ),
    "fm-groups.md": (
        "---\naccess_groups: {team: staff}\n---\nText.\n",
        None,
        "front matter line 2: access_groups must be a list of group names",
    ),
}


def test_bad_source_fields_quarantine_their_document_naming_the_key(tmp_path: Path) -> None:
    root = tmp_path / "src"
    for name, (text, values, _) in BAD_METADATA.items():
        page = write(root / name, text)
        if values is not None:
            sidecar(page, values)
    # A key of another kind is not that field (Jekyll's `published: false`); a TOML datetime is read as one.
    write(root / "jekyll.md", "---\npublished: false\ndate: 2024-01-02 10:00:00 +0100\n---\nText.\n")
    write(
        root / "hugo.md", '+++\ntitle = "TOML"\ndate = 2024-01-02T10:00:00+01:00\nmodified = 2024-02-03\n+++\nText.\n'
    )
    write(root / "levels.md", "---\nauthority: blog\nmodified: 2024-03-04T05:06:07Z\nlastmod: 2020-01-01\n---\nText.\n")
    result = run(
        "ingest",
        root,
        "--store",
        tmp_path / "store",
        "--version",
        "v1",
        "--workers",
        "1",
        "--authority-levels",
        "spec,blog",
        "--source-field",
        "updated_at=modified",
    )
    assert result.exit_code == 0, result.output
    for name, (_, _, reason) in BAD_METADATA.items():
        assert f"quarantined {name}: discover: InvalidMetadata: {reason}" in result.output, name
    documents = CorpusStore(tmp_path / "store").read_documents("v1").sort("source_path")
    assert documents.select("source_path", "published_at", "updated_at", "authority").rows() == [
        ("hugo.md", utc("2024-01-02T09:00:00+00:00"), utc("2024-02-03T00:00:00+00:00"), None),
        ("jekyll.md", utc("2024-01-02T09:00:00+00:00"), None, None),
        ("levels.md", None, utc("2024-03-04T05:06:07+00:00"), "blog"),  # updated_at from `modified` only
    ]


@pytest.mark.parametrize(
    ("written", "instant"),
    [
        ("2024-01-02", "2024-01-02T00:00:00+00:00"),  # a date alone: midnight UTC
        ("2024-01-02T10:00:00", "2024-01-02T10:00:00+00:00"),  # no offset: UTC
        ("2024-01-02T10:00:00Z", "2024-01-02T10:00:00+00:00"),
        ("2017-03-02T12:00:00-05:00", "2017-03-02T17:00:00+00:00"),
        ("2024-01-02 10:00:00 +0100", "2024-01-02T09:00:00+00:00"),  # Jekyll
        ("2024-01-02 10:00 -0230", "2024-01-02T12:30:00+00:00"),
        (" 2024-01-02T10:00:00.250+08:00 ", "2024-01-02T02:00:00.250+00:00"),
    ],
)
def test_dates_are_read_as_utc_instants(written: str, instant: str) -> None:
    assert parse_timestamp(written) == datetime.fromisoformat(instant)


@pytest.mark.parametrize(
    "written", ["soon", "2024", "10:00:00", "2024-13-01", "2024年1月2日", "2024-01-02 10:00:00 CET"]
)
def test_a_date_that_does_not_parse_is_refused(written: str) -> None:
    with pytest.raises(ValueError, match="is not a date: write ISO 8601"):
        parse_timestamp(written)


# ---------------------------------------------------------------------- a metadata change


def test_a_changed_date_is_a_metadata_change_and_citations_stay_valid(tmp_path: Path) -> None:
    root = tmp_path / "src"
    page = copy_page("hugo-docs/v0.141.0", "showcase/letsencrypt/index.md", root / "letsencrypt.md")
    store_dir = tmp_path / "store"
    assert run("ingest", root, "--store", store_dir, "--version", "v1", "--workers", "1").exit_code == 0
    v1_chunks = CorpusStore(store_dir).read_chunks("v1").sort("chunk_id")
    cited = v1_chunks.row(0, named=True)
    answer = {
        "answer_id": "encrypt",
        "answer": "Let's Encrypt moved to Hugo [1].",
        "corpus_version": "v1",
        "references": [{"ref": 1, "chunk_id": cited["chunk_id"], "quote": cited["text"][:60]}],
    }
    write(tmp_path / "answers.jsonl", json.dumps(answer) + "\n")
    assert run("answers", "add", tmp_path / "answers.jsonl", "--store", store_dir).exit_code == 0

    text = page.read_text()  # only the front matter changes: a lastmod after its date line
    page.write_text(text.replace("date: 2018-03-13\n", "date: 2018-03-13\nlastmod: 2024-05-01T08:00:00+02:00\n", 1))
    second = run("ingest", root, "--store", store_dir, "--version", "v2", "--workers", "1")
    assert "created corpus version v2" in second.output and "parsed 1, reused 0" in second.output, second.output
    # A sidecar edit leaves the page's bytes as they are: it is a new version all the same.
    sidecar(page, {"authority": "community"})
    third = run("ingest", root, "--store", store_dir, "--version", "v3", "--workers", "1")
    assert "created corpus version v3" in third.output and "parsed 1, reused 0" in third.output, third.output

    store = CorpusStore(store_dir)
    for version, updated_at, authority in (
        ("v1", None, None),
        ("v2", utc("2024-05-01T06:00:00+00:00"), None),
        ("v3", utc("2024-05-01T06:00:00+00:00"), "community"),
    ):
        out = tmp_path / f"documents-{version}.parquet"
        assert run("export", "documents", "--version", version, "--out", out, "--store", store_dir).exit_code == 0
        assert pl.read_parquet(out).select("updated_at", "authority").rows() == [(updated_at, authority)], version
        chunks = store.read_chunks(version).sort("chunk_id")
        assert chunks.select("chunk_id", "text_hash").equals(v1_chunks.select("chunk_id", "text_hash")), version
        status_out = tmp_path / f"status-{version}.parquet"
        assert run("stale", "--against", version, "--out", status_out, "--store", store_dir).exit_code == 0
        assert pl.read_parquet(status_out)["status"].to_list() == ["valid"], version


def test_unchanged_tree_with_source_fields_equals_its_version(tmp_path: Path) -> None:
    root = tmp_path / "src"
    sidecar(write(root / "a.md", "---\ndate: 2024-01-02\n---\n# A\n\nText.\n"), {"authority": "community"})
    store_dir = tmp_path / "store"
    options = ("--store", store_dir, "--workers", "1", "--source-url-template", TEMPLATE)
    assert "created corpus version v0001" in run("ingest", root, *options).output
    assert "equals corpus version v0001" in run("ingest", root, *options).output
    # A new template changes every document's source_url: a new version, the documents parsed again.
    moved = run("ingest", root, *options[:-1], "https://elsewhere.example/{path}")
    assert "created corpus version v0002" in moved.output and "parsed 1" in moved.output, moved.output
    assert CorpusStore(store_dir).read_documents("v0002")["source_url"].to_list() == ["https://elsewhere.example/a.md"]


# ---------------------------------------------------------------------- settings


def test_settings_from_env_and_their_refusals() -> None:
    env = {
        "CITEKEEPER_SOURCE_URL_TEMPLATE": "https://d.example/{dir}/{stem}",
        "CITEKEEPER_AUTHORITY_LEVELS": "spec, blog",
        "CITEKEEPER_SOURCE_FIELDS_MAP": '{"updated_at": ["modified"]}',
        "CITEKEEPER_SOURCE_DEFAULTS": '[["api/**", "authority", "spec"]]',
    }
    config = settings_from_env(env).ingest.parse_config()
    assert (config.source_url_template, config.authority_levels) == ("https://d.example/{dir}/{stem}", ("spec", "blog"))
    assert config.source_keys["updated_at"] == ("modified",) and config.source_defaults == (
        ("api/**", "authority", "spec"),
    )
    for bad, message in (
        ({"CITEKEEPER_SOURCE_URL_TEMPLATE": "https://d/{slug}"}, "names ['slug']"),
        ({"CITEKEEPER_AUTHORITY_LEVELS": "a,a"}, "distinct"),
        ({"CITEKEEPER_SOURCE_DEFAULTS": '[["*", "authority", "spec"]]'}, "not one of authority_levels"),
        ({"CITEKEEPER_SOURCE_FIELDS_MAP": '{"summary": ["summary"]}'}, "unknown field 'summary'"),
        ({"CITEKEEPER_SOURCE_FIELDS_MAP": "{"}, "must be JSON"),
    ):
        with pytest.raises(ValueError, match=message.replace("[", r"\[")):
            settings_from_env(bad)
    refused = run("ingest", ".", "--source-url-template", "https://d/{slug}")
    assert refused.exit_code == 2 and "names ['slug']" in refused.output


def test_the_source_model_dataclass_holds_the_schemas_columns():
    """SourceFields.columns() and its fingerprint read the schema's columns off the dataclass: the two name the
    same fields, in the same order."""
    assert tuple(f.name for f in dataclasses.fields(SourceFields)) == SOURCE_FIELD_NAMES
