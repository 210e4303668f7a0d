"""Front matter as real generators write it (Hugo, MkDocs, VitePress, dumi): read whole and kept as JSON, within
bounds that still refuse bombs; pages of front matter only are skipped as no_text, not quarantined."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.store import CorpusStore
from parsers.discover import discover_sources
from parsers.ingest import ingest
from parsers.metadata import MAX_FRONT_MATTER_DEPTH, MAX_FRONT_MATTER_NODES, MetadataError, read_front_matter
from parsers.records import ParseConfig
from pipelines.cli import main

SERIAL = ParseConfig(workers=1)

# Each shape as the generator's own docs write it; every one was refused as "not nested" before.
HUGO = """---
title: Hugo Modules
linkTitle: Modules
date: 2019-07-24
draft: false
weight: 50
menu:
  docs:
    parent: modules
    weight: 10
params:
  functions_and_methods:
    aliases: [absURL]
    returnType: template.HTML
    signatures: ['urls.AbsURL INPUT']
---
"""
MKDOCS = """---
search:
  exclude: true
hide:
  - navigation
  - toc
social:
  cards_layout_options:
    background_color: "#ff1493"
    font_family: Noto Sans SC
---
"""
VITEPRESS = """---
title: 组合式 API 常见问答
author:
  name: 尤雨溪
  link: https://github.com/yyx990803
head:
  - - meta
    - name: description
      content: 常见问答
hero:
  actions:
    - theme: brand
      text: 快速上手
---
"""
DUMI = """---
group:
  title: 高级特性
  order: 3
demo:
  cols: 2
