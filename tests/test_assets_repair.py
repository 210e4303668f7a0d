"""repaired_answers materialized by Dagster: files only by default, registered with `apply: true`, and the
verification of the repaired revisions: what was verified before served from the verdict cache."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl

from assets import citations as citation_assets
from assets.verification import verification
from citekeeper.answers.store import AnswerStore
from citekeeper.schema import REPAIRS
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from tests.chunk_frames import write_tree
from tests.dagster_settings import settings
from tests.random_models import save_random_nli_model
from tests.store_helpers import chunk_with

MOVED = "Each proxy URL names its scheme and its host."
V1 = {
    "timeouts.md": "# Timeouts\n\nThe default timeout is five seconds for every network operation.\n",
    "proxies.md": f"# Proxies\n\nProxies are configured per client. {MOVED}\n",
}
V2 = {
    "timeouts.md": (
        "# Timeouts\n\nThe default timeout is five seconds for every network operation. Streams have none.\n"
    ),
    "proxies.md": "# Proxies\n\nProxies are configured per client. Settings moved to the transport page.\n",
    "transport.md": f"# Transport\n\n{MOVED}\n",
}
ASSETS = [citation_assets.citation_status, citation_assets.repaired_answers, verification]


def test_repaired_answers_asset_applies_on_request_and_verification_reuses_the_cache(tmp_path: Path) -> None:
    store = CorpusStore(tmp_path / "store")
    ingest(write_tree(tmp_path / "v1", V1), store, version="v1")
    ingest(write_tree(tmp_path / "v2", V2), store, version="v2")

    def cite(words: str) -> str:
        return chunk_with(store, "v1", words)["chunk_id"]

    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        json.dumps(
            {
                "answer_id": "a",
                "answer": "The timeout is five seconds [1]. A proxy URL has a scheme and a host [2].",
                "corpus_version": "v1",
                "references": [
                    {"ref": 1, "chunk_id": cite("five seconds"), "quote": "default timeout is five seconds"},
                    {"ref": 2, "chunk_id": cite("proxy URL"), "quote": MOVED},
                ],
            }
        )
        + "\n"
    )
    model = save_random_nli_model(tmp_path / "model", list(V1.values()) + list(V2.values()), favour_label="entailment")
    config = settings(store_dir=str(store.root), answers_path=str(answers), nli_model=str(model))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("corpus_version", ["v2"])

    def materialize(apply: bool) -> dict:
        run_config = {"ops": {"repaired_answers": {"config": {"apply": apply}}}}
        result = dg.materialize(
            ASSETS, partition_key="v2", instance=instance, resources=config.resources(), run_config=run_config
        )
        return {
            e.asset_key.path[-1]: {k: v.value for k, v in e.materialization.metadata.items()}
            for e in result.get_asset_materialization_events()
        }

    planned = materialize(apply=False)
    repairs = pl.read_parquet(store.layout.repairs_file("v2"))
    assert repairs.columns == REPAIRS.names
    # the proxy sentence left its chunk for transport.md, verbatim: relocated there (#29), re-pointed with its quote
    assert repairs.select("status", "repair").rows() == [
        ("drifted", "repointed_successor"),
        ("relocated", "repointed_successor"),
    ]
    assert not repairs["applied"].any() and planned["repaired_answers"]["applied"] is False
    assert (
        planned["repaired_answers"]["repair_repointed_successor"] == 2
        and planned["repaired_answers"]["n_answers_repaired"] == 1
    )
    record = json.loads(store.layout.repaired_answers_file("v2").read_text())
    assert record["references"][1]["repair"]["new"]["source_path"] == "transport.md"
    assert AnswerStore(store.root).all_answers()["revision"].to_list() == [1]  # not applied
    assert planned["verification"]["model_calls"] > 0

    applied = materialize(apply=True)
    assert applied["repaired_answers"]["revisions_registered"] == 1
    assert AnswerStore(store.root).answers()["revision"].to_list() == [2]
    assert pl.read_parquet(store.layout.repairs_file("v2"))["to_revision"].to_list() == [2, 2]
    # Both citations have evidence before the repair (the drifted one in its successor, the relocated one where it
    # now stands), so the repaired revision's evidence is all in the cache: no model call.
    assert planned["verification"]["model_calls"] == 2
    assert applied["verification"]["model_calls"] == 0
    assert (
        applied["verification"]["cache_hits"]
        == planned["verification"]["model_calls"] + planned["verification"]["cache_hits"]
    )
    # The next run registers the same answers file again: the content the repair revised does not undo it.
    again = materialize(apply=False)
    assert again["citation_status"]["answers_registered"] == 0
    assert AnswerStore(store.root).answers()["revision"].to_list() == [2]
