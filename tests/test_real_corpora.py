"""Real documentation sites at two releases each (shared/eval/corpora, issue 29): MkDocs Material, Hugo's docs,
Flask's Sphinx docs (reStructuredText) and Ant Design's Chinese docs, ingested as their repositories hold them.

Per site, both releases go into one store. Every page with body text is ingested and no page is refused for its
front matter; offsets reproduce the chunk text and the hashes are right; unchanged chunks keep their ids. Then
`stale` judges answers quoting a seeded sample of the old release's chunks against the new release. The
oracles read the files and the canonical texts, never the code under test: which page has body text, which
quote is still verbatim in the new release.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.identity import chunk_ids, text_hash
from citekeeper.schema import CITATION_STATUS
from citekeeper.settings import variable
from citekeeper.store import CorpusStore
from citekeeper.text import split_sentences
from parsers.records import IngestError
from pipelines.cli import main
from tests.conftest import REAL_CORPORA, require_eval

SITES = {  # folder: (old release, new release)
    "mkdocs-material": ("9.5.0", "9.7.6"),
    "hugo-docs": ("v0.141.0", "v0.148.0"),
    "flask-docs": ("3.0.0", "3.1.3"),
    "antd-docs-zh": ("5.0.0", "6.6.1"),
}
SAMPLE_SEED, SAMPLE_CHUNKS = 29, 60
MIN_QUOTE_CHARS = 16  # shorter sentences (headings, "例如：") say too little to be worth citing
LEADING_FRONT_MATTER = re.compile(r"\A\s*---[ \t]*\r?\n.*?^(?:---|\.\.\.)[ \t]*$", re.S | re.M)
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)  # in Markdown too: a renderer shows none of it


@dataclass
class SiteStore:
    name: str
    old: str
    new: str
    store: CorpusStore
    errors: dict[str, list[IngestError]]  # quarantined pages, by release
    no_text: dict[str, list[str]]  # pages skipped with nothing to cite, by release

    def root(self, release: str) -> Path:
        return REAL_CORPORA / self.name / release


@pytest.fixture(scope="module", params=sorted(SITES))
def site(request, tmp_path_factory) -> SiteStore:
    from parsers.ingest import ingest

    name = request.param
    old, new = SITES[name]
    for release in (old, new):
        require_eval(REAL_CORPORA / name / release)
    store = CorpusStore(tmp_path_factory.mktemp(name) / "store")
    errors, no_text = {}, {}
    for release in (old, new):
        result = ingest(REAL_CORPORA / name / release, store, version=release)
        assert result.created, (release, result.equals)
        errors[release], no_text[release] = result.errors, result.no_text
    return SiteStore(name, old, new, store, errors, no_text)


# ------------------------------------------------------------------------------------------- the oracles


def rst_prose(text: str) -> str:
    """reStructuredText without its explicit markup blocks (`.. ` directives, comments, targets and the lines
    indented under them): an `.. include::` of a file outside the tree is no text of the page."""
    kept, in_markup = [], False
    for line in text.splitlines():
        if line.startswith(".."):
            in_markup = True
        elif line.strip() and not line[0].isspace():
            in_markup = False
        if not in_markup:
            kept.append(line)
    return "\n".join(kept)


def has_body_text(path: Path) -> bool:
    """The page holds something to cite: its text without a leading YAML front matter block and HTML comments
    (Markdown; Hugo allows blank lines before the block) or without explicit markup (reStructuredText) is not
    whitespace only."""
    text = path.read_text("utf-8-sig")
    body = (
        rst_prose(text) if path.suffix == ".rst" else HTML_COMMENT.sub("", LEADING_FRONT_MATTER.sub("", text, count=1))
    )
    return bool(body.strip())


def pages(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def citable_sentences(text: str) -> list[str]:
    return [s for s in split_sentences(text) if len(s.strip()) >= MIN_QUOTE_CHARS and "\n" not in s and s in text]


# -------------------------------------------------------------------------------------------------- ingest


def test_every_page_with_body_text_is_ingested_and_no_page_is_refused_for_its_front_matter(site):
    for release in (site.old, site.new):
        files = pages(site.root(release))
        with_body = {path for path, file in files.items() if has_body_text(file)}
        ingested = set(site.store.read_documents(release, columns=["source_path"])["source_path"])
        errors = site.errors[release]
        refused_front_matter = [(e.source_path, e.reason) for e in errors if e.error_type == "InvalidMetadata"]
        assert not refused_front_matter, (release, len(refused_front_matter), refused_front_matter[:3])
        missing = sorted(with_body - ingested)
        why = {e.source_path: f"{e.error_type}: {e.reason}" for e in errors} | dict.fromkeys(
            site.no_text[release], "no_text"
        )
        assert not missing, (
            release,
            len(missing),
            [(path, why.get(path, "neither quarantined nor skipped")) for path in missing[:5]],
        )
        # A page with nothing but front matter (a Hugo `_index.md`) is skipped: it has nothing to cite.
        assert ingested == with_body, (release, sorted(ingested - with_body)[:5])
        assert set(site.no_text[release]) | {e.source_path for e in errors} == files.keys() - with_body, release


def test_offsets_reproduce_every_chunk_and_its_hashes(site):
    for release in (site.old, site.new):
        files = pages(site.root(release))
        docs = site.store.read_documents(release, columns=["doc_id", "source_path", "doc_content_hash", "text"])
        text_of = dict(zip(docs["doc_id"], docs["text"]))
        for source_path, content_hash in docs.select("source_path", "doc_content_hash").iter_rows():
            assert content_hash == "sha256:" + hashlib.sha256(files[source_path].read_bytes()).hexdigest(), source_path
        chunks = site.store.read_chunks(
            release, columns=["doc_id", "chunk_id", "text", "text_hash", "start_char", "end_char"]
        )
        assert set(chunks["doc_id"]) == set(text_of), release  # every ingested page has chunks
        for (doc_id,), doc_chunks in chunks.sort("start_char").group_by("doc_id", maintain_order=True):
            for _, _, text, hashed, start, end in doc_chunks.iter_rows():
                assert text_of[doc_id][start:end] == text, (release, doc_id, start)
                assert hashed == text_hash(text), (release, doc_id, start)
            assert doc_chunks["chunk_id"].to_list() == chunk_ids(doc_id, doc_chunks["text"]), (release, doc_id)


def test_unchanged_chunks_keep_their_ids_across_the_releases(site):
    columns = ["doc_id", "chunk_id", "text", "start_char", "end_char"]
    before, after = site.store.read_chunks(site.old, columns=columns), site.store.read_chunks(site.new, columns=columns)
    old_docs = site.store.read_documents(site.old, columns=["doc_id", "text"])
    new_docs = site.store.read_documents(site.new, columns=["doc_id", "text"])
    same_text = old_docs.join(new_docs, on=["doc_id", "text"])["doc_id"]
    assert same_text.len() >= 10, site.name

    # A page whose canonical text is byte-identical keeps every chunk: id, text and offsets.
    def of_same_pages(chunks: pl.DataFrame) -> pl.DataFrame:
        return chunks.filter(pl.col("doc_id").is_in(same_text.implode())).sort("doc_id", "start_char")

    assert of_same_pages(before).equals(of_same_pages(after)), site.name

    # In an edited page, a chunk whose text survives keeps its id wherever the edits moved it. A text that
    # occurs twice in one page may pair with either occurrence's id.
    edited = ~pl.col("doc_id").is_in(same_text.implode())
    kept = after.filter(edited).join(before.filter(edited), on=["doc_id", "text"], suffix="_old")
    ids_of = before.group_by("doc_id", "text").agg(pl.col("chunk_id").alias("old_ids"))
    changed_id = kept.join(ids_of, on=["doc_id", "text"]).filter(~pl.col("chunk_id").is_in(pl.col("old_ids")))
    assert changed_id.is_empty(), (site.name, changed_id.head(3).to_dicts())
    assert kept["chunk_id"].n_unique() >= 10, site.name
    assert (kept["start_char"] != kept["start_char_old"]).sum() >= 5, site.name  # ids survive edits before them


# --------------------------------------------------------------------------------------------------- stale


def sampled_answers(site: SiteStore) -> list[dict]:
    """One answer per sampled chunk of the old release, quoting one of its sentences: half the sample from pages
    whose text changed or went (the quotes whose fate is in question), half from all pages."""
    chunks = site.store.read_chunks(site.old, columns=["chunk_id", "doc_id", "text"])
    new_text = dict(site.store.read_documents(site.new, columns=["doc_id", "text"]).iter_rows())
    old_text = dict(site.store.read_documents(site.old, columns=["doc_id", "text"]).iter_rows())
    citable = [(chunk_id, doc_id, citable_sentences(text)) for chunk_id, doc_id, text in chunks.iter_rows()]
    citable = [c for c in citable if c[2]]
    in_question = [c for c in citable if new_text.get(c[1]) != old_text[c[1]]]
    rng = random.Random(SAMPLE_SEED)
    picked = rng.sample(in_question, min(SAMPLE_CHUNKS // 2, len(in_question)))
    rest = [c for c in citable if c not in picked]
    picked += rng.sample(rest, SAMPLE_CHUNKS - len(picked))
    answers = []
    for i, (chunk_id, _, sentences) in enumerate(picked):
        quote = rng.choice(sentences)
        answers.append(
            {
                "answer_id": f"{site.name}-{i}",
                "question": "What do the docs say?",
                "answer": quote,
                "corpus_version": site.old,
                "claims": [{"claim_id": "c0", "text": quote, "citations": [{"chunk_id": chunk_id, "quote": quote}]}],
            }
        )
    return answers


@pytest.fixture(scope="module")
def embedding_model(tmp_path_factory) -> Path:
    """A sentence-embedding model of random weights (BERT, 2 layers of 32) for the re-anchoring's hybrid tier: the
    bundled MiniLM embeds the whole target release first, minutes per site on 2 cores (mkdocs-material: 377 s).
    No status and no exact suggestion depends on the vectors; the hybrid tier still runs."""
    import torch
    from transformers import BertConfig, BertModel

    from tests.random_models import TINY_BERT, build_tokenizer

    directory = tmp_path_factory.mktemp("embedding-model")
    tokenizer = build_tokenizer([(REAL_CORPORA / "README.md").read_text("utf-8")])
    torch.manual_seed(SAMPLE_SEED)
    BertModel(BertConfig(vocab_size=len(tokenizer), **TINY_BERT)).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def stale_status(site, embedding_model, tmp_path_factory) -> pl.DataFrame:
    answers = sampled_answers(site)
    path = tmp_path_factory.mktemp(f"{site.name}-answers") / "answers.jsonl"
    path.write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in answers), encoding="utf-8")
    runner, where = CliRunner(), ["--store", str(site.store.root)]
    added = runner.invoke(main, ["answers", "add", str(path), *where])
    assert added.exit_code == 0, added.output
    out = path.parent / "status.parquet"
    with pytest.MonkeyPatch.context() as env:
        env.setenv(variable("embedding_model"), str(embedding_model))
        stale = runner.invoke(main, ["stale", "--against", site.new, "--out", str(out), *where])
    assert stale.exit_code == 0, (stale.output, stale.exception)
    status = pl.read_parquet(out)
    assert status.columns == CITATION_STATUS.names and status.height == len(answers) == SAMPLE_CHUNKS
    return status


def test_stale_between_the_releases_matches_the_text(site, stale_status):
    """A quote still verbatim in the new release is never `stale`, and `removed` only with an exact suggestion
    of where it stands now; a quote the new release lost is `stale` or `removed`."""
    text_of = dict(site.store.read_documents(site.new, columns=["doc_id", "text"]).iter_rows())
    new_chunks = {
        row[0]: row for row in site.store.read_chunks(site.new, columns=["chunk_id", "doc_id", "text"]).iter_rows()
    }
    seen: dict[tuple[str, bool], int] = {}
    wrong = []
    for row in stale_status.to_dicts():
        quote, status = row["quote"], row["status"]
        verbatim = any(quote in text for text in text_of.values())
        seen[(status, verbatim)] = seen.get((status, verbatim), 0) + 1
        assert status != "invalid" and row["quote_match"] == "exact", row["reason"]
        if status in ("valid", "relocated", "drifted") and row["new_match"] == "exact":
            assert text_of[row["new_doc_id"]][row["new_start_char"] : row["new_end_char"]] == quote, row
        if not verbatim:
            assert status in ("stale", "removed") or row["new_match"] == "normalized", row
        elif status == "stale" or (status == "removed" and not exact_suggestion(row, quote, new_chunks, text_of)):
            wrong.append((status, row["reason"], quote, row["suggested_method"]))
    assert not wrong, (site.name, f"{len(wrong)} of {stale_status.height} quotes verbatim in {site.new}", wrong[:5])
    assert sum(n for (_, verbatim), n in seen.items() if verbatim) >= SAMPLE_CHUNKS // 4, (
        site.name,
        seen,
    )  # enough to judge


def exact_suggestion(row: dict, quote: str, new_chunks: dict[str, tuple], text_of: dict[str, str]) -> bool:
    """The row suggests a chunk of the new release holding the quote, and the quote's exact span in its document."""
    if row["suggested_method"] != "exact" or row["suggested_chunk_id"] not in new_chunks:
        return False
    _, doc_id, chunk_text = new_chunks[row["suggested_chunk_id"]]
    return quote in chunk_text and text_of[doc_id][row["suggested_start_char"] : row["suggested_end_char"]] == quote
