"""Checkers that are not transformers models, end to end: a Python callable (tests.external_checkers) and an HTTP
endpoint on loopback, through `citekeeper verify` and Dagster's verification asset into the verdict Parquet; their
identity (callable name or URL, and the user's version) in the verdict cache's key; the endpoint's retries and
the errors that name a checker answering out of contract."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.answers.store import AnswerStore
from citekeeper.layout import StoreLayout
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.external_checkers import ScoringEndpoint, score_pairs
from tests.verify_helpers import citations_frame, claims_frame, verify
from verifiers.checkers.base import CheckerError
from verifiers.checkers.loading import load_scorer

CALLABLE = "tests.external_checkers:score_pairs"
DOCS = {
    "pool.md": "# Pool\n\nThe client keeps four connections alive for every host it talks to.\n",
    "retry.md": "# Retry\n\nEvery retry waits twice as long as the one before it, up to a minute.\n",
}
CLAIMS = ["Idle connections stay alive per host.", "Retries are never delayed."]  # neither decided lexically


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> CorpusStore:
    base = tmp_path_factory.mktemp("external")
    store = CorpusStore(base / "store")
    ingest(write_tree(base / "src", DOCS), store, version="v1", config=ParseConfig(workers=1))
    chunks = store.read_chunks("v1", columns=["chunk_id"]).sort("chunk_id")
    records = [
        {
            "answer_id": f"a-{i}",
            "answer": "...",
            "corpus_version": "v1",
            "claims": [{"text": claim, "citations": [{"chunk_id": chunk_id}]} for claim in CLAIMS],
        }
        for i, chunk_id in enumerate(chunks["chunk_id"])
    ]
    (base / "answers.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert AnswerStore(store.root).add(base / "answers.jsonl").n_registered == len(records)
    return store


@pytest.fixture
def endpoint():
    with ScoringEndpoint().running() as server:
        yield server


def own_store(store: CorpusStore, tmp_path: Path) -> Path:
    """A copy of the store with an empty verdict cache of its own."""
    root = shutil.copytree(store.root, tmp_path / "store")
    shutil.rmtree(StoreLayout(root).verdict_cache_dir, ignore_errors=True)
    return root


def run_verify(store_root: Path, out: Path, *options) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the model tier's pairs, the claims) that `citekeeper verify` wrote."""
    result = CliRunner().invoke(
        main, ["verify", "--store", str(store_root), "--version", "v1", "--out", str(out), *map(str, options)]
    )
    assert result.exit_code == 0, result.output
    pairs = pl.read_parquet(next(out.rglob("pairs.parquet"))).filter(pl.col("tier") == "nli")
    return pairs, pl.read_parquet(next(out.rglob("claims.parquet")))


def assert_scored_by_score_pairs(store: CorpusStore, pairs: pl.DataFrame) -> None:
    """Every pair's probabilities are what score_pairs says of its whole evidence and its sentence."""
    texts = dict(store.read_documents("v1", columns=["doc_id", "text"]).iter_rows())
    assert pairs.height == len(CLAIMS) * len(DOCS) and (pairs["n_windows"] == 1).all()  # no windows: whole evidence
    for pair in pairs.iter_rows(named=True):
        evidence = texts[pair["doc_id"]][pair["evidence_start_char"] : pair["evidence_end_char"]]
        assert (pair["window_start_char"], pair["window_end_char"]) == (
            pair["evidence_start_char"],
            pair["evidence_end_char"],
        )
        expected = score_pairs([evidence], [pair["sentence"]])[0]
        assert [pair["p_entailment"], pair["p_neutral"], pair["p_contradiction"]] == pytest.approx(expected)


def test_a_callable_checker_through_the_cli(store, tmp_path):
    root = own_store(store, tmp_path)
    pairs, claims = run_verify(root, tmp_path / "one", "--checker", "callable", "--model", CALLABLE)
    assert_scored_by_score_pairs(store, pairs)
    identity = pairs.select("model_id", "model_revision", "backend", "precision", "checker").unique()
    assert identity.rows() == [(CALLABLE, "unversioned", "python", "external", "callable")]
    assert not pairs["from_cache"].any()
    statuses = dict(claims.group_by("text").agg(pl.col("status").unique()).iter_rows())
    assert statuses[CLAIMS[1]] == ["contradicted"]  # score_pairs' contradiction column is read
    again, _ = run_verify(root, tmp_path / "two", "--checker", "callable", "--model", CALLABLE)
    assert again["from_cache"].all()  # the same name and version: the cache answers
    versioned, _ = run_verify(
        root, tmp_path / "three", "--checker", "callable", "--model", CALLABLE, "--checker-version", "2"
    )
    assert not versioned["from_cache"].any() and set(versioned["model_revision"]) == {"2"}


def test_an_http_checker_through_the_cli(store, endpoint, tmp_path):
    root, url = own_store(store, tmp_path), f"{endpoint.url}/score"
    pairs, claims = run_verify(root, tmp_path / "one", "--checker", "http", "--model", url, "--batch-size", "3")
    assert_scored_by_score_pairs(store, pairs)
    assert pairs.select("model_id", "backend", "checker").unique().rows() == [(url, "http", "http")]
    sent = endpoint.pairs_sent()
    assert sum(sent) == pairs.height and max(sent) == 3  # each POST a batch of at most --batch-size pairs
    assert set(claims.filter(pl.col("text") == CLAIMS[1])["status"]) == {"contradicted"}
    again, _ = run_verify(root, tmp_path / "two", "--checker", "http", "--model", url)
    assert again["from_cache"].all() and sum(endpoint.pairs_sent()) == pairs.height  # nothing sent again
    versioned, _ = run_verify(root, tmp_path / "three", "--checker", "http", "--model", url, "--checker-version", "v2")
    assert not versioned["from_cache"].any() and set(versioned["model_revision"]) == {"v2"}
    elsewhere, _ = run_verify(root, tmp_path / "four", "--checker", "http", "--model", f"{endpoint.url}/flaky")
    assert not elsewhere["from_cache"].any()  # another URL is another checker


