"""Markdown, MDX and HTML as real sites write them: no text lost silently, a stray NUL is not UTF-16, MDX's ESM
lines are not prose, and a page of comments only has nothing to cite."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from parsers.discover import discover_sources
from parsers.document import parse_document
from parsers.records import DocumentError, NothingToCite, ParseConfig, ParsedDocument

from .conftest import SHARED_EVAL, require_eval

CONFIG = ParseConfig()
HUGO_DOCS = SHARED_EVAL / "corpora" / "hugo-docs" / "v0.148.0"
# Past the 10,000,000 bytes libxml2 keeps of one text node without its huge-tree option (3 UTF-8 bytes each); Chinese
# because unstructured's English heuristics take minutes over megabytes of English words.
HUGE_PARAGRAPH = "长段落里的每一个字都要留下，" * 250_000


def parse(path: Path, data: bytes | str) -> ParsedDocument:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    sources, errors = discover_sources(path.parent, CONFIG)
    assert errors == []
    (source,) = [s for s in sources if s.path == path.absolute()]
    return parse_document(source, CONFIG)


def assert_offsets(doc: ParsedDocument) -> None:
    assert doc.chunks and all(doc.text[c.start_char : c.end_char] == c.text for c in doc.chunks)


def test_markdown_huge_paragraph_keeps_its_text(tmp_path):
    doc = parse(tmp_path / "long.md", "# R\n\n" + HUGE_PARAGRAPH + "\n")
    assert HUGE_PARAGRAPH.strip() in doc.text  # partition_md kept the heading alone
    assert_offsets(doc)


def test_html_huge_paragraph_is_quarantined_naming_the_file(tmp_path):
    with pytest.raises(DocumentError) as caught:
        parse(tmp_path / "long.html", f"<html><body><h1>R</h1><p>{HUGE_PARAGRAPH}</p></body></html>")
    error = caught.value.error
    assert (error.source_path, error.stage, error.error_type) == ("long.html", "parse", "TextLost")
    assert "kept 1 of the 3,250,001 letters and digits" in error.reason


def test_markdown_raw_main_element_does_not_hide_the_page(tmp_path):
    # Hugo's goldmark reads "```lang {attrs}" as a fence, Python-Markdown does not: the HTML in it became raw
    # HTML, and unstructured kept only its <main> (templates/types.md lost 98% of its text).
    page = (
        "## Structure\n\nCreate templates in the `layouts` directory of your project.\n\n"
        '```go-html-template {file="layouts/baseof.html"}\n<body>\n  <main>\n    {{ block "main" . }}{{ end }}\n'
        "  </main>\n</body>\n```\n\nEvery page of the site is built from these templates.\n"
    )
    doc = parse(tmp_path / "types.md", page)
    assert "Create templates in the" in doc.text and "Every page of the site is built" in doc.text
    assert_offsets(doc)
    # read as Markdown (the fence's attributes dropped), not as plain text: a section, the code, no markup
    assert '{{ block "main" . }}{{ end }}' in doc.text and "```" not in doc.text and "## " not in doc.text
    assert all(chunk.section_path == ["Structure"] for chunk in doc.chunks)


def test_hugo_template_types_page_keeps_its_text(tmp_path):
    shutil.copy(require_eval(HUGO_DOCS / "templates" / "types.md"), tmp_path / "types.md")
    doc = parse(tmp_path / "types.md", (tmp_path / "types.md").read_bytes())
    for sentence in ("Create templates in the layouts directory", "This will replace the content of the"):
        assert sentence in doc.text
    assert ["Section"] in [chunk.section_path for chunk in doc.chunks]  # its headings are sections


@pytest.mark.parametrize(
    ("name", "page"),
    [
        (
            "documentation.md",
            "---\ntitle: Hugo Documentation\nlayout: list\n---\n\n<!--\nIf we want content on this page\n-->\n",
        ),
        ("comment.html", "<!DOCTYPE html>\n<!-- nothing here yet -->\n"),
    ],
)
def test_page_of_comments_only_has_nothing_to_cite(tmp_path, name, page):
    # lxml finds no element in it, and unstructured's HTML partitioner failed on the missing root:
    # "AttributeError: 'NoneType' object has no attribute 'xpath'".
    with pytest.raises(NothingToCite):
        parse(tmp_path / name, page)


def test_hugo_documentation_page_is_skipped_not_a_parser_error(tmp_path):
    shutil.copy(require_eval(HUGO_DOCS / "documentation.md"), tmp_path / "documentation.md")
    with pytest.raises(NothingToCite):
        parse(tmp_path / "documentation.md", (tmp_path / "documentation.md").read_bytes())


def test_markdown_with_a_stray_nul_is_utf8(tmp_path):
    doc = parse(tmp_path / "notes.md", "# Café\n\nThe deploy runs nightly.\x00 Back up first.\n")
    assert doc.encoding == "utf-8"
    assert "Café" in doc.text and "The deploy runs nightly." in doc.text


MDX = """---
title: Tabs
sidebar_position: 2
---
import Tabs from '@theme/Tabs';
import {
  TabItem,
  Admonition,
} from '@site/src/components';
export const meta = {version: 2};

# Installing

Install the package before you deploy.

```js
import {run} from './run.js';
export default run;
```

<Tabs groupId="os">
<TabItem value="linux">

Run the installer as root.

</TabItem>
</Tabs>

export const toc = [
  {value: 'Installing', id: 'installing'},
];

Exported settings are kept in the config file.
"""


def test_mdx_leaves_esm_out_of_the_text(tmp_path):
    doc = parse(tmp_path / "install.mdx", MDX)
    assert doc.source.filetype == "mdx"
    assert "import Tabs" not in doc.text and "@site/src/components" not in doc.text and "meta" not in doc.text
    assert "toc" not in doc.text and "Exported settings are kept in the config file." in doc.text
    assert "import {run} from './run.js';\nexport default run;" in doc.text  # code in a fence stays code
    assert "Install the package before you deploy." in doc.text and "Run the installer as root." in doc.text
    assert "sidebar_position" not in doc.text  # front matter is metadata
    assert doc.text.startswith("Installing")
    assert_offsets(doc)


def test_markdown_keeps_lines_that_start_with_export(tmp_path):
    doc = parse(tmp_path / "shell.md", "# Setup\n\nexport PATH before you run the tool.\n")
    assert "export PATH before you run the tool." in doc.text


def test_a_sphinx_page_of_an_include_alone_is_skipped(tmp_path):
    """Flask's contributing.rst is `.. include:: ../CONTRIBUTING.rst`: nothing of its own to cite."""
    with pytest.raises(NothingToCite):
        parse(tmp_path / "contributing.rst", ".. include:: ../CONTRIBUTING.rst\n\n.. a comment\n   on two lines\n")
    doc = parse(tmp_path / "note.rst", ".. note::\n\n   Sessions expire after an hour.\n")
    assert "Sessions expire after an hour." in doc.text  # a directive that shows its body is read
