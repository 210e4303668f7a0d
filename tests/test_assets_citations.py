"""chunk_diff, citation_status and stale_report materialized by Dagster against a real store."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl

from assets import citations as citation_assets
from assets import corpus as ingest_assets
from assets.partitions import corpus_versions
from citekeeper.schema import BLAST_RADIUS, CHUNK_DIFF, CITATION_STATUS, DOC_DIFF
from citekeeper.store import CorpusStore
from tests.chunk_frames import write_tree
from tests.dagster_settings import settings

ASSETS = [
    ingest_assets.ingested_corpus,
    citation_assets.chunk_diff,
    citation_assets.citation_status,
    citation_assets.stale_report,
    citation_assets.citations_reference_existing_chunks,
]


def materialize(instance, source: Path, store_dir: Path, version: str, answers: Path | None = None):
    instance.add_dynamic_partitions(corpus_versions.name, [version])
    config = settings(store_dir=str(store_dir), source_dir=str(source), answers_path=str(answers) if answers else None)
    return dg.materialize(ASSETS, instance=instance, partition_key=version, resources=config.resources())


def check_metadata(result) -> dict:
    (evaluation,) = result.get_asset_check_evaluations()
    return {"passed": evaluation.passed, **{k: v.value for k, v in evaluation.metadata.items()}}


def test_materialize_diff_status_report_and_check(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    instance = dg.DagsterInstance.ephemeral()
    v1 = write_tree(
        tmp_path / "v1",
        {
            "a.md": "# A\n\nAlpha keeps its words exactly.\n\n## B\n\nBeta will change in the next version of a.\n",
            "gone.md": "# Gone\n\nThis whole document is deleted later.\n",
        },
    )
    first = materialize(instance, v1, store_dir, "v1")
    first_diff = {e.asset_key.path[-1]: e.materialization.metadata for e in first.get_asset_materialization_events()}
    assert first_diff["chunk_diff"]["parent"].value == ""
    assert check_metadata(first)["n_phantom_citations"] == 0
    assert check_metadata(first)["phantom_citations"].records == []

    store = CorpusStore(store_dir)
    chunks = store.read_chunks("v1", columns=["chunk_id", "text"])

    def cid(words: str) -> str:
        return chunks.filter(pl.col("text").str.contains(words, literal=True))["chunk_id"].item()

    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "\n".join(
            json.dumps(a)
            for a in [
                {
                    "answer_id": "alpha",
                    "answer": "Alpha [1].",
                    "corpus_version": "v1",
                    "references": [{"ref": 1, "chunk_id": cid("Alpha keeps")}],
                },
                {
                    "answer_id": "beta",
                    "answer": "Beta [1].",
                    "corpus_version": "v1",
                    "references": [{"ref": 1, "chunk_id": cid("Beta will"), "quote": "Beta will change"}],
                },
                {
                    "answer_id": "gone",
                    "answer": "Gone [1].",
                    "corpus_version": "v1",
                    "references": [{"ref": 1, "chunk_id": cid("whole document")}],
                },
                {
                    "answer_id": "phantom",
                    "answer": "Made up [1].",
                    "corpus_version": "v1",
                    "references": [{"ref": 1, "chunk_id": "chk_invented"}],
                },
            ]
        )
    )
    v2 = write_tree(
        tmp_path / "v2",
        {"a.md": "# A\n\nAlpha keeps its words exactly.\n\n## B\n\nBeta has changed in this version of a.\n"},
    )
    second = materialize(instance, v2, store_dir, "v2", answers=answers)

    diff_dir = store_dir / "diffs" / "v1__v2"
    chunk_diff = pl.read_parquet(diff_dir / "chunk_diff.parquet")
    doc_diff = pl.read_parquet(diff_dir / "doc_diff.parquet")
    assert chunk_diff.columns == CHUNK_DIFF.names and doc_diff.columns == DOC_DIFF.names
    assert dict(doc_diff.select("old_source_path", "change").iter_rows()) == {"a.md": "modified", "gone.md": "removed"}

    status_dir = store_dir / "citations" / "target_version=v2"
    status = pl.read_parquet(status_dir / "citation_status.parquet")
    assert status.columns == CITATION_STATUS.names
    assert dict(status.select("answer_id", "status").iter_rows()) == {
        "alpha": "valid",
        "beta": "stale",
        "gone": "removed",
        "phantom": "invalid",
    }
    radius = pl.read_parquet(status_dir / "blast_radius.parquet")
    assert radius.columns == BLAST_RADIUS.names
    assert sorted(radius.select("source_path", "n_citations").rows()) == [("a.md", 1), ("gone.md", 1)]
    assert 'id="blast-radius"' in (status_dir / "report.html").read_text()

    materialized = {e.asset_key.path[-1]: e.materialization.metadata for e in second.get_asset_materialization_events()}
    assert materialized["citation_status"]["status_stale"].value == 1
    assert materialized["citation_status"]["status_invalid"].value == 1
    assert materialized["citation_status"]["answers_registered"].value == 4
    assert materialized["chunk_diff"]["documents_removed"].value == 1
    changed = materialized["chunk_diff"]["changed_documents"]
    assert [c.name for c in changed.schema.columns] == ["change", "old_source_path", "new_source_path"]
    assert sorted(list(r.data.values()) for r in changed.records) == [
        ["modified", "a.md", "a.md"],
        ["removed", "gone.md", None],
    ]
    blast_radius = materialized["citation_status"]["blast_radius"]
    assert ("rank", "int") in [(c.name, c.type) for c in blast_radius.schema.columns]
    assert sorted((r.data["source_path"], r.data["n_citations"]) for r in blast_radius.records) == [
        ("a.md", 1),
        ("gone.md", 1),
    ]
    metadata = check_metadata(second)
    assert metadata["passed"] is False and metadata["n_phantom_citations"] == 1
    assert [(r.data["answer_id"], r.data["chunk_id"]) for r in metadata["phantom_citations"].records] == [
        ("phantom", "chk_invented")
    ]
