"""Verification against a real store: ingest (LanceDB), registered answers, citation status from the
stale-citation work, a tiny random-weight model, the verdict cache, Parquet outputs, the CLI and the
Dagster asset with its check."""

from __future__ import annotations

import json
import shutil
from datetime import UTC
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from changes.citation_status import check_citations
from changes.repair import repair_citations
from citekeeper.answers.store import AnswerStore
from citekeeper.layout import latest_run_dir
from citekeeper.schema import CLAIM_STATUSES, NLI_ANSWERS, NLI_CLAIMS, NLI_PAIRS, NLI_RUNS
from citekeeper.sharding import Shard
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.random_models import save_random_nli_model
from verifiers.checkers.loading import load_scorer
from verifiers.verify_output import ShardsMissing, merge_shards
from verifiers.verify_store import StoredRun, verify_store

DOCS = {
    f"doc{d}.md": "\n\n".join(
        [f"# Guide {d}"]
        + [
            f"Section {p} of guide {d} says the client keeps {p + d} connections alive. It shipped in release {d}.{p}."
            for p in range(1, 5)
        ]
    )
    for d in range(4)
}
EDITED_DOC = "doc2.md"


def answers_jsonl(chunks: pl.DataFrame, path: Path) -> Path:
    """Two claims per chunk: one citing the whole chunk, one quoting its first sentence."""
    records = []
    for i, row in enumerate(chunks.sort("chunk_id").iter_rows(named=True)):
        first_sentence = row["text"].split(". ")[0] + "."
        records.append(
            {
                "answer_id": f"ans-{i}",
                "question": "How many connections?",
                "answer": "...",
                "corpus_version": "v1",
                "claims": [
                    {
                        "text": f"The client of {row['doc_id']} is configurable.",
                        "citations": [{"chunk_id": row["chunk_id"]}],
                    },
                    {
                        "text": "Connections are kept alive.",
                        "citations": [{"chunk_id": row["chunk_id"], "quote": first_sentence}],
                    },
                ],
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("verify-world")
    store = CorpusStore(base / "store")
    config = ParseConfig(max_chunk_chars=160)
    source = write_tree(base / "src", DOCS)
    ingest(source, store, version="v1", config=config)
    answers = answers_jsonl(store.read_chunks("v1"), base / "answers.jsonl")
    AnswerStore(store.root).add(answers)
    edited = dict(DOCS)
    edited[EDITED_DOC] = DOCS[EDITED_DOC].replace("keeps 4 connections alive", "keeps 40 idle connections open")
    assert edited != DOCS
    ingest(write_tree(base / "src", edited), store, version="v2", config=config)
    check_citations(store, "v2")
    model = save_random_nli_model(base / "model", list(DOCS.values()), favour_label="entailment")
    return {"base": base, "store": store, "answers": answers, "model": model}


def evidence_texts(store: CorpusStore, version: str, pairs: pl.DataFrame) -> set[tuple[str, str]]:
    """(sentence, evidence text) of every model-judged pair, cut from the documents by its stored locator."""
    docs = store.read_documents(version, columns=["doc_id", "text"])
    judged = pairs.filter(pl.col("tier") == "nli").join(docs, on="doc_id")
    return {
        (row["sentence"], row["text"][row["evidence_start_char"] : row["evidence_end_char"]])
        for row in judged.iter_rows(named=True)
    }


def test_reverification_scores_only_pairs_whose_evidence_changed(world, tmp_path):
    """After the edit no evidence text changed: holding citations cite the same words, lost ones none at all
    (a re-anchoring suggestion is no evidence). Once repair --apply re-points them, only those pairs are scored."""
    store = CorpusStore(shutil.copytree(world["store"].root, tmp_path / "store"))  # the repair writes revisions
    shutil.rmtree(store.root / "verify" / "cache", ignore_errors=True)
    scorer = load_scorer(str(world["model"]), batch_size=8)
    first, _ = verify_store(store.root, tmp_path / "out", version="v1", scorer=scorer)
    calls_first = first.stats["model_calls"]
    assert calls_first == len(evidence_texts(store, "v1", first.pairs)) > 10
    second, _ = verify_store(store.root, tmp_path / "out", version="v2", scorer=scorer)
    assert evidence_texts(store, "v2", second.pairs) <= evidence_texts(store, "v1", first.pairs)
    assert second.stats["model_calls"] == 0
    lost = second.pairs.filter(pl.col("citation_status").is_in(["stale", "removed"]))
    assert (
        lost.height and lost["evidence_chunk_id"].null_count() == lost.height and set(lost["label"]) == {"no_evidence"}
    )
    statuses = set(second.pairs["citation_status"].drop_nulls())
    assert "valid" in statuses and "stale" in statuses
    lost_claims = second.claims.join(lost.select("answer_id", "claim_id").unique(), on=["answer_id", "claim_id"])
    assert set(lost_claims["status"]) == {"unsupported"} and all("stale" in r for r in lost_claims["reason"])

    repair = repair_citations(store, "v2", min_score=0.5, apply=True)
    assert repair.counts().get("repointed_suggestion", 0) > 0
    check_citations(store, "v2")
    third, _ = verify_store(store.root, tmp_path / "out", version="v2", scorer=scorer)
    changed = evidence_texts(store, "v2", third.pairs) - evidence_texts(store, "v1", first.pairs)
    assert 0 < len(changed) < calls_first / 4
    assert third.stats["model_calls"] == len(changed)  # one window each: short chunks
    rescored = third.pairs.filter((pl.col("tier") == "nli") & ~pl.col("from_cache"))
    assert set(rescored["doc_id"]) == {EDITED_DOC}
    # a run with nothing changed costs nothing
    fourth, _ = verify_store(store.root, tmp_path / "out", version="v2", scorer=scorer)
    assert fourth.stats["model_calls"] == 0 and fourth.stats["cache_hits"] == third.stats["cache_hits"] + len(changed)


def test_parquet_outputs_are_partitioned_and_typed(world, tmp_path):
    scorer = load_scorer(str(world["model"]))
    _, paths = verify_store(world["store"].root, tmp_path / "out", version="v2", scorer=scorer, run_id="r-test")
    assert paths["claims"] == tmp_path / "out" / "corpus_version=v2" / "run_id=r-test" / "claims.parquet"
    for name, schema in (("pairs", NLI_PAIRS), ("claims", NLI_CLAIMS), ("answers", NLI_ANSWERS), ("run", NLI_RUNS)):
        assert pq.read_schema(paths[name]).equals(schema, check_metadata=False), name
    claims = pl.read_parquet(paths["claims"])
    registered = AnswerStore(world["store"].root).claims()
    assert claims.height == registered.height and claims.select("answer_id", "claim_id").n_unique() == claims.height
    assert set(claims["status"]) <= set(CLAIM_STATUSES)
    pairs = pl.read_parquet(paths["pairs"])
    judged = pairs.filter(pl.col("label") != "no_evidence")
    assert judged["doc_id"].null_count() == 0 and judged["window_start_char"].null_count() == 0
    assert (judged["window_start_char"] >= judged["evidence_start_char"]).all()


def test_batched_run_equals_one_batch(world, tmp_path):
    """A few answers at a time (the bounded-memory path of a million answers): the same pairs, claims and answers
    row for row, and the same run metrics, as one batch."""
    scorer = load_scorer(str(world["model"]))
    whole, _ = verify_store(world["store"].root, tmp_path / "one", version="v2", scorer=scorer, run_id="r")
    batched, _ = verify_store(
        world["store"].root, tmp_path / "many", version="v2", scorer=scorer, run_id="r", answers_per_batch=3
    )
    assert AnswerStore(world["store"].root).answers().height > 3 * 3  # several batches
    for table in ("pairs", "claims", "answers"):
        assert (
            batched.read(table)
            .drop("from_cache", strict=False)
            .equals(whole.read(table).drop("from_cache", strict=False))
        ), table
    timing = ["started_at", "duration_s", "cache_hits", "model_calls"]  # the second run is served by the cache
    assert batched.run.drop(timing).equals(whole.run.drop(timing))
    assert batched.run["n_unique_pairs"].item() > 0


def test_sharded_run_equals_unsharded(world, tmp_path):
    """Three answer shards, each verified on its own (as separate processes or pods would), then merged: the same
    pairs, claims and answers row for row, and the same run metrics, as one unsharded run."""
    scorer = load_scorer(str(world["model"]))
    whole, _ = verify_store(world["store"].root, tmp_path / "one", version="v2", scorer=scorer, run_id="r")
    with pytest.raises(ShardsMissing, match=r"shard\(s\) \[1, 2\] of 3"):
        verify_store(
            world["store"].root, tmp_path / "sharded", version="v2", scorer=scorer, run_id="r", shard=Shard(0, 3)
        )
        merge_shards(tmp_path / "sharded", "v2", "r")
    assert latest_run_dir(tmp_path / "sharded", "v2") is None  # not complete: no run row yet
    shards = [
        verify_store(
            world["store"].root, tmp_path / "sharded", version="v2", scorer=scorer, run_id="r", shard=Shard(i, 3)
        )[0]
        for i in (1, 2)
    ]
    assert all(0 < s.run["n_answers"].item() < whole.run["n_answers"].item() for s in shards)  # each has some answers
    run = merge_shards(tmp_path / "sharded", "v2", "r")
    merged = StoredRun(run, latest_run_dir(tmp_path / "sharded", "v2"))
    key = ["answer_id", "claim_id", "sentence_index", "citation_id"]
    for table, order in (("pairs", key), ("claims", key[:2]), ("answers", key[:1])):
        left, right = (r.read(table).drop("from_cache", strict=False).sort(order) for r in (merged, whole))
        assert left.equals(right), table
    timing = ["started_at", "duration_s", "cache_hits", "model_calls"]
    assert merged.run.drop(timing).equals(whole.run.drop(timing))


def run_cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, ["verify", *args], env={"HF_HUB_OFFLINE": "1", **(env or {})})


def test_cli_no_model_fail_under_and_missing_model(world, tmp_path):
    store = str(world["store"].root)
    out = tmp_path / "cli"
    result = run_cli("--store", store, "--out", str(out), "--no-model")
    assert result.exit_code == 0, result.output
    assert "model: none (--no-model)" in result.output and "unverified" in result.output
    run = pl.read_parquet(next(out.rglob("run.parquet")))
    assert run["model_calls"][0] == 0 and run["corpus_version"][0] == "v2"
    failing = run_cli("--store", store, "--out", str(out), "--no-model", "--fail-under", "0.99")
    assert failing.exit_code == 1 and "below --fail-under 0.99" in failing.output
    missing = run_cli("--store", store, "--out", str(out), env={"HF_HOME": str(tmp_path / "hf")})
    assert missing.exit_code == 1
    assert "cross-encoder/nli-deberta-v3-xsmall" in missing.output
    assert "--model /local/dir" in missing.output and "--no-model" in missing.output
    unknown = run_cli("--store", store, "--out", str(out), "--no-model", "--version", "v9")
    assert unknown.exit_code == 1 and "v9" in unknown.output


def test_cli_shards_and_merge(world, tmp_path):
    """`verify --shard I/N --run-id R` per shard on the CPU, then `verify-merge`: the run row of an unsharded run."""
    store, out = str(world["store"].root), tmp_path / "cli"
    args = ["--store", store, "--out", str(out), "--model", str(world["model"]), "--device", "cpu", "--threads", "1"]
    assert "needs --run-id" in run_cli(*args, "--shard", "0/2").output
    assert "I/N" in run_cli(*args, "--shard", "2/2", "--run-id", "r").output
    first = run_cli(*args, "--shard", "0/2", "--run-id", "r")
    assert first.exit_code == 0, first.output
    assert "device: cpu, fp32" in first.output and "verify-merge" in first.output
    early = CliRunner().invoke(main, ["verify-merge", "--out", str(out), "--version", "v2", "--run-id", "r"])
    assert early.exit_code == 1 and "shard(s) [1] of 2 have not finished" in early.output
    assert run_cli(*args, "--shard", "1/2", "--run-id", "r").exit_code == 0
    merged = CliRunner().invoke(
        main, ["verify-merge", "--out", str(out), "--version", "v2", "--run-id", "r", "--fail-under", "0.0"]
    )
    assert merged.exit_code == 0, merged.output
    assert run_cli(*args, "--run-id", "whole").exit_code == 0
    runs = {r: pl.read_parquet(out / "corpus_version=v2" / f"run_id={r}" / "run.parquet") for r in ("r", "whole")}
    varying = ["run_id", "started_at", "duration_s", "cache_hits", "model_calls"]
    assert runs["r"].drop(varying).equals(runs["whole"].drop(varying))
    assert runs["r"]["n_claims"].item() == AnswerStore(store).claims().height


def test_cli_with_local_model_and_answers_file(world, tmp_path):
    out = tmp_path / "cli"
    args = ["--store", str(world["store"].root), "--out", str(out), "--model", str(world["model"]), "--version", "v1"]
    result = run_cli(*args, "--answers", str(world["answers"]), "--fail-under", "0.5")
    assert result.exit_code == 0, result.output
    claims = pl.read_parquet(next(out.rglob("claims.parquet")))
    assert claims.height == 2 * world["store"].read_chunks("v1").height
    assert claims["status"].to_list() == ["supported"] * claims.height  # the model favours entailment
    assert claims["model_id"][0] == str(world["model"])


def test_dagster_asset_and_check(world):
    from assets.verification import every_claim_has_one_status, verification
    from tests.dagster_settings import settings

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("corpus_version", ["v2"])
    resources = settings(store_dir=str(world["store"].root), nli_model=str(world["model"])).resources()
    result = dg.materialize(
        [verification, every_claim_has_one_status], partition_key="v2", resources=resources, instance=instance
    )
    assert result.success
    metadata = result.asset_materializations_for_node("verification")[0].metadata
    counts = metadata["status_counts"].value
    assert sum(counts.values()) == AnswerStore(world["store"].root).claims().height
    output_dir = Path(metadata["output_dir"].value)
    assert output_dir.parent.name == "corpus_version=v2"
    assert pl.read_parquet(output_dir / "claims.parquet")["status"].value_counts().height >= 1
    checks = result.get_asset_check_evaluations()
    assert len(checks) == 1 and checks[0].passed
    assert checks[0].metadata["n_without_exactly_one_status"].value == 0
    assert {"model_calls", "cache_hits", "duration_s"} <= set(metadata)


def test_dagster_sharded_verification_job(world):
    """citekeeper_verify_sharded: one step per answer shard, then the merge, recorded as the verification
    partition; its run is the latest complete run of the version and equals an unsharded run."""
    from pipelines.automation import SHARDED_VERIFY_JOB
    from pipelines.definitions import build_definitions
    from tests.dagster_settings import settings

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("corpus_version", ["v2"])
    config = settings(store_dir=str(world["store"].root), nli_model=str(world["model"]), nli_device="cpu")
    job = build_definitions(config).resolve_job_def(SHARDED_VERIFY_JOB)
    result = job.execute_in_process(partition_key="v2", instance=instance)
    assert result.success and config.verify_shards == 2
    metadata = result.asset_materializations_for_node("merge_verification_shards")[0].metadata
    run_dir = Path(metadata["output_dir"].value)
    assert sorted(p.name for p in run_dir.glob("shard=*")) == ["shard=0-of-2", "shard=1-of-2"]
    unsharded, _ = verify_store(
        world["store"].root, world["base"] / "unsharded", version="v2", scorer=load_scorer(str(world["model"]))
    )
    merged = StoredRun(pl.read_parquet(run_dir / "run.parquet"), run_dir)
    assert (
        merged.read("claims")
        .drop("run_id")
        .sort("answer_id", "claim_id")
        .equals(unsharded.read("claims").drop("run_id").sort("answer_id", "claim_id"))
    )
    assert metadata["n_claims"].value == AnswerStore(world["store"].root).claims().height
    assert latest_run_dir(world["store"].layout.runs_dir, "v2") == run_dir  # what the asset check reads


def test_the_latest_run_is_the_one_that_started_last_not_the_name_that_sorts_last(world, tmp_path):
    out = tmp_path / "out"
    verify_store(world["store"].root, out, version="v2", scorer=None, run_id="nightly")
    _, paths = verify_store(world["store"].root, out, version="v2", scorer=None)  # a timestamped id, < "nightly"
    assert paths["run"].parent.name < "run_id=nightly"
    assert latest_run_dir(out, "v2") == paths["run"].parent


def test_the_latest_run_is_found_among_runs_of_older_releases(tmp_path):
    """A store verified before the `checker` column existed keeps its old run rows beside the new ones."""
    from datetime import datetime

    base = tmp_path / "corpus_version=v1"
    old, new = base / "run_id=a-old", base / "run_id=b-new"
    for directory in (old, new):
        directory.mkdir(parents=True)
    pl.DataFrame({"run_id": ["a-old"], "started_at": [datetime(2026, 1, 1, tzinfo=UTC)]}).write_parquet(
        old / "run.parquet"
    )
    pl.DataFrame(
        {"run_id": ["b-new"], "started_at": [datetime(2026, 2, 1, tzinfo=UTC)], "checker": ["nli"]}
    ).write_parquet(new / "run.parquet")
    assert latest_run_dir(tmp_path, "v1") == new
