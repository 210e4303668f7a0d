"""`citekeeper demo` runs the Dagster pipeline over the sample corpus v1 -> v2, says where everything went,
and gives the same results when run twice."""

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.answers.store import AnswerStore
from citekeeper.layout import StoreLayout, latest_run_dir
from citekeeper.store import CorpusStore
from pipelines import cli_demo
from pipelines.cli import main


def _results(store_root: Path) -> dict[str, pl.DataFrame]:
    """Everything the demo produces that must not change on a rerun (run ids and timestamps aside)."""
    store, layout = CorpusStore(store_root), StoreLayout(store_root)
    claims = pl.read_parquet(latest_run_dir(layout.runs_dir, "v2") / "claims.parquet").drop("run_id")
    return {
        "manifests": pl.DataFrame(
            [(m.name, m.parent, m.corpus_hash, m.n_chunks) for m in store.versions()],
            orient="row",
            schema=["name", "parent", "corpus_hash", "n_chunks"],
        ),
        **{f"status_{v}": pl.read_parquet(layout.citation_status_file(v)).sort("citation_id") for v in ("v1", "v2")},
        "blast_radius": pl.read_parquet(layout.blast_radius_file("v2")).sort("doc_id"),
        "chunk_diff": pl.read_parquet(layout.chunk_diff_file("v1", "v2")).sort(pl.all()),
        "answers": AnswerStore(store_root).answers().drop("registered_at").sort("answer_id", "revision"),
        "claims": claims.sort("claim_id"),
        "repairs": pl.read_parquet(layout.repairs_file("v2")).sort("citation_id"),
    }


def test_demo_runs_the_pipeline_and_is_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    store_root = tmp_path / "demo"
    runner = CliRunner()
    first = runner.invoke(main, ["demo", "--store", str(store_root)])
    assert first.exit_code == 0, first.output
    results = _results(store_root)

    report = StoreLayout(store_root).report_file("v2")
    repaired = StoreLayout(store_root).repaired_answers_file("v2")
    chunk_parts = Path(CorpusStore(store_root).parquet_path("chunks", "v2"))  # a glob, as Parquet readers take it
    for path in (report, repaired, chunk_parts, latest_run_dir(StoreLayout(store_root).runs_dir, "v2")):
        assert str(path) in first.output
        assert list(path.parent.glob(path.name)), path
    assert "NLI: " in first.output  # says which model ran, or plainly that none could be loaded
    assert '<section id="plots">' in report.read_text()

    # sample_corpus/answers.jsonl cites real v1 chunks: against v1 only the two invented citations fail, and the
    # customer's answer citing a staff-only page is out of scope.
    v1 = results["status_v1"]
    assert sorted(v1.filter(pl.col("status") != "valid").select("answer_id", "status").rows()) == [
        ("discount-approval", "out_of_scope"),
        ("service-credit-cash", "invalid"),
        ("service-credit-cash", "invalid"),
    ]
    v2 = {(r["answer_id"], r["status"]) for r in results["status_v2"].iter_rows(named=True)}
    assert {
        ("sla-uptime", "valid"),
        ("refund-window", "stale"),
        ("rate-limit-429", "removed"),
        ("on-call-ack", "stale"),
        ("service-credit-cash", "invalid"),
    } <= v2
    assert results["manifests"]["name"].to_list() == ["v1", "v2"]
    # The repair is planned, not applied: the refund window's drifted citation would follow its successor.
    repairs = {(r["answer_id"], r["status"]): r["repair"] for r in results["repairs"].iter_rows(named=True)}
    assert (
        repairs[("refund-window", "drifted")] == "repointed_successor"
        and repairs[("rate-limit-429", "removed")] == "unresolved"
    )
    assert "repair plan: 6 answers to revise" in first.output and not results["repairs"]["applied"].any()

    # The source model: official API docs outrank a community article; two equal pages stay an open conflict;
    # a customer's answer citing a staff-only page is out_of_scope (and its evidence is never judged).
    conflicts = {
        r["answer_id"]: r for r in results["claims"].filter(pl.col("conflict").is_not_null()).iter_rows(named=True)
    }
    assert {k: (r["conflict"], r["status"]) for k, r in conflicts.items()} == {
        "api-quota": ("decided", "supported"),
        "phone-support": ("open", "conflicted"),
    }
    assert (
        '"API Quotas"' in conflicts["api-quota"]["reason"]
        and "decided by authority" in conflicts["api-quota"]["reason"]
    )
    assert (
        '"Support Channels"' in conflicts["phone-support"]["reason"]
        and '"Support FAQ"' in conflicts["phone-support"]["reason"]
    )
    assert ("discount-approval", "out_of_scope") in v2
    assert "decided conflict (api-quota)" in first.output and "open conflict (phone-support)" in first.output
    assert "out of scope (discount-approval)" in first.output

    # The rerun names the store through $CITEKEEPER_STORE instead of --store, from another directory.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    second = runner.invoke(main, ["demo"], env={"CITEKEEPER_STORE": str(store_root)})
    assert second.exit_code == 0, second.output
    assert f"store {store_root}" in second.output and list(elsewhere.iterdir()) == []
    again = _results(store_root)
    for name, frame in results.items():
        assert again[name].equals(frame), name
    assert (results["answers"]["revision"] == 1).all()  # re-registering identical answers is a no-op


@pytest.mark.parametrize(
    "args, env, expected",
    [
        (["--store", "from-flag"], {"CITEKEEPER_STORE": "from-env"}, "from-flag"),  # --store wins
        ([], {"CITEKEEPER_STORE": "from-env"}, "from-env"),
        ([], {"CITEKEEPER_STORE": None}, ".citekeeper/demo"),
    ],
)
def test_demo_store_is_the_flag_then_the_environment_then_its_default(
    args: list[str], env: dict, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    used = []
    monkeypatch.setattr(cli_demo, "run_version", lambda instance, store_dir, *rest: used.append(store_dir))
    monkeypatch.setattr(cli_demo, "summary", lambda store_dir, note: f"summary of {store_dir}")
    result = CliRunner().invoke(main, ["demo", "--no-model", *args], env=env)
    assert result.exit_code == 0, result.output
    assert used == [Path(expected)] * 2 and (tmp_path / expected / "dagster_home").is_dir()
    assert f"summary of {expected}" in result.output