order: 1.5
---
"""


@pytest.mark.parametrize("front_matter", [HUGO, MKDOCS, VITEPRESS, DUMI], ids=["hugo", "mkdocs", "vitepress", "dumi"])
def test_nested_front_matter_of_real_generators_is_read_whole(front_matter):
    read = read_front_matter(front_matter + "Body text.\n")
    assert read.body == "Body text.\n"
    assert json.loads(read.as_json) == _expected(front_matter)


def _expected(front_matter: str) -> dict:
    """What each block says, written out by hand: scalars typed as YAML 1.2 reads them, dates as written."""
    return {
        HUGO: {
            "title": "Hugo Modules",
            "linkTitle": "Modules",
            "date": "2019-07-24",
            "draft": False,
            "weight": 50,
            "menu": {"docs": {"parent": "modules", "weight": 10}},
            "params": {
                "functions_and_methods": {
                    "aliases": ["absURL"],
                    "returnType": "template.HTML",
                    "signatures": ["urls.AbsURL INPUT"],
                }
            },
        },
        MKDOCS: {
            "search": {"exclude": True},
            "hide": ["navigation", "toc"],
            "social": {"cards_layout_options": {"background_color": "#ff1493", "font_family": "Noto Sans SC"}},
        },
        VITEPRESS: {
            "title": "组合式 API 常见问答",
            "author": {"name": "尤雨溪", "link": "https://github.com/yyx990803"},
            "head": [["meta", {"name": "description", "content": "常见问答"}]],
            "hero": {"actions": [{"theme": "brand", "text": "快速上手"}]},
        },
        DUMI: {"group": {"title": "高级特性", "order": 3}, "demo": {"cols": 2}, "order": 1.5},
    }[front_matter]


def test_identity_keys_are_kept_as_written():
    read = read_front_matter("---\ndoc_id: 007\ntitle: No\naccess_scope: internal_only\n---\nBody.\n")
    assert read.explicit == {"doc_id": "007", "title": "No", "access_scope": "internal_only"}
    assert json.loads(read.as_json) == {"doc_id": 7, "title": "No", "access_scope": "internal_only"}


def test_hugo_toml_front_matter_and_leading_blank_lines():
    read = read_front_matter('\n+++\ntitle = "发布说明"\ndate = 2024-01-02\n[menu.docs]\nweight = 5\n+++\nBody.\n')
    assert read.body == "Body.\n" and read.explicit == {"title": "发布说明"}
    assert json.loads(read.as_json) == {"title": "发布说明", "date": "2024-01-02", "menu": {"docs": {"weight": 5}}}
    assert read_front_matter("\n---\ntitle: After a blank line\n---\nBody.\n").explicit == {
        "title": "After a blank line"
    }


def nested(levels: int) -> str:
    return (
        "---\ntitle: t\nx:\n"
        + "".join("  " * i + f"k{i}:\n" for i in range(levels - 1))
        + "  " * levels
        + "v: 1\n---\nB\n"
    )


def test_the_bounds_admit_what_they_name_and_refuse_past_it():
    assert read_front_matter(nested(MAX_FRONT_MATTER_DEPTH - 1)).explicit == {"title": "t"}
    with pytest.raises(MetadataError, match=f"nested over {MAX_FRONT_MATTER_DEPTH} levels"):
        read_front_matter(nested(MAX_FRONT_MATTER_DEPTH + 1))
    many = "".join(f"k{i}: {i}\n" for i in range(MAX_FRONT_MATTER_NODES // 2 + 1))
    with pytest.raises(MetadataError, match=f"over {MAX_FRONT_MATTER_NODES:,} values"):
        read_front_matter("---\n" + many + "---\nB\n")
    with pytest.raises(MetadataError, match="over the limit of 65,536"):
        read_front_matter("---\ntitle: " + "x" * 70_000 + "\n---\nB\n")
    for bomb in (
        "---\ntitle: " + "[" * 100_000 + "]" * 100_000 + "\n---\nB\n",
        '+++\ntitle = "t"\nx = ' + "[" * 30_000 + "]" * 30_000 + "\n+++\nB\n",
    ):
        with pytest.raises(MetadataError, match=r"nested over|over the limit"):
            read_front_matter(bomb)


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        ("a: &x [1]\nb: *x", "line 3: YAML anchors and aliases are not allowed"),
        ("menu:\n  docs: 1\n  docs: 2", "key 'docs' is given twice"),  # duplicate keys stay refused, at any depth
        ("doc_id:\n  - a", "line 3: doc_id must be plain text, not a list"),
    ],
)
def test_what_stays_refused(block, reason):
    with pytest.raises(MetadataError, match=reason):
        read_front_matter(f"---\ntitle: t\n{block}\n---\nB\n")


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_a_site_of_nested_front_matter_is_ingested_whole(tmp_path):
    """A Hugo-like site: pages with nested front matter, and section pages of front matter only."""
    root = write_tree(
        tmp_path / "site",
        {
            "modules.md": HUGO + "# Modules\n\nHugo Modules are the core building blocks in Hugo.\n",
            "social.md": MKDOCS + "Social cards are generated for every page.\n",
            "zh/faq.md": VITEPRESS + "组合式 API 是一系列 API 的集合。\n",
            "_index.md": "---\ntitle: Documentation\nmenu:\n  main:\n    weight: 1\n---\n",
            "zh/_index.md": "---\ntitle: 文档\n---\n\n   \n",
        },
    )
    store = CorpusStore(tmp_path / "store")
    result = ingest(root, store, version="v1", config=SERIAL, strict=True)
    assert result.errors == [] and result.no_text == ["_index.md", "zh/_index.md"]
    assert result.manifest.n_documents == 3 and result.manifest.n_no_text == 2
    documents = store.read_documents("v1", columns=["source_path", "title", "front_matter", "text"]).sort("source_path")
    assert documents["source_path"].to_list() == ["modules.md", "social.md", "zh/faq.md"]
    assert documents["title"].to_list() == ["Hugo Modules", None, "组合式 API 常见问答"]
    assert [json.loads(fm) for fm in documents["front_matter"]] == [
        _expected(HUGO),
        _expected(MKDOCS),
        _expected(VITEPRESS),
    ]
    assert not any("weight" in text for text in documents["text"])  # front matter is metadata, not text

    printed = CliRunner().invoke(main, ["ingest", str(root), "--store", str(tmp_path / "cli"), "--strict"])
    assert printed.exit_code == 0, printed.output
    assert "quarantined 0, skipped 2" in printed.output
    assert "skipped _index.md: no_text" in printed.output and "skipped zh/_index.md: no_text" in printed.output
    exported = tmp_path / "documents.parquet"
    out = CliRunner().invoke(
        main, ["export", "documents", "--version", "v0001", "--out", str(exported), "--store", str(tmp_path / "cli")]
    )
    assert out.exit_code == 0, out.output
    front_matter = dict(pl.read_parquet(exported).select("source_path", "front_matter").iter_rows())
    assert json.loads(front_matter["modules.md"])["menu"] == {"docs": {"parent": "modules", "weight": 10}}


def test_a_file_with_text_but_no_front_matter_has_none(tmp_path):
    write_tree(tmp_path, {"plain.md": "# Plain\n\nNo front matter.\n"})
    (source,), errors = discover_sources(tmp_path, SERIAL)
    assert errors == [] and source.front_matter is None


def test_a_store_from_before_the_front_matter_column_takes_the_next_ingest(tmp_path, monkeypatch):
    """v1 committed by a citekeeper whose documents table had no front_matter column: v2 commits, and v1 reads
    back with the column null."""
    from citekeeper import store as store_module

    root = write_tree(tmp_path / "site", {"modules.md": HUGO + "# Modules\n\nHugo Modules are building blocks.\n"})
    older = store_module.STORED_SCHEMAS["documents"]
    with monkeypatch.context() as patched:
        patched.setitem(store_module.STORED_SCHEMAS, "documents", older.remove(older.get_field_index("front_matter")))
        ingest(root, CorpusStore(tmp_path / "store"), version="v1", config=SERIAL)
    (root / "social.md").write_text(MKDOCS + "Social cards.\n", encoding="utf-8")
    store = CorpusStore(tmp_path / "store")
    assert ingest(root, store, version="v2", config=SERIAL).created
    front_matter = {
        version: dict(store.read_documents(version, columns=["source_path", "front_matter"]).iter_rows())
        for version in ("v1", "v2")
    }
    assert front_matter["v1"] == {"modules.md": None}
    assert {path: json.loads(value) for path, value in front_matter["v2"].items()} == {
        "modules.md": _expected(HUGO),
        "social.md": _expected(MKDOCS),
    }


def test_mdx_front_matter_is_read_like_markdown(tmp_path):
    """A format declares its front matter (Format.front_matter): an .mdx page's access_scope holds, or it would
    be published."""
    write_tree(
        tmp_path,
        {
            "page.mdx": (
                "---\ntitle: 内部页面\naccess_scope: internal_only\n---\nimport X from './x'\n\n# Page\n\nBody.\n"
            )
        },
    )
    (source,), errors = discover_sources(tmp_path, SERIAL)
    assert errors == [] and (source.filetype, source.access_scope, source.title) == ("mdx", "internal_only", "内部页面")
    assert json.loads(source.front_matter) == {"title": "内部页面", "access_scope": "internal_only"}


def test_invalid_toml_names_the_line_of_the_file():
    with pytest.raises(MetadataError, match=r"invalid TOML: .*\(at line 4, column \d+\)"):
        read_front_matter('\n+++\ntitle = "t"\nweight = \ndraft = true\n+++\nBody.\n')