def test_a_bad_answer_fails_the_command_naming_the_endpoint(store, endpoint, tmp_path):
    url = f"{endpoint.url}/not-json"
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["verify", "--store", str(store.root), "--out", str(out), "--checker", "http", "--model", url]
    )
    assert result.exit_code == 1 and f"http checker {url!r}: the answer is not JSON" in result.output, result.output


def test_the_dagster_asset_runs_a_callable_checker_with_its_version(store, tmp_path):
    from assets.verification import verification
    from tests.dagster_settings import settings

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("corpus_version", ["v1"])
    config = settings(
        store_dir=str(own_store(store, tmp_path)), nli_model=CALLABLE, nli_checker="callable", nli_checker_version="7"
    )
    result = dg.materialize([verification], partition_key="v1", resources=config.resources(), instance=instance)
    metadata = result.asset_materializations_for_node("verification")[0].metadata
    assert metadata["model"].value == f"{CALLABLE}@7 (python, external, callable)"
    pairs = pl.read_parquet(Path(metadata["output_dir"].value) / "pairs.parquet").filter(pl.col("tier") == "nli")
    assert_scored_by_score_pairs(store, pairs)


# ---------------------------------------------------------------- through the engine: retries and bad answers


def frames():
    claims = claims_frame([("a", "c1", CLAIMS[0], 1), ("a", "c2", CLAIMS[1], 1)])
    evidence = "The client keeps four connections alive for every host it talks to."
    citations = citations_frame(
        [
            {"answer_id": "a", "claim_id": claim_id, "citation_id": f"k{claim_id}", "chunk_text": evidence}
            for claim_id in ("c1", "c2")
        ]
    )
    return claims, citations


def test_a_busy_endpoint_is_asked_again(endpoint):
    result = verify(*frames(), "v1", load_scorer(f"{endpoint.url}/flaky", checker="http"))
    assert endpoint.pairs_sent("/flaky") == [2, 2]  # 503, then the answer
    pairs = result.pairs.sort("claim_id")
    assert pairs["p_entailment"].to_list() == [0.5, 0.05]  # 3 of 6 words; "never": contradicted
    assert result.claims.sort("claim_id")["status"].to_list() == ["supported", "contradicted"]


@pytest.mark.parametrize(
    ("path", "message", "requests"),
    [
        ("/not-json", 'the answer is not JSON: "<html>a proxy', 1),
        ("/no-scores", 'the answer has no "scores" list', 1),
        ("/short", "returned an array of shape (1, 3) for 2 pairs", 1),
        ("/missing", "HTTP 404 Not Found: 'no such endpoint'", 1),  # not retried: asking again will not help
        ("/slow", "no answer after 2 attempts: timed out", 2),
    ],
)
def test_an_answer_out_of_contract_names_the_endpoint(endpoint, path, message, requests):
    scorer = load_scorer(f"{endpoint.url}{path}", checker="http")
    scorer.score_pairs.timeout_s, scorer.score_pairs.attempts = 0.3, 2
    with pytest.raises(CheckerError) as raised:
        verify(*frames(), "v1", scorer)
    assert str(raised.value).startswith(f"http checker '{endpoint.url}{path}': ") and message in str(raised.value)
    assert len(endpoint.pairs_sent(path)) == requests


def test_an_endpoint_nobody_answers_is_named():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/score"
    scorer = load_scorer(url, checker="http")
    scorer.score_pairs.attempts = 2
    with pytest.raises(CheckerError, match=f"http checker '{url}': no answer after 2 attempts: .*refused"):
        verify(*frames(), "v1", scorer)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("score_pairs", "callable checker 'score_pairs': name it module:function"),
        ("tests.no_such_module:score", "callable checker 'tests.no_such_module:score': cannot import tests.no_such"),
        ("tests.external_checkers:nothing", "tests.external_checkers has no nothing"),
        ("tests.external_checkers:NOT_CALLABLE", "NOT_CALLABLE is not callable"),
    ],
)
def test_a_callable_that_is_not_there_is_refused_at_load(spec, message):
    with pytest.raises(CheckerError, match=message.replace("(", r"\(")):
        load_scorer(spec, checker="callable")


def test_a_callable_may_return_one_support_score_and_must_return_one_per_pair():
    claims, citations = frames()
    result = verify(claims, citations, "v1", load_scorer("tests.external_checkers:support_only", checker="callable"))
    pairs = result.pairs.sort("claim_id")
    assert pairs["p_contradiction"].is_null().all()  # one score: no contradiction column
    assert np.allclose(pairs["p_entailment"] + pairs["p_neutral"], 1.0)
    short = load_scorer("tests.external_checkers:one_score_short", checker="callable")
    with pytest.raises(CheckerError, match=r"callable checker 'tests.external_checkers:one_score_short': returned "):
        verify(claims, citations, "v1", short)


def test_what_a_checker_that_is_not_a_model_does_not_take(tmp_path):
    with pytest.raises(CheckerError, match="http checker 'ftp://host/score': not an http"):
        load_scorer("ftp://host/score", checker="http")
    with pytest.raises(CheckerError, match="the onnx backend runs nli and binary checkers, not http"):
        load_scorer("http://127.0.0.1:9/score", backend="onnx", checker="http")
    with pytest.raises(CheckerError, match="a checker version is given to the checkers that are not models"):
        load_scorer(str(tmp_path / "a-model"), checker_version="1")  # refused before the model is looked for
